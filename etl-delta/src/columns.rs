//! A table's columns, as Delta fields and as Arrow batches: the rows table
//! of the JSON shape (the PostgreSQL table's columns), the rejects table,
//! and the loader columns a typed table starts with.

use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema as ArrowSchema, TimeUnit};
use deltalake::kernel::{DataType, StructField, StructType};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::keys::{FPP, LOW_FPP};

/// The time zone of every timestamp column: Delta's `timestamp` is UTC.
pub(crate) const UTC: &str = "UTC";

/// When a remembered deletion was made ([`Columns::deletions`]).
pub(crate) const DELETED_AT: &str = "_etl_deleted_at";

/// What one table holds: its key column first, then the rest, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Columns {
    fields: Vec<StructField>,
    /// How many of `fields`, from the first, a table must hold as they are
    /// (all of them, but for a typed table only its loader columns).
    fixed: usize,
    /// Whether the table may hold more (a typed table's data columns,
    /// which grow with its records).
    grows: bool,
    /// The column holding each entry's JSON text, if one does.
    text: Option<&'static str>,
    /// The key column, where it is not the first ([`Columns::keyed_by`]).
    key: Option<&'static str>,
}

impl Columns {
    /// The rows table: `content_key`, the record-id column `id_column`,
    /// `updated_at`, `loaded_at`, `row` (the record as canonical JSON text).
    pub fn rows(id_column: &str) -> Self {
        Columns::fixed(vec![
            StructField::new("content_key", DataType::STRING, false),
            StructField::new(id_column, DataType::STRING, true),
            StructField::new("updated_at", DataType::TIMESTAMP, true),
            StructField::new("loaded_at", DataType::TIMESTAMP, false),
            StructField::new("row", DataType::STRING, false),
        ])
        .with_text("row")
    }

    /// The rejects table: `reject_key`, `raw` (the entry as sent), `error`,
    /// `source`, `rejected_at`.
    pub fn rejects() -> Self {
        Columns::fixed(vec![
            StructField::new("reject_key", DataType::STRING, false),
            StructField::new("raw", DataType::STRING, false),
            StructField::new("error", DataType::STRING, false),
            StructField::new("source", DataType::STRING, false),
            StructField::new("rejected_at", DataType::TIMESTAMP, false),
        ])
        .with_text("raw")
    }

    /// A merge family's remembered deletions ([`crate::deleted`]):
    /// `_etl_key` (the deleting version's content key), `_etl_id` (the
    /// primary key it deleted), `_etl_updated_at` (the deleting version's
    /// time), `_etl_deleted_at`.
    pub fn deletions() -> Self {
        use etl_core::content::typed::loader;
        Columns::fixed(vec![
            StructField::new(loader::KEY, DataType::STRING, false),
            StructField::new(loader::ID, DataType::STRING, false),
            StructField::new(loader::UPDATED_AT, DataType::TIMESTAMP, true),
            StructField::new(DELETED_AT, DataType::TIMESTAMP, false),
        ])
    }

    fn fixed(fields: Vec<StructField>) -> Self {
        let fixed = fields.len();
        Columns {
            fields,
            fixed,
            grows: false,
            text: None,
            key: None,
        }
    }

    /// A typed table: `fields` to create it with, of which the first
    /// `loader` (its loader columns) every table at its place must hold;
    /// the others are data columns, which grow.
    pub fn growing(fields: Vec<StructField>, loader: usize) -> Self {
        Columns {
            fixed: loader.min(fields.len()),
            fields,
            grows: true,
            text: None,
            key: None,
        }
    }

    /// These columns, `name` holding each entry's JSON text (the record or
    /// the rejected entry as it came): written without a dictionary or
    /// statistics, which such text gains nothing from.
    pub fn with_text(mut self, name: &'static str) -> Self {
        self.text = Some(name);
        self
    }

    /// These columns, each entry known by `name` rather than the first
    /// column: a merge table, one row per primary key (`_etl_id`), whose
    /// key filters answer which files hold a key.
    pub fn keyed_by(mut self, name: &'static str) -> Self {
        self.key = Some(name);
        self
    }

    /// The key column and the false-positive rate of its filters (each
    /// file's own, and those built of a file without one): [`LOW_FPP`] for
    /// a merge table's (every page of a merge probes all its keys against
    /// every file), else [`FPP`].
    pub fn key_filter(&self) -> (&str, f64) {
        let fpp = match self.key {
            Some(_) => LOW_FPP,
            None => FPP,
        };
        (self.key(), fpp)
    }

