//! [`Decode`]: what a [`super::RestSource`] makes of each entry of a page.
//! Any JSON API's records are [`JsonRecord`]s ([`AsJson`]); a source of
//! typed rows (Launch Library's [`crate::AsLaunch`]) decodes into its own
//! type, over the same page loop, HTTP path and incremental handshake.

use etl_core::{Record, Reject};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

use super::pointer::Body;
use super::record::JsonRecord;
use super::Resource;

/// How a [`super::RestSource`] reads one entry of a page into a row, and
/// one stored row back into its update time.
///
/// The source finds the entries (`records`), pages, retries and asks for
/// changes; a `Decode` only says what one entry is. An entry it cannot
/// read never fails its page: it becomes a [`Reject`], kept as sent with
/// the reason.
///
/// Rows of a type of your own, read over the same loop:
///
/// ```
/// use etl_core::Record;
/// use etl_sources::rest::{Decode, Resource, RestSource};
/// use etl_sources::SourceOptions;
/// use serde::{Deserialize, Serialize};
/// use std::borrow::Cow;
///
/// #[derive(Clone, Debug, Deserialize, Serialize)]
/// struct Reading { sensor: String, celsius: f64 }
///
/// impl Record for Reading {
///     const KIND: &'static str = "reading";
///     fn record_id(&self) -> Option<String> { Some(self.sensor.clone()) }
/// }
///
/// #[derive(Debug)]
/// struct AsReading;
///
/// impl Decode for AsReading {
///     type Row = Reading;
///     fn read(&self, entry: &str, _: &Resource, _: Option<&str>) -> Result<Reading, String> {
///         serde_json::from_str(entry).map_err(|e| e.to_string())
///     }
///     fn stored_updated_at<'l>(&self, _: &Resource, _: &'l [u8]) -> Option<Cow<'l, str>> {
///         None // readings carry no update time
///     }
/// }
///
/// let file = "name = \"readings\"\nurl = \"http://127.0.0.1:8080/readings\"\nrecords = \"/items\"\nid = \"/sensor\"\n";
/// let resource = Resource::parse(file, "readings.toml", |_| None)?;
/// let source = RestSource::decoded(resource, AsReading, SourceOptions::default())?;
/// assert_eq!(source.next_url().unwrap().path(), "/readings");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Decode: fmt::Debug + Send + Sync + 'static {
    /// The row an entry becomes.
    type Row: Record + Clone + Send;

    /// One entry of a page, as sent, of `resource`; `parent` is the
    /// `_parent` of a child resource's chain (canonical JSON text), `None`
    /// for a root. `Err` says what did not read.
    fn read(
        &self,
        entry: &str,
        resource: &Resource,
        parent: Option<&str>,
    ) -> Result<Self::Row, String>;

    /// The [`Record::updated_at`] of a row as an output stored it (one
    /// JSONL line, without the newline), for the cursor of an incremental
    /// run; `None` when it has none that reads.
    fn stored_updated_at<'l>(&self, resource: &Resource, stored: &'l [u8]) -> Option<Cow<'l, str>>;
}

/// Entries as [`JsonRecord`]s: JSON objects, with the id and update time
/// the resource's pointers find. What [`super::RestSource::new`] reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsJson;

impl Decode for AsJson {
    type Row = JsonRecord;

    fn read(
        &self,
        entry: &str,
        resource: &Resource,
        parent: Option<&str>,
    ) -> Result<JsonRecord, String> {
        JsonRecord::read_in(entry, &resource.id, resource.updated_at.as_ref(), parent)
    }

    /// The line's top level is read as unparsed members and only the
    /// pointer's path is parsed: a cursor scan of a big output reads each
    /// record once, building none of it.
    fn stored_updated_at<'l>(&self, resource: &Resource, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        let at = resource.updated_at.as_ref()?;
        let body = Body::parse(std::str::from_utf8(stored).ok()?).ok()?;
        at.of_stored(&body).map(Cow::Owned)
    }
}

/// One page's entries read by `decode`: the rows, and the entries that did
/// not read as one, each kept (in canonical form) with why, and `source`
/// (the page's URL) as where it came from.
pub(crate) fn read_entries<D: Decode>(
    decode: &D,
    resource: &Resource,
    entries: &[&RawValue],
    parent: Option<&str>,
    source: &str,
) -> (Vec<D::Row>, Vec<Reject>) {
    // Each entry parsed on every core: most of a page's work.
    let read =
        etl_core::content::par_map(entries, |entry| decode.read(entry.get(), resource, parent));
    let mut rows = Vec::with_capacity(entries.len());
    let mut rejects = Vec::new();
    for (entry, result) in entries.iter().zip(read) {
        match result {
            Ok(row) => rows.push(row),
            Err(error) => {
                tracing::warn!(%source, %error, "an entry did not read as a record; rejected");
                rejects.push(Reject::of(entry, error, source));
            }
        }
    }
    (rows, rejects)
}
