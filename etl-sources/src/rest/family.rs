//! Parent and child resources: [`Tapped`] keeps, of each record a parent
//! resource reads, the values its children's `[from_parent]` point at;
//! [`ChildSource`] reads one request chain of a child resource for each of
//! those records, its records carrying `_parent`, an incremental cursor
//! kept per parent.

use etl_core::{EtlError, Reject};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::fetch::Task;
use super::pointer::{Body, Pointer};
use super::{JsonRecord, Pipeline, RestSource};
use crate::source::{PageRead, Source};
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

/// What parents read this run, for each child: child name -> records.
pub type Feed = Arc<Mutex<HashMap<String, Vec<ParentRecord>>>>;

/// A source whose records feed children: each record's `[from_parent]`
/// values are kept in `feed`, for each child, as it is read.
#[derive(Debug)]
pub struct Tapped<S> {
    inner: S,
    resource: String,
    /// child name -> its `[from_parent]`.
    children: Vec<(String, BTreeMap<String, Pointer>)>,
    feed: Feed,
}

impl<S> Tapped<S> {
    /// `inner`, the source of `resource`, feeding `children` through `feed`.
    pub fn new(
        inner: S,
        resource: &str,
        children: Vec<(String, BTreeMap<String, Pointer>)>,
        feed: Feed,
    ) -> Self {
        Tapped {
            inner,
            resource: resource.to_owned(),
            children,
            feed,
        }
    }

    fn keep(&self, rows: &[JsonRecord]) {
        if self.children.is_empty() {
            return;
        }
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        for row in rows {
            let record: Value = serde_json::from_str(row.json()).unwrap_or(Value::Null);
            let shown = format!("{} record {}", self.resource, row.id());
            for (child, from_parent) in &self.children {
                let values = values_of(&record, from_parent, &shown);
                let raw = values
                    .is_err()
                    .then(|| RawValue::from_string(row.json().to_owned()).ok())
                    .flatten();
                feed.entry(child.clone()).or_default().push(ParentRecord {
                    shown: shown.clone(),
                    values,
                    raw,
                });
            }
        }
    }
}

/// The values `from_parent` points at in `record`: each a string or a
/// number, else the error naming the pointer and the parent record.
fn values_of(
    record: &Value,
    from_parent: &BTreeMap<String, Pointer>,
    shown: &str,
) -> Result<BTreeMap<String, Value>, String> {
    from_parent
        .iter()
        .map(|(name, pointer)| match pointer.get(record) {
            Some(v @ (Value::String(_) | Value::Number(_))) => Ok((name.clone(), v.clone())),
            found => Err(format!(
                "from_parent {name} ({pointer}): {} in {shown}, so its children are not read",
                match found {
                    None => "nothing",
                    Some(_) => "neither a string nor a number",
                }
            )),
        })
        .collect()
}

impl<S: Source<Row = JsonRecord>> Source for Tapped<S> {
    type Row = JsonRecord;

    async fn next_page(&mut self) -> Result<Option<PageRead<JsonRecord>>, EtlError> {
        let page = self.inner.next_page().await?;
        if let Some(page) = &page {
            self.keep(&page.rows);
        }
        Ok(page)
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

/// A child resource: one request chain for each parent record, in the
/// order the parent read them, each record carrying `"_parent": {NAME:
/// value, ...}`. A parent whose values are missing is a reject of the
/// child, naming the parent and the pointer.
///
/// Read incrementally, each chain asks from its own cursor: the newest
/// update time among the stored children of that parent (learnt from the
/// stored rows a JSONL output scans, [`Source::stored_updated_at`], or
/// handed over by a table output through [`Source::parent_cursors`]); a
/// parent with none stored reads everything (or from `initial`).
///
/// Up to `concurrency` chains are read at once, each with one request in
/// flight; a page is handed over as soon as it came, and each chain's
/// pages in their order. A run stopped at any moment has written a prefix
/// of every chain, so each parent's cursor stays right.
pub struct ChildSource {
    template: Pipeline,
    options: SourceOptions,
    parents: VecDeque<ParentRecord>,
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

/// One chain reading its next page, and the chain back with it: a task
/// of its own, so its request leaves at once and its page is read on any
/// thread, beside the load of the page before.
type Chain = Task<(RestSource, Result<Option<PageRead<JsonRecord>>, EtlError>)>;

/// `source`'s next page, as a chain under way.
fn read_on(mut source: RestSource) -> Chain {
    Task::spawn(async move {
        let page = source.next_page().await;
        (source, page)
    })
}

impl fmt::Debug for ChildSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSource")
            .field("resource", &self.template.name)
            .field("parents_left", &self.parents.len())
            .field("chains", &self.chains.len())
            .field("pages", &self.pages)
            .finish()
    }
}

impl ChildSource {
    /// The child resource `template`, read for each of `parents`.
    pub fn new(template: Pipeline, options: SourceOptions, parents: Vec<ParentRecord>) -> Self {
        let shared_client = template
            .headers
            .values()
            .all(|v| super::config::placeholders(v).is_empty());
        ChildSource {
            client: None,
            shared_client,
            template,
            options,
            parents: parents.into(),
            chains: FuturesUnordered::new(),
            incremental: false,
            cursors: Mutex::new(HashMap::new()),
            pages: 0,
        }
    }

    /// Starts the chain of `parent`'s children, or gives the reject of a
    /// parent whose values are missing.
    fn start(&mut self, parent: ParentRecord) -> Result<Option<Reject>, EtlError> {
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
        self.chains.push(read_on(source));
        Ok(None)
    }
}

impl Source for ChildSource {
    type Row = JsonRecord;

    async fn next_page(&mut self) -> Result<Option<PageRead<JsonRecord>>, EtlError> {
        loop {
            while self.chains.len() < self.template.concurrency {
                let Some(parent) = self.parents.pop_front() else {
                    break;
                };
                if let Some(reject) = self.start(parent)? {
                    self.pages += 1;
                    return Ok(Some(PageRead {
                        url: self.template.url.clone(),
                        rows: Vec::new(),
                        rejects: vec![reject],
                        count: None,
                    }));
                }
            }
            // Whichever chain's page came first; a chain that ended makes
            // room for the next parent's.
            match self.chains.next().await {
                None => return Ok(None),
                Some((_, Ok(None))) => {}
                Some((source, Ok(Some(page)))) => {
                    self.pages += 1;
                    // A chain that has ended makes room at once: the next
                    // call starts the next parent's, whose request goes out
                    // while this page is loaded.
                    if !source.is_done() {
                        self.chains.push(read_on(source));
                    }
                    return Ok(Some(page));
                }
                // Kept: the next call asks for the same page again.
                Some((source, Err(e))) => {
                    self.chains.push(read_on(source));
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
        if let Some(parent) = body.member("_parent") {
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
