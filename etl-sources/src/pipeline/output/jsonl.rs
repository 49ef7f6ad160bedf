//! A JSONL file and its rejects file: resumed where a run left it.

use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, Record, RejectSink, Sink};
use futures_util::FutureExt;
use std::path::{Path, PathBuf};

use super::{CursorFuture, Described, Options, Output, StoredUpdatedAt};
use crate::cursor;
use crate::pipeline::rejects_path;

/// A JSONL output. Opening it cuts a torn last line left by a crash, and
/// every row and reject the files hold counts as written, so a re-run
/// appends only what is new.
#[derive(Debug)]
pub(super) struct Jsonl {
    sink: IdempotentSink<JsonlSink>,
    rejects: JsonlRejects,
}

impl Jsonl {
    /// Opens `path` for rows of type `T`; the rejects go to
    /// [`Options::rejects`] or, by default, beside it.
    pub fn open<T: Record>(path: &Path, options: &Options<'_>) -> Result<Self, EtlError> {
        let sink = IdempotentSink::resume_as::<T>(path)?;
        let rejects_at = options
            .rejects
            .map_or_else(|| rejects_path(path), PathBuf::from);
        let rejects = JsonlRejects::open(&rejects_at)?;
        Ok(Jsonl { sink, rejects })
    }
}

impl<T: Record + Clone> Output<T> for Jsonl {
    fn sink(&self) -> &dyn Sink<T> {
        &self.sink
    }

    fn rejects(&self) -> &dyn RejectSink {
        &self.rejects
    }

    /// A scan of the file, each line read by the source.
    fn cursor(&self, stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
        std::future::ready(cursor::jsonl_cursor(self.sink.inner().path(), stored)).boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        Ok(Described {
            rows: self.sink.inner().path().display().to_string(),
            held: Some(self.sink.seen_count()),
            rejects: self.rejects.path().display().to_string(),
        })
    }
}
