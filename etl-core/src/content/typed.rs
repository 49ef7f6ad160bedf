//! Typed tables: a record's members as typed columns, its lists as child
//! tables, the schema growing as members arrive, and the raw record kept
//! beside its columns so that nothing a column cannot hold is lost.
//!
//! This is the part every typed output shares; an output (PostgreSQL,
//! Delta) keeps a [`Schema`] per resource, hands each record's canonical
//! text to [`Schema::shred`] with a [`RowWriter`] of its own (COPY rows,
//! Arrow column builders), and adds the columns the schema grew before it
//! commits the rows.
//!
//! - A nested object's members are columns `parent__child`, at any depth
//!   up to [`SchemaOptions::max_nesting`]; past it an object or list is
//!   one [`ColumnType::Json`] column.
//! - A list is a child table `<table>__<member>`, a row per element with
//!   its parent's key, the record's key and its index
//!   ([`loader::CHILD_COLUMNS`]); a list of scalars has one column,
//!   `value`. Empty, null and absent lists add no rows.
//! - A column's type is its first non-null value's ([`ColumnType`]) and
//!   never changes. A value that does not fit is a [`Misfit`]: NULL in
//!   the column, named in the row's `_etl_meta`, whole in `_etl_row`.
//! - Names are [`crate::content::naming`]'s (dlt's `snake_case`), unique
//!   in their table, kept for good; loader columns ([`loader`]) are never
//!   a member's.
//! - A table takes at most [`SchemaOptions::max_columns`] data columns
//!   (fewer when [`SchemaOptions::max_fixed_bytes`] says a row would be
//!   too wide): later members stay in the raw record only, listed by
//!   [`Table::untyped`].

mod column;
pub mod loader;
mod schema;
mod shred;
mod split;
mod time;

pub use column::{meta_json, Cell, ColumnType, Misfit, UnknownType};
pub use schema::{Column, Contract, Schema, SchemaOptions, Table, MAX_COLUMNS};
pub use shred::{element_key, Refused, RowKeys, RowWriter, ShredError, ID_MAP_MEMBERS};
pub use split::SplitWriter;
pub use time::{timestamp_micros, update_micros};

#[cfg(test)]
mod tests;
