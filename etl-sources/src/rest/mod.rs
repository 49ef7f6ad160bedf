//! Any JSON API, described in a TOML file (each resource of it a
//! [`Resource`]; the whole file is [`crate::Pipeline`]) and read page by
//! page by [`RestSource`]: six pagination styles (or a [`Paginator`] of
//! your own), four kinds of auth, JSON Pointers to the records, their ids
//! and update times, and incremental reads. `etl run PIPELINE.toml` runs it
//! through the same pipeline as `launches`.
//!
//! ```no_run
//! use etl_core::{IdempotentSink, JsonlRejects};
//! use etl_sources::rest::{JsonRecord, Resource, RestSource};
//! use etl_sources::{pipeline, SourceOptions};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let file = Resource::load("items.toml".as_ref())?;
//! let mut source = RestSource::new(file, SourceOptions::default())?;
//! let sink = IdempotentSink::resume_as::<JsonRecord>("items.jsonl")?;
//! let rejects = JsonlRejects::open("items.rejects.jsonl")?;
//! let summary = pipeline::run(&mut source, &sink, &rejects, None).await?;
//! println!("{} new records", summary.new_rows);
//! # Ok(())
//! # }
//! ```

mod auth;
mod config;
mod decode;
mod error;
mod family;
mod fetch;
mod file_pointer;
mod keys;
mod paginate;
mod pointer;
mod record;
mod stamp;
mod table_shape;
mod write;

pub(crate) use auth::header as header_auth;
pub use auth::Auth;
pub use config::{Incremental, Method, ParamIn, Resource, DEFAULT_CONCURRENCY};
pub use decode::{AsJson, Decode};
pub use error::ConfigError;
pub use family::{feed, ChildSource, Feed, Feeder, ParentRecord, Tapped};
pub(crate) use paginate::{cursor_at, NextUrl};
pub use paginate::{Head, Page, Paginator, Request};
pub use pointer::Pointer;
pub use record::{JsonRecord, PARENT_MEMBER};
pub use stamp::{TimeUnit, UpdatedAt};
pub use table_shape::TableShape;

/// One resource of a pipeline file, under its old name.
#[deprecated(note = "renamed `Resource`; the whole file is `etl_sources::Pipeline`")]
pub type Pipeline = Resource;

use etl_core::EtlError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use url::{Origin, Url};

use crate::source::{PageRead, Source};
use crate::{wire, SourceOptions};
use fetch::{Fetcher, InFlight};
use pointer::Body;

/// A JSON API read as its [`Resource`] file says, each entry of a page
/// made a row by `D` ([`AsJson`]: a [`JsonRecord`]; [`crate::AsLaunch`]: a
/// Launch Library launch).
///
/// Every request goes to the origin (scheme, host, port) of the file's
/// `url`: a next URL or Link elsewhere, or a redirect there, is refused
/// before any request leaves, so a credential never does. Secrets are
/// never shown: the query parameter of `query` auth is added to each
/// request, and removed from any URL the server hands back, so neither a
/// log line, an error nor a reject's source holds it.
///
/// Each page fetch is a `#[retry]` fn (5 attempts, 1 s doubling to 60 s):
/// network failures, 408, 429 and 5xx with backoff or the server's Retry-After
/// (bounded by [`SourceOptions::max_retry_after`]); a body that is not JSON
/// or has no array at `records` is [`EtlError::Parse`], never retried. A
/// pagination that repeats itself (a next URL or cursor met before, a page
/// that repeats the one before) ends the read with an error naming it.
///
/// Once a page said where the next one is, that request is sent at once,
/// on a task of its own, while the page is read and loaded (so a source
/// must be read inside a tokio runtime); where the paginator knows the
/// requests after it too ([`Paginator::planned`]: `offset` and
/// `page_number` once the total is known), up to `concurrency` are in
/// flight. Pages are handed over in their order whatever order they came
/// in. A read that stops early leaves those requests unanswered.
///
/// [`SourceOptions`] holds what is not the API's own (the timeout, the
/// longest wait, the run's throttle); the rest belongs to the file (a page
/// size is `[params]`, an API key `[auth]`, incremental reads
/// [`Source::read_since`]).
#[derive(Debug)]
pub struct RestSource<D: Decode = AsJson> {
    resource: Resource,
    decode: D,
    fetcher: Arc<Fetcher>,
    origin: Origin,
    paginator: Box<dyn Paginator>,
    next: Option<Request>,
    /// Requests sent before they were asked for, in their order: `next`'s,
    /// then those the paginator knows follow it. The window that puts
    /// pages that came out of order back in order.
    ahead: VecDeque<InFlight>,
    /// How many may be in flight at once (0: none sent ahead).
    width: usize,
    pages: u32,
    /// A pagination that stopped making progress: the next call fails
    /// with this, after the page that showed it was handed over.
    stalled: Option<EtlError>,
    /// For a chain of a child resource: the `_parent` its records carry.
    parent: Option<String>,
}

