//! [`AsLaunch`]: a Launch Library 2 list entry read as a [`Launch`] row.

use etl_core::{Launch, Row};
use std::borrow::Cow;

use crate::rest::{Decode, Resource};

/// Entries read as [`Launch`]es, each a [`Row::Launches`]: the rows, and
/// so the content keys ([`Row::content_key`]), that `launches` has always
/// written. An entry that does not read as one (not an object, no `id` or
/// `name`, a known field in an unknown type) says which field did not.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsLaunch;

impl Decode for AsLaunch {
    type Row = Row;

    fn read(&self, entry: &str, _: &Resource, _: Option<&str>) -> Result<Row, String> {
        let mut reader = serde_json::Deserializer::from_str(entry);
        match serde_path_to_error::deserialize::<_, Launch>(&mut reader) {
            Ok(launch) => Ok(Row::Launches(launch)),
            // `.` is the entry itself: a missing `id`, or not an object.
            Err(e) => Err(match e.path().to_string() {
                path if path == "." => e.into_inner().to_string(),
                path => format!("{path}: {}", e.into_inner()),
            }),
        }
    }

    /// The line's last `"last_updated":"`, not a parse of the whole launch
    /// ([`crate::cursor`]).
    fn stored_updated_at<'l>(&self, _: &Resource, stored: &'l [u8]) -> Option<Cow<'l, str>> {
        crate::cursor::launch_updated_at(stored)
    }
}
