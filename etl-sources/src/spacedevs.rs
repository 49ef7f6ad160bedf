//! [`SpaceDevsSource`]: a Launch Library 2 list endpoint, page by page.

use etl_core::{retry, EtlError, Row};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use url::{Origin, Url};

use crate::source::{PageRead, Source};
use crate::throttle::Throttle;
use crate::wire::{self, Page};

/// How a [`SpaceDevsSource`] talks to the server.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// Page size: the API's `limit` query parameter (the server's default
    /// when `None`).
    pub limit: Option<u32>,
    /// An API key, sent as `Authorization: Token <key>`, and only ever to
    /// the origin of the base URL.
    pub api_key: Option<String>,
    /// Timeout of one request, connect to last byte (`None`: no timeout).
    pub timeout: Option<Duration>,
    /// The longest server-requested wait (a 429's or 503's Retry-After) to
    /// sit out.
    /// A longer one fails the page at once with
    /// [`EtlError::RetryAfterTooLong`], naming the wait (`None`: every
    /// wait is honoured; the free tier can ask for 40 minutes).
    pub max_retry_after: Option<Duration>,
    /// Read incrementally: ask only for launches updated at or after
    /// `since`, oldest change first (`ordering=last_updated`), and page by
    /// that cursor rather than by the API's `next` links (see
    /// [`SpaceDevsSource`]).
    pub incremental: bool,
    /// The cursor of an incremental read: the newest `last_updated` already
    /// held (`None`: read everything, still in `last_updated` order).
    pub since: Option<String>,
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
            limit: None,
            api_key: None,
            timeout: Some(Duration::from_secs(30)),
            max_retry_after: None,
            incremental: false,
            since: None,
            throttle: Arc::default(),
        }
    }
}

/// A paginated Launch Library 2 list endpoint (2.3.0's
/// `/2.3.0/launches/upcoming/`, `/launches/previous/`, `/launches/`, or
/// 2.2.0's `/2.2.0/launch/upcoming/`), read page by page.
///
/// # Incremental reads
/// With [`SourceOptions::incremental`], every request carries
/// `ordering=last_updated` and `last_updated__gte=<cursor>`, and the pages
/// are walked by that cursor (keyset paging): after each page the cursor
/// moves to the page's newest `last_updated`, and `offset` skips only the
/// entries of that very timestamp already read. The API's offset links
/// would skip a launch whenever one read earlier is updated mid-run and
/// moves to the end (every later entry shifts back by one); the cursor
/// cannot, since an update only ever moves a launch past it, where it is
/// read again. Each page still brings `limit` entries not read before, so
/// a run costs the same requests as following `next`.
///
/// Every page fetch is a `#[retry]` fn: network failures, 408, 429 and 5xx
/// answers are retried with backoff (5 attempts, 1 s doubling to 60 s, or
/// the server's Retry-After); anything else fails at once. `next` links and
/// redirects are followed only on the base URL's origin (scheme, host and
/// port), so an API key never travels elsewhere.
///
/// ```no_run
/// use etl_sources::{Source, SourceOptions, SpaceDevsSource};
///
/// # async fn run() -> Result<(), etl_core::EtlError> {
/// let mut source = SpaceDevsSource::new(
///     "https://ll.thespacedevs.com/2.3.0/launches/upcoming/",
///     SourceOptions { limit: Some(10), ..Default::default() },
/// )?;
/// while let Some(page) = source.next_page().await? {
///     println!("{} launches, {} rejected", page.rows.len(), page.rejects.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SpaceDevsSource {
    client: reqwest::Client,
    origin: Origin,
    next: Option<Url>,
    pages: u32,
    max_retry_after: Option<Duration>,
    /// Incremental reads: where the next page starts.
    keyset: Option<Keyset>,
    /// Entries all pages hold, and the page size, once the first page came.
    count: Option<u64>,
    page_size: Option<u64>,
    /// The run's throttle ([`SourceOptions::throttle`]): its holds and
    /// rate limit, and the time held back so far.
    throttle: Arc<Throttle>,
    /// An incremental read whose last page did not move the cursor: the
    /// next call fails with this instead of asking for the same page again.
    stalled: Option<String>,
}

/// The cursor of an incremental read.
#[derive(Debug)]
struct Keyset {
    /// The base URL with `limit` and `ordering`.
    base: Url,
    cursor: Option<String>,
    /// Entries at exactly `cursor` already read.
    offset: usize,
}