impl RestSource {
    /// A source reading as `resource` says, its records [`JsonRecord`]s.
    pub fn new(resource: Resource, options: SourceOptions) -> Result<Self, EtlError> {
        Self::decoded(resource, AsJson, options)
    }

    /// The HTTP client a source of `resource` sends with: its headers (the
    /// auth's included), its timeout, redirects kept on its origin.
    pub(crate) fn client(
        resource: &Resource,
        options: &SourceOptions,
    ) -> Result<reqwest::Client, EtlError> {
        wire::client(&resource.url.origin(), headers(resource)?, options.timeout)
    }

    /// A source of `resource` sending with `client`, made by
    /// [`RestSource::client`] for a resource of the same headers and
    /// origin (the chains of one child resource share one, and so its
    /// connections).
    pub(crate) fn with_client(
        resource: Resource,
        options: SourceOptions,
        client: reqwest::Client,
    ) -> Self {
        Self::with_parts(resource, AsJson, options, client)
    }
}

impl<D: Decode> RestSource<D> {
    /// A source reading as `resource` says, each entry made a row by
    /// `decode`.
    pub fn decoded(
        resource: Resource,
        decode: D,
        options: SourceOptions,
    ) -> Result<Self, EtlError> {
        let client = RestSource::client(&resource, &options)?;
        Ok(Self::with_parts(resource, decode, options, client))
    }

    /// A source of `resource`, decoding with `decode`, sending with
    /// `client`.
    fn with_parts(
        resource: Resource,
        decode: D,
        options: SourceOptions,
        client: reqwest::Client,
    ) -> Self {
        let origin = resource.url.origin();
        let paginator = resource.paginate.clone();
        let fetcher = Arc::new(Fetcher {
            client,
            auth: resource.auth.as_ref().map(|auth| Arc::from(auth.boxed())),
            max_retry_after: options.max_retry_after,
            throttle: Arc::clone(&options.throttle),
        });
        let mut source = RestSource {
            decode,
            fetcher,
            origin,
            paginator,
            next: None,
            ahead: VecDeque::new(),
            width: resource.concurrency,
            pages: 0,
            stalled: None,
            parent: None,
            resource,
        };
        source.next = Some(source.paginator.first(&source.base(None)));
        source
    }

    /// Makes this source one chain of a child resource: each record it
    /// reads carries `"_parent": parent` (canonical JSON text).
    pub(crate) fn set_parent(&mut self, parent: String) {
        self.parent = Some(parent);
    }

    /// Pages read so far.
    pub fn pages_read(&self) -> u32 {
        self.pages
    }

    /// The resource it reads.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The resource it reads.
    #[deprecated(note = "renamed `resource`: the whole file is `etl_sources::Pipeline`")]
    pub fn pipeline(&self) -> &Resource {
        &self.resource
    }

    /// The URL the next call of [`Source::next_page`] fetches (without the
    /// secret of `query` auth).
    pub fn next_url(&self) -> Option<Url> {
        self.next.as_ref().map(|r| self.url_of(r))
    }

    /// Where `request` goes: its URL, with the paginator's parameters in
    /// the query unless they go in the body.
    fn url_of(&self, request: &Request) -> Url {
        match self.resource.param_in {
            ParamIn::Query => request.in_query(),
            ParamIn::Body => request.url.clone(),
        }
    }

    /// The JSON body of `request`, for `method = "POST"`: `[body]`, and the
    /// paginator's parameters at its top level with `param_in = "body"`.
    fn body_of(&self, request: &Request) -> Result<Option<Vec<u8>>, EtlError> {
        if self.resource.method != Method::Post {
            return Ok(None);
        }
        let mut body = self.resource.body.clone();
        if self.resource.param_in == ParamIn::Body {
            for (name, value) in &request.params {
                body.insert(name.clone(), value.clone());
            }
        }
        serde_json::to_vec(&Value::Object(body))
            .map(Some)
            .map_err(|e| EtlError::InvalidInput(format!("the request body: {e}")))
    }

