//! A JSONL file and its rejects file, resumed where a run left it; or a
//! directory of them, one a resource.

use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, Record, RejectSink, Sink};
use futures_util::FutureExt;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use super::{
    CursorFuture, Described, Destination, FinishFuture, RecordFuture, StoredUpdatedAt, Table,
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
        let replace = *target.write == Write::Replace;
        let opened = self.file_of(&target).and_then(|path| {
            let table = match replace {
                true => Jsonl::replacing::<T>(&path, target.rejects)?,
                false => Jsonl::open::<T>(&path, target.rejects)?,
            };
            Ok(Box::new(table) as Box<dyn Table<T>>)
        });
        std::future::ready(opened).boxed()
    }
}

/// A JSONL output. Opening it cuts a torn last line left by a crash, and
/// every row and reject the files hold counts as written, so a re-run
/// appends only what is new.
///
/// Under `write = "replace"` the rows go to a file of the run's own beside
/// it ([`Staging`]), renamed over it once the run read every page
/// ([`Table::finish`]): a reader sees the old file whole until then, and
/// a run that fails or is killed leaves it as it was.
#[derive(Debug)]
struct Jsonl {
    sink: IdempotentSink<JsonlSink>,
    rejects: JsonlRejects,
    /// The line the last cursor scan found newest.
    newest: std::sync::Mutex<Option<String>>,
    /// Where a replace's rows go until the switch.
    staging: Option<Staging>,
}

impl Jsonl {
    /// Opens `path` for rows of type `T`; the rejects go to `rejects` or,
    /// by default, beside it.
    fn open<T: Record>(path: &Path, rejects: Option<&Path>) -> Result<Self, EtlError> {
        let sink = IdempotentSink::resume_as::<T>(path)?;
        Self::with(sink, path, rejects, None)
    }

    /// Opens a replace of `path` by this run's rows of type `T`: they go
    /// to a new file beside it, each once.
    fn replacing<T: Record>(path: &Path, rejects: Option<&Path>) -> Result<Self, EtlError> {
        let staging = Staging::new(path)?;
        let sink = IdempotentSink::resume_as::<T>(&staging.path)?;
        Self::with(sink, path, rejects, Some(staging))
    }

    fn with(
        sink: IdempotentSink<JsonlSink>,
        path: &Path,
        rejects: Option<&Path>,
        staging: Option<Staging>,
    ) -> Result<Self, EtlError> {
        let rejects_at = rejects.map_or_else(|| rejects_path(path), PathBuf::from);
        let rejects = JsonlRejects::open(&rejects_at)?;
        Ok(Jsonl {
            sink,
            rejects,
            newest: std::sync::Mutex::default(),
            staging,
        })
    }

    /// The file the table is: the one replaced, under a replace.
    fn table_path(&self) -> &Path {
        match &self.staging {
            Some(staging) => &staging.table,
            None => self.sink.inner().path(),
        }
    }
}

/// A replace's file: `.<name>.replacing-<pid>` beside the table's file, of
/// this process alone, so that runs replacing one file at once never
/// write each other's. Files a killed run left are removed when the next
/// replace opens.
#[derive(Debug)]
struct Staging {
    table: PathBuf,
    path: PathBuf,
}

impl Staging {
    fn new(table: &Path) -> Result<Self, EtlError> {
        let name = table
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = table.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or_else(|| Path::new("."));
        let prefix = format!(".{name}.replacing-");
        // A killed run's: its process is gone (where the system says).
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = file.strip_prefix(&prefix) else {
                    continue;
                };
                if !Path::new("/proc").join(pid).exists() && Path::new("/proc/self").exists() {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let path = dir.join(format!("{prefix}{}", std::process::id()));
        // Anything there is this process's own from before: start again.
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(EtlError::Io(e));
            }
            _ => {}
        }
        Ok(Staging {
            table: table.to_owned(),
            path,
        })
    }
}

impl Drop for Staging {
    /// A run that ends without its switch (a failure) leaves nothing
    /// staged behind.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Staging {
    /// Renames the run's file over the table's, then syncs the directory
    /// so that the switch survives a crash.
    fn switch(&self) -> Result<(), EtlError> {
        if !self.path.exists() {
            // A run that wrote no row: the table becomes empty.
            std::fs::File::create(&self.path)?.sync_all()?;
        }
        std::fs::rename(&self.path, &self.table)?;
        if let Some(dir) = self.table.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
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

    /// A replace's switch: the run's file renamed over the table's.
    fn finish(&self) -> FinishFuture<'_> {
        let switched = self.staging.as_ref().map_or(Ok(()), Staging::switch);
        std::future::ready(switched).boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        Ok(Described {
            rows: self.table_path().display().to_string(),
            held: Some(self.sink.seen_count()),
            rejects: self.rejects.path().display().to_string(),
        })
    }
}
