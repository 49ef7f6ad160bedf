//! Pagination: where a read's next page is. Each style is one type
//! implementing [`Paginator`], in a file of its own (as dlt's paginators
//! are one class a style, with `update_state` and `update_request`): it
//! reads its keys of the `[paginate]` table once, when the pipeline file is
//! read ([`from_table`]), and is then run page by page. The guards against
//! a pagination going round in circles ([`Met`], [`Repeats`]) are shared.

mod cursor;
mod header_cursor;
mod link_header;
mod next_url;
mod offset;
mod page_number;
mod single;

pub(crate) use next_url::NextUrl;

pub(crate) use single::Single;

use etl_core::EtlError;
use reqwest::header::HeaderMap;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use toml::Spanned;
use url::Url;

use super::error::{ConfigError, Locator};
use super::keys::{self, Keys, Table};
use super::pointer::{Body, Pointer};

/// One pagination style: the first request of a read, then each next one
/// from the page before.
///
/// The styles of a pipeline file (`[paginate] style = ...`) are types of
/// this crate; a program of its own may hand a [`super::Resource`] a
/// paginator of its own ([`super::Resource::with_paginator`]).
///
/// ```
/// use etl_core::EtlError;
/// use etl_sources::rest::{Page, Paginator, Resource, Pointer, Request};
/// use url::Url;
///
/// /// The next page is `?after=<the last record's id>`; an empty page ends.
/// #[derive(Clone, Debug)]
/// struct After { base: Option<Url>, id: Pointer }
///
/// impl Paginator for After {
///     fn first(&mut self, base: &Url) -> Request {
///         self.base = Some(base.clone());
///         Request::to(base.clone())
///     }
///     fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
///         let Some(last) = page.entries().last() else { return Ok(None) };
///         let record: serde_json::Value = serde_json::from_str(last.get())
///             .map_err(|e| EtlError::Parse(e.to_string()))?;
///         let Some(id) = self.id.get(&record) else { return Ok(None) };
///         let base = self.base.clone().unwrap_or_else(|| page.url().clone());
///         Ok(Some(Request::with(&base, vec![("after".into(), id.clone())])))
///     }
///     fn boxed(&self) -> Box<dyn Paginator> {
///         Box::new(self.clone())
///     }
/// }
///
/// let file = "name = \"items\"\nurl = \"http://127.0.0.1:8080/items\"\nrecords = \"\"\nid = \"/id\"\n";
/// let pipeline = Resource::parse(file, "items.toml", |_| None)?
///     .with_paginator(After { base: None, id: Pointer::parse("/id")? });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Paginator: fmt::Debug + Send + Sync {
    /// The first request of a read (which starts the paginator afresh),
    /// from `base`: the file's URL with its `[params]` (and, reading
    /// incrementally, the cursor's parameters).
    fn first(&mut self, base: &Url) -> Request;

    /// The request after `page`, `None` at the end, or the error that ends
    /// the read: a pagination going round in circles, or a page that does
    /// not say what the style needs as it should.
    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError>;

    /// Up to `n` requests that follow the one [`Paginator::next`] last
    /// returned, where they are known before its page is read (the pages
    /// of `offset` and `page_number` once a page gave the total): the
    /// source sends them ahead, at most `concurrency` in flight. Each must
    /// be the very request `next` will return in its turn; one that is not
    /// is dropped unused and sent again. None by default.
    fn planned(&self, n: usize) -> Vec<Request> {
        let _ = n;
        Vec::new()
    }

    /// The request after a page, where the page's headers or the head of
    /// its body tell it before the page is read (a next URL that stands
    /// before the records, as Django REST framework's and Launch
    /// Library's do; a `Link` header): the source sends it at once, so the
    /// page's own reading is not between one round trip and the next. It
    /// must be the very request [`Paginator::next`] then returns for that
    /// page; one that is not is dropped unused. `None` by default.
    fn early(&self, head: &Head<'_>) -> Option<Request> {
        let _ = head;
        None
    }

    /// Pages in all, once a page said (a progress bar's length).
    fn pages_total(&self) -> Option<u64> {
        None
    }

    /// A copy of this paginator, for another read (a clone of a
    /// [`super::Resource`]): `Box::new(self.clone())` for a `Clone` type.
    fn boxed(&self) -> Box<dyn Paginator>;
}

impl Clone for Box<dyn Paginator> {
    fn clone(&self) -> Self {
        self.boxed()
    }
}

