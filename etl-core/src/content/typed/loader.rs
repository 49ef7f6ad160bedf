//! The loader's own columns of a typed table. Every name starts with
//! `_etl_`, and no member of a record is ever named as one (a member
//! `_etl_key` gets a column `_etl_key_<hash>`).

/// The content key; the PRIMARY KEY of the resource's table.
pub const KEY: &str = "_etl_key";
/// The record's id, as text.
pub const ID: &str = "_etl_id";
/// The record's update time, null without one.
pub const UPDATED_AT: &str = "_etl_updated_at";
/// When the row was loaded.
pub const LOADED_AT: &str = "_etl_loaded_at";
/// The whole record as canonical JSON text: what its content key hashes.
pub const ROW: &str = "_etl_row";
/// Null, or `{"misfits": [...]}` ([`super::meta_json`]).
pub const META: &str = "_etl_meta";
/// A child row's parent row's `_etl_key`.
pub const PARENT_KEY: &str = "_etl_parent_key";
/// A child row's top-level row's `_etl_key`.
pub const ROOT_KEY: &str = "_etl_root_key";
/// A child row's place in its list, from 0.
pub const LIST_IDX: &str = "_etl_list_idx";

/// In the PostgreSQL view `<table>_versions` of an append table: when a
/// version began to hold (its update time, else its load time).
pub const VALID_FROM: &str = "_etl_valid_from";
/// In the PostgreSQL view `<table>_versions`: when the next version
/// began to hold; null for the newest.
pub const VALID_TO: &str = "_etl_valid_to";

/// The data column of a list of scalars (and the name part of a list in a
/// list).
pub const VALUE_COLUMN: &str = "value";

/// The loader columns of the resource's table, in order.
pub const RECORD_COLUMNS: &[&str] = &[KEY, ID, UPDATED_AT, LOADED_AT, ROW, META];

/// The loader columns of a child table, in order.
pub const CHILD_COLUMNS: &[&str] = &[KEY, PARENT_KEY, ROOT_KEY, LIST_IDX];

/// Every loader column's name: none is given to a member, in any table.
pub const ALL: &[&str] = &[
    KEY, ID, UPDATED_AT, LOADED_AT, ROW, META, PARENT_KEY, ROOT_KEY, LIST_IDX, VALID_FROM, VALID_TO,
];
