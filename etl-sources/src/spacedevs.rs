//! Launch Library 2 (The Space Devs): the REST source ([`RestSource`])
//! configured for its list endpoints ([`LaunchLibrary`]), its entries read
//! as launches ([`AsLaunch`]). One page loop, one HTTP path and one
//! incremental handshake serve `launches` and `etl run` alike.

mod decode;
mod pages;

pub use decode::AsLaunch;

use etl_core::EtlError;
use reqwest::header::{HeaderValue, AUTHORIZATION};
use std::collections::BTreeMap;
use url::Url;

use crate::rest::{
    Incremental, Method, ParamIn, Pointer, Resource, RestSource, TableShape, UpdatedAt,
    DEFAULT_CONCURRENCY,
};
use crate::{wire, SourceOptions};
use pages::LaunchPages;

/// A Launch Library 2 list endpoint read page by page: the REST source
/// whose entries are [`etl_core::Launch`]es ([`LaunchLibrary::source`]).
///
/// Every page fetch is a `#[retry]` fn: network failures, 408, 429 and 5xx
/// answers are retried with backoff (5 attempts, 1 s doubling to 60 s, or
/// the server's Retry-After); anything else fails at once. `next` links and
/// redirects are followed only on the base URL's origin (scheme, host and
/// port), so an API key never travels elsewhere. An entry that does not
/// read as a launch fails neither its page nor the read: it comes back in
/// [`crate::PageRead::rejects`], and the page is not fetched again for it.
///
/// # Incremental reads
/// After [`crate::Source::read_since`], every request carries
/// `ordering=last_updated` and `last_updated__gte=<cursor>`, and the pages
/// are walked by that cursor (keyset paging): after each page the cursor
/// moves to the page's newest `last_updated`, and `offset` skips only the
/// entries of that very timestamp already read. The API's offset links
/// would skip a launch whenever one read earlier is updated mid-run and
/// moves to the end; the cursor cannot. A page that cannot move the cursor
/// (empty, yet its `next` says more follow) ends the read with an error
/// rather than asking for it forever.
pub type SpaceDevsSource = RestSource<AsLaunch>;

/// How to read a Launch Library 2 list endpoint (2.3.0's
/// `/2.3.0/launches/upcoming/`, `/launches/previous/`, `/launches/`, or
/// 2.2.0's `/2.2.0/launch/upcoming/`): its first page, page size and API
/// key. [`LaunchLibrary::resource`] is the REST [`Resource`] that reads it.
///
/// ```no_run
/// use etl_sources::{LaunchLibrary, Source, SourceOptions};
///
/// # async fn run() -> Result<(), etl_core::EtlError> {
/// let mut source = LaunchLibrary::new("https://ll.thespacedevs.com/2.3.0/launches/upcoming/")?
///     .limit(10)
///     .source(SourceOptions::default())?;
/// while let Some(page) = source.next_page().await? {
///     println!("{} launches, {} rejected", page.rows.len(), page.rejects.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LaunchLibrary {
    url: Url,
    limit: Option<u32>,
    api_key: Option<String>,
}

/// The API key is never shown.
impl std::fmt::Debug for LaunchLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchLibrary")
            .field("url", &self.url.as_str())
            .field("limit", &self.limit)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl LaunchLibrary {
    /// The endpoint whose first page is `base_url`. Fails with
    /// `InvalidInput`, naming it, for a URL that is not http(s).
    pub fn new(base_url: &str) -> Result<Self, EtlError> {
        let url = Url::parse(base_url)
            .map_err(|e| EtlError::InvalidInput(format!("base URL {base_url:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(EtlError::InvalidInput(format!(
                "base URL {base_url:?}: expected an http(s) URL"
            )));
        }
        Ok(LaunchLibrary {
            url,
            limit: None,
            api_key: None,
        })
    }

    /// Pages of `limit` entries: the API's `limit` query parameter,
    /// replacing one the base URL holds (the server's default without it).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// An API key, sent as `Authorization: Token <key>`, and only ever to
    /// the base URL's origin.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The REST resource that reads the endpoint: records at `/results`,
    /// ids at `/id`, update times at `/last_updated`, incremental reads by
    /// `last_updated__gte` in `last_updated` order. Fails with
    /// `InvalidInput` for an API key a header cannot carry.
    pub fn resource(&self) -> Result<Resource, EtlError> {
        let mut url = self.url.clone();
        if let Some(limit) = self.limit {
            wire::set_query(&mut url, &[], &[("limit", &limit.to_string())]);
        }
        let pointer = |text: &str| Pointer::parse(text).expect("a valid pointer");
        let (order, by) = pages::ORDERING;
        Ok(Resource {
            name: "launches".into(),
            url,
            records: pointer("/results"),
            id: pointer("/id"),
            updated_at: Some(UpdatedAt {
                pointer: pointer("/last_updated"),
                unit: None,
            }),
            params: BTreeMap::new(),
            headers: BTreeMap::new(),
            paginate: Box::new(LaunchPages::new(self.limit)),
            incremental: Some(Incremental {
                param: pages::CURSOR_PARAM.into(),
                params: BTreeMap::from([(order.into(), by.into())]),
                initial: None,
                lag: None,
            }),
            auth: self.api_key.as_deref().map(token).transpose()?,
            method: Method::Get,
            body: serde_json::Map::new(),
            param_in: ParamIn::Query,
            parent: None,
            from_parent: BTreeMap::new(),
            load: true,
            rate_limit: None,
            concurrency: DEFAULT_CONCURRENCY,
            shape: TableShape::Json,
            write: etl_core::content::write::Write::Append,
        })
    }

    /// A source reading the endpoint ([`LaunchLibrary::resource`]).
    pub fn source(&self, options: SourceOptions) -> Result<SpaceDevsSource, EtlError> {
        RestSource::decoded(self.resource()?, AsLaunch, options)
    }
}

/// `Authorization: Token <key>`, marked sensitive.
fn token(key: &str) -> Result<Box<dyn crate::rest::Auth>, EtlError> {
    let value = HeaderValue::from_str(&format!("Token {key}")).map_err(|_| {
        EtlError::InvalidInput("the API key holds characters a header cannot carry".into())
    })?;
    Ok(crate::rest::header_auth(AUTHORIZATION, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_replaces_the_query_parameter() {
        let source =
            LaunchLibrary::new("https://ll.example/2.2.0/launch/upcoming/?limit=5&mode=list")
                .unwrap()
                .limit(20)
                .source(SourceOptions::default())
                .unwrap();
        assert_eq!(
            source.next_url().unwrap().as_str(),
            "https://ll.example/2.2.0/launch/upcoming/?mode=list&limit=20"
        );
    }

    #[test]
    fn base_url_must_be_http() {
        for bad in ["ftp://ll.example/", "not a url", "file:///etc/passwd"] {
            let e = LaunchLibrary::new(bad).unwrap_err();
            assert!(
                matches!(e, EtlError::InvalidInput(ref m) if m.contains(bad)),
                "{e}"
            );
        }
    }

    #[test]
    fn the_api_key_never_shows() {
        let ll = LaunchLibrary::new("https://ll.example/")
            .unwrap()
            .api_key("s3cret");
        assert!(!format!("{ll:?}").contains("s3cret"));
        assert!(!format!("{:?}", ll.resource().unwrap()).contains("s3cret"));
        let bad = LaunchLibrary::new("https://ll.example/")
            .unwrap()
            .api_key("a\nb");
        assert!(matches!(bad.resource(), Err(EtlError::InvalidInput(_))));
    }
}