/// A request a [`Paginator`] asks for: a URL, and the paginator's own
/// parameters (an offset and a limit, a page, a cursor), which the source
/// sets in the URL's query or, with `[paginate] param_in = "body"`, at the
/// top level of the JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Where the request goes.
    pub url: Url,
    /// The paginator's parameters, each replacing one of the same name.
    pub params: Vec<(String, Value)>,
}

impl Request {
    /// A request of `url` as it is (a next URL, a link).
    pub fn to(url: Url) -> Self {
        Request {
            url,
            params: Vec::new(),
        }
    }

    /// A request of `url` with `params`.
    pub fn with(url: &Url, params: Vec<(String, Value)>) -> Self {
        Request {
            url: url.clone(),
            params,
        }
    }

    /// The URL with the parameters in its query, each replacing any of the
    /// same name (a string as it is, anything else as its JSON text).
    ///
    /// ```
    /// use etl_sources::rest::Request;
    /// use serde_json::json;
    ///
    /// let url = url::Url::parse("http://x/items?offset=0&q=a")?;
    /// let request = Request::with(&url, vec![("offset".into(), json!(20)), ("after".into(), json!("c2"))]);
    /// assert_eq!(request.in_query().as_str(), "http://x/items?q=a&offset=20&after=c2");
    /// # Ok::<(), url::ParseError>(())
    /// ```
    pub fn in_query(&self) -> Url {
        let texts: Vec<(&str, String)> = self
            .params
            .iter()
            .map(|(name, value)| (name.as_str(), as_text(value)))
            .collect();
        let set: Vec<(&str, &str)> = texts.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let mut url = self.url.clone();
        crate::wire::set_query(&mut url, &[], &set);
        url
    }
}

/// A parameter's value as query text: a string as it is, anything else as
/// its JSON text.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What a page tells a [`Paginator`]: its URL, headers, body and entries.
pub struct Page<'a> {
    pub(crate) url: &'a Url,
    pub(crate) body: &'a Body<'a>,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) entries: &'a [&'a RawValue],
}

impl<'a> Page<'a> {
    /// The page's URL (relative next URLs and links resolve against it).
    pub fn url(&self) -> &Url {
        self.url
    }

    /// The value at `pointer` in the body, parsed; `None` when nothing is
    /// there. A body that does not read there is [`EtlError::Parse`].
    pub fn value_at(&self, pointer: &Pointer) -> Result<Option<Value>, EtlError> {
        self.body
            .value_at(pointer)
            .map_err(|e| EtlError::Parse(format!("{}: {e}", self.url)))
    }

    /// The values of the response header `name`, joined with `, ` as
    /// RFC 9110 joins a header sent more than once; `None` when absent.
    pub fn header(&self, name: &str) -> Option<String> {
        header_of(self.headers, name)
    }

    /// The page's entries at `records`, each as sent.
    pub fn entries(&self) -> &'a [&'a RawValue] {
        self.entries
    }
}

/// What a page tells before it is read, for [`Paginator::early`]: its
/// URL, its headers, and the head of its body.
pub struct Head<'a> {
    pub(crate) url: &'a Url,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

impl Head<'_> {
    /// The page's URL.
    pub fn url(&self) -> &Url {
        self.url
    }

    /// The response header `name`, as [`Page::header`] gives it.
    pub fn header(&self, name: &str) -> Option<String> {
        header_of(self.headers, name)
    }

    /// The scalar at `pointer`, where its member stands in the body's
    /// head: a one-token pointer to a top-level member that comes before
    /// any array or object. `None` otherwise (the page's reading then
    /// finds it).
    pub fn value_in_head(&self, pointer: &Pointer) -> Option<Value> {
        super::pointer::in_head(pointer, self.body)
    }
}

