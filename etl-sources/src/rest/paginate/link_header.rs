//! `style = "link_header"`: the `rel="next"` link of the `Link` header
//! (RFC 8288).

use etl_core::EtlError;
use url::Url;

use super::{Met, Page, Paginator, Request};
use crate::rest::config::ConfigError;
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

impl Paginator for LinkHeader {
    fn first(&mut self, base: &Url) -> Request {
        self.met.clear();
        let _ = self.met.url(base.clone());
        Request::to(base.clone())
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        let Some(link) = page.header("link") else {
            return Ok(None);
        };
        let links = http_link::parse_link_header(&link, page.url).map_err(|e| {
            EtlError::Parse(format!("{}: the Link header does not read: {e}", page.url))
        })?;
        let next = links.into_iter().find(|l| {
            l.rel
                .split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("next"))
        });
        match next {
            None => Ok(None),
            Some(link) => self.met.url(link.target),
        }
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}
