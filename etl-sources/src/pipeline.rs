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
use etl_core::{EtlError, Prepared, RejectSink, RetryPolicy, Sink, Written};
use futures_util::future::{MaybeDone, OptionFuture};
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::oneshot;

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
    /// Rows the pages held, less those the sink refused.
    pub rows: usize,
    /// Rows written: new, or changed since an earlier run.
    pub new_rows: usize,
    /// Entries that did not read as rows, and rows the sink refused (a
    /// frozen table's): each kept as a reject.
    pub rejected: usize,
    /// Rejected entries the rejects sink did not hold before this run.
    pub new_rejects: usize,
    /// Rows taken out: a merge's records marked deleted.
    pub deleted: usize,
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
/// While a page is written the next one is fetched and made ready
/// ([`Sink::prepare`]: keys, encodings, a table's rows), all on this task
/// (no reader is spawned), so a round trip, the making of a page and the
/// write of the one before overlap. A page whose request was sent ahead
/// ([`Source::next_sent_ahead`]) is read once the write in front of it
/// has started, while that write waits on work off this task (a Delta
/// table's files encoded on other threads). Pages are written one at a time, in
/// order: a page's write starts once the page before it is written.
/// Nothing read is lost: a page counts as done only once it is loaded; a
/// failed load ends the run, and the page fetched or made beside it is
/// dropped unwritten; a failed fetch ends the run after the load beside it
/// finished. A kill therefore leaves a prefix of the pages loaded. A
/// page's [`crate::OnLoaded`] is told once it is loaded. A transient sink
/// failure is retried with `RetryPolicy::default()` (the calls named
/// `sink_load` and `reject_sink` in the retry metrics). One `info` event
/// per page.
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
    let page = match source.next_page().await {
        Ok(Some(page)) => page,
        Ok(None) => return Ok(done),
        Err(error) => return Err(RunError { done, error }),
    };
    let mut started = 1;
    // `next_turn`: the turn of the page after the last one started.
    let (mut front, mut next_turn) = queued(sink, rejects, page, None);
    let more = |started: u32| max_pages.is_none_or(|max| started < max);
    let mut report = None; // the last round's, made once this one started
    loop {
        // This round: the front page is written while the next is fetched
        // and made ready behind it; the front's write starts before the
        // last round's report.
        let sent = source.next_sent_ahead();
        let mut fetch = Box::pin(MaybeDone::Future(next_page(source, more(started))));
        start_round(fetch.as_mut(), front.as_mut(), sent).await;
        if let Some(progress) = report.take() {
            on_page(&progress);
        }
        let mut fetched = None;
        let mut back = none_like(&front);
        // Whether `back` is still to finish (it cannot before the front).
        let (mut back_busy, mut front_done) = (false, false);
        while !front_done || fetched.is_none() {
            tokio::select! {
                biased;
                () = fetch.as_mut(), if fetched.is_none() => {
                    fetched = fetch.as_mut().take_output();
                    // The page fetched, taken out to be made ready behind.
                    let next = match &mut fetched {
                        Some((Ok(got), _)) => got.take(),
                        _ => None,
                    };
                    if let Some(next) = next {
                        started += 1;
                        let (load, turn) = queued(sink, rejects, next, Some(next_turn));
                        (back, next_turn, back_busy) = (Some(load), turn, true);
                    }
                }
                () = front.as_mut(), if !front_done => {
                    front_done = true;
                    match front.as_mut().take_output() {
                        Some((page, Ok(counts))) => count_loaded(&mut done, &page, counts),
                        // The page made behind it is dropped unwritten.
                        Some((_, Err(error))) => return Err(RunError { done, error }),
                        None => {}
                    }
                }
                // Makes the next page ready; it writes once the front is
                // written, and is taken up as the front next round.
                Some(()) = OptionFuture::from(back.as_mut()), if back_busy => back_busy = false,
            }
        }
        let Some((got, stands)) = fetched else {
            return Ok(done);
        };
        let progress = stands.after(done);
        match got.map(|_| back) {
            Ok(Some(next)) => (front, report) = (next, Some(progress)),
            end => {
                on_page(&progress);
                return end.map(|_| done).map_err(|error| RunError { done, error });
            }
        }
    }
}

/// Where a source stands: [`Progress`] but for what the run did.
struct Stands {
    pages_total: Option<u64>,
    throttled: Duration,
    in_flight: u32,
}

impl Stands {
    fn after(self, done: Summary) -> Progress {
        Progress {
            done,
            pages_total: self.pages_total,
            throttled: self.throttled,
            in_flight: self.in_flight,
        }
    }
}

/// The next page of `source` when `fetch` (else none), and where the
/// source stands once it is read: the one future of a round that holds
/// the source.
async fn next_page<Src: Source>(
    source: &mut Src,
    fetch: bool,
) -> (Result<Option<crate::PageRead<Src::Row>>, EtlError>, Stands) {
    let got = if fetch {
        source.next_page().await
    } else {
        Ok(None)
    };
    let stands = Stands {
        pages_total: source.pages_total(),
        throttled: source.throttled(),
        in_flight: source.in_flight(),
    };
    (got, stands)
}