/// The values of the header `name` in `headers`, joined with `, ` as RFC
/// 9110 joins a header sent more than once; `None` when absent.
fn header_of(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// A `[paginate]` table read: the paginator, and `param_in` as written.
pub(crate) type Pagination = (Box<dyn Paginator>, Option<Spanned<String>>);

/// One style's constructor: it takes its keys of the `[paginate]` table.
type Make = fn(&mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError>;

/// Every style a pipeline file can name: adding one is a file and a line
/// here.
const STYLES: &[(&str, Make)] = &[
    ("next_url", next_url::NextUrl::from_keys),
    ("link_header", link_header::LinkHeader::from_keys),
    ("offset", offset::Offset::from_keys),
    ("page_number", page_number::PageNumber::from_keys),
    ("cursor", cursor::Cursor::from_keys),
    ("header_cursor", header_cursor::HeaderCursor::from_keys),
];

/// The paginator a `[paginate]` table describes, every key checked: an
/// unknown style (with the closest known one), a required key missing, a
/// key of the wrong type or of another style are named with their line.
///
/// `param_in`, a key of every style, is handed back as written for the
/// pipeline to check (it places parameters; it does not find them).
pub(crate) fn from_table(
    table: &Spanned<Table>,
    at: &Locator<'_>,
) -> Result<Pagination, ConfigError> {
    keys::read(
        table,
        at,
        ("paginate", "style", "style"),
        STYLES,
        |make, keys| {
            let param_in = keys.text("param_in")?;
            Ok((make(keys)?, param_in))
        },
    )
}

/// The URLs or cursors a read met: one met again is a loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct Met(HashSet<String>);

impl Met {
    /// Forgets what was met: a read starts.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// `url`, unless it was asked for before.
    pub fn url(&mut self, url: Url) -> Result<Option<Request>, EtlError> {
        if self.0.insert(url.to_string()) {
            Ok(Some(Request::to(url)))
        } else {
            Err(EtlError::Parse(format!(
                "pagination loop: the next page {url} was read before; stopping"
            )))
        }
    }

    /// Fails when `cursor` (found by `what`) was met before.
    pub fn cursor(&mut self, cursor: &Value, what: &str, page: &Page<'_>) -> Result<(), EtlError> {
        let cursor = as_text(cursor);
        if self.0.insert(cursor.clone()) {
            Ok(())
        } else {
            Err(EtlError::Parse(format!(
                "{}: pagination loop: the cursor {cursor:?} ({what}) was met before; stopping",
                page.url
            )))
        }
    }
}

/// A chain of requests that each send the cursor the page before gave, as
/// `cursor_param`, on the read's first URL: what `cursor` and
/// `header_cursor` share.
#[derive(Clone, Debug)]
pub(crate) struct CursorChain {
    cursor_param: String,
    base: Option<Url>,
    met: Met,
}

impl CursorChain {
    pub fn new(cursor_param: String) -> Self {
        CursorChain {
            cursor_param,
            base: None,
            met: Met::default(),
        }
    }

    /// The first request: `base` as it is; a read starts.
    pub fn first(&mut self, base: &Url) -> Request {
        self.base = Some(base.clone());
        self.met.clear();
        Request::to(base.clone())
    }

    /// The request sending `cursor` (found by `what` on `page`), unless it
    /// was met before: a loop.
    pub fn follow(
        &mut self,
        cursor: Value,
        what: &str,
        page: &Page<'_>,
    ) -> Result<Option<Request>, EtlError> {
        self.met.cursor(&cursor, what, page)?;
        let base = self.base.clone().unwrap_or_else(|| page.url.clone());
        Ok(Some(Request::with(
            &base,
            vec![(self.cursor_param.clone(), cursor)],
        )))
    }
}

/// A hash of the previous page's entries: a page that repeats it means the
/// server ignores the parameter that should move the read on.
#[derive(Clone, Debug, Default)]
pub(crate) struct Repeats {
    previous: Option<u64>,
    hasher: foldhash::quality::FixedState,
}

impl Repeats {
    /// Forgets the previous page: a read starts.
    pub fn clear(&mut self) {
        self.previous = None;
    }

    /// Fails when `page`'s entries are the previous page's again.
    pub fn check(&mut self, page: &Page<'_>, param: &str) -> Result<(), EtlError> {
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

/// The cursor at `pointer`: a string or a number as sent; `None` for null,
/// `""` or nothing there.
pub(crate) fn cursor_at(
    pointer: &Pointer,
    page: &Page<'_>,
    key: &str,
) -> Result<Option<Value>, EtlError> {
    cursor_of(page.value_at(pointer)?, pointer, page.url, key)
}

/// A value found by `key`'s `pointer` as a cursor or URL: a string or a
/// number as sent; `None` for null, `""` or nothing.
pub(crate) fn cursor_of(
    value: Option<Value>,
    pointer: &Pointer,
    page: &Url,
    key: &str,
) -> Result<Option<Value>, EtlError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(v @ (Value::String(_) | Value::Number(_))) => Ok(Some(v)),
        Some(other) => Err(EtlError::Parse(format!(
            "{page}: `{key}` ({pointer}) is neither a string nor null: {other}"
        ))),
    }
}

/// The non-negative integer at `pointer`, if one is there.
pub(crate) fn number_at(
    pointer: &Pointer,
    page: &Page<'_>,
    key: &str,
) -> Result<Option<u64>, EtlError> {
    match page.value_at(pointer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
        Some(other) => Err(EtlError::Parse(format!(
            "{}: `{key}` ({pointer}) is not a non-negative integer: {other}",
            page.url
        ))),
    }
}

/// Whether the page says more follow, by the boolean at `has_more` (the
/// optional key of `cursor`, `offset` and `page_number`): `false` ends the
/// chain; `None` (no key, or nothing there) leaves it to the style.
pub(crate) fn more_at(
    has_more: Option<&Pointer>,
    page: &Page<'_>,
) -> Result<Option<bool>, EtlError> {
    let Some(pointer) = has_more else {
        return Ok(None);
    };
    match page.value_at(pointer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(more)) => Ok(Some(more)),
        Some(other) => Err(EtlError::Parse(format!(
            "{}: `paginate.has_more` ({pointer}) is not a boolean: {other}",
            page.url
        ))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The paginator of a file's `[paginate]` table `paginate`, records at
    /// `/data`.
    pub fn paginator(paginate: &str) -> Box<dyn Paginator> {
        let file = format!(
            "name = \"items\"\nurl = \"http://x/items\"\nrecords = \"/data\"\nid = \"/id\"\n[paginate]\n{paginate}"
        );
        crate::rest::Resource::parse(&file, "items.toml", |_| None)
            .unwrap()
            .paginate
    }

    /// `paginator`'s next request after a page of `text` (entries at
    /// `/data`) at `url`, with `headers`.
    pub fn next(
        paginator: &mut dyn Paginator,
        url: &Url,
        text: &str,
        headers: &HeaderMap,
    ) -> Result<Option<Request>, EtlError> {
        let body = Body::parse(text).unwrap();
        let entries = body
            .array_at(&Pointer::parse("/data").unwrap())
            .unwrap()
            .unwrap_or_default();
        paginator.next(&Page {
            url,
            body: &body,
            headers,
            entries: &entries,
        })
    }
}

#[cfg(test)]
mod planned {
    use super::tests::{next, paginator};
    use super::*;

    fn queries(requests: &[Request]) -> Vec<String> {
        requests
            .iter()
            .map(|r| r.in_query().query().unwrap_or("").to_owned())
            .collect()
    }

    /// Every request `next` returns, in turn, against the requests planned
    /// before it: each planned one is the one `next` then returns.
    fn walk(mut paginator: Box<dyn Paginator>, body: &dyn Fn(&Request) -> String) -> Vec<String> {
        let base = Url::parse("http://x/items").unwrap();
        let mut request = paginator.first(&base);
        let mut planned_before: Vec<Request> = Vec::new();
        let mut all = Vec::new();
        let none = HeaderMap::new();
        loop {
            all.push(request.clone());
            let got = next(
                paginator.as_mut(),
                &request.in_query(),
                &body(&request),
                &none,
            )
            .unwrap();
            let Some(following) = got else { break };
            if let Some(first) = planned_before.first() {
                assert_eq!(
                    *first, following,
                    "a planned request is the one next returns"
                );
            }
            planned_before = paginator.planned(3);
            request = following;
        }
        assert!(planned_before.is_empty() || all.len() < 2);
        queries(&all)
    }

    #[test]
    fn offset_plans_the_offsets_below_the_total_once_it_is_known() {
        let mut offset = paginator("style = \"offset\"\nlimit = 10\ntotal = \"/count\"\n");
        assert!(offset.planned(3).is_empty(), "nothing before a page");
        let base = Url::parse("http://x/items").unwrap();
        let first = offset.first(&base);
        let none = HeaderMap::new();
        next(
            offset.as_mut(),
            &first.in_query(),
            r#"{"data": [], "count": 45}"#,
            &none,
        )
        .unwrap();
        assert_eq!(
            queries(&offset.planned(8)),
            [
                "offset=20&limit=10",
                "offset=30&limit=10",
                "offset=40&limit=10"
            ]
        );
        let walked = walk(
            paginator("style = \"offset\"\nlimit = 10\ntotal = \"/count\"\n"),
            &|r| format!(r#"{{"data": [{:?}], "count": 45}}"#, r.in_query().as_str()),
        );
        assert_eq!(walked.len(), 5);
        // With has_more deciding the end, nothing is planned.
        let mut more =
            paginator("style = \"offset\"\nlimit = 10\ntotal = \"/count\"\nhas_more = \"/more\"\n");
        let first = more.first(&base);
        next(
            more.as_mut(),
            &first.in_query(),
            r#"{"data": [1], "count": 45, "more": true}"#,
            &none,
        )
        .unwrap();
        assert!(more.planned(3).is_empty());
    }

    #[test]
    fn page_number_plans_the_pages_up_to_the_total() {
        let walked = walk(
            paginator("style = \"page_number\"\ntotal_pages = \"/pages\"\n"),
            &|r| format!(r#"{{"data": [{:?}], "pages": 6}}"#, r.in_query().as_str()),
        );
        assert_eq!(
            walked,
            ["page=1", "page=2", "page=3", "page=4", "page=5", "page=6"]
        );
        let mut pages = paginator("style = \"page_number\"\nstart = 0\ntotal_pages = \"/pages\"\n");
        let base = Url::parse("http://x/items").unwrap();
        let first = pages.first(&base);
        next(
            pages.as_mut(),
            &first.in_query(),
            r#"{"data": [1], "pages": 3}"#,
            &HeaderMap::new(),
        )
        .unwrap();
        assert_eq!(
            queries(&pages.planned(5)),
            ["page=2"],
            "pages 0, 1 and 2: after 1, only 2"
        );
    }
}

#[cfg(test)]
mod early {
    use super::tests::{next, paginator};
    use super::*;
    use reqwest::header::HeaderValue;

    /// `paginator`'s early request for a page of `text` at `url`, and the
    /// one its `next` gives when the page is read.
    fn both(
        paginator: &mut dyn Paginator,
        text: &str,
        headers: &HeaderMap,
    ) -> (Option<Request>, Option<Request>) {
        let url = Url::parse("http://x/items?page=1").unwrap();
        paginator.first(&url);
        let early = paginator.early(&Head {
            url: &url,
            headers,
            body: text.as_bytes(),
        });
        (early, next(paginator, &url, text, headers).unwrap())
    }

    #[test]
    fn a_next_url_before_the_records_is_the_request_next_gives() {
        let mut pager = paginator("style = \"next_url\"\nnext = \"/next\"");
        let none = HeaderMap::new();
        let (early, read) = both(
            &mut *pager,
            r#"{"count": 9, "next": "/items?page=2", "data": [{"id": 1}]}"#,
            &none,
        );
        assert_eq!(
            early.as_ref().map(|r| r.url.as_str()),
            Some("http://x/items?page=2")
        );
        assert_eq!(early, read);
        // After the records: found only by reading the page.
        let (early, read) = both(
            &mut *pager,
            r#"{"data": [{"id": 1}], "next": "/items?page=3"}"#,
            &none,
        );
        assert_eq!(early, None);
        assert!(read.is_some());
        // The last page says so in its head: no early request, as none next.
        let (early, read) = both(&mut *pager, r#"{"next": null, "data": []}"#, &none);
        assert_eq!((early, read), (None, None));
        // Below the top level (`/meta/next`): only the read finds it.
        let mut nested = paginator("style = \"next_url\"\nnext = \"/meta/next\"");
        let (early, read) = both(
            &mut *nested,
            r#"{"meta": {"next": "/items?page=2"}, "data": []}"#,
            &none,
        );
        assert_eq!(early, None);
        assert!(read.is_some());
    }

    #[test]
    fn a_link_header_is_the_request_next_gives() {
        let mut pager = paginator("style = \"link_header\"");
        let mut headers = HeaderMap::new();
        headers.insert(
            "link",
            HeaderValue::from_static(
                r#"<http://x/items?page=2>; rel="next", <http://x/items?page=9>; rel="last""#,
            ),
        );
        let (early, read) = both(&mut *pager, r#"{"data": []}"#, &headers);
        assert_eq!(
            early.as_ref().map(|r| r.url.as_str()),
            Some("http://x/items?page=2")
        );
        assert_eq!(early, read);
        let (early, read) = both(&mut *pager, r#"{"data": []}"#, &HeaderMap::new());
        assert_eq!((early, read), (None, None));
    }

    #[test]
    fn styles_that_need_the_page_read_ask_nothing_early() {
        for style in [
            "style = \"offset\"\nlimit = 2",
            "style = \"page_number\"",
            "style = \"cursor\"\ncursor = \"/next\"\ncursor_param = \"after\"",
        ] {
            let mut pager = paginator(style);
            let (early, _) = both(
                &mut *pager,
                r#"{"next": "c2", "data": [{"id": 1}]}"#,
                &HeaderMap::new(),
            );
            assert_eq!(early, None, "{style}");
        }
    }
}
