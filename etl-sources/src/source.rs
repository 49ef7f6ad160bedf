//! [`Source`]: what the pipeline reads from, page by page. The bundled
//! source implements it ([`crate::rest::RestSource`], for any JSON API and
//! for Launch Library), and so can a source of your own: [`crate::pipeline::run`] then gives it
//! rejects, incremental runs, retried sink loads, progress and metrics.

use etl_core::{EtlError, Record, Reject, Row};
use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

use crate::throttle::Throttle;

/// How a source talks to its server: what is not the API's own (that is
/// its [`crate::rest::Resource`]: URL, parameters, auth, pagination).
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// Timeout of one request, connect to last byte (`None`: no timeout).
    pub timeout: Option<Duration>,
    /// The longest server-requested wait (a 429's or 503's Retry-After) to
    /// sit out.
    /// A longer one fails the page at once with
    /// [`EtlError::RetryAfterTooLong`], naming the wait (`None`: every
    /// wait is honoured; Launch Library's free tier can ask for 40
    /// minutes).
    pub max_retry_after: Option<Duration>,
    /// What holds the requests back ([`Throttle`]): a run's rate limit,
    /// and the waits servers asked of an origin. Shared by every source
    /// made with these options or their clones, so one run keeps one
    /// limit across all its sources and requests. The default has no
    /// limit of its own.
    pub throttle: Arc<Throttle>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            timeout: Some(Duration::from_secs(30)),
            max_retry_after: None,
            throttle: Arc::default(),
        }
    }
}

/// One page as read: its rows, and the entries that did not read as one.
#[derive(Debug)]
pub struct PageRead<T = Row> {
    /// The URL the page was fetched from.
    pub url: Url,
    /// The entries that read as rows, in page order.
    pub rows: Vec<T>,
    /// The entries that did not, each kept as sent with what did not read.
    pub rejects: Vec<Reject>,
    /// How many entries all pages hold together, as the server counts them.
    pub count: Option<u64>,
    /// Told once the page's rows and rejects are loaded (by the pipeline,
    /// after a load that succeeded; never for a page that was not). `None`
    /// for a source that need not know.
    pub on_loaded: Option<OnLoaded>,
}

/// What a source is told once the pipeline has loaded one of its pages: a
/// parent resource waits for this on its children's pages before it
/// writes its own, so a run killed at any moment has written no parent
/// whose children it has not.
///
/// ```
/// use etl_sources::OnLoaded;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let loaded = Arc::new(AtomicBool::new(false));
/// let told = Arc::clone(&loaded);
/// let signal = OnLoaded::new(move || told.store(true, Ordering::Release));
/// signal.tell();
/// assert!(loaded.load(Ordering::Acquire));
/// ```
pub struct OnLoaded(Box<dyn FnOnce() + Send + Sync>);

impl OnLoaded {
    /// `f`, called once when the page is loaded.
    pub fn new(f: impl FnOnce() + Send + Sync + 'static) -> Self {
        OnLoaded(Box::new(f))
    }

    /// Says the page is loaded.
    pub fn tell(self) {
        (self.0)()
    }
}

impl std::fmt::Debug for OnLoaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnLoaded")
    }
}

/// A paginated source of rows: the one seam between an API and the
/// pipeline.
///
/// Only [`Source::next_page`] is required. The rest has defaults for a
/// source that cannot tell its length, is never throttled, and does not
/// read incrementally.
///
/// A hand-written source for an API of your own, loaded exactly once into a
/// JSONL file by the same runner as `launches` and `etl run`:
///
/// ```
/// use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, Record};
/// use etl_sources::{pipeline, PageRead, Source};
/// use serde::Serialize;
///
/// #[derive(Clone, Serialize)]
/// struct Reading { sensor: String, celsius: f64 }
///
/// impl Record for Reading {
///     const KIND: &'static str = "reading";
///     fn record_id(&self) -> Option<String> { Some(self.sensor.clone()) }
/// }
///
/// /// Two pages of readings (a real source would fetch them with `#[retry]`).
/// struct Sensors { page: u32 }
///
/// impl Source for Sensors {
///     type Row = Reading;
///
///     async fn next_page(&mut self) -> Result<Option<PageRead<Reading>>, EtlError> {
///         if self.page == 2 {
///             return Ok(None);
///         }
///         self.page += 1;
///         let url = format!("memory://sensors/{}", self.page).parse().expect("a URL");
///         let rows = vec![Reading { sensor: format!("t{}", self.page), celsius: 21.5 }];
///         Ok(Some(PageRead { url, rows, rejects: vec![], count: Some(2), on_loaded: None }))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let out = dir.path().join("readings.jsonl");
/// let sink = IdempotentSink::resume_as::<Reading>(&out)?;
/// let rejects = JsonlRejects::open(pipeline::rejects_path(&out))?;
/// let summary = pipeline::run(&mut Sensors { page: 0 }, &sink, &rejects, None).await?;
/// assert_eq!((summary.pages, summary.new_rows), (2, 2));
///
/// // Run again: every reading is already held, nothing is written twice.
/// let sink = IdempotentSink::resume_as::<Reading>(&out)?;
/// let again = pipeline::run(&mut Sensors { page: 0 }, &sink, &rejects, None).await?;
/// assert_eq!(again.new_rows, 0);
/// # Ok(())
/// # }
/// ```
pub trait Source: Send {
    /// The rows it reads (cloned only when a sink must keep a row it
    /// cannot write at once).
    type Row: Record + Clone;

