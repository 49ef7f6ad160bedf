//! [`Pager`]: where the next page is, for each pagination style, and the
//! guards that stop a pagination going round in circles.

use etl_core::EtlError;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use url::Url;

use super::config::Paginate;
use super::pointer::{Body, Pointer};

/// What a page tells the pager.
pub(crate) struct Page<'a> {
    /// The page's URL: relative next URLs and Links resolve against it.
    pub url: &'a Url,
    /// The body, its top level read.
    pub body: &'a Body<'a>,
    /// The `Link` header, its values joined.
    pub link: Option<&'a str>,
    /// The entries at `records`.
    pub entries: &'a [&'a RawValue],
}

/// The pagination of one read: the style, where it stands, what it met.
#[derive(Debug)]
pub(crate) struct Pager {
    style: Paginate,
    /// The first page's URL: offset, page and cursor requests build on it.
    base: Option<Url>,
    /// Offset or page number of the page last asked for.
    at: u64,
    /// Pages in all, once a page said (offset `total`, `total_pages`).
    total_pages: Option<u64>,
    /// URLs (next_url, link_header) or cursors (cursor) met: one met again
    /// is a loop.
    met: HashSet<String>,
    /// A hash of the previous page's entries (offset, page_number): a page
    /// that repeats it means the server ignores the parameter.
    previous: Option<u64>,
    hasher: foldhash::quality::FixedState,
}

impl Pager {
    pub fn new(style: &Paginate) -> Self {
        Pager {
            style: style.clone(),
            base: None,
            at: 0,
            total_pages: None,
            met: HashSet::new(),
            previous: None,
            hasher: foldhash::quality::FixedState::default(),
        }
    }

    /// The first request, from the file's URL with its parameters.
    pub fn first(&mut self, base: &Url) -> Url {
        self.base = Some(base.clone());
        self.met.clear();
        self.previous = None;
        match &self.style {
            Paginate::Offset {
                offset_param,
                limit_param,
                limit,
                ..
            } => {
                self.at = 0;
                with(
                    base,
                    &[(offset_param, "0"), (limit_param, &limit.to_string())],
                )
            }
            Paginate::PageNumber {
                page_param, start, ..
            } => {
                self.at = *start;
                with(base, &[(page_param, &start.to_string())])
            }
            _ => {
                self.met.insert(base.to_string());
                base.clone()
            }
        }
    }

    /// Pages in all, where the server said.
    pub fn pages_total(&self) -> Option<u64> {
        self.total_pages
    }

