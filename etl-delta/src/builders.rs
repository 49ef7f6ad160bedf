//! [`Builders`]: a batch of typed rows straight into Arrow column builders,
//! what `Schema::shred` writes for a Delta table family: one set of
//! builders per table, filled as the record's text is walked, with no
//! row-wise copy between.

use deltalake::arrow::array::{
    new_null_array, ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Float64Builder,
    Int64Builder, RecordBatch, StringArray, StringBuilder, TimestampMicrosecondBuilder,
};
use deltalake::arrow::compute::concat_batches;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::arrow::error::ArrowError;
use deltalake::kernel::StructField;
use etl_core::content::typed::{
    meta_json, Cell, ColumnType, Misfit, RowKeys, RowWriter, Schema, SplitWriter,
};
use std::sync::Arc;

use crate::columns::{arrow_schema, UTC};
use crate::fields::table_fields;

/// One data column's values, in the Arrow builder of its type (a json
/// column is text, as Delta has no JSON type).
enum Column {
    Bool(BooleanBuilder),
    Bigint(Int64Builder),
    Double(Float64Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Date(Date32Builder),
    Text(StringBuilder),
}

impl Column {
    fn new(t: ColumnType) -> Column {
        match t {
            ColumnType::Bool => Column::Bool(BooleanBuilder::new()),
            ColumnType::Bigint => Column::Bigint(Int64Builder::new()),
            ColumnType::Double => Column::Double(Float64Builder::new()),
            ColumnType::Timestamp => Column::Timestamp(TimestampMicrosecondBuilder::new()),
            ColumnType::Date => Column::Date(Date32Builder::new()),
            ColumnType::Text | ColumnType::Json => Column::Text(StringBuilder::new()),
        }
    }

    fn builder(&mut self) -> &mut dyn ArrayBuilder {
        match self {
            Column::Bool(b) => b,
            Column::Bigint(b) => b,
            Column::Double(b) => b,
            Column::Timestamp(b) => b,
            Column::Date(b) => b,
            Column::Text(b) => b,
        }
    }

    /// Pads with nulls to `rows` values.
    fn pad(&mut self, rows: usize) {
        let missing = rows.saturating_sub(self.builder().len());
        match self {
            Column::Bool(b) => b.append_nulls(missing),
            Column::Bigint(b) => b.append_nulls(missing),
            Column::Double(b) => b.append_nulls(missing),
            Column::Timestamp(b) => b.append_nulls(missing),
            Column::Date(b) => b.append_nulls(missing),
            Column::Text(b) => b.append_nulls(missing),
        }
    }

    /// Sets the value of row `row` (the last), nulls before it.
    fn set(&mut self, row: usize, cell: Cell<'_>) {
        self.pad(row);
        match (self, cell) {
            (Column::Bool(b), Cell::Bool(v)) => b.append_value(v),
            (Column::Bigint(b), Cell::Bigint(v)) => b.append_value(v),
            (Column::Double(b), Cell::Double(v)) => b.append_value(v),
            (Column::Timestamp(b), Cell::Timestamp(v)) => b.append_value(v),
            (Column::Date(b), Cell::Date(v)) => b.append_value(v),
            (Column::Text(b), Cell::Text(v) | Cell::Json(v)) => b.append_value(v),
            // A column's cells are of its type (the schema says so); any
            // other stays null rather than failing the load.
            (column, _) => column.pad(row + 1),
        }
    }