    /// The first page's URL with `[params]` and, reading since `cursor`,
    /// the incremental parameters.
    fn base(&self, since: Option<Option<&str>>) -> Url {
        let mut url = self.resource.url.clone();
        {
            let mut query = url.query_pairs_mut();
            query.extend_pairs(&self.resource.params);
            if let (Some(cursor), Some(incremental)) = (since, &self.resource.incremental) {
                query.extend_pairs(&incremental.params);
                if let Some(cursor) = cursor {
                    query.append_pair(&incremental.param, cursor);
                }
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        url
    }

    /// The held `cursor` (RFC 3339) as an incremental request sends it:
    /// moved back by `[incremental] lag`, in the records' own form (a
    /// number with `updated_at_unit`, else text).
    fn cursor_sent(&self, cursor: &str) -> Result<String, EtlError> {
        let not_a_time = |what: &str| {
            EtlError::InvalidInput(format!(
                "{}: the cursor {cursor:?} is not an RFC 3339 UTC time, so it cannot be {what}",
                self.resource.name
            ))
        };
        let lag = self.resource.incremental.as_ref().and_then(|i| i.lag);
        let cursor = match lag {
            Some(lag) => {
                stamp::minus(cursor, lag).ok_or_else(|| not_a_time("moved back by `lag`"))?
            }
            None => cursor.to_owned(),
        };
        match &self.resource.updated_at {
            Some(at) => at
                .sent(&cursor)
                .ok_or_else(|| not_a_time("sent as a Unix time")),
            None => Ok(cursor),
        }
    }

    /// The query parameter that holds the auth's secret, if it has one.
    fn secret_param(&self) -> Option<&str> {
        self.resource.auth.as_ref()?.secret_param()
    }

    /// Where `request` goes, after the check that it stays on the file's
    /// origin.
    fn url_on_origin(&self, request: &Request) -> Result<Url, EtlError> {
        let url = self.url_of(request);
        if url.origin() != self.origin {
            // The URL as the server gave it, the auth's secret taken out
            // (`followed`): it names what was refused.
            return Err(EtlError::Refused(format!(
                "next page {url} is on origin {}, not {}: not following it (a credential never leaves its origin)",
                url.origin().ascii_serialization(),
                self.origin.ascii_serialization()
            )));
        }
        Ok(url)
    }

    /// The request of `request`, as sent: its URL (on the file's origin)
    /// and body.
    fn prepared(&self, request: &Request) -> Result<(Url, Option<Vec<u8>>), EtlError> {
        Ok((self.url_on_origin(request)?, self.body_of(request)?))
    }

    /// A request the paginator asks for, as this source follows it: the
    /// auth's secret parameter taken out (the auth puts it in as sent).
    fn followed(&self, mut request: Request) -> Request {
        if let Some(param) = self.secret_param() {
            wire::set_query(&mut request.url, &[param], &[]);
        }
        request
    }

    /// Sends at once the request after the page at `url`, where its
    /// headers or its body's head tell it ([`Paginator::early`]), before
    /// the page is read: the round trip no longer waits for that.
    /// [`RestSource::send_ahead`] keeps it if the page's reading asks for
    /// the same.
    fn send_early(&mut self, url: &Url, headers: &HeaderMap, body: &[u8]) {
        if self.width == 0 {
            return;
        }
        let head = Head { url, headers, body };
        let Some(early) = self.paginator.early(&head) else {
            return;
        };
        let early = self.followed(early);
        if self.ahead.front().is_some_and(|sent| sent.request == early) {
            return;
        }
        if let Ok((target, body)) = self.prepared(&early) {
            self.ahead
                .push_front(InFlight::send(&self.fetcher, early, target, body));
        }
    }

    /// Sends ahead `next` and the requests known to follow it, up to the
    /// width: those already in flight are kept, any other in flight is
    /// dropped (cancelled). A request that would fail before leaving is not
    /// sent, nor any after it (the call that needs it fails as it would
    /// have).
    fn send_ahead(&mut self) {
        let mut old = std::mem::take(&mut self.ahead);
        let Some(next) = self.next.clone().filter(|_| self.width > 0) else {
            return;
        };
        let wanted = std::iter::once(next).chain(self.paginator.planned(self.width - 1));
        for request in wanted {
            if old.front().is_some_and(|sent| sent.request == request) {
                self.ahead.extend(old.pop_front());
                continue;
            }
            let Ok((url, body)) = self.prepared(&request) else {
                break;
            };
            self.ahead
                .push_back(InFlight::send(&self.fetcher, request, url, body));
        }
    }

    /// Whether the read has ended: no next page, and no error to report.
    pub(crate) fn is_done(&self) -> bool {
        self.next.is_none() && self.stalled.is_none()
    }

    /// Sends no request ahead: each goes when its page is asked for (the
    /// chains of a child resource, which run side by side instead).
    pub(crate) fn send_none_ahead(&mut self) {
        self.width = 0;
        self.ahead.clear();
    }
}

/// The headers of every request: `[headers]`, and the auth's own (marked
/// sensitive: never shown in a `Debug`).
fn headers(resource: &Resource) -> Result<HeaderMap, EtlError> {
    let mut headers = HeaderMap::new();
    for (name, value) in &resource.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| EtlError::InvalidInput(format!("header {name:?}: {e}")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|e| EtlError::InvalidInput(format!("header {name}: {e}")))?;
        headers.insert(name, value);
    }
    if let Some(auth) = &resource.auth {
        for (name, value) in auth.headers() {
            headers.insert(name, value);
        }
    }
    Ok(headers)
}

impl<D: Decode> Source for RestSource<D> {
    type Row = D::Row;

