//! The indexes a typed family makes on its tables: what they are, and the
//! SQL that makes them.
//!
//! Besides the loader's own (the key, the incremental cursor, the
//! `_current` view's order, a merge's child-row lookup), a merge table gets
//! an index on its primary key's own columns ([`primary_key`]): analysts
//! look rows up by `id` or `org` and `number`, never by `_etl_id`. The
//! uniqueness stays on `_etl_id`, the key's canonical text, which every
//! record has whatever its members' types; the key's columns are typed as
//! the records make them, and come into being with the first record that
//! has them.

use etl_core::content::typed::{loader, Schema, Table};
use etl_core::content::write::Write;

use etl_core::content::naming::{fit, POSTGRES_MAX_BYTES};

use crate::table::quote;

/// How one key column of an index is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Asc,
    DescNullsLast,
    /// Descending, nulls first (PostgreSQL's default for `DESC`).
    Desc,
}

impl Order {
    fn sql(self) -> &'static str {
        match self {
            Order::Asc => "",
            Order::DescNullsLast => " DESC NULLS LAST",
            Order::Desc => " DESC",
        }
    }
}

/// One index a family makes on one of its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    /// Unique: the merge table's `_etl_id`.
    unique: bool,
    /// The access method: `btree` or `hash`.
    method: &'static str,
    keys: Vec<(String, Order)>,
    /// Its name, where ours (made once, by name: `IF NOT EXISTS`); else
    /// the server names it.
    name: Option<String>,
}

impl Index {
    fn btree(keys: &[(&str, Order)]) -> Index {
        Index {
            unique: false,
            method: "btree",
            keys: keys.iter().map(|(c, o)| ((*c).to_owned(), *o)).collect(),
            name: None,
        }
    }

    /// The statement that makes this index on `table`.
    pub(crate) fn create_sql(&self, table: &str) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|(column, order)| format!("{}{}", quote(column), order.sql()))
            .collect();
        let name = self
            .name
            .as_ref()
            .map_or(String::new(), |n| format!("IF NOT EXISTS {} ", quote(n)));
        format!(
            "CREATE {}INDEX {name}ON {} USING {} ({});\n",
            if self.unique { "UNIQUE " } else { "" },
            quote(table),
            self.method,
            keys.join(", ")
        )
    }

    /// Its name, where ours.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether it is on any of `columns`.
    fn covers_any(&self, columns: &[etl_core::content::typed::Column]) -> bool {
        self.keys
            .iter()
            .any(|(key, _)| columns.iter().any(|c| &c.name == key))
    }
}

/// The [`primary_key`] index that `table` comes to need once its columns
/// from `known` on are added: the key's last column is among them.
pub(crate) fn primary_key_grown(schema: &Schema, table: &Table, known: usize) -> Option<Index> {
    primary_key(schema, table).filter(|index| index.covers_any(&table.columns()[known..]))
}

/// The index on a merge table's primary key's own columns (`id`; `org`
/// and `number` for a compound key, in the key's order), once `table`
/// (the resource's table) has a column for each of the key's members;
/// `None` for any other table, or before then. Named
/// `<table>_primary_key` (cut to 63 bytes with a hash when longer).
pub(crate) fn primary_key(schema: &Schema, table: &Table) -> Option<Index> {
    let (Write::Merge(keys), None) = (schema.write(), table.parent()) else {
        return None;
    };
    let columns: Option<Vec<(String, Order)>> = keys
        .primary_key
        .iter()
        .map(|at| {
            table
                .columns()
                .iter()
                .find(|c| c.path == at.as_str())
                .map(|c| (c.name.clone(), Order::Asc))
        })
        .collect();
    Some(Index {
        keys: columns?,
        name: Some(fit(
            &format!("{}_primary_key", table.name()),
            POSTGRES_MAX_BYTES,
            table.name(),
        )),
        ..Index::btree(&[])
    })
}

/// The indexes the family of `schema` makes on its table `table` with it,
/// besides a root table's key (its primary key constraint) and the key's
/// own columns' ([`primary_key`]), which come with those columns.
pub(crate) fn of(schema: &Schema, table: &Table) -> Vec<Index> {
    let merge = matches!(schema.write(), Write::Merge(_));
    match table.parent() {
        // A merge table holds one row per key, `_etl_id`.
        None if merge => vec![
            Index::btree(&[(loader::UPDATED_AT, Order::Asc)]),
            Index {
                unique: true,
                ..Index::btree(&[(loader::ID, Order::Asc)])
            },
        ],
        // The incremental cursor, and the `_current` view's newest version
        // of each id.
        None => vec![
            Index::btree(&[(loader::UPDATED_AT, Order::Asc)]),
            Index::btree(&[
                (loader::ID, Order::Asc),
                (loader::UPDATED_AT, Order::DescNullsLast),
                (loader::LOADED_AT, Order::Desc),
            ]),
        ],
        // A merge takes a replaced row's child rows out by its key: without
        // an index each page's delete reads the whole child table. A hash
        // index: only ever looked up by equality, and it holds a hash of
        // the 64-character key, not the key (a btree cost a merge into a
        // new table 0.4 s more of 100,000 records).
        Some(_) if merge => vec![Index {
            method: "hash",
            ..Index::btree(&[(loader::ROOT_KEY, Order::Asc)])
        }],
        // None on an append's child table: an index on `_etl_parent_key`
        // cost a load a fifth of its time (BENCHMARKS.md), and analysts'
        // joins read whole tables; one who looks up a few records adds it.
        Some(_) => Vec::new(),
    }
}

/// The statements that make the indexes of [`of`] and [`primary_key`]
/// on `table`.
pub(crate) fn create_sql(schema: &Schema, table: &Table) -> String {
    of(schema, table)
        .iter()
        .chain(&primary_key(schema, table))
        .map(|index| index.create_sql(table.name()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_made_with_its_order_and_method() {
        let index = Index {
            method: "hash",
            ..Index::btree(&[(loader::ROOT_KEY, Order::Asc)])
        };
        assert_eq!(
            index.create_sql("t"),
            "CREATE INDEX ON \"t\" USING hash (\"_etl_root_key\");\n"
        );
        let index = Index {
            unique: true,
            ..Index::btree(&[(loader::ID, Order::Asc), (loader::LOADED_AT, Order::Desc)])
        };
        assert_eq!(
            index.create_sql("t"),
            "CREATE UNIQUE INDEX ON \"t\" USING btree (\"_etl_id\", \"_etl_loaded_at\" DESC);\n"
        );
    }
}
