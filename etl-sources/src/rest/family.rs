//! Parent and child resources: [`Tapped`] hands, of each page a parent
//! resource reads, the values its children's `[from_parent]` point at to
//! each child through a [`Feed`]; [`ChildSource`] reads one request chain
//! of a child resource for each of those records, its records carrying
//! `_parent`, an incremental cursor kept per parent.
//!
//! A parent's page is handed on to be written only once every child has
//! loaded the whole chain of each of its records. A run killed at any
//! moment has therefore written no parent whose children are not all
//! written, and the parent's incremental cursor never passes a parent
//! whose chain the kill cut.

use etl_core::{EtlError, Reject};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

use super::fetch::Task;
use super::pointer::{Body, Pointer};
use super::{JsonRecord, Resource, RestSource};
use crate::source::{OnLoaded, PageRead, Source};
use crate::SourceOptions;

/// One record a parent read, as one child needs it: the values of the
/// child's `[from_parent]`, or why one is missing.
#[derive(Clone, Debug)]
pub struct ParentRecord {
    /// The parent's resource and record id, for messages.
    pub shown: String,
    /// NAME -> the value as the parent sent it (a string or a number).
    pub values: Result<BTreeMap<String, Value>, String>,
    /// The parent record itself, kept for a reject when a value is
    /// missing (and only then).
    pub raw: Option<Box<RawValue>>,
}

/// The records of one parent page, and who to tell once their children
/// are all loaded.
type Handed = (Vec<ParentRecord>, oneshot::Sender<()>);

/// What a child resource reads its parents from: the records of each page
/// its parent reads, as they are read, until the parent's read ends. Made
/// with [`feed`]; or, for a fixed list of parents, `Feed::from(records)`.
#[derive(Debug)]
pub struct Feed {
    pages: mpsc::UnboundedReceiver<Handed>,
}

impl From<Vec<ParentRecord>> for Feed {
    /// One page of `records`, and no more (nobody waits on its children).
    fn from(records: Vec<ParentRecord>) -> Self {
        let (tx, pages) = mpsc::unbounded_channel();
        let (told, _) = oneshot::channel();
        // The receiver is here: a send cannot fail.
        let _ = tx.send((records, told));
        Feed { pages }
    }
}

/// The end of a [`Feed`] a parent resource's [`Tapped`] hands its records
/// through: for one child, by that child's `[from_parent]`.
#[derive(Debug)]
pub struct Feeder {
    child: String,
    from_parent: BTreeMap<String, Pointer>,
    pages: mpsc::UnboundedSender<Handed>,
}

/// A feed from a parent resource to its child `child`, whose
/// `[from_parent]` is `from_parent`: the [`Feeder`] for the parent's
/// [`Tapped`], the [`Feed`] for the child's [`ChildSource`].
pub fn feed(child: &str, from_parent: BTreeMap<String, Pointer>) -> (Feeder, Feed) {
    let (tx, pages) = mpsc::unbounded_channel();
    (
        Feeder {
            child: child.to_owned(),
            from_parent,
            pages: tx,
        },
        Feed { pages },
    )
}

/// A source whose records feed children: each page's `[from_parent]`
/// values are handed to every child as the page is read, and the page is
/// handed on (to be written) once every child has loaded their chains.
///
/// Its pages are read one at a time: the next page's records go to the
/// children once this page's children are loaded. A child that stops
/// first (its `--max-pages`, or an error) stops the parent before the
/// first page whose children it did not load.
#[derive(Debug)]
pub struct Tapped<S> {
    inner: S,
    resource: String,
    feeders: Vec<Feeder>,
    /// The page read and handed to the children, and the children it
    /// waits for, each told once its chains for the page are loaded.
    waiting: Option<Waiting>,
    /// No page is read any more: the parent's read ended, or a child
    /// stopped.
    ended: bool,
}

/// A parent page whose children are not all loaded yet.
#[derive(Debug)]
struct Waiting {
    page: PageRead<JsonRecord>,
    children: Vec<(String, oneshot::Receiver<()>)>,
}

