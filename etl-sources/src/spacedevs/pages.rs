//! [`LaunchPages`]: how the pages of a Launch Library 2 list follow one
//! another, by its `next` links or, read in update order, by the
//! `last_updated` cursor.

use etl_core::EtlError;
use serde::Deserialize;
use url::Url;

use crate::rest::{cursor_at, Head, NextUrl, Page, Paginator, Pointer, Request};
use crate::wire;

/// The query parameter an incremental read sends its cursor in.
pub(crate) const CURSOR_PARAM: &str = "last_updated__gte";
/// The order an incremental read asks for: `ordering=last_updated`.
pub(crate) const ORDERING: (&str, &str) = ("ordering", "last_updated");
/// The offset parameter of the API's own paging.
const OFFSET_PARAM: &str = "offset";

/// Launch Library 2's pagination. A page says whether more follow with its
/// `next` link (null on the last page) and how many entries all pages hold
/// with `count`.
///
/// A read in `last_updated` order (an incremental read: its first request
/// carries [`ORDERING`]) is walked by that cursor (keyset paging): after
/// each page the cursor moves to the page's newest `last_updated`, and
/// `offset` skips only the entries of that very timestamp already read.
/// The API's offset links would skip a launch whenever one read earlier is
/// updated mid-run and moves to the end (every later entry shifts back by
/// one); the cursor cannot, since an update only ever moves a launch past
/// it, where it is read again. Each page still brings `limit` entries not
/// read before, so a read costs the same requests as following `next`. Any
/// other read follows the `next` links, sent as soon as a page's head
/// names them.
#[derive(Clone, Debug)]
pub(crate) struct LaunchPages {
    next: NextUrl,
    /// Where the read in `last_updated` order stands; `None` for a read
    /// that follows the links.
    keyset: Option<Keyset>,
    /// The page size asked for (`limit`), if any.
    limit: Option<u64>,
    /// Entries all pages hold, and the page size, once the first page came.
    count: Option<u64>,
    size: Option<u64>,
}

impl LaunchPages {
    /// Pages of `limit` entries (the server's default size when `None`).
    pub(crate) fn new(limit: Option<u32>) -> Self {
        LaunchPages {
            next: NextUrl::new(next_pointer()),
            keyset: None,
            limit: limit.map(u64::from),
            count: None,
            size: None,
        }
    }

    /// Learns the listing's size from a page: its `count`, and the page
    /// size of a page that more follow.
    fn learn(&mut self, page: &Page<'_>, more: bool) -> Result<(), EtlError> {
        if self.count.is_none() {
            self.count = page
                .value_at(&Pointer::parse("/count").expect("a valid pointer"))?
                .and_then(|count| count.as_u64());
        }
        if self.size.is_none() && more {
            self.size = Some(page.entries().len() as u64);
        }
        Ok(())
    }
}

/// Where a page's next link is.
fn next_pointer() -> Pointer {
    Pointer::parse("/next").expect("a valid pointer")
}

impl Paginator for LaunchPages {
    fn first(&mut self, base: &Url) -> Request {
        self.count = None;
        self.size = self.limit;
        self.keyset = Keyset::of(base);
        let first = self.next.first(base);
        match &self.keyset {
            Some(keyset) => Request::to(keyset.url()),
            None => first,
        }
    }

    fn next(&mut self, page: &Page<'_>) -> Result<Option<Request>, EtlError> {
        let next = match &mut self.keyset {
            // The link itself: `None` at the end, a loop refused.
            None => self.next.next(page)?,
            // The link says only whether more follow; the cursor says where.
            Some(keyset) => match cursor_at(&next_pointer(), page, "next")? {
                None => None,
                Some(_) => Some(keyset.advance(page)?),
            },
        };
        self.learn(page, next.is_some())?;
        Ok(next)
    }

    /// A link read is sent ahead from the page's head; a cursor read waits
    /// for the page's entries, which move the cursor.
    fn early(&self, head: &Head<'_>) -> Option<Request> {
        match self.keyset {
            Some(_) => None,
            None => self.next.early(head),
        }
    }

    /// How many pages the listing holds in all, as far as the server's
    /// `count` and the page size tell (`None` before the first page).
    fn pages_total(&self) -> Option<u64> {
        let (count, size) = (self.count?, self.size.filter(|&s| s > 0));
        Some(match size {
            Some(size) => count.div_ceil(size).max(1),
            None => 1,
        })
    }

    fn boxed(&self) -> Box<dyn Paginator> {
        Box::new(self.clone())
    }
}

/// The cursor of a read in `last_updated` order.
#[derive(Clone, Debug)]
struct Keyset {
    /// The first request's URL without the cursor or an offset.
    base: Url,
    cursor: Option<String>,
    /// Entries at exactly `cursor` already read.
    offset: usize,
}

impl Keyset {
    /// The keyset a read starting at `base` walks, if `base` asks for
    /// `last_updated` order; its cursor is the one `base` sends.
    fn of(base: &Url) -> Option<Self> {
        let (name, order) = ORDERING;
        if !base.query_pairs().any(|(k, v)| k == name && v == order) {
            return None;
        }
        let cursor = base
            .query_pairs()
            .filter(|(k, _)| k == CURSOR_PARAM)
            .last()
            .map(|(_, v)| v.into_owned());
        let mut base = base.clone();
        wire::set_query(&mut base, &[CURSOR_PARAM, OFFSET_PARAM], &[ORDERING]);
        Some(Keyset {
            base,
            cursor,
            offset: 0,
        })
    }

    /// The request of the page where the read stands.
    fn url(&self) -> Url {
        let mut url = self.base.clone();
        if let Some(cursor) = &self.cursor {
            wire::set_query(&mut url, &[], &[(CURSOR_PARAM, cursor)]);
        }
        if self.offset > 0 {
            wire::set_query(&mut url, &[], &[(OFFSET_PARAM, &self.offset.to_string())]);
        }
        url
    }

    /// Moves past `page` (one that more follow), by its entries'
    /// `last_updated`; the request after it. A page that cannot move the
    /// cursor (no entry, yet more follow) ends the read with an error:
    /// asking again would get the same page, forever.
    fn advance(&mut self, page: &Page<'_>) -> Result<Request, EtlError> {
        let before = (self.cursor.clone(), self.offset);
        let stamps: Vec<Option<String>> = page
            .entries()
            .iter()
            .map(|e| last_updated(e.get()))
            .collect();
        match stamps.iter().rev().flatten().next() {
            // No timestamp at all: step over the page by position.
            None => self.offset += stamps.len(),
            Some(newest) => {
                let at_newest = stamps
                    .iter()
                    .filter(|s| s.as_deref() == Some(newest.as_str()))
                    .count();
                if self.cursor.as_deref() == Some(newest.as_str()) {
                    // A page full of one timestamp: skip it by position.
                    self.offset += at_newest;
                } else {
                    self.cursor = Some(newest.clone());
                    self.offset = at_newest;
                }
            }
        }
        if (self.cursor.clone(), self.offset) == before {
            return Err(EtlError::Parse(format!(
                "{}: the page holds no entry but its `next` says more follow; \
                 the incremental read cannot move its cursor",
                page.url()
            )));
        }
        Ok(Request::to(self.url()))
    }
}

/// The `last_updated` of an entry as sent, if it is an object that has one
/// as a string (rejected entries move the cursor too).
fn last_updated(entry: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Stamp {
        last_updated: Option<String>,
    }
    serde_json::from_str::<Stamp>(entry).ok()?.last_updated
}
