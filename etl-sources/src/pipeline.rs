//! The pipeline, one for every [`Source`]: pages -> [`etl_core::IdempotentSink`]
//! -> a JSONL file, a PostgreSQL or a Delta table ([`Output`]), resumable and safe to
//! kill at any moment, with the entries that do not read kept as rejects.

use etl_core::retry::Retry;
use etl_core::{EtlError, RejectSink, RetryPolicy, Sink};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Source;

pub mod output;

pub use output::Output;

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Pages read.
    pub pages: u32,
    /// Rows the pages held.
    pub rows: usize,
    /// Rows written: new, or changed since an earlier run.
    pub new_rows: usize,
    /// Entries that did not read as rows (each kept in the rejects sink).
    pub rejected: usize,
    /// Rejected entries the rejects sink did not hold before this run.
    pub new_rejects: usize,
}

/// Where a run stands after a page, for a progress display.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// What the run did so far.
    pub done: Summary,
    /// Pages the listing holds in all, as far as the server's `count` says.
    pub pages_total: Option<u64>,
    /// Time the server asked the run to wait (429 Retry-After) so far.
    pub throttled: Duration,
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

/// Where the rejects of the JSONL output `out` go by default:
/// `<out stem>.rejects.jsonl` beside it (`launches.jsonl` ->
/// `launches.rejects.jsonl`).
///
/// ```
/// use etl_sources::pipeline::rejects_path;
/// use std::path::Path;
///
/// assert_eq!(rejects_path(Path::new("data/launches.jsonl")), Path::new("data/launches.rejects.jsonl"));
/// assert_eq!(rejects_path(Path::new("out")), Path::new("out.rejects.jsonl"));
/// ```
pub fn rejects_path(out: &Path) -> PathBuf {
    let stem = out.file_stem().unwrap_or(out.as_os_str());
    let mut name = stem.to_os_string();
    name.push(".rejects.jsonl");
    out.with_file_name(name)
}

/// Reads `source` page by page (at most `max_pages`) and loads each page
/// into `sink`, and its unreadable entries into `rejects`, before fetching
/// the next, so a failure, or a kill, loses no page that was already read.
/// A transient sink failure is retried with `RetryPolicy::default()` (the
/// calls named `sink_load` and `reject_sink` in the retry metrics). One
/// `info` event per page.
pub async fn run<Src: Source, S: Sink<Src::Row> + ?Sized, R: RejectSink + ?Sized>(
    source: &mut Src,
    sink: &S,
    rejects: &R,
    max_pages: Option<u32>,
) -> Result<Summary, RunError> {
    run_with_progress(source, sink, rejects, max_pages, |_| {}).await
}

/// [`run`], calling `on_page` after each page is loaded.
pub async fn run_with_progress<Src: Source, S: Sink<Src::Row> + ?Sized, R: RejectSink + ?Sized>(
    source: &mut Src,
    sink: &S,
    rejects: &R,
    max_pages: Option<u32>,
    mut on_page: impl FnMut(&Progress),
) -> Result<Summary, RunError> {
    let mut done = Summary::default();
    while max_pages.is_none_or(|max| done.pages < max) {
        let page = match source.next_page().await {
            Ok(Some(page)) => page,
            Ok(None) => break,
            Err(error) => return Err(RunError { done, error }),
        };
        // A sink's transient failure (a lost database connection, say) is
        // retried; an IdempotentSink gives back the keys of a failed write,
        // so the retry writes them.
        let new_rows = match Retry::new(RetryPolicy::default())
            .name("sink_load")
            .run(|| sink.load(&page.rows))
            .await
        {
            Ok(n) => n,
            Err(error) => return Err(RunError { done, error }),
        };
        let new_rejects = if page.rejects.is_empty() {
            0
        } else {
            match Retry::new(RetryPolicy::default())
                .name("reject_sink")
                .run(|| rejects.reject(&page.rejects))
                .await
            {
                Ok(n) => n,
                Err(error) => return Err(RunError { done, error }),
            }
        };
        done.pages += 1;
        crate::metrics::page_loaded();
        done.rows += page.rows.len();
        done.new_rows += new_rows;
        done.rejected += page.rejects.len();
        done.new_rejects += new_rejects;
        tracing::info!(
            page = done.pages,
            rows = page.rows.len(),
            new = new_rows,
            rejected = page.rejects.len(),
            "page loaded"
        );
        on_page(&Progress {
            done,
            pages_total: source.pages_total(),
            throttled: source.throttled(),
        });
    }
    Ok(done)
}
