//! `write = "merge"` into a typed family: one row per primary key, the
//! newest version read, deletions remembered.
//!
//! A page is merged in its own transaction, before its rows are inserted
//! ([`apply`]): its versions are weighed ([`etl_core::content::write::merge`])
//! against the rows the table holds for their keys (locked) and the
//! deletions remembered for them (locked, in [`DELETED_TABLE`]). A
//! replaced row leaves with its child rows, in the same transaction as
//! its successor's come in.
//!
//! Two writers merging one key at once: the unique index on `_etl_id` makes
//! the later insert fail (it waits for the first to commit); that page
//! then fails as a serialization failure (transient), and its retry weighs
//! its versions against the winner's.

use etl_core::content::typed::{loader, Schema};
use etl_core::content::write::merge::{weigh, Gone, Held, Merged, Version};
use etl_core::{EtlError, Reject};
use std::time::SystemTime;
use tokio_postgres::Client;

use crate::errors;
use crate::table::quote;

/// The table of remembered deletions, one for every merge family:
/// `table_name`, `key` (the primary key, as `_etl_id` holds it), the
/// deleted version's `updated_at`, and when it was deleted.
pub const DELETED_TABLE: &str = "_etl_deleted";

/// Creates [`DELETED_TABLE`] if it is missing (under the caller's lock:
/// two creations at once would collide).
pub(crate) async fn create_deleted_table(client: &Client) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} (
                 table_name text NOT NULL,
                 key text NOT NULL,
                 updated_at timestamptz,
                 deleted_at timestamptz NOT NULL DEFAULT now(),
                 PRIMARY KEY (table_name, key))",
            quote(DELETED_TABLE)
        ))
        .await
}

/// Merges the page's `versions` into the family of `schema` (its table
/// names) at the table's side: old rows and their child rows out,
/// deletions remembered or forgotten. Returns which versions' rows are
/// to be inserted.
pub(crate) async fn apply(
    client: &Client,
    schema: &Schema,
    versions: &[Version<'_>],
) -> Result<Merged, EtlError> {
    let table = schema.tables()[0].name();
    let mut keys: Vec<&str> = versions.iter().map(|v| v.key).collect();
    keys.sort_unstable();
    keys.dedup();
    let held = held_rows(client, table, &keys).await?;
    let gone = remembered(client, table, &keys).await?;
    let (merged, change) = weigh(versions, &held, &gone);
    take_out(client, schema, &change.out).await?;
    remember(client, table, change.remember).await?;
    forget(client, table, &change.forget).await?;
    Ok(merged)
}

/// The rows the table holds for `keys`, locked: each key's content key and
/// update time.
async fn held_rows(client: &Client, table: &str, keys: &[&str]) -> Result<Held, EtlError> {
    let sql = format!(
        "SELECT {i}, {k}, {u} FROM {t} WHERE {i} = ANY($1) FOR UPDATE",
        i = quote(loader::ID),
        k = quote(loader::KEY),
        u = quote(loader::UPDATED_AT),
        t = quote(table)
    );
    client
        .query(&sql, &[&keys])
        .await
        .and_then(|rows| {
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?))))
                .collect()
        })
        .map_err(|e| errors::from_pg_plain(&e))
}

/// The deletions remembered for `keys`, locked: each key's deleted
/// version's update time.
async fn remembered(client: &Client, table: &str, keys: &[&str]) -> Result<Gone, EtlError> {
    let sql = format!(
        "SELECT key, updated_at FROM {} WHERE table_name = $1 AND key = ANY($2) FOR UPDATE",
        quote(DELETED_TABLE)
    );
    client
        .query(&sql, &[&table, &keys])
        .await
        .and_then(|rows| {
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
        .map_err(|e| errors::from_pg_plain(&e))
}

/// Takes the rows of content keys `out` out of the family: their child
/// rows first, by the index on `_etl_root_key`, then them.
async fn take_out(client: &Client, schema: &Schema, out: &[&str]) -> Result<(), EtlError> {
    if out.is_empty() {
        return Ok(());
    }
    let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
    // By the index on `_etl_root_key`, whatever the planner guesses: a
    // table just loaded has no statistics yet, and `= ANY` of a page's
    // keys is then estimated to match every row, so it would read the
    // whole child table for each page.
    client
        .batch_execute("SET LOCAL enable_seqscan = off")
        .await
        .map_err(fail)?;
    for child in &schema.tables()[1..] {
        let sql = format!(
            "DELETE FROM {} WHERE {} = ANY($1)",
            quote(child.name()),
            quote(loader::ROOT_KEY)
        );
        client.execute(&sql, &[&out]).await.map_err(fail)?;
    }
    client
        .batch_execute("RESET enable_seqscan")
        .await
        .map_err(fail)?;
    let sql = format!(
        "DELETE FROM {} WHERE {} = ANY($1)",
        quote(schema.tables()[0].name()),
        quote(loader::KEY)
    );
    client.execute(&sql, &[&out]).await.map_err(fail)?;
    Ok(())
}

/// Remembers the deletions `gone` (key, deleted version's time).
async fn remember(
    client: &Client,
    table: &str,
    gone: Vec<(&str, Option<SystemTime>)>,
) -> Result<(), EtlError> {
    if gone.is_empty() {
        return Ok(());
    }
    let (keys, times): (Vec<&str>, Vec<Option<SystemTime>>) = gone.into_iter().unzip();
    let sql = format!(
        "INSERT INTO {d} (table_name, key, updated_at) SELECT $1, k, u FROM unnest($2::text[], $3::timestamptz[]) AS v(k, u) \
         ON CONFLICT (table_name, key) DO UPDATE SET updated_at = EXCLUDED.updated_at, deleted_at = now()",
        d = quote(DELETED_TABLE)
    );
    client
        .execute(&sql, &[&table, &keys, &times])
        .await
        .map_err(|e| errors::from_pg_plain(&e))?;
    Ok(())
}

/// Forgets the remembered deletions of `keys` (a newer version came).
async fn forget(client: &Client, table: &str, keys: &[&str]) -> Result<(), EtlError> {
    if keys.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "DELETE FROM {} WHERE table_name = $1 AND key = ANY($2)",
        quote(DELETED_TABLE)
    );
    client
        .execute(&sql, &[&table, &keys])
        .await
        .map_err(|e| errors::from_pg_plain(&e))?;
    Ok(())
}

/// A page whose versions a concurrent writer's insert of the same key
/// overtook (`violation`, the unique violation its insert met): retried as
/// a whole, against the winner's rows. The server's own words go in the
/// message, naming the index: a unique index of the user's own that the
/// page's rows break fails the same way, and must be told apart.
pub(crate) fn overtaken(table: &str, violation: &tokio_postgres::Error) -> EtlError {
    let said = match violation.as_db_error() {
        Some(db) => db.to_string(),
        None => violation.to_string(),
    };
    EtlError::Database {
        sqlstate: Some("40001".into()),
        message: format!(
            "table {table}: another writer merged a key of this page at the same moment ({said}); \
             the page is merged again (a unique index of your own that the page breaks fails so every time)"
        ),
    }
}

/// A record without its primary key, as a reject.
pub(crate) fn keyless(json: &str, why: String, table: &str) -> Result<Reject, EtlError> {
    Reject::new(json, why, format!("table {table}"))
}
