//! `style = "link_header"`: the `rel="next"` link of the `Link` header
//! (RFC 8288).

use etl_core::EtlError;
use url::Url;

use super::{Head, Met, Page, Paginator, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// The target of the `Link` header's `rel="next"` link, resolved against
/// the page; no such link ends the read. A URL met before is a loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct LinkHeader {
    met: Met,
}

impl LinkHeader {
    /// No keys.
    pub fn from_keys(_keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        Ok(Box::new(LinkHeader::default()))
    }
}

/// The target of the `rel="next"` link of `link` (a `Link` header's
/// value), resolved against `page`.
fn next_link(link: Option<String>, page: &Url) -> Result<Option<Url>, EtlError> {
    let Some(link) = link else {
        return Ok(None);
    };
    let links = http_link::parse_link_header(&link, page)
        .map_err(|e| EtlError::Parse(format!("{page}: the Link header does not read: {e}")))?;
    Ok(links
        .into_iter()
        .find(|l| {
            l.rel
                .split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("next"))
        })
        .map(|l| l.target))
}

impl Paginator for LinkHeader {
    fn first(&mut self, base: &Url) -> Request {
        self.met.clear();
        let _ = self.met.url(base.clone());
        Request::to(base.clone())
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        match next_link(page.header("link"), page.url)? {
            Some(target) => self.met.url(target),
            None => Ok(None),
        }
    }

    /// The header is there before the body is read.
    fn early(&self, head: &Head<'_>) -> Option<Request> {
        next_link(head.header("link"), head.url)
            .ok()
            .flatten()
            .map(Request::to)
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}