    /// The next request after `page`, `None` at the end, or the error that
    /// ends a pagination going round in circles.
    pub fn next(&mut self, page: &Page<'_>) -> Result<Option<Url>, EtlError> {
        let base = self.base.clone().unwrap_or_else(|| page.url.clone());
        match self.style.clone() {
            Paginate::None => Ok(None),
            Paginate::NextUrl { next } => {
                let Some(target) = text_at(&next, page, "paginate.next")? else {
                    return Ok(None);
                };
                let url = page.url.join(&target).map_err(|e| {
                    EtlError::Parse(format!(
                        "{}: `paginate.next` ({next}) is not a URL: {target:?}: {e}",
                        page.url
                    ))
                })?;
                self.once(url)
            }
            Paginate::LinkHeader => {
                let Some(link) = page.link else {
                    return Ok(None);
                };
                let links = http_link::parse_link_header(link, page.url).map_err(|e| {
                    EtlError::Parse(format!("{}: the Link header does not read: {e}", page.url))
                })?;
                let next = links.into_iter().find(|l| {
                    l.rel
                        .split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("next"))
                });
                match next {
                    None => Ok(None),
                    Some(link) => self.once(link.target),
                }
            }
            Paginate::Offset {
                offset_param,
                limit_param,
                limit,
                total,
            } => {
                let total = match &total {
                    Some(p) => number_at(p, page, "paginate.total")?,
                    None => None,
                };
                if let Some(total) = total {
                    self.total_pages = Some(total.div_ceil(limit).max(1));
                }
                self.repeats(page, &offset_param)?;
                self.at = self.at.saturating_add(limit);
                let ended = match total {
                    Some(total) => self.at >= total,
                    None => (page.entries.len() as u64) < limit,
                };
                Ok((!ended).then(|| {
                    with(
                        &base,
                        &[
                            (&offset_param, &self.at.to_string()),
                            (&limit_param, &limit.to_string()),
                        ],
                    )
                }))
            }
            Paginate::PageNumber {
                page_param,
                start,
                total_pages,
            } => {
                let total = match &total_pages {
                    Some(p) => number_at(p, page, "paginate.total_pages")?,
                    None => None,
                };
                if let Some(total) = total {
                    self.total_pages = Some(total);
                }
                self.repeats(page, &page_param)?;
                let read = self.at - start + 1;
                // Saturating: a `start` near u64::MAX from the file must not
                // overflow; the page asked again is then caught as a repeat.
                self.at = self.at.saturating_add(1);
                let ended = match total {
                    Some(total) => read >= total,
                    None => page.entries.is_empty(),
                };
                Ok((!ended).then(|| with(&base, &[(&page_param, &self.at.to_string())])))
            }
            Paginate::Cursor {
                cursor,
                cursor_param,
            } => {
                let Some(value) = text_at(&cursor, page, "paginate.cursor")? else {
                    return Ok(None);
                };
                if !self.met.insert(value.clone()) {
                    return Err(EtlError::Parse(format!(
                        "{}: pagination loop: the cursor {value:?} ({cursor}) was met before; stopping",
                        page.url
                    )));
                }
                Ok(Some(with(&base, &[(&cursor_param, &value)])))
            }
        }
    }

    /// `url`, unless it was asked for before.
    fn once(&mut self, url: Url) -> Result<Option<Url>, EtlError> {
        if self.met.insert(url.to_string()) {
            Ok(Some(url))
        } else {
            Err(EtlError::Parse(format!(
                "pagination loop: the next page {url} was read before; stopping"
            )))
        }
    }

    /// Fails when this page's entries are the previous page's again: the
    /// server ignores `param`, and asking on would never end.
    fn repeats(&mut self, page: &Page<'_>, param: &str) -> Result<(), EtlError> {
        let mut hasher = self.hasher.build_hasher();
        for entry in page.entries {
            hasher.write(entry.get().as_bytes());
            hasher.write_u8(0);
        }
        let hash = hasher.finish();
        let again = !page.entries.is_empty() && self.previous == Some(hash);
        self.previous = Some(hash);
        if again {
            return Err(EtlError::Parse(format!(
                "{}: pagination loop: this page repeats the one before (does the API ignore `{param}`?); stopping",
                page.url
            )));
        }
        Ok(())
    }
}

/// `base` with these query parameters set (replacing any of the same name).
fn with(base: &Url, set: &[(&str, &str)]) -> Url {
    let mut url = base.clone();
    crate::wire::set_query(&mut url, &[], set);
    url
}

/// The string (or number, as its digits) at `pointer`; `None` for null,
/// `""` or nothing there.
fn text_at(pointer: &Pointer, page: &Page<'_>, key: &str) -> Result<Option<String>, EtlError> {
    match value_at(pointer, page)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok((!s.is_empty()).then_some(s)),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(EtlError::Parse(format!(
            "{}: `{key}` ({pointer}) is neither a string nor null: {other}",
            page.url
        ))),
    }
}

/// The non-negative integer at `pointer`, if one is there.
fn number_at(pointer: &Pointer, page: &Page<'_>, key: &str) -> Result<Option<u64>, EtlError> {
    match value_at(pointer, page)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => Err(EtlError::Parse(format!(
            "{}: `{key}` ({pointer}) is not a non-negative integer: {other}",
            page.url
        ))),
    }
}

fn value_at(pointer: &Pointer, page: &Page<'_>) -> Result<Option<Value>, EtlError> {
    page.body
        .value_at(pointer)
        .map_err(|e| EtlError::Parse(format!("{}: {e}", page.url)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(pager: &mut Pager, url: &Url, text: &str) -> Result<Option<Url>, EtlError> {
        let body = Body::parse(text).unwrap();
        let entries = body
            .array_at(&Pointer::parse("/data").unwrap())
            .unwrap()
            .unwrap();
        pager.next(&Page {
            url,
            body: &body,
            link: None,
            entries: &entries,
        })
    }

    #[test]
    fn a_page_number_at_the_top_of_u64_neither_overflows_nor_runs_on() {
        let mut pager = Pager::new(&Paginate::PageNumber {
            page_param: "page".into(),
            start: u64::MAX,
            total_pages: None,
        });
        let base = Url::parse("http://x/items").unwrap();
        let first = pager.first(&base);
        assert_eq!(first.as_str(), "http://x/items?page=18446744073709551615");
        // The page number cannot move on: the same page comes again, and
        // the repeat ends the read.
        let again = next(&mut pager, &first, r#"{"data": [1]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(again, first);
        let e = next(&mut pager, &again, r#"{"data": [1]}"#).unwrap_err();
        assert!(e.to_string().contains("repeats the one before"), "{e}");
    }
}