impl<S> Tapped<S> {
    /// `inner`, the source of `resource`, feeding its children through
    /// `feeders` (none: `inner` as it is).
    pub fn new(inner: S, resource: &str, feeders: Vec<Feeder>) -> Self {
        Tapped {
            inner,
            resource: resource.to_owned(),
            feeders,
            waiting: None,
            ended: false,
        }
    }

    /// Reads no more: the children's feeds close (each child ends once
    /// its chains have) and a page not yet handed on is dropped.
    fn end(&mut self) {
        self.ended = true;
        self.feeders.clear();
        self.waiting = None;
    }

    /// Hands `page`'s records to every child; the children to wait for.
    /// Each record's top level is read once, unparsed, and only the
    /// values `[from_parent]` points at are parsed (as a page's are).
    fn hand_over(&self, page: &PageRead<JsonRecord>) -> Vec<(String, oneshot::Receiver<()>)> {
        if page.rows.is_empty() {
            return Vec::new();
        }
        let records: Vec<(String, Option<Body<'_>>)> = page
            .rows
            .iter()
            .map(|row| {
                let shown = format!("{} record {}", self.resource, row.id());
                (shown, Body::parse(row.json()).ok())
            })
            .collect();
        let mut waits = Vec::new();
        for feeder in &self.feeders {
            let parents = page
                .rows
                .iter()
                .zip(&records)
                .map(|(row, (shown, body))| {
                    let values = values_of(body.as_ref(), &feeder.from_parent, shown);
                    let raw = values
                        .is_err()
                        .then(|| RawValue::from_string(row.json().to_owned()).ok())
                        .flatten();
                    ParentRecord {
                        shown: shown.clone(),
                        values,
                        raw,
                    }
                })
                .collect();
            let (told, wait) = oneshot::channel();
            // A child that has ended drops its feed: then its wait fails at
            // once and the parent stops before this page.
            let _ = feeder.pages.send((parents, told));
            waits.push((feeder.child.clone(), wait));
        }
        waits
    }
}

/// The values `from_parent` points at in a record (its top level read as
/// `record`): each a string or a number, else the error naming the pointer
/// and the parent record.
fn values_of(
    record: Option<&Body<'_>>,
    from_parent: &BTreeMap<String, Pointer>,
    shown: &str,
) -> Result<BTreeMap<String, Value>, String> {
    from_parent
        .iter()
        .map(|(name, pointer)| {
            match record.and_then(|body| body.value_at(pointer).ok().flatten()) {
                Some(v @ (Value::String(_) | Value::Number(_))) => Ok((name.clone(), v)),
                found => Err(format!(
                    "from_parent {name} ({pointer}): {} in {shown}, so its children are not read",
                    match found {
                        None => "nothing",
                        Some(_) => "neither a string nor a number",
                    }
                )),
            }
        })
        .collect()
}

impl<S: Source<Row = JsonRecord>> Source for Tapped<S> {
    type Row = JsonRecord;

    async fn next_page(&mut self) -> Result<Option<PageRead<JsonRecord>>, EtlError> {
        if self.ended {
            return Ok(None);
        }
        if self.feeders.is_empty() {
            return self.inner.next_page().await;
        }
        if self.waiting.is_none() {
            let Some(page) = self.inner.next_page().await? else {
                // No more parents: each child ends once its chains have.
                self.end();
                return Ok(None);
            };
            let children = self.hand_over(&page);
            self.waiting = Some(Waiting { page, children });
        }
        // The page stays in `waiting` until every child told: a call
        // dropped midway loses nothing.
        while let Some(waiting) = self.waiting.as_mut() {
            let Some((child, told)) = waiting.children.last_mut() else {
                break;
            };
            if told.await.is_err() {
                tracing::warn!(
                    resource = %self.resource,
                    child = %child,
                    "{}: stopped before a page whose children {child} did not all load: that page and the rest are not written",
                    self.resource
                );
                self.end();
                return Ok(None);
            }
            waiting.children.pop();
        }
        Ok(self.waiting.take().map(|waiting| waiting.page))
    }

