//! The pipeline, one for every [`Source`]: pages -> [`etl_core::IdempotentSink`]
//! -> a JSONL file, a PostgreSQL or a Delta table ([`Output`]), resumable and safe to
//! kill at any moment, with the entries that do not read kept as rejects.
//!
//! - [`Pipeline`]: a whole pipeline file, run by [`Pipeline::run`] as
//!   `etl run` runs it ([`RunOptions`], [`RunReport`]);
//! - [`run`]: one [`Source`] of your own into a sink and a rejects sink;
//! - [`output`]: the outputs, and the traits an output of your own
//!   implements.

use etl_core::retry::Retry;
use etl_core::{EtlError, RejectSink, RetryPolicy, Sink};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Source;

mod file;
mod options;
pub mod output;
mod report;
mod resource;

pub use file::Pipeline;
pub use options::RunOptions;
pub use output::Output;
pub use report::{
    Failure, PipelineError, ResourceReport, RunReport, EXIT_FAILED, EXIT_OK, EXIT_REJECTED,
    EXIT_USAGE,
};
#[cfg(feature = "cli")]
pub(crate) use resource::load as load_resource;

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
    /// Time the run's requests were held back so far (a server's
    /// Retry-After or spent quota, the rate limit).
    pub throttled: Duration,
    /// Requests on the wire at that moment.
    pub in_flight: u32,
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
/// into `sink`, and its unreadable entries into `rejects`, in page order.
/// While a page is loaded the next one is fetched (the two run together on
/// this task; no reader is spawned), so a round trip and a load overlap.
/// Nothing read is lost: a page counts as done only once it is loaded; a
/// failed load ends the run and the page fetched beside it is dropped
/// unloaded; a failed fetch ends the run after the load beside it
/// finished. A kill therefore leaves a prefix of the pages loaded. A
/// page's [`crate::OnLoaded`] is told once it is loaded. A
/// transient sink failure is retried with `RetryPolicy::default()` (the
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
    if max_pages == Some(0) {
        return Ok(done);
    }
    let mut fetched = source.next_page().await;
    loop {
        let mut page = match fetched {
            Ok(Some(page)) => page,
            Ok(None) => break,
            Err(error) => return Err(RunError { done, error }),
        };
        // Told only after a load that succeeded.
        let on_loaded = page.on_loaded.take();
        let last = max_pages.is_some_and(|max| done.pages + 1 >= max);
        let next = if last {
            match load(sink, rejects, &page).await {
                Ok(counts) => count_loaded(&mut done, &page, counts),
                Err(error) => return Err(RunError { done, error }),
            }
            if let Some(on_loaded) = on_loaded {
                on_loaded.tell();
            }
            None
        } else {
            // The fetch is polled first, so its request is on the wire
            // before a load that blocks its thread (a write and
            // `fdatasync`) starts. A failed load drops the fetch, whatever
            // it got; a page is counted as soon as it is loaded.
            let fetch = source.next_page();
            let loading = load(sink, rejects, &page);
            tokio::pin!(fetch, loading);
            let mut next = None;
            let loaded = loop {
                tokio::select! {
                    biased;
                    got = &mut fetch, if next.is_none() => next = Some(got),
                    loaded = &mut loading => break loaded,
                }
            };
            match loaded {
                Ok(counts) => count_loaded(&mut done, &page, counts),
                Err(error) => return Err(RunError { done, error }),
            }
            if let Some(on_loaded) = on_loaded {
                on_loaded.tell();
            }
            Some(match next {
                Some(next) => next,
                None => fetch.await,
            })
        };
        on_page(&Progress {
            done,
            pages_total: source.pages_total(),
            throttled: source.throttled(),
            in_flight: source.in_flight(),
        });
        match next {
            Some(next) => fetched = next,
            None => break,
        }
    }
    Ok(done)
}

/// Counts a page loaded with `(new rows, new rejects)` into `done`, in
/// the metrics and as one `info` event.
fn count_loaded<T>(
    done: &mut Summary,
    page: &crate::PageRead<T>,
    (new_rows, new_rejects): (usize, usize),
) {
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
}

/// A page's rows into `sink` and its rejects into `rejects`: the counts of
/// new rows and new rejects. A sink's transient failure (a lost database
/// connection, say) is retried; an `IdempotentSink` gives back the keys of
/// a failed write, so the retry writes them.
async fn load<T: etl_core::Record + Clone, S: Sink<T> + ?Sized, R: RejectSink + ?Sized>(
    sink: &S,
    rejects: &R,
    page: &crate::PageRead<T>,
) -> Result<(usize, usize), EtlError> {
    let new_rows = Retry::new(RetryPolicy::default())
        .name("sink_load")
        .run(|| sink.load(&page.rows))
        .await?;
    let new_rejects = if page.rejects.is_empty() {
        0
    } else {
        Retry::new(RetryPolicy::default())
            .name("reject_sink")
            .run(|| rejects.reject(&page.rejects))
            .await?
    };
    Ok((new_rows, new_rejects))
}