impl Keyset {
    fn url(&self) -> Url {
        let mut url = self.base.clone();
        if let Some(cursor) = &self.cursor {
            wire::set_query(&mut url, &[], &[("last_updated__gte", cursor)]);
        }
        if self.offset > 0 {
            wire::set_query(&mut url, &[], &[("offset", &self.offset.to_string())]);
        }
        url
    }

    /// Moves past a page whose entries carry `stamps` (`last_updated`, in
    /// page order; `None` for an entry that has none).
    fn advance(&mut self, stamps: &[Option<String>]) {
        match stamps.iter().rev().flatten().next() {
            // No timestamp at all: step over the page by position.
            None => self.offset += stamps.len(),
            Some(newest) => {
                let at_newest = stamps
                    .iter()
                    .filter(|s| s.as_deref() == Some(newest.as_str()))
                    .count();
                if self.cursor.as_deref() == Some(newest.as_str()) {
                    // A page full of one timestamp: skip it by position.
                    self.offset += at_newest;
                } else {
                    self.cursor = Some(newest.clone());
                    self.offset = at_newest;
                }
            }
        }
    }
}

impl SpaceDevsSource {
    /// A source starting at `base_url`, the full URL of a list endpoint's
    /// first page. Fails with `InvalidInput` for a URL that is not http(s).
    pub fn new(base_url: &str, options: SourceOptions) -> Result<Self, EtlError> {
        let mut url = Url::parse(base_url)
            .map_err(|e| EtlError::InvalidInput(format!("base URL {base_url:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(EtlError::InvalidInput(format!(
                "base URL {base_url:?}: expected an http(s) URL"
            )));
        }
        if let Some(limit) = options.limit {
            wire::set_query(&mut url, &[], &[("limit", &limit.to_string())]);
        }
        let origin = url.origin();

