//! A JSONL file and its rejects file, resumed where a run left it; or a
//! directory of them, one a resource.

use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, Record, RejectSink, Sink};
use futures_util::FutureExt;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use super::{
    unbuilt, CursorFuture, Described, Destination, RecordFuture, StoredUpdatedAt, Table,
    TableFuture, Target,
};
use crate::cursor;
use crate::pipeline::rejects_path;
use etl_core::content::write::Write;

/// `--out` as a path: one JSONL file, or a directory holding
/// `<resource>.jsonl` (and `<resource>.rejects.jsonl`) files.
#[derive(Debug)]
pub(super) struct Place {
    path: PathBuf,
    file: bool,
}

impl Place {
    /// The file `path` (`file`), or the directory `path`.
    pub fn new(path: &Path, file: bool) -> Self {
        Place {
            path: path.to_owned(),
            file,
        }
    }

    /// The file of `target`: the one file, or its file in the directory
    /// (the directory made if missing).
    fn file_of(&self, target: &Target<'_>) -> Result<PathBuf, EtlError> {
        if self.file {
            if target.many {
                return Err(EtlError::InvalidInput(
                    "one JSONL file holds one resource, and the file holds many: give a directory"
                        .to_owned(),
                ));
            }
            return Ok(self.path.clone());
        }
        std::fs::create_dir_all(&self.path)
            .map_err(|e| EtlError::InvalidInput(format!("cannot be made a directory ({e})")))?;
        Ok(self.path.join(format!("{}.jsonl", target.resource)))
    }
}

impl<T: Record + Clone + 'static> Destination<T> for Place {
    /// `write = "merge"` is [`EtlError::InvalidInput`]: a file keeps
    /// every line, and one row per key needs a table.
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T> {
        if let Write::Merge(_) = target.write {
            let refused = EtlError::InvalidInput(
                "`write = \"merge\"` needs a table of one row per key (PostgreSQL or Delta), and a JSONL file keeps every line"
                    .to_owned(),
            );
            return std::future::ready(Err(refused)).boxed();
        }
        let opened = unbuilt(target.write, "a JSONL file")
            .and_then(|()| self.file_of(&target))
            .and_then(|path| {
                Ok(Box::new(Jsonl::open::<T>(&path, target.rejects)?) as Box<dyn Table<T>>)
            });
        std::future::ready(opened).boxed()
    }
}

/// A JSONL output. Opening it cuts a torn last line left by a crash, and
/// every row and reject the files hold counts as written, so a re-run
/// appends only what is new.
#[derive(Debug)]
struct Jsonl {
    sink: IdempotentSink<JsonlSink>,
    rejects: JsonlRejects,
    /// The line the last cursor scan found newest.
    newest: std::sync::Mutex<Option<String>>,
}

impl Jsonl {
    /// Opens `path` for rows of type `T`; the rejects go to `rejects` or,
    /// by default, beside it.
    fn open<T: Record>(path: &Path, rejects: Option<&Path>) -> Result<Self, EtlError> {
        let sink = IdempotentSink::resume_as::<T>(path)?;
        let rejects_at = rejects.map_or_else(|| rejects_path(path), PathBuf::from);
        let rejects = JsonlRejects::open(&rejects_at)?;
        Ok(Jsonl {
            sink,
            rejects,
            newest: std::sync::Mutex::default(),
        })
    }
}

impl<T: Record + Clone> Table<T> for Jsonl {
    fn sink(&self) -> &dyn Sink<T> {
        &self.sink
    }

    fn rejects(&self) -> &dyn RejectSink {
        &self.rejects
    }

    /// A scan of the file, each line read by the source.
    fn cursor(&self, stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
        let newest = cursor::jsonl_newest(self.sink.inner().path(), stored).map(|found| {
            let (cursor, line) = found.unzip();
            *self.newest.lock().unwrap_or_else(PoisonError::into_inner) = line;
            cursor
        });
        std::future::ready(newest).boxed()
    }

    /// The line the cursor scan found it in.
    fn newest_record(&self) -> RecordFuture<'_> {
        let line = self
            .newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        std::future::ready(Ok(line)).boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        Ok(Described {
            rows: self.sink.inner().path().display().to_string(),
            held: Some(self.sink.seen_count()),
            rejects: self.rejects.path().display().to_string(),
        })
    }
}
