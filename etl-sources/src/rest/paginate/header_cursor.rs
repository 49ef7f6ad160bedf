//! `style = "header_cursor"`: the next cursor is a response header (dlt's
//! `header_cursor`).

use etl_core::EtlError;
use url::Url;

use super::{CursorChain, Page, Paginator, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// The first request as written, then `?<cursor_param>=<the header's
/// value>`; the header absent or empty ends the read. A cursor met before
/// is a loop.
#[derive(Clone, Debug)]
pub(crate) struct HeaderCursor {
    header: String,
    chain: CursorChain,
}

impl HeaderCursor {
    /// `header` (required: a header name), `cursor_param` (`cursor`).
    pub fn from_keys(keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        let header = keys
            .text("header")?
            .ok_or_else(|| keys.required("header"))?;
        if reqwest::header::HeaderName::from_bytes(header.get_ref().as_bytes()).is_err() {
            return Err(keys.error(header.span(), "header", "is not a valid header name"));
        }
        Ok(Box::new(HeaderCursor {
            header: header.into_inner(),
            chain: CursorChain::new(keys.text_or("cursor_param", "cursor")?),
        }))
    }
}

impl Paginator for HeaderCursor {
    fn first(&mut self, base: &Url) -> Request {
        self.chain.first(base)
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        let Some(value) = page.header(&self.header).filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        self.chain
            .follow(serde_json::Value::String(value), &self.header, page)
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::paginate::tests::next;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn the_header_carries_the_cursor_and_its_absence_ends_the_read() {
        let mut pager = HeaderCursor {
            header: "X-Next-Cursor".into(),
            chain: CursorChain::new("cursor".into()),
        };
        let base = Url::parse("http://x/items?per_page=2").unwrap();
        assert_eq!(pager.first(&base).in_query(), base);
        let mut headers = HeaderMap::new();
        headers.insert("x-next-cursor", HeaderValue::from_static("c2"));
        let second = next(&mut pager, &base, r#"{"data": [1, 2]}"#, &headers)
            .unwrap()
            .unwrap()
            .in_query();
        assert_eq!(second.as_str(), "http://x/items?per_page=2&cursor=c2");
        let e = next(&mut pager, &second, r#"{"data": [3]}"#, &headers).unwrap_err();
        assert!(e.to_string().contains("pagination loop"), "{e}");
        headers.insert("x-next-cursor", HeaderValue::from_static(""));
        assert_eq!(
            next(&mut pager, &second, r#"{"data": [3]}"#, &headers).unwrap(),
            None
        );
        assert_eq!(
            next(&mut pager, &second, r#"{"data": [3]}"#, &HeaderMap::new()).unwrap(),
            None
        );
    }
}