    /// The column holding each entry's JSON text, if one does.
    pub fn text(&self) -> Option<&str> {
        self.text
    }

    /// The Delta fields, for creating the table.
    pub fn fields(&self) -> &[StructField] {
        &self.fields
    }

    /// The key column: what each entry is known by.
    pub fn key(&self) -> &str {
        self.key.unwrap_or_else(|| self.fields[0].name())
    }

    /// Where `found` (an existing table's schema) differs from these
    /// columns, in words; `None` when it holds exactly them (for a typed
    /// table: when it starts with its loader columns).
    pub fn mismatch(&self, found: &StructType) -> Option<String> {
        let want: Vec<(&str, &DataType)> = self
            .fields
            .iter()
            .map(|f| (f.name().as_str(), f.data_type()))
            .collect();
        let have: Vec<(&str, &DataType)> = found
            .fields()
            .map(|f| (f.name().as_str(), f.data_type()))
            .collect();
        let holds = if self.grows {
            have.get(..self.fixed) == Some(&want[..self.fixed])
        } else {
            want == have
        };
        (!holds).then(|| {
            format!(
                "it holds another table (columns {}), not this one's ({})",
                describe(&have),
                describe(&want)
            )
        })
    }

    /// The Arrow schema of a batch for this table ([`arrow_schema`]).
    pub fn arrow_schema(&self) -> Arc<ArrowSchema> {
        arrow_schema(&self.fields)
    }
}

/// The Arrow schema of a batch of `fields` ([`arrow_type`] of each).
pub(crate) fn arrow_schema(fields: &[StructField]) -> Arc<ArrowSchema> {
    let fields = fields
        .iter()
        .map(|f| Field::new(f.name(), arrow_type(f.data_type()), f.is_nullable()));
    Arc::new(ArrowSchema::new(fields.collect::<Vec<_>>()))
}

/// The Arrow type of a column of a Delta type this crate writes: Delta's
/// `timestamp` is microseconds in UTC, its `date` days, its `string`
/// Arrow's `Utf8`.
pub(crate) fn arrow_type(delta: &DataType) -> ArrowType {
    match delta {
        t if *t == DataType::TIMESTAMP => {
            ArrowType::Timestamp(TimeUnit::Microsecond, Some(UTC.into()))
        }
        t if *t == DataType::BOOLEAN => ArrowType::Boolean,
        t if *t == DataType::LONG => ArrowType::Int64,
        t if *t == DataType::DOUBLE => ArrowType::Float64,
        t if *t == DataType::DATE => ArrowType::Date32,
        _ => ArrowType::Utf8,
    }
}

fn describe(columns: &[(&str, &DataType)]) -> String {
    columns
        .iter()
        .map(|(name, ty)| format!("{name} {ty}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A column of text values.
pub(crate) fn text<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

/// A column of UTC timestamps, in microseconds (Delta's precision).
pub(crate) fn times(values: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(TimestampMicrosecondArray::from_iter(values).with_timezone(UTC))
}

/// `t` in whole microseconds since the epoch, cut (never rounded up, so a
/// cursor read back never passes the time it came from).
pub(crate) fn micros(t: SystemTime) -> Option<i64> {
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(since.as_micros()).ok()
}

/// A batch of `columns` for `schema`.
pub(crate) fn batch(
    schema: Arc<ArrowSchema>,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch, deltalake::arrow::error::ArrowError> {
    RecordBatch::try_new(schema, columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_rows_table_has_the_postgres_columns() {
        let columns = Columns::rows("launch_id");
        let names: Vec<&str> = columns.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            ["content_key", "launch_id", "updated_at", "loaded_at", "row"]
        );
        assert_eq!(columns.key(), "content_key");
        let schema = columns.arrow_schema();
        assert_eq!(schema.fields().len(), 5);
    }

    #[test]
    fn another_schema_is_named_as_a_mismatch() {
        let mine = Columns::rows("record_id");
        let same = StructType::try_new(mine.fields().iter().cloned()).unwrap();
        assert_eq!(mine.mismatch(&same), None);
        let other = StructType::try_new(Columns::rejects().fields().iter().cloned()).unwrap();
        let why = mine.mismatch(&other).unwrap();
        assert!(why.contains("reject_key"), "{why}");
        assert!(why.contains("content_key"), "{why}");
    }

    #[test]
    fn micros_cut_and_read_back() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let m = micros(t).unwrap();
        assert_eq!(m, 1_700_000_000_123_456);
        assert_eq!(micros(UNIX_EPOCH - Duration::from_secs(1)), None);
    }
}