    /// The next page, or `None` once the last page was read. On an error
    /// the same page is tried again by the next call.
    fn next_page(
        &mut self,
    ) -> impl Future<Output = Result<Option<PageRead<Self::Row>>, EtlError>> + Send;

    /// How many pages the listing holds in all, where the source can tell
    /// (a progress bar's length). `None` by default.
    fn pages_total(&self) -> Option<u64> {
        None
    }

    /// How long this source's requests were held back so far, in all (a
    /// server's Retry-After or spent quota, a rate limit). Zero by default.
    fn throttled(&self) -> Duration {
        Duration::ZERO
    }

    /// Requests sent and not yet answered, now (a progress display's).
    /// Zero by default.
    fn in_flight(&self) -> u32 {
        0
    }

    /// Whether the request of the next page is on the wire already (sent
    /// ahead while this page was read), so that the next
    /// [`Source::next_page`] sends nothing before it reads. The pipeline
    /// then starts the page in front's write before it reads the next
    /// page, and the reading runs while that write's files are encoded on
    /// other threads; otherwise the request goes first, so that its round
    /// trip overlaps the write. `false` by default.
    fn next_sent_ahead(&self) -> bool {
        false
    }

    /// Reads from here on only what changed at or after `cursor`: the
    /// newest [`Record::updated_at`] the output already holds (`None`: an
    /// empty output, read everything in update order). Call it before the
    /// first page. The default refuses with [`EtlError::InvalidInput`]: a
    /// source must say how it asks its API for changes.
    fn read_since(&mut self, cursor: Option<&str>) -> Result<(), EtlError> {
        let _ = cursor;
        Err(EtlError::InvalidInput(
            "this source cannot read incrementally".into(),
        ))
    }

    /// The record the output holds whose update time is the cursor, as
    /// stored (its JSON text; [`crate::pipeline::output::Table::newest_record`]),
    /// handed over before [`Source::read_since`]: a source that sends the
    /// cursor back to its API learns from it the form its records write
    /// that time in (a number of Unix seconds, or text), where its own
    /// configuration does not say. Nothing by default.
    fn held_record(&mut self, record: &str) {
        let _ = record;
    }

    /// For a source whose rows carry `_parent` (a child resource, one
    /// request chain a parent): the cursor of each parent's chain, by its
    /// `_parent` as compact JSON text, for the output to fill before the
    /// first page of an incremental read. `None` by default: the source
    /// reads as one.
    fn parent_cursors(&mut self) -> Option<&mut HashMap<String, String>> {
        None
    }

    /// The [`Record::updated_at`] of a row as stored (one JSONL line, its
    /// serialised form, without the newline; bytes, so that a scan that
    /// needs no UTF-8 check does none), for the cursor of an incremental
    /// run over a file. `None` by default, and for a line it cannot read.
    fn stored_updated_at<'l>(&self, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        let _ = stored;
        None
    }
}

/// What a [`Source::read_since`] checks first: no page was read yet (the
/// cursor decides where a read starts, so it cannot move one under way).
pub(crate) fn before_first_page(pages_read: u32) -> Result<(), EtlError> {
    if pages_read > 0 {
        return Err(EtlError::InvalidInput(
            "read_since after the first page: the cursor decides where a read starts".into(),
        ));
    }
    Ok(())
}
