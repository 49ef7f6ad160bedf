//! `style = "offset"`: `offset_param` moves by `limit`.

use etl_core::EtlError;
use url::Url;

use super::{more_at, number_at, Page, Paginator, Repeats, Request};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;
use crate::rest::pointer::Pointer;

/// `?offset=0&limit=N`, then `N`, `2N`, ... The read ends where `has_more`
/// says `false`, where the offset reaches the body's `total`, or (with
/// neither) at the first page holding fewer than `limit` entries. A page
/// that repeats the one before means the API ignores the offset: a loop.
#[derive(Clone, Debug)]
pub(crate) struct Offset {
    offset_param: String,
    limit_param: String,
    limit: u64,
    total: Option<Pointer>,
    has_more: Option<Pointer>,
    base: Option<Url>,
    /// The offset last asked for.
    at: u64,
    /// The records in all, as the last page that said it said.
    total_known: Option<u64>,
    total_pages: Option<u64>,
    repeats: Repeats,
}

impl Offset {
    /// `limit` (required, at least 1), `offset_param` (`offset`),
    /// `limit_param` (`limit`), `total` and `has_more` (optional pointers).
    pub fn from_keys(keys: &mut Keys<'_>) -> Result<Box<dyn Paginator>, ConfigError> {
        let limit = keys
            .number("limit")?
            .ok_or_else(|| keys.required("limit"))?;
        if *limit.get_ref() == 0 {
            return Err(keys.error(limit.span(), "limit", "must be at least 1"));
        }
        Ok(Box::new(Offset {
            offset_param: keys.text_or("offset_param", "offset")?,
            limit_param: keys.text_or("limit_param", "limit")?,
            limit: limit.into_inner(),
            total: keys.pointer("total")?,
            has_more: keys.pointer("has_more")?,
            base: None,
            at: 0,
            total_known: None,
            total_pages: None,
            repeats: Repeats::default(),
        }))
    }

    fn request(&self, base: &Url) -> Request {
        self.request_at(base, self.at)
    }

    fn request_at(&self, base: &Url, at: u64) -> Request {
        Request::with(
            base,
            vec![
                (self.offset_param.clone(), at.into()),
                (self.limit_param.clone(), self.limit.into()),
            ],
        )
    }
}

impl Paginator for Offset {
    fn first(&mut self, base: &Url) -> Request {
        self.base = Some(base.clone());
        self.repeats.clear();
        self.at = 0;
        self.request(base)
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        let base = self.base.clone().unwrap_or_else(|| page.url.clone());
        let total = match &self.total {
            Some(p) => number_at(p, page, "paginate.total")?,
            None => None,
        };
        if let Some(total) = total {
            self.total_known = Some(total);
            self.total_pages = Some(total.div_ceil(self.limit).max(1));
        }
        self.repeats.check(page, &self.offset_param)?;
        self.at = self.at.saturating_add(self.limit);
        let ended = match (more_at(self.has_more.as_ref(), page)?, total) {
            (Some(more), _) => !more,
            (None, Some(total)) => self.at >= total,
            (None, None) => (page.entries.len() as u64) < self.limit,
        };
        Ok((!ended).then(|| self.request(&base)))
    }

    /// The offsets after the next one, below the total, once a page gave
    /// it (and no `has_more` decides the end instead).
    fn planned(&self, n: usize) -> Vec<Request> {
        let (Some(total), None, Some(base)) = (self.total_known, &self.has_more, &self.base) else {
            return Vec::new();
        };
        (1..=n as u64)
            .map_while(|k| {
                let at = self.at.checked_add(k.checked_mul(self.limit)?)?;
                (at < total).then(|| self.request_at(base, at))
            })
            .collect()
    }

    fn pages_total(&self) -> Option<u64> {
        self.total_pages
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}
