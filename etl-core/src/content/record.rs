//! [`Record`]: any row type a sink can store and content-address.

use serde::Serialize;

use crate::Row;

/// A row type: anything `Serialize` that a [`crate::Sink`] can store and
/// [`crate::IdempotentSink`] can content-address.
///
/// Its content key is [`crate::content_id`]`(T::KIND, serde_json::to_string(row))`
/// ([`crate::content_key`]). The kind tag comes from the type, not from the
/// sink: a record's key is a property of its data, the same whichever sink
/// or process computes it, and two types whose JSON happens to coincide stay
/// apart when their kinds differ. `KIND` defaults to `"row"`, the kind
/// [`Row`] has always used, so an implementation is often one line.
///
/// ```
/// use etl_core::{content_id, content_key, Record};
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct Reading { sensor: String, celsius: f64 }
///
/// impl Record for Reading {
///     const KIND: &'static str = "reading";
/// }
///
/// let r = Reading { sensor: "t1".into(), celsius: 21.5 };
/// assert_eq!(content_key(&r)?, content_id("reading", r#"{"sensor":"t1","celsius":21.5}"#));
/// # Ok::<(), etl_core::EtlError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an etl_core::Record",
    label = "a sink stores and content-addresses Records",
    note = "add `impl etl_core::Record for {Self} {{}}` (its content keys then use the kind \"row\"), or set `const KIND`"
)]
pub trait Record: Serialize + Send + Sync {
    /// The kind tag its content keys are hashed under. Must not hold a NUL
    /// byte (the separator of [`crate::content_id`]).
    const KIND: &'static str = "row";

    /// What a sink with a column for [`Record::record_id`] names it
    /// (`etl-postgres`, in a table it creates). `"record_id"` by default.
    /// Must be a plain SQL identifier (letters, digits, `_`).
    const ID_COLUMN: &'static str = "record_id";

    /// The record's own id, if it has one, kept beside it where a sink has
    /// room (the [`Record::ID_COLUMN`] column of `etl-postgres`). `None`
    /// by default.
    fn record_id(&self) -> Option<String> {
        None
    }

    /// When the record last changed at its source, if it says: an RFC 3339
    /// UTC timestamp such as `2026-11-12T12:00:00Z` (fractional seconds and
    /// `+00:00` read too). `etl-postgres` keeps it in the indexed
    /// `updated_at` column: the cursor of an incremental load, and the
    /// order of the `<table>_current` view. `None` by default.
    fn updated_at(&self) -> Option<String> {
        None
    }

    /// The record's JSON text exactly as `serde_json::to_string(self)`
    /// writes it, where the record holds that text already (one read as
    /// canonical JSON text): its content key hashes it, and the bundled
    /// sinks write it, without serialising the record. `None` by default:
    /// the record is serialised. A record that returns text other than its
    /// serialisation would be keyed and stored by that text (debug builds
    /// check it).
    fn json_text(&self) -> Option<&str> {
        None
    }
}

impl Record for Row {
    /// A launch's id: the column every release of `etl-postgres` has made.
    const ID_COLUMN: &'static str = "launch_id";

    fn record_id(&self) -> Option<String> {
        match self {
            Row::Launches(launch) => Some(launch.id.clone()),
        }
    }

    /// A launch's `last_updated`.
    fn updated_at(&self) -> Option<String> {
        match self {
            Row::Launches(launch) => launch.last_updated.clone(),
        }
    }
}