    /// Only while no child waits on the pages: otherwise the next call
    /// may wait on the children's loads before it reads.
    fn next_sent_ahead(&self) -> bool {
        self.feeders.is_empty() && self.inner.next_sent_ahead()
    }

    fn pages_total(&self) -> Option<u64> {
        self.inner.pages_total()
    }

    fn throttled(&self) -> Duration {
        self.inner.throttled()
    }

    fn in_flight(&self) -> u32 {
        self.inner.in_flight()
    }

    fn held_record(&mut self, record: &str) {
        self.inner.held_record(record);
    }

    fn read_since(&mut self, cursor: Option<&str>) -> Result<(), EtlError> {
        self.inner.read_since(cursor)
    }

    fn stored_updated_at<'l>(&self, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        self.inner.stored_updated_at(stored)
    }

    fn parent_cursors(&mut self) -> Option<&mut HashMap<String, String>> {
        self.inner.parent_cursors()
    }
}

/// A child resource: one request chain for each parent record, as the
/// parent's pages come through its [`Feed`], each record carrying
/// `"_parent": {NAME: value, ...}`. A parent whose values are missing is a
/// reject of the child, naming the parent and the pointer.
///
/// Read incrementally, each chain asks from its own cursor: the newest
/// update time among the stored children of that parent (learnt from the
/// stored rows a JSONL output scans, [`Source::stored_updated_at`], or
/// handed over by a table output through [`Source::parent_cursors`]); a
/// parent with none stored reads everything (or from `initial`).
///
/// Up to `concurrency` chains are read at once, each with one request in
/// flight; a page is handed over as soon as it came, and each chain's
/// pages in their order. Each page carries an [`crate::OnLoaded`]: once
/// every chain of a parent page has ended and each of its pages is
/// loaded, that parent page is let through to be written. A run stopped
/// at any moment has written a prefix of every chain, and no parent whose
/// chain it cut, so every cursor stays right.
pub struct ChildSource {
    template: Resource,
    options: SourceOptions,
    /// The parent's pages still to come; `None` once its read ended.
    feed: Option<Feed>,
    /// Parent records whose chain is not started yet, each with its page.
    parents: VecDeque<(ParentRecord, Arc<Batch>)>,
    /// The chains under way, each reading its next page.
    chains: FuturesUnordered<Chain>,
    incremental: bool,
    /// `_parent` (its JSON text) -> the newest update time stored.
    cursors: Mutex<HashMap<String, String>>,
    pages: u32,
    /// The client every chain sends with, where their headers are the
    /// same (no placeholder in them): one connection pool for all.
    client: Option<reqwest::Client>,
    shared_client: bool,
}

/// The chains of one parent page: its parent is told once every chain
/// has ended and each page they handed over is loaded.
#[derive(Debug)]
struct Batch {
    /// Chains not ended, and pages handed over and not yet loaded.
    pending: AtomicUsize,
    told: Mutex<Option<oneshot::Sender<()>>>,
}

impl Batch {
    /// The page of `chains` parent records, whose parent waits on `told`.
    fn new(chains: usize, told: oneshot::Sender<()>) -> Arc<Self> {
        let batch = Arc::new(Batch {
            pending: AtomicUsize::new(chains + 1),
            told: Mutex::new(Some(told)),
        });
        // The one added above: a page of no records is done at once.
        batch.release();
        batch
    }

    /// One chain ended, or one page loaded.
    fn release(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            let told = self
                .told
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(told) = told {
                // The parent may have stopped waiting: nothing to tell.
                let _ = told.send(());
            }
        }
    }

    /// `page`, handed over by one of this batch's chains: pending until
    /// it is loaded.
    fn hand_over(self: &Arc<Self>, mut page: PageRead<JsonRecord>) -> PageRead<JsonRecord> {
        self.pending.fetch_add(1, Ordering::AcqRel);
        let batch = Arc::clone(self);
        page.on_loaded = Some(OnLoaded::new(move || batch.release()));
        page
    }
}

