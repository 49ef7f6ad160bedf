//! The pipeline: source pages -> [`IdempotentSink`] -> [`JsonlSink`] -> file,
//! resumable and safe to kill at any moment.

use etl_core::{with_retry, EtlError, IdempotentSink, JsonlSink, RetryPolicy, Sink};
use std::fmt;
use std::path::Path;

use crate::SpaceDevsSource;

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Pages read.
    pub pages: u32,
    /// Rows the pages held.
    pub rows: usize,
    /// Rows written: new, or changed since an earlier run.
    pub new_rows: usize,
}

/// A run that stopped on an error, with what it did before: every row of
/// the pages in `done` is written.
#[derive(Debug)]
pub struct RunError {
    /// The pages loaded before the error.
    pub done: Summary,
    /// What stopped the run.
    pub error: EtlError,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (after {} pages, {} rows written of {} read)",
            self.error, self.done.pages, self.done.new_rows, self.done.rows
        )
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Opens (or creates) the JSONL output at `path` for a resumable run: a torn
/// last line left by a crash is cut off, and the rows already in the file
/// are remembered so they are not written again.
pub fn open_output(path: &Path) -> Result<IdempotentSink<JsonlSink>, EtlError> {
    let sink = IdempotentSink::resume(path)?;
    tracing::info!(path = %path.display(), rows = sink.seen_count(), "output opened");
    Ok(sink)
}

/// Reads `source` page by page (at most `max_pages`) and loads each page
/// into `sink` before fetching the next, so a failure, or a kill, loses no
/// page that was already read; a transient sink failure is retried with
/// `RetryPolicy::default()`. One `info` event per page.
pub async fn run<S: Sink>(
    source: &mut SpaceDevsSource,
    sink: &S,
    max_pages: Option<u32>,
) -> Result<Summary, RunError> {
    let mut done = Summary::default();
    while max_pages.is_none_or(|max| done.pages < max) {
        let rows = match source.next_page().await {
            Ok(Some(rows)) => rows,
            Ok(None) => break,
            Err(error) => return Err(RunError { done, error }),
        };
        // A sink's transient failure (a lost database connection, say) is
        // retried; an IdempotentSink gives back the keys of a failed write,
        // so the retry writes them.
        let new_rows = match with_retry(RetryPolicy::default(), || sink.load(&rows)).await {
            Ok(n) => n,
            Err(error) => return Err(RunError { done, error }),
        };
        done.pages += 1;
        done.rows += rows.len();
        done.new_rows += new_rows;
        tracing::info!(
            page = done.pages,
            rows = rows.len(),
            new = new_rows,
            "page loaded"
        );
    }
    Ok(done)
}