    async fn next_page(&mut self) -> Result<Option<PageRead<D::Row>>, EtlError> {
        if let Some(stalled) = self.stalled.take() {
            return Err(stalled);
        }
        let Some(request) = self.next.clone() else {
            return Ok(None);
        };
        let url = self.url_on_origin(&request)?;
        // Sent ahead already, or sent now (its body made only then).
        let fetched = match self.ahead.pop_front() {
            Some(sent) if sent.request == request => sent.page().await,
            _ => {
                let body = self.body_of(&request)?;
                self.fetcher.fetch_page(&url, body.as_deref()).await
            }
        };
        let (body, response_headers) = fetched?;
        self.send_early(&url, &response_headers, &body);
        let not_a_page = |why: String| EtlError::Parse(format!("{url}: {why}"));
        let text = std::str::from_utf8(&body)
            .map_err(|e| not_a_page(format!("the body is not UTF-8 ({e})")))?;
        let page_body = Body::parse(text).map_err(|e| {
            not_a_page(format!(
                "the body is not JSON ({e}); it starts {:?}",
                etl_core::http::excerpt(&body)
            ))
        })?;
        let records = &self.resource.records;
        let entries: Vec<&RawValue> = match page_body.array_at(records) {
            Ok(Some(entries)) => entries,
            Ok(None) => {
                return Err(not_a_page(format!(
                    "no array at `records` ({records:?}): {}",
                    page_body.describe()
                )))
            }
            Err(e) => return Err(not_a_page(e.to_string())),
        };
        self.pages += 1;
        // The next request first, sent at once: its round trip runs while
        // this page's records are read and loaded.
        let step = self.paginator.next(&Page {
            url: &url,
            body: &page_body,
            headers: &response_headers,
            entries: &entries,
        });
        self.next = match step {
            Ok(next) => next.map(|next| self.followed(next)),
            Err(why) => {
                self.stalled = Some(why);
                None
            }
        };
        self.send_ahead();
        let shown = url.to_string();
        let (rows, rejects) = decode::read_entries(
            &self.decode,
            &self.resource,
            &entries,
            self.parent.as_deref(),
            &shown,
        );
        Ok(Some(PageRead {
            url,
            rows,
            rejects,
            count: None,
            on_loaded: None,
        }))
    }

    fn pages_total(&self) -> Option<u64> {
        self.paginator.pages_total()
    }

    fn throttled(&self) -> Duration {
        self.fetcher.throttle.total()
    }

    fn in_flight(&self) -> u32 {
        self.fetcher.throttle.in_flight()
    }

    fn next_sent_ahead(&self) -> bool {
        self.stalled.is_none()
            && self
                .ahead
                .front()
                .is_some_and(|sent| self.next.as_ref() == Some(&sent.request))
    }

    /// A number at `updated_at` in the held record: the cursor goes back
    /// as Unix seconds ([`UpdatedAt`] without `updated_at_unit`).
    fn held_record(&mut self, record: &str) {
        if let Some(at) = &mut self.resource.updated_at {
            at.learn(record);
        }
    }

    /// Requests carry `[incremental].param=<cursor>` and
    /// `[incremental].params` from the first page on.
    fn read_since(&mut self, cursor: Option<&str>) -> Result<(), EtlError> {
        crate::source::before_first_page(self.pages)?;
        let incremental = self
            .resource
            .check_incremental()
            .map_err(|e| EtlError::InvalidInput(e.to_string()))?;
        let sent = match cursor
            .map(str::to_owned)
            .or_else(|| incremental.initial.clone())
        {
            None => None,
            Some(cursor) => Some(self.cursor_sent(&cursor)?),
        };
        let base = self.base(Some(sent.as_deref()));
        self.next = Some(self.paginator.first(&base));
        self.ahead.clear();
        Ok(())
    }

    /// As `D` reads a stored row ([`Decode::stored_updated_at`]).
    fn stored_updated_at<'l>(&self, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        self.decode.stored_updated_at(&self.resource, stored)
    }
}