/// One chain reading its next page, and the chain back with it: a task
/// of its own, so its request leaves at once and its page is read on any
/// thread, beside the load of the page before.
type Chain = Task<(
    RestSource,
    Arc<Batch>,
    Result<Option<PageRead<JsonRecord>>, EtlError>,
)>;

/// `source`'s next page, as a chain of `batch` under way.
fn read_on(mut source: RestSource, batch: Arc<Batch>) -> Chain {
    Task::spawn(async move {
        let page = source.next_page().await;
        (source, batch, page)
    })
}

/// The parent's next page, once it came (`None`: its read ended); never,
/// with no feed.
async fn handed(feed: &mut Option<Feed>) -> Option<Handed> {
    match feed {
        Some(feed) => feed.pages.recv().await,
        None => std::future::pending().await,
    }
}

impl fmt::Debug for ChildSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSource")
            .field("resource", &self.template.name)
            .field("fed", &self.feed.is_some())
            .field("parents_left", &self.parents.len())
            .field("chains", &self.chains.len())
            .field("pages", &self.pages)
            .finish()
    }
}

impl ChildSource {
    /// The child resource `template`, read for each parent record `feed`
    /// brings.
    pub fn new(template: Resource, options: SourceOptions, feed: Feed) -> Self {
        let shared_client = template
            .headers
            .values()
            .all(|v| super::config::placeholders(v).is_empty());
        ChildSource {
            client: None,
            shared_client,
            template,
            options,
            feed: Some(feed),
            parents: VecDeque::new(),
            chains: FuturesUnordered::new(),
            incremental: false,
            cursors: Mutex::new(HashMap::new()),
            pages: 0,
        }
    }

    /// Takes in a parent page (`None`: the parent's read ended).
    fn take_in(&mut self, handed: Option<Handed>) {
        match handed {
            Some((records, told)) => {
                let batch = Batch::new(records.len(), told);
                self.parents
                    .extend(records.into_iter().map(|r| (r, Arc::clone(&batch))));
            }
            None => self.feed = None,
        }
    }

    /// Takes in the parent pages that came, without waiting.
    fn take_in_ready(&mut self) {
        while let Some(feed) = &mut self.feed {
            match feed.pages.try_recv() {
                Ok(handed) => self.take_in(Some(handed)),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => self.take_in(None),
            }
        }
    }

    /// Starts the chain of `parent`'s children, or gives the reject of a
    /// parent whose values are missing.
    fn start(
        &mut self,
        parent: ParentRecord,
        batch: &Arc<Batch>,
    ) -> Result<Option<Reject>, EtlError> {
        let values = match parent.values {
            Ok(values) => values,
            Err(why) => {
                return Ok(Some(match &parent.raw {
                    Some(raw) => Reject::of(raw, why, &parent.shown),
                    None => Reject::new("null", why, &parent.shown)?,
                }));
            }
        };
        let text: BTreeMap<String, String> = values
            .iter()
            .map(|(k, v)| {
                let shown = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), shown)
            })
            .collect();
        let pipeline = self
            .template
            .for_parent(&text)
            .map_err(|e| EtlError::InvalidInput(e.to_string()))?;
        let client = match &self.client {
            Some(client) => client.clone(),
            None => {
                let client = RestSource::client(&pipeline, &self.options)?;
                if self.shared_client {
                    self.client = Some(client.clone());
                }
                client
            }
        };
        let mut source = RestSource::with_client(pipeline, self.options.clone(), client);
        let marker = Value::Object(values.into_iter().collect()).to_string();
        if self.incremental {
            let cursors = self.cursors.lock().unwrap_or_else(PoisonError::into_inner);
            let cursor = cursors.get(&marker).cloned();
            drop(cursors);
            source.read_since(cursor.as_deref())?;
        }
        source.set_parent(marker);
        source.send_none_ahead();
        self.chains.push(read_on(source, Arc::clone(batch)));
        Ok(None)
    }
}

