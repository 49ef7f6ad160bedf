//! A typed family's schema as Delta fields: each table's loader and data
//! columns, each data column's path, type and hint in its field's
//! metadata, and the family's schema text in the metadata of the resource
//! table's `_etl_row`. Below the tables and the dispositions: a table
//! checks a batch's columns against what it holds with these, and a
//! writer makes its batches' columns with them.

use deltalake::kernel::{DataType, MetadataValue, StructField, StructType};
use etl_core::content::typed::{loader, Column, ColumnType, Schema};
use std::collections::HashMap;

/// The field metadata key of `_etl_row` in the resource's table that holds
/// the family's schema.
pub(crate) const SCHEMA_KEY: &str = "etl.schema";
/// The field metadata key of a data column's JSON Pointer.
pub(crate) const PATH_KEY: &str = "etl.path";
/// The field metadata key of a data column's type as the schema names it
/// (`json` and `text` are both Delta strings).
pub(crate) const TYPE_KEY: &str = "etl.type";
/// The field metadata key of a data column's hint.
pub(crate) const HINT_KEY: &str = "etl.hint";
/// The field metadata keys of a child table's `_etl_parent_key`: the
/// name of the table whose rows hold its list, and the list's path there.
/// What the table is, for a writer that finds it made by another before
/// the schema text lists it.
pub(crate) const PARENT_KEY: &str = "etl.parent";
pub(crate) const LIST_KEY: &str = "etl.list";

/// The Delta type of a column of type `t`.
pub(crate) fn delta_type(t: ColumnType) -> DataType {
    match t {
        ColumnType::Bool => DataType::BOOLEAN,
        ColumnType::Bigint => DataType::LONG,
        ColumnType::Double => DataType::DOUBLE,
        ColumnType::Timestamp => DataType::TIMESTAMP,
        ColumnType::Date => DataType::DATE,
        ColumnType::Text | ColumnType::Json => DataType::STRING,
    }
}

/// The loader columns of the resource's table, in order.
pub(crate) fn record_fields() -> Vec<StructField> {
    vec![
        StructField::new(loader::KEY, DataType::STRING, false),
        StructField::new(loader::ID, DataType::STRING, true),
        StructField::new(loader::UPDATED_AT, DataType::TIMESTAMP, true),
        StructField::new(loader::LOADED_AT, DataType::TIMESTAMP, false),
        StructField::new(loader::ROW, DataType::STRING, false),
        StructField::new(loader::META, DataType::STRING, true),
    ]
}

/// The loader columns of a child table, in order.
pub(crate) fn child_fields() -> Vec<StructField> {
    vec![
        StructField::new(loader::KEY, DataType::STRING, false),
        StructField::new(loader::PARENT_KEY, DataType::STRING, false),
        StructField::new(loader::ROOT_KEY, DataType::STRING, false),
        StructField::new(loader::LIST_IDX, DataType::LONG, false),
    ]
}

/// Table `at`'s columns in `schema` as Delta fields: its loader columns,
/// then its data columns (each nullable, with its path, type and hint in
/// its metadata). With `stored`, the resource's `_etl_row` carries it as
/// the family's schema.
pub(crate) fn table_fields(schema: &Schema, at: usize, stored: Option<&str>) -> Vec<StructField> {
    let table = &schema.tables()[at];
    let mut fields = match table.parent() {
        None => record_fields(),
        Some(parent) => child_fields()
            .into_iter()
            .map(|f| match f.name() == loader::PARENT_KEY {
                true => f.with_metadata([
                    (PARENT_KEY, schema.tables()[parent].name()),
                    (LIST_KEY, table.path()),
                ]),
                false => f,
            })
            .collect(),
    };
    if let (None, Some(stored)) = (table.parent(), stored) {
        for field in &mut fields {
            if field.name() == loader::ROW {
                *field = field.clone().with_metadata([(SCHEMA_KEY, stored)]);
            }
        }
    }
    fields.extend(table.columns().iter().map(|c| {
        let mut metadata = vec![
            (PATH_KEY, c.path.clone()),
            (TYPE_KEY, c.column_type.as_str().to_owned()),
        ];
        if let Some(hint) = c.hint {
            metadata.push((HINT_KEY, hint.as_str().to_owned()));
        }
        StructField::new(&c.name, delta_type(c.column_type), true).with_metadata(metadata)
    }));
    fields
}

/// The family's schema as the resource's table holds it, if it does.
pub(crate) fn stored_schema(fields: &StructType) -> Option<&str> {
    meta(fields.field(loader::ROW)?, SCHEMA_KEY)
}

/// The text of `field`'s metadata at `key`, if it has one.
pub(crate) fn meta<'f>(field: &'f StructField, key: &str) -> Option<&'f str> {
    match field.metadata().get(key)? {
        MetadataValue::String(text) => Some(text),
        _ => None,
    }
}

/// Whether a child table's batch, of the columns `fields`, was made on
/// other columns than the table holds (`have`): one they both hold with
/// another type or path, a member the table holds under another name, or
/// another list under the table's name. Another writer grew the table
/// first, and the batch must be made again on what it holds.
pub(crate) fn disagrees(have: &StructType, fields: &[StructField]) -> bool {
    let differs = |a: &StructField, b: &StructField, key: &str| matches!((meta(a, key), meta(b, key)), (Some(x), Some(y)) if x != y);
    let named: HashMap<&str, &str> = have
        .fields()
        .filter_map(|f| Some((meta(f, PATH_KEY)?, f.name().as_str())))
        .collect();
    fields.iter().any(|field| {
        let clash = have.field(field.name()).is_some_and(|held| {
            held.data_type() != field.data_type()
                || [PATH_KEY, TYPE_KEY, PARENT_KEY, LIST_KEY]
                    .iter()
                    .any(|key| differs(held, field, key))
        });
        let renamed = meta(field, PATH_KEY)
            .and_then(|path| named.get(path))
            .is_some_and(|name| *name != field.name());
        clash || renamed
    })
}

/// The data column a child table's `field` is, from its metadata.
pub(crate) fn held_column(field: &StructField) -> Option<Column> {
    Some(Column {
        name: field.name().clone(),
        column_type: meta(field, TYPE_KEY)?.parse().ok()?,
        path: meta(field, PATH_KEY)?.to_owned(),
        hint: meta(field, HINT_KEY).and_then(|h| h.parse().ok()),
    })
}

/// Where a table's child table is: beside it, its name's part past the
/// resource's name added (`lake/issues` -> `lake/issues__labels`).
pub(crate) fn child_suffix(schema: &Schema, at: usize) -> String {
    let root = schema.tables()[0].name();
    let name = schema.tables()[at].name();
    match name.strip_prefix(root) {
        Some(rest) if rest.starts_with("__") => rest.to_owned(),
        _ => format!("__{name}"),
    }
}
