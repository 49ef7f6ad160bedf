//! `style = "page_number"`: `page_param` moves by one from `start`.

use etl_core::EtlError;
use url::Url;

use super::{more_at, number_at, Page, Paginator, Repeats, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;
use crate::rest::pointer::Pointer;

/// `?page=<start>`, then one more each page. The read ends where
/// `has_more` says `false`, after the body's `total_pages`, or (with
/// neither) at the first empty page. A page that repeats the one before
/// means the API ignores the page number: a loop.
#[derive(Clone, Debug)]
pub(crate) struct PageNumber {
    page_param: String,
    start: u64,
    total_pages: Option<Pointer>,
    has_more: Option<Pointer>,
    base: Option<Url>,
    /// The page number last asked for.
    at: u64,
    pages: Option<u64>,
    repeats: Repeats,
}

impl PageNumber {
    /// `page_param` (`page`), `start` (1), `total_pages` and `has_more`
    /// (optional pointers).
    pub fn from_keys(keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        Ok(Box::new(PageNumber {
            page_param: keys.text_or("page_param", "page")?,
            start: keys.number("start")?.map_or(1, |s| s.into_inner()),
            total_pages: keys.pointer("total_pages")?,
            has_more: keys.pointer("has_more")?,
            base: None,
            at: 0,
            pages: None,
            repeats: Repeats::default(),
        }))
    }
}

impl Paginator for PageNumber {
    fn first(&mut self, base: &Url) -> Request {
        self.base = Some(base.clone());
        self.repeats.clear();
        self.at = self.start;
        Request::with(base, vec![(self.page_param.clone(), self.start.into())])
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        let base = self.base.clone().unwrap_or_else(|| page.url.clone());
        let total = match &self.total_pages {
            Some(p) => number_at(p, page, "paginate.total_pages")?,
            None => None,
        };
        if let Some(total) = total {
            self.pages = Some(total);
        }
        self.repeats.check(page, &self.page_param)?;
        let read = self.at - self.start + 1;
        // Saturating: a `start` near u64::MAX from the file must not
        // overflow; the page asked again is then caught as a repeat.
        self.at = self.at.saturating_add(1);
        let ended = match (more_at(self.has_more.as_ref(), page)?, total) {
            (Some(more), _) => !more,
            (None, Some(total)) => read >= total,
            (None, None) => page.entries.is_empty(),
        };
        Ok((!ended).then(|| Request::with(&base, vec![(self.page_param.clone(), self.at.into())])))
    }

    /// The page numbers after the next one, up to the total, once a page
    /// gave it (and no `has_more` decides the end instead).
    fn planned(&self, n: usize) -> Vec<Request> {
        let (Some(total), None, Some(base)) = (self.pages, &self.has_more, &self.base) else {
            return Vec::new();
        };
        (1..=n as u64)
            .map_while(|k| {
                let number = self.at.checked_add(k)?;
                (number - self.start < total)
                    .then(|| Request::with(base, vec![(self.page_param.clone(), number.into())]))
            })
            .collect()
    }

    fn pages_total(&self) -> Option<u64> {
        self.pages
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

    #[test]
    fn a_page_number_at_the_top_of_u64_neither_overflows_nor_runs_on() {
        let mut pager = PageNumber {
            page_param: "page".into(),
            start: u64::MAX,
            total_pages: None,
            has_more: None,
            base: None,
            at: 0,
            pages: None,
            repeats: Repeats::default(),
        };
        let base = Url::parse("http://x/items").unwrap();
        let first = pager.first(&base).in_query();
        assert_eq!(first.as_str(), "http://x/items?page=18446744073709551615");
        // The page number cannot move on: the same page comes again, and
        // the repeat ends the read.
        let none = HeaderMap::new();
        let again = next(&mut pager, &first, r#"{"data": [1]}"#, &none)
            .unwrap()
            .unwrap()
            .in_query();
        assert_eq!(again, first);
        let e = next(&mut pager, &again, r#"{"data": [1]}"#, &none).unwrap_err();
        assert!(e.to_string().contains("repeats the one before"), "{e}");
    }
}