    fn finish(mut self, rows: usize) -> ArrayRef {
        self.pad(rows);
        match self {
            Column::Bool(mut b) => Arc::new(b.finish()),
            Column::Bigint(mut b) => Arc::new(b.finish()),
            Column::Double(mut b) => Arc::new(b.finish()),
            Column::Timestamp(mut b) => Arc::new(b.finish().with_timezone(UTC)),
            Column::Date(mut b) => Arc::new(b.finish()),
            Column::Text(mut b) => Arc::new(b.finish()),
        }
    }
}

/// One table's rows of a batch.
#[derive(Default)]
struct TableRows {
    keys: Vec<String>,
    parents: StringBuilder,
    roots: StringBuilder,
    idx: Int64Builder,
    columns: Vec<Option<Column>>,
}

/// The resource's rows' loader values that [`Schema::shred`] does not know.
#[derive(Default)]
struct Records {
    ids: StringBuilder,
    updated: TimestampMicrosecondBuilder,
    texts: StringBuilder,
    metas: StringBuilder,
}

/// A batch's rows, by table, as Arrow builders.
#[derive(Default)]
pub(crate) struct Builders {
    tables: Vec<TableRows>,
    records: Records,
    /// Rows made on other cores after these ([`SplitWriter::append`]),
    /// in order: each finished as its own batch, then concatenated.
    later: Vec<Builders>,
}

/// One table's part of a batch, ready to append.
pub(crate) struct TableBatch {
    /// Each row's `_etl_key`.
    pub keys: Vec<String>,
    /// The table's columns as Delta fields.
    pub fields: Vec<StructField>,
    /// The rows.
    pub batch: RecordBatch,
}

impl RowWriter for Builders {
    fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
        if self.tables.len() <= table {
            self.tables.resize_with(table + 1, TableRows::default);
        }
        let rows = &mut self.tables[table];
        rows.keys.push(keys.key.to_owned());
        if let (Some(parent), Some(idx)) = (keys.parent_key, keys.list_idx) {
            rows.parents.append_value(parent);
            rows.roots.append_value(keys.root_key);
            rows.idx
                .append_value(i64::try_from(idx).unwrap_or(i64::MAX));
        }
    }

    fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>) {
        let rows = &mut self.tables[table];
        if rows.columns.len() <= column {
            rows.columns.resize_with(column + 1, || None);
        }
        let row = rows.keys.len() - 1;
        rows.columns[column]
            .get_or_insert_with(|| Column::new(cell.column_type()))
            .set(row, cell);
    }

    fn end_row(&mut self, table: usize, misfits: &[Misfit]) {
        if table == 0 {
            self.records.metas.append_option(meta_json(misfits));
        }
    }
}

impl SplitWriter for Builders {
    fn append(&mut self, mut later: Builders) {
        let rest = std::mem::take(&mut later.later);
        self.later.push(later);
        self.later.extend(rest);
    }
}

impl Builders {
    /// The resource's row just shredded: its id, update time (µs, UTC) and
    /// canonical text.
    pub fn record(&mut self, id: Option<&str>, updated: Option<i64>, text: &str) {
        self.records.ids.append_option(id);
        self.records.updated.append_option(updated);
        self.records.texts.append_value(text);
    }

    /// How many tables have rows.
    pub fn tables(&self) -> usize {
        self.later
            .iter()
            .map(|part| part.tables.len())
            .fold(self.tables.len(), usize::max)
    }

    /// Table `at`'s rows as a batch of its columns in `schema`, loaded at
    /// `loaded_at` (µs, UTC). Takes the table's builders: called once a
    /// table.
    pub fn finish(
        &mut self,
        at: usize,
        schema: &Schema,
        loaded_at: i64,
    ) -> Result<TableBatch, ArrowError> {
        let fields = table_fields(schema, at, None);
        let target = arrow_schema(&fields);
        let (mut keys, batch) = self.finish_part(at, &target, loaded_at)?;
        if self.later.is_empty() {
            return Ok(TableBatch {
                keys,
                fields,
                batch,
            });
        }
        let mut batches = vec![batch];
        for part in &mut self.later {
            let (more, batch) = part.finish_part(at, &target, loaded_at)?;
            keys.extend(more);
            batches.push(batch);
        }
        let batch = concat_batches(&target, &batches)?;
        Ok(TableBatch {
            keys,
            fields,
            batch,
        })
    }

