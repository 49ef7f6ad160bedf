//! The indexes a typed family makes on its tables: what they are, the SQL
//! that makes them, and which of them a replace's switch drops while it
//! fills a table and builds again after.
//!
//! A switch empties a table and copies every row of the run into it. An
//! index kept up row by row through that copy costs more than one built
//! once over the filled table, the root table's key most of all: its
//! 64-hex-digit keys land all over the index (PostgreSQL's own advice for
//! a bulk load, "Populating a Database": remove indexes and foreign keys,
//! add them after). So the switch rebuilds the family's own indexes, its
//! key among them. It leaves alone any index something else hangs on,
//! which a drop would lose or could not be made with: a user's index, a
//! view or foreign key that depends on it, a comment, a tablespace, a
//! cluster mark or the replica identity.

use etl_core::content::typed::{loader, Schema, Table};
use etl_core::content::write::Write;
use etl_core::EtlError;
use tokio_postgres::Client;

use crate::errors;
use crate::typed::quote;

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

    /// The column's bits in `pg_index.indoption`: 1 is `DESC`, 2 is
    /// `NULLS FIRST`.
    fn option(self) -> i16 {
        match self {
            Order::Asc => 0,
            Order::DescNullsLast => 1,
            Order::Desc => 3,
        }
    }
}

/// One index a family makes on one of its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    /// Unique: the merge table's `_etl_id`, and the key.
    unique: bool,
    /// The table's primary key: made with the table, as its constraint.
    primary: bool,
    /// The access method: `btree` or `hash`.
    method: &'static str,
    keys: Vec<(&'static str, Order)>,
}

impl Index {
    fn btree(keys: &[(&'static str, Order)]) -> Index {
        Index {
            unique: false,
            primary: false,
            method: "btree",
            keys: keys.to_vec(),
        }
    }

    /// A root table's primary key, `_etl_key`.
    fn key() -> Index {
        Index {
            unique: true,
            primary: true,
            ..Index::btree(&[(loader::KEY, Order::Asc)])
        }
    }

    /// The statement that makes this index on `table`, named by the
    /// server.
    fn create_sql(&self, table: &str) -> String {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|(column, order)| format!("{}{}", quote(column), order.sql()))
            .collect();
        format!(
            "CREATE {}INDEX ON {} USING {} ({});\n",
            if self.unique { "UNIQUE " } else { "" },
            quote(table),
            self.method,
            keys.join(", ")
        )
    }

    /// Whether an index the catalog holds, by its access method,
    /// uniqueness, key columns and their `indoption` bits, is this one.
    fn is(&self, held: &Held) -> bool {
        let Held {
            method,
            unique,
            primary,
            columns,
            options,
            ..
        } = held;
        self.method == method
            && self.unique == *unique
            && self.primary == *primary
            && columns.len() == self.keys.len()
            && options.len() == self.keys.len()
            && self.keys.iter().zip(columns.iter().zip(options)).all(
                |((name, order), (column, option))| name == column && order.option() == *option,
            )
    }
}

/// The indexes the family of `schema` makes on its table `table`, besides
/// a root table's key ([`Index::key`]).
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

/// The statements that make the indexes of [`of`] on `table`.
pub(crate) fn create_sql(schema: &Schema, table: &Table) -> String {
    of(schema, table)
        .iter()
        .map(|index| index.create_sql(table.name()))
        .collect()
}

/// What a switch does to the family's own indexes on one table: drop
/// them before the fill, make them again after, each as it was (its name
/// and definition, as the catalog gives them).
#[derive(Debug, Default)]
pub(crate) struct Rebuild {
    /// `DROP INDEX` of each, or `DROP CONSTRAINT` of the key.
    pub(crate) drop_sql: String,
    /// Each one's own definition.
    pub(crate) create_sql: String,
}

/// One index on a table, as the catalog holds it.
#[derive(Clone, Debug)]
struct Held {
    /// Its name, qualified and quoted as needed.
    name: String,
    /// Its `CREATE INDEX` statement.
    definition: String,
    method: String,
    unique: bool,
    primary: bool,
    /// The constraint it holds, quoted, and that constraint's definition.
    constraint: Option<(String, String)>,
    columns: Vec<String>,
    options: Vec<i16>,
}

/// The catalog's indexes on a table that a drop would lose nothing of, and
/// that could be dropped: valid, on plain columns with no predicate or
/// `INCLUDE`, in the table's tablespace, with no comment, no cluster mark,
/// not the replica identity, nothing depending on them (a foreign key, a
/// view grouping by the key), and behind no constraint but the primary
/// key.
const DROPPABLE: &str = "\
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid), am.amname::text,
       i.indisunique, i.indisprimary, quote_ident(k.conname), pg_get_constraintdef(k.oid),
       array(SELECT a.attname::text
             FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS n(attnum, at)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = n.attnum
             ORDER BY n.at),
       i.indoption::int2[]
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am am ON am.oid = c.relam
LEFT JOIN pg_constraint k
       ON k.conindid = i.indexrelid AND k.conrelid = i.indrelid AND k.contype IN ('p', 'u', 'x')
WHERE i.indrelid = to_regclass($1)
  AND i.indisvalid AND NOT i.indisclustered AND NOT i.indisreplident
  AND i.indexprs IS NULL AND i.indpred IS NULL AND i.indnkeyatts = i.indnatts
  AND c.reltablespace = 0
  AND obj_description(i.indexrelid, 'pg_class') IS NULL
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = i.indexrelid
                    AND d.deptype = 'n')
  AND (k.oid IS NULL
       OR k.contype = 'p' AND NOT k.condeferrable
          AND obj_description(k.oid, 'pg_constraint') IS NULL
          AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.refclassid = 'pg_constraint'::regclass AND d.refobjid = k.oid
                            AND d.deptype = 'n'))
