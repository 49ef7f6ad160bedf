//! `style = "cursor"`: the next page is asked for with a cursor the page
//! gives, in its body (`cursor`) or as a member of its last record
//! (`last_record`, as Stripe's `starting_after`).

use etl_core::EtlError;
use serde_json::Value;
use url::Url;

use super::{cursor_at, cursor_of, more_at, CursorChain, Page, Paginator, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;
use crate::rest::pointer::Pointer;

/// Where a page's next cursor is.
#[derive(Clone, Debug)]
enum From {
    /// At this pointer in the body: null, `""` or nothing ends the read.
    Body(Pointer),
    /// This member of the page's last record: an empty page ends the read.
    LastRecord(Pointer),
}

/// The first request as written, then `?<cursor_param>=<cursor>`. The
/// read also ends where `has_more` says `false`. A cursor met before is a
/// loop.
#[derive(Clone, Debug)]
pub(crate) struct Cursor {
    from: From,
    has_more: Option<Pointer>,
    chain: CursorChain,
}

impl Cursor {
    /// `cursor` or `last_record` (one of them), `cursor_param` (`cursor`),
    /// `has_more` (an optional pointer).
    pub fn from_keys(keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        let in_body = keys.text("cursor")?;
        let last = keys.text("last_record")?;
        let pointer = |s: &toml::Spanned<String>, key| {
            Pointer::parse(s.get_ref()).map_err(|e| keys.error(s.span(), key, &e))
        };
        let from = match (&in_body, &last) {
            (Some(c), None) => From::Body(pointer(c, "cursor")?),
            (None, Some(l)) => From::LastRecord(pointer(l, "last_record")?),
            (Some(_), Some(l)) => {
                return Err(keys.error(
                    l.span(),
                    "last_record",
                    "and `paginate.cursor` are two ways to find the cursor: give one",
                ))
            }
            (None, None) => {
                return Err(keys.required_either(
                    "cursor",
                    "`paginate.last_record`, a member of each page's last record",
                ))
            }
        };
        Ok(Box::new(Cursor {
            from,
            chain: CursorChain::new(keys.text_or("cursor_param", "cursor")?),
            has_more: keys.pointer("has_more")?,
        }))
    }

    /// The page's cursor, if it gives one.
    fn cursor(&self, page: &Page<'_>) -> Result<Option<Value>, EtlError> {
        match &self.from {
            From::Body(pointer) => cursor_at(pointer, page, "paginate.cursor"),
            From::LastRecord(pointer) => {
                let Some(last) = page.entries.last() else {
                    return Ok(None);
                };
                let record: Value = serde_json::from_str(last.get())
                    .map_err(|e| EtlError::Parse(format!("{}: {e}", page.url)))?;
                match pointer.get(&record) {
                    Some(v) => cursor_of(Some(v.clone()), pointer, page.url, "paginate.last_record")?
                        .map(Some)
                        .ok_or_else(|| {
                            EtlError::Parse(format!(
                                "{}: `paginate.last_record` ({pointer}) of the page's last record is null or empty",
                                page.url
                            ))
                        }),
                    None => Err(EtlError::Parse(format!(
                        "{}: the page's last record has nothing at `paginate.last_record` ({pointer})",
                        page.url
                    ))),
                }
            }
        }
    }
}

impl Paginator for Cursor {
    fn first(&mut self, base: &Url) -> Request {
        self.chain.first(base)
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        if more_at(self.has_more.as_ref(), page)? == Some(false) {
            return Ok(None);
        }
        let Some(value) = self.cursor(page)? else {
            return Ok(None);
        };
        let what = match &self.from {
            From::Body(p) | From::LastRecord(p) => p.to_string(),
        };
        self.chain.follow(value, &what, page)
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::paginate::tests::next;
    use reqwest::header::HeaderMap;

    fn stripe() -> Cursor {
        Cursor {
            from: From::LastRecord(Pointer::parse("/id").unwrap()),
            has_more: Some(Pointer::parse("/has_more").unwrap()),
            chain: CursorChain::new("starting_after".into()),
        }
    }

    #[test]
    fn the_last_records_id_asks_for_the_next_page_until_has_more_is_false() {
        let mut pager = stripe();
        let base = Url::parse("http://x/v1/customers?limit=2").unwrap();
        let first = pager.first(&base).in_query();
        assert_eq!(first, base);
        let none = HeaderMap::new();
        let page = r#"{"data": [{"id": "cus_1"}, {"id": "cus_2"}], "has_more": true}"#;
        let second = next(&mut pager, &first, page, &none)
            .unwrap()
            .unwrap()
            .in_query();
        assert_eq!(
            second.as_str(),
            "http://x/v1/customers?limit=2&starting_after=cus_2"
        );
        let last = r#"{"data": [{"id": "cus_3"}], "has_more": false}"#;
        assert_eq!(next(&mut pager, &second, last, &none).unwrap(), None);
        // An empty page ends the read; the same cursor twice is a loop.
        let mut pager = stripe();
        pager.has_more = None;
        pager.first(&base);
        assert_eq!(
            next(&mut pager, &base, r#"{"data": []}"#, &none).unwrap(),
            None
        );
        next(&mut pager, &base, page, &none).unwrap();
        let e = next(&mut pager, &base, page, &none).unwrap_err();
        assert!(e.to_string().contains("pagination loop"), "{e}");
        let e = next(&mut pager, &base, r#"{"data": [{"name": "no id"}]}"#, &none).unwrap_err();
        assert!(e.to_string().contains("last_record"), "{e}");
        let e = next(
            &mut stripe(),
            &base,
            r#"{"data": [], "has_more": "yes"}"#,
            &none,
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a boolean"), "{e}");
    }
}