    /// This part's rows of table `at` (none if it has none), as a batch of
    /// the columns `target`, and their keys.
    fn finish_part(
        &mut self,
        at: usize,
        target: &SchemaRef,
        loaded_at: i64,
    ) -> Result<(Vec<String>, RecordBatch), ArrowError> {
        let rows = match self.tables.get_mut(at) {
            Some(rows) => std::mem::take(rows),
            None => TableRows::default(),
        };
        let n = rows.keys.len();
        let keys: ArrayRef = Arc::new(StringArray::from_iter_values(&rows.keys));
        let mut arrays: Vec<ArrayRef> = vec![keys];
        if at == 0 {
            let records = std::mem::take(&mut self.records);
            let loaded = {
                let mut b = TimestampMicrosecondBuilder::with_capacity(n);
                b.append_value_n(loaded_at, n);
                b
            };
            arrays.extend(finish_all(
                [
                    Column::Text(records.ids),
                    Column::Timestamp(records.updated),
                    Column::Timestamp(loaded),
                    Column::Text(records.texts),
                    Column::Text(records.metas),
                ],
                n,
            ));
        } else {
            arrays.extend(finish_all(
                [
                    Column::Text(rows.parents),
                    Column::Text(rows.roots),
                    Column::Bigint(rows.idx),
                ],
                n,
            ));
        }
        let data = &target.fields()[arrays.len()..];
        let mut columns = rows.columns.into_iter();
        for field in data {
            let array = match columns.next().flatten() {
                Some(column) => column.finish(n),
                None => new_null_array(field.data_type(), n),
            };
            arrays.push(array);
        }
        let batch = RecordBatch::try_new(target.clone(), arrays)?;
        Ok((rows.keys, batch))
    }
}

fn finish_all<const N: usize>(columns: [Column; N], rows: usize) -> impl Iterator<Item = ArrayRef> {
    columns.into_iter().map(move |c| c.finish(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etl_core::content::typed::SchemaOptions;

    /// Issue-like records: a nested object, a list of objects and a list
    /// of scalars, a member that arrives late and a misfit.
    fn records(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let late = match i {
                    1_700 => r#","late":{"at":"2026-12-04T00:00:00Z"}"#,
                    _ => "",
                };
                let number = match i % 500 {
                    7 => format!("\"#{i}\""),
                    _ => i.to_string(),
                };
                format!(
                    r#"{{"number":{number},"user":{{"login":"u{i}","site_admin":{}}},"labels":[{{"name":"l{i}"}},{{"name":"bug","id":{i}}}],"tags":["a","b{i}"]{late}}}"#,
                    i % 2 == 0
                )
            })
            .collect()
    }

    /// Each table's batch of `records`, shredded in two loads: split on
    /// the cores (`split`), or one record after another.
    fn batches(records: &[String], split: bool) -> Vec<TableBatch> {
        let mut schema = Schema::new("issues", SchemaOptions::default()).unwrap();
        let each = |schema: &mut Schema, rows: &mut Builders, i: usize| {
            let key = etl_core::content_id("row", &records[i]);
            schema.shred(&records[i], &key, rows)?;
            rows.record(Some(&i.to_string()), None, &records[i]);
            Ok::<_, etl_core::content::typed::ShredError>(())
        };
        let mut loads = Vec::new();
        for range in [0..1_000, 1_000..records.len()] {
            let mut rows = Builders::default();
            if split {
                let at = range.start;
                let (made, _) = schema
                    .shred_batch(range.len(), |schema, rows, i| each(schema, rows, at + i))
                    .unwrap();
                rows = made;
            } else {
                for i in range {
                    each(&mut schema, &mut rows, i).unwrap();
                }
            }
            loads.push(rows);
        }
        let mut out = Vec::new();
        for mut rows in loads {
            for at in 0..rows.tables() {
                out.push(rows.finish(at, &schema, 42).unwrap());
            }
        }
        out
    }

    #[test]
    fn rows_made_on_several_cores_are_the_rows_of_one_pass() {
        let records = records(3_000);
        let one = batches(&records, false);
        let split = batches(&records, true);
        assert_eq!(one.len(), split.len());
        for (a, b) in one.iter().zip(&split) {
            assert_eq!(a.keys, b.keys);
            assert_eq!(a.fields, b.fields);
            assert_eq!(a.batch, b.batch);
        }
        // Both loads' resource rows, and the late member's column.
        assert_eq!(one[0].batch.num_rows() + one[3].batch.num_rows(), 3_000);
        assert!(split[3].batch.column_by_name("late__at").is_some());
    }
}