ORDER BY 1";

/// The [`Rebuild`] of the family's own indexes on `table` of `schema`, as
/// the catalog holds them now: its key and the non-unique indexes of
/// [`of`], each only when a drop would lose nothing of it. A table that
/// does not exist yet has none.
pub(crate) async fn rebuild(
    client: &Client,
    schema: &Schema,
    table: &Table,
) -> Result<Rebuild, EtlError> {
    let ours: Vec<Index> = of(schema, table)
        .into_iter()
        .filter(|index| !index.unique)
        .chain(table.parent().is_none().then(Index::key))
        .collect();
    if ours.is_empty() {
        return Ok(Rebuild::default());
    }
    let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
    let t = quote(table.name());
    let mut rebuild = Rebuild::default();
    for row in client.query(DROPPABLE, &[&t]).await.map_err(fail)? {
        let constraint: Option<String> = row.try_get(5).map_err(fail)?;
        let held = Held {
            name: row.try_get(0).map_err(fail)?,
            definition: row.try_get(1).map_err(fail)?,
            method: row.try_get(2).map_err(fail)?,
            unique: row.try_get(3).map_err(fail)?,
            primary: row.try_get(4).map_err(fail)?,
            constraint: match constraint {
                Some(name) => Some((name, row.try_get(6).map_err(fail)?)),
                None => None,
            },
            columns: row.try_get(7).map_err(fail)?,
            options: row.try_get(8).map_err(fail)?,
        };
        if !ours.iter().any(|index| index.is(&held)) {
            continue;
        }
        let (drop, create) = match &held.constraint {
            Some((name, definition)) => (
                format!("ALTER TABLE {t} DROP CONSTRAINT {name};\n"),
                format!("ALTER TABLE {t} ADD CONSTRAINT {name} {definition};\n"),
            ),
            None => (
                format!("DROP INDEX {};\n", held.name),
                format!("{};\n", held.definition),
            ),
        };
        rebuild.drop_sql.push_str(&drop);
        // The key first: the other indexes are then built beside it.
        if held.primary {
            rebuild.create_sql.insert_str(0, &create);
        } else {
            rebuild.create_sql.push_str(&create);
        }
    }
    Ok(rebuild)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_told_by_its_method_columns_and_order() {
        let current = Index::btree(&[
            (loader::ID, Order::Asc),
            (loader::UPDATED_AT, Order::DescNullsLast),
            (loader::LOADED_AT, Order::Desc),
        ]);
        let held = Held {
            name: "t_idx".into(),
            definition: String::new(),
            method: "btree".into(),
            unique: false,
            primary: false,
            constraint: None,
            columns: [loader::ID, loader::UPDATED_AT, loader::LOADED_AT]
                .map(String::from)
                .to_vec(),
            options: vec![0, 1, 3],
        };
        assert!(current.is(&held));
        assert!(!Index::key().is(&held));
        // Another order, method, uniqueness or column is another index.
        let other = |change: fn(&mut Held)| {
            let mut other = held.clone();
            change(&mut other);
            current.is(&other)
        };
        assert!(!other(|h| h.options[2] = 1));
        assert!(!other(|h| h.method = "hash".into()));
        assert!(!other(|h| h.unique = true));
        assert!(!other(|h| {
            h.columns.pop();
            h.options.pop();
        }));
        assert!(!other(|h| h.columns[0] = "id".into()));
        let key = Held {
            unique: true,
            primary: true,
            columns: vec![loader::KEY.into()],
            options: vec![0],
            ..held.clone()
        };
        assert!(Index::key().is(&key));
        // A unique index on the key column is not the primary key.
        assert!(!Index::key().is(&Held {
            primary: false,
            ..key
        }));
    }

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