impl Source for ChildSource {
    type Row = JsonRecord;

    async fn next_page(&mut self) -> Result<Option<PageRead<JsonRecord>>, EtlError> {
        loop {
            self.take_in_ready();
            while self.chains.len() < self.template.concurrency {
                let Some((parent, batch)) = self.parents.pop_front() else {
                    break;
                };
                if let Some(reject) = self.start(parent, &batch)? {
                    self.pages += 1;
                    let page = batch.hand_over(PageRead {
                        url: self.template.url.clone(),
                        rows: Vec::new(),
                        rejects: vec![reject],
                        count: None,
                        on_loaded: None,
                    });
                    // That parent's chain: this page alone.
                    batch.release();
                    return Ok(Some(page));
                }
            }
            if self.chains.is_empty() {
                // Nothing under way: the parent's next page, or its end.
                if self.feed.is_none() {
                    return Ok(None);
                }
                let next = handed(&mut self.feed).await;
                self.take_in(next);
                continue;
            }
            // Whichever chain's page came first; with room for a chain, a
            // parent page that comes first is taken in.
            let room = self.chains.len() < self.template.concurrency;
            let got = tokio::select! {
                got = self.chains.next() => got,
                next = handed(&mut self.feed), if room => {
                    self.take_in(next);
                    continue;
                }
            };
            match got {
                None => {}
                Some((_, batch, Ok(None))) => batch.release(),
                Some((source, batch, Ok(Some(page)))) => {
                    self.pages += 1;
                    let page = batch.hand_over(page);
                    // A chain that has ended makes room at once: the next
                    // call starts the next parent's, whose request goes out
                    // while this page is loaded.
                    if source.is_done() {
                        batch.release();
                    } else {
                        self.chains.push(read_on(source, batch));
                    }
                    return Ok(Some(page));
                }
                // Kept: the next call asks for the same page again.
                Some((source, batch, Err(e))) => {
                    self.chains.push(read_on(source, batch));
                    return Err(e);
                }
            }
        }
    }

    fn throttled(&self) -> Duration {
        self.options.throttle.total()
    }

    fn in_flight(&self) -> u32 {
        self.options.throttle.in_flight()
    }

    /// Every chain sends its cursor in the form the held record shows.
    fn held_record(&mut self, record: &str) {
        if let Some(at) = &mut self.template.updated_at {
            at.learn(record);
        }
    }

    /// Each chain reads from its own parent's cursor; the one given (the
    /// newest of all children) is not used.
    fn read_since(&mut self, _cursor: Option<&str>) -> Result<(), EtlError> {
        crate::source::before_first_page(self.pages)?;
        self.template
            .check_incremental()
            .map_err(|e| EtlError::InvalidInput(e.to_string()))?;
        self.incremental = true;
        Ok(())
    }

    fn parent_cursors(&mut self) -> Option<&mut HashMap<String, String>> {
        Some(
            self.cursors
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// A stored child's update time, and, as a scan goes, the newest one
    /// of its parent's.
    /// A stored row's top level is read as unparsed members (as
    /// [`RestSource`]'s scan reads it); `_parent` is keyed by its text as
    /// stored, which is the compact JSON a chain's rows are made with.
    fn stored_updated_at<'l>(&self, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        let at = self.template.updated_at.as_ref()?;
        let body = Body::parse(std::str::from_utf8(stored).ok()?).ok()?;
        let stamp = at.of_stored(&body)?;
        if let Some(parent) = body.member(super::PARENT_MEMBER) {
            let mut cursors = self.cursors.lock().unwrap_or_else(PoisonError::into_inner);
            match cursors.get_mut(parent) {
                Some(newest) if crate::cursor::is_newer(&stamp, newest) => {
                    newest.clone_from(&stamp)
                }
                Some(_) => {}
                None => {
                    cursors.insert(parent.to_owned(), stamp.clone());
                }
            }
        }
        Some(Cow::Owned(stamp))
    }
}