        let mut headers = HeaderMap::new();
        if let Some(key) = &options.api_key {
            let mut value = HeaderValue::from_str(&format!("Token {key}")).map_err(|_| {
                EtlError::InvalidInput("the API key holds characters a header cannot carry".into())
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = wire::client(&origin, headers, options.timeout)?;
        let mut source = SpaceDevsSource {
            client,
            origin,
            next: Some(url),
            pages: 0,
            max_retry_after: options.max_retry_after,
            keyset: None,
            count: None,
            page_size: options.limit.map(u64::from),
            throttle: Arc::clone(&options.throttle),
            stalled: None,
        };
        if options.incremental {
            source.start_keyset(options.since);
        }
        Ok(source)
    }

    /// Walks the listing by the `last_updated` cursor from `since` on
    /// (see "Incremental reads" above). Called before the first page: the
    /// next URL is still the first page's.
    fn start_keyset(&mut self, since: Option<String>) {
        let keyset = match self.keyset.take() {
            Some(keyset) => Keyset {
                cursor: since,
                ..keyset
            },
            None => {
                let Some(mut base) = self.next.take() else {
                    return;
                };
                wire::set_query(&mut base, &[], &[("ordering", "last_updated")]);
                Keyset {
                    base,
                    cursor: since,
                    offset: 0,
                }
            }
        };
        self.next = Some(keyset.url());
        self.keyset = Some(keyset);
    }

    /// Pages read so far.
    pub fn pages_read(&self) -> u32 {
        self.pages
    }

    /// The URL the next call of [`Source::next_page`] fetches.
    pub fn next_url(&self) -> Option<&Url> {
        self.next.as_ref()
    }

    /// One page: the whole request, status check and parse is one attempt.
    /// Every long wait is announced ([`announce_wait`]).
    #[retry(max_attempts = 5, base = "1s", max = "60s", on_retry = wire::announce_wait)]
    async fn fetch_page(&self, url: Url) -> Result<Page, EtlError> {
        let request = self.client.get(url.clone());
        let (_, body) = wire::get(request, &url, self.max_retry_after, &self.throttle).await?;
        wire::parse_page(&url, &body)
    }
}

/// Read through [`Source`]: `next_page`, `pages_total`, `throttled`, and
/// incremental reads by `read_since`.
impl Source for SpaceDevsSource {
    type Row = Row;

    /// The next page, or `None` once the last page was read.
    ///
    /// An entry that does not read as a launch fails neither the page nor
    /// the call: it comes back in [`PageRead::rejects`], and the page is not
    /// fetched again for it (the same bytes would read the same way).
    ///
    /// On an error the same page is tried again by the next call. A `next`
    /// link on another origin fails with `EtlError::Refused`, naming it,
    /// before any request goes there.
    async fn next_page(&mut self) -> Result<Option<PageRead>, EtlError> {
        if let Some(stalled) = self.stalled.take() {
            return Err(EtlError::Parse(stalled));
        }
        let Some(url) = self.next.clone() else {
            return Ok(None);
        };
        if url.origin() != self.origin {
            return Err(EtlError::Refused(format!(
                "next page {url} is on another origin than {}; not following it",
                self.origin.ascii_serialization()
            )));
        }
        let page = self.fetch_page(url.clone()).await?;
        let next = match page.next.as_deref() {
            None | Some("") => None,
            Some(next) => Some(url.join(next).map_err(|e| {
                EtlError::Parse(format!("{url}: `next` is not a URL ({next:?}: {e})"))
            })?),
        };
        self.pages += 1;
        if self.count.is_none() {
            self.count = page.count;
        }
        if self.page_size.is_none() && next.is_some() {
            self.page_size = Some(page.results.len() as u64);
        }
        let mut rows = Vec::with_capacity(page.results.len());
        let mut rejects = Vec::new();
        let mut stamps = Vec::with_capacity(page.results.len());
        for entry in page.results {
            match wire::read_launch(&url, entry) {
                Ok(launch) => {
                    stamps.push(launch.last_updated.clone());
                    rows.push(Row::Launches(launch));
                }
                Err(reject) => {
                    tracing::warn!(source = %url, error = %reject.error, "an entry did not read as a launch; rejected");
                    stamps.push(wire::last_updated(&reject.raw));
                    rejects.push(reject);
                }
            }
        }
        // The server says whether more follows; an incremental read decides
        // where it starts by the cursor, not by the server's offset link.
        self.next = match (&mut self.keyset, next) {
            (_, None) => None,
            (None, next) => next,
            (Some(keyset), Some(_)) => {
                keyset.advance(&stamps);
                let next = keyset.url();
                if next == url {
                    // An empty page that says more follows: asking again
                    // would get the same page, forever.
                    self.stalled = Some(format!(
                        "{url}: the page holds no entry but its `next` says more follow; \
                         the incremental read cannot move its cursor"
                    ));
                    None
                } else {
                    Some(next)
                }
            }
        };
        Ok(Some(PageRead {
            url,
            rows,
            rejects,
            count: page.count,
            on_loaded: None,
        }))
    }

    /// How many pages the listing holds in all, as far as the server's
    /// `count` and the page size tell (`None` before the first page).
    fn pages_total(&self) -> Option<u64> {
        let (count, size) = (self.count?, self.page_size.filter(|&s| s > 0));
        Some(match size {
            Some(size) => count.div_ceil(size).max(1),
            None => 1,
        })
    }

    /// How long the server asked this source to wait (its 429
    /// Retry-After), in all, so far.
    fn throttled(&self) -> Duration {
        self.throttle.total()
    }

    fn in_flight(&self) -> u32 {
        self.throttle.in_flight()
    }

    /// Asks for launches updated at or after `cursor`, in `last_updated`
    /// order (as [`SourceOptions::incremental`] with `since`).
    fn read_since(&mut self, cursor: Option<&str>) -> Result<(), EtlError> {
        crate::source::before_first_page(self.pages)?;
        self.start_keyset(cursor.map(str::to_owned));
        Ok(())
    }

    fn stored_updated_at<'l>(&self, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        crate::cursor::launch_updated_at(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_replaces_the_query_parameter() {
        let source = SpaceDevsSource::new(
            "https://ll.example/2.2.0/launch/upcoming/?limit=5&mode=list",
            SourceOptions {
                limit: Some(20),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            source.next_url().unwrap().as_str(),
            "https://ll.example/2.2.0/launch/upcoming/?mode=list&limit=20"
        );
    }

    #[test]
    fn base_url_must_be_http() {
        for bad in ["ftp://ll.example/", "not a url", "file:///etc/passwd"] {
            let e = SpaceDevsSource::new(bad, SourceOptions::default()).unwrap_err();
            assert!(
                matches!(e, EtlError::InvalidInput(ref m) if m.contains(bad)),
                "{e}"
            );
        }
    }
}
