//! `style = "next_url"`: the body holds the next page's URL.

use etl_core::EtlError;
use url::Url;

use super::{cursor_of, Head, Met, Page, Paginator, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;
use crate::rest::pointer::Pointer;

/// The URL at `next` (absolute, or relative to the page); null, `""` or
/// nothing there ends the read. A URL met before is a loop.
#[derive(Clone, Debug)]
pub(crate) struct NextUrl {
    next: Pointer,
    met: Met,
}

impl NextUrl {
    /// The URL at `next`.
    pub(crate) fn new(next: Pointer) -> Self {
        NextUrl {
            next,
            met: Met::default(),
        }
    }

    /// `next` (required).
    pub fn from_keys(keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        let next = keys.pointer("next")?.ok_or_else(|| keys.required("next"))?;
        Ok(Box::new(NextUrl::new(next)))
    }
}

impl NextUrl {
    /// The next page's URL from what `next` found in the page at `page`.
    fn target(
        &self,
        found: Option<serde_json::Value>,
        page: &Url,
    ) -> Result<Option<Url>, EtlError> {
        let Some(target) = cursor_of(found, &self.next, page, "paginate.next")? else {
            return Ok(None);
        };
        let target = match target {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        page.join(&target).map(Some).map_err(|e| {
            EtlError::Parse(format!(
                "{page}: `paginate.next` ({}) is not a URL: {target:?}: {e}",
                self.next
            ))
        })
    }
}

impl Paginator for NextUrl {
    fn first(&mut self, base: &Url) -> Request {
        self.met.clear();
        // The first URL counts as met: a next URL back to it is a loop.
        let _ = self.met.url(base.clone());
        Request::to(base.clone())
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        match self.target(page.value_at(&self.next)?, page.url)? {
            Some(url) => self.met.url(url),
            None => Ok(None),
        }
    }

    /// Where the next URL stands before the records, it is known from
    /// the body's head.
    fn early(&self, head: &Head<'_>) -> Option<Request> {
        let found = head.value_in_head(&self.next)?;
        let url = self.target(Some(found), head.url).ok()??;
        Some(Request::to(url))
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}