/// A page's load ([`page_load`]) as the pipeline holds it, written after
/// `turn` (at once without one), and the turn of the page after it.
// The load's type is unnameable (an `async fn`'s future), so it is spelled
// out here rather than in an alias.
#[allow(clippy::type_complexity)]
fn queued<'a, T, S, R>(
    sink: &'a S,
    rejects: &'a R,
    page: crate::PageRead<T>,
    turn: Option<oneshot::Receiver<()>>,
) -> (
    Pin<Box<MaybeDone<impl Future<Output = (crate::PageRead<T>, Loaded)> + 'a>>>,
    oneshot::Receiver<()>,
)
where
    T: etl_core::Record + Clone + 'a,
    S: Sink<T> + ?Sized,
    R: RejectSink + ?Sized,
{
    let (written, next) = oneshot::channel();
    let load = page_load(sink, rejects, page, turn, written);
    (Box::pin(MaybeDone::Future(load)), next)
}

/// Polls `first`, then `second`, once each, whatever they answer (a
/// finished one keeps its output).
async fn poll_once<A: Future, B: Future>(first: Pin<&mut A>, second: Pin<&mut B>) {
    let (mut first, mut second) = (first, second);
    std::future::poll_fn(|cx| {
        let _ = first.as_mut().poll(cx);
        let _ = second.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await;
}

/// A round's first poll of its `fetch` and of the `front` page's write.
/// A request not yet sent goes first, so it is on the wire before a load
/// that blocks its thread (a write and `fdatasync`) starts. A page whose
/// request was `sent` ahead is read after the front's write has started:
/// the write's CPU steps run on this task, and its files are encoded on
/// other threads while the next page is read here.
async fn start_round<F: Future, W: Future>(fetch: Pin<&mut F>, front: Pin<&mut W>, sent: bool) {
    if sent {
        poll_once(front, fetch).await;
    } else {
        poll_once(fetch, front).await;
    }
}

/// `None` of `like`'s type: the page load behind the front is of the
/// front's (unnameable) future type.
fn none_like<F>(_like: &F) -> Option<F> {
    None
}

/// One page's load: the page made ready for `sink` now, written once
/// `turn` says the page before it is written (at once without one), then
/// its rejects; `written` and the page's [`crate::OnLoaded`] are told
/// when it is. Returns the page and what its load did.
async fn page_load<T, S, R>(
    sink: &S,
    rejects: &R,
    mut page: crate::PageRead<T>,
    turn: Option<oneshot::Receiver<()>>,
    written: oneshot::Sender<()>,
) -> (crate::PageRead<T>, Loaded)
where
    T: etl_core::Record + Clone,
    S: Sink<T> + ?Sized,
    R: RejectSink + ?Sized,
{
    // Told only after a load that succeeded.
    let on_loaded = page.on_loaded.take();
    let prepared = sink.prepare(&page.rows, None).await;
    if let Some(turn) = turn {
        if turn.await.is_err() {
            // The page before failed: the run ends with its error, and
            // this page is not written.
            drop(prepared);
            let error = EtlError::Io(std::io::Error::other(
                "not written: the page before it was not loaded",
            ));
            return (page, Err(error));
        }
    }
    let loaded = load(sink, rejects, &page, prepared).await;
    if loaded.is_ok() {
        let _ = written.send(());
        if let Some(on_loaded) = on_loaded {
            on_loaded.tell();
        }
    }
    (page, loaded)
}

/// A page's load's outcome: its rows' write (with the records the sink
/// refused and kept as rejects), and how many of the entries that did not
/// read were new to the rejects sink.
type Loaded = Result<(Written, usize), EtlError>;

/// Counts a page loaded into `done`, in the metrics and as one `info`
/// event. A row the sink refused counts as a reject, as an entry that did
/// not read does: wherever a record is refused, the run exits 3 for it.
fn count_loaded<T>(
    done: &mut Summary,
    page: &crate::PageRead<T>,
    (written, new_rejects): (Written, usize),
) {
    done.pages += 1;
    crate::metrics::page_loaded();
    let rows = page.rows.len().saturating_sub(written.refused);
    let rejected = page.rejects.len() + written.refused;
    done.rows += rows;
    done.new_rows += written.new;
    done.rejected += rejected;
    done.new_rejects += new_rejects + written.new_rejects;
    done.deleted += written.deleted;
    tracing::info!(
        page = done.pages,
        rows,
        new = written.new,
        rejected,
        "page loaded"
    );
}

/// A page's rows into `sink` and its rejects into `rejects`: the rows'
/// write and the count of new rejects. A sink's transient failure (a lost database
/// connection, say) is retried; an `IdempotentSink` gives back the keys of
/// a failed write, so the retry writes them.
///
/// The first attempt writes `prepared`, the page made ready before its
/// turn; a retry makes it again.
async fn load<T: etl_core::Record + Clone, S: Sink<T> + ?Sized, R: RejectSink + ?Sized>(
    sink: &S,
    rejects: &R,
    page: &crate::PageRead<T>,
    prepared: Result<Prepared<'_>, EtlError>,
) -> Loaded {
    let mut prepared = Some(prepared);
    let written = Retry::new(RetryPolicy::default())
        .name("sink_load")
        .run(|| {
            let prepared = prepared.take();
            async move {
                let prepared = match prepared {
                    Some(prepared) => prepared?,
                    None => sink.prepare(&page.rows, None).await?,
                };
                prepared.write().await
            }
        })
        .await?;
    let new_rejects = if page.rejects.is_empty() {
        0
    } else {
        Retry::new(RetryPolicy::default())
            .name("reject_sink")
            .run(|| rejects.reject(&page.rejects))
            .await?
    };
    Ok((written, new_rejects))
}
