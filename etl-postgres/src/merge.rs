//! `write = "merge"` into a typed family: one row per primary key, the
//! newest version read, deletions remembered.
//!
//! A page is merged in its own transaction, before its rows are inserted
//! ([`apply`]): of the page's versions of one key the newest stays; each
//! is weighed against the row the table holds for its key (locked) and
//! the deletion remembered for it (locked, in [`DELETED_TABLE`]). A version
//! replaces what is held unless that is newer: a greater update time, or a
//! time where the version has none; at an equal time the version read
//! later wins. A replaced row leaves with its child rows, in the same
//! transaction as its successor's come in. A version marked deleted
//! (`hard_delete`) takes its key's row out and is remembered, so that an
//! older version read later does not bring the row back; a newer one does.
//!
//! Two writers merging one key at once: the unique index on `_etl_id` makes
//! the later insert skip; that page then fails as a serialization failure
//! (transient), and its retry weighs its versions against the winner's.

use etl_core::content::typed::{loader, Schema};
use etl_core::content::write::MergeKeys;
use etl_core::{EtlError, Reject};
use serde_json::Value;
use std::collections::HashMap;
use std::time::SystemTime;
use tokio_postgres::Client;

use crate::errors;
use crate::typed::quote;

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

/// A record's primary key, as `_etl_id` holds it (a string as it is, an
/// integer as its digits, any other value as its JSON; a compound key as
/// the JSON array of its values), and whether the record says it was
/// deleted. `Err` names the pointer that found nothing.
pub(crate) fn key_of(json: &str, keys: &MergeKeys) -> Result<(String, bool), String> {
    let record: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let found = |at: &str| {
        record
            .pointer(at)
            .filter(|v| !v.is_null())
            .ok_or_else(|| format!("primary key {at}: not found (merge needs it)"))
    };
    let key = match keys.primary_key.as_slice() {
        [one] => match found(one)? {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
        many => {
            let values = many.iter().map(|at| found(at).cloned());
            Value::Array(values.collect::<Result<_, _>>()?).to_string()
        }
    };
    let deleted = keys
        .hard_delete
        .as_deref()
        .and_then(|at| record.pointer(at))
        .is_some_and(|v| match v {
            Value::Bool(b) => *b,
            other => !other.is_null(),
        });
    Ok((key, deleted))
}

/// One version of a page, as the merge weighs it.
pub(crate) struct Version<'a> {
    pub key: &'a str,
    /// Its content key (`_etl_key`).
    pub row: &'a str,
    pub updated: Option<SystemTime>,
    pub deleted: bool,
}

/// What a page's merge did, and which of its rows go in.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Merged {
    /// Per version of the page: whether its row is inserted.
    pub insert: Vec<bool>,
    /// Rows taken out by a deletion.
    pub deleted: usize,
    /// Versions held already, or older than what is held.
    pub seen: usize,
}

/// Whether a version of time `new`, read now, replaces one of time `held`:
/// unless `held` is newer (a greater time, or a time where `new` has none).
fn replaces(new: Option<SystemTime>, held: Option<SystemTime>) -> bool {
    new >= held
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
    let mut merged = Merged {
        insert: vec![false; versions.len()],
        ..Merged::default()
    };
    let newest = newest_of_page(versions, &mut merged);
    let keys: Vec<&str> = newest.keys().copied().collect();
    let held = held_rows(client, table, &keys).await?;
    let gone = remembered(client, table, &keys).await?;
    let change = weigh(versions, &newest, (&held, &gone), &mut merged);
    take_out(client, schema, &change.out).await?;
    remember(client, table, change.remember).await?;
    forget(client, table, &change.forget).await?;
    Ok(merged)
}

/// The index of the newest of the page's versions of each key; the others
/// are counted as seen.
fn newest_of_page<'a>(versions: &[Version<'a>], merged: &mut Merged) -> HashMap<&'a str, usize> {
    let mut newest: HashMap<&str, usize> = HashMap::new();
    for (i, v) in versions.iter().enumerate() {
        match newest.get(v.key) {
            Some(&j) if !replaces(v.updated, versions[j].updated) => merged.seen += 1,
            Some(_) => {
                merged.seen += 1;
                newest.insert(v.key, i);
            }
            None => {
                newest.insert(v.key, i);
            }
        }
    }
    newest
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

/// The rows held for a page's keys: key -> (content key, update time).
type Held = HashMap<String, (String, Option<SystemTime>)>;
/// The deletions remembered for a page's keys: key -> deleted version's time.
type Gone = HashMap<String, Option<SystemTime>>;

/// What a page's merge changes at the table's side.
#[derive(Default)]
struct Change<'a> {
    /// Content keys of held rows to take out (with their child rows).
    out: Vec<&'a str>,
    /// Deletions to remember: the key and the deleted version's time.
    remember: Vec<(&'a str, Option<SystemTime>)>,
    /// Remembered deletions a newer version undoes.
    forget: Vec<&'a str>,
}

/// Weighs each key's newest version against the row held for it and the
/// deletion remembered for it: marks in `merged` the versions to insert
/// and counts the rest, and returns what the table side must change.
fn weigh<'a>(
    versions: &[Version<'a>],
    newest: &HashMap<&'a str, usize>,
    (held, gone): (&'a Held, &Gone),
    merged: &mut Merged,
) -> Change<'a> {
    let mut change = Change::default();
    for (&key, &i) in newest {
        let v = &versions[i];
        let row = held.get(key);
        let stays = match (row, gone.get(key)) {
            // The same version, held: nothing to do.
            (Some((held_row, _)), _) if held_row == v.row => true,
            (Some((_, at)), _) => !replaces(v.updated, *at),
            (None, Some(at)) => !replaces(v.updated, *at),
            (None, None) => false,
        };
        if stays {
            merged.seen += 1;
            continue;
        }
        if let Some((held_row, _)) = row {
            change.out.push(held_row.as_str());
        }
        if v.deleted {
            merged.deleted += usize::from(row.is_some());
            change.remember.push((key, v.updated));
        } else {
            if gone.contains_key(key) {
                change.forget.push(key);
            }
            merged.insert[i] = true;
        }
    }
    change
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
/// overtook: retried as a whole, against the winner's rows.
pub(crate) fn overtaken(table: &str) -> EtlError {
    EtlError::Database {
        sqlstate: Some("40001".into()),
        message: format!(
            "table {table}: another writer merged a key of this page at the same moment; the page is merged again"
        ),
    }
}

/// A record without its primary key, as a reject.
pub(crate) fn keyless(json: &str, why: String, table: &str) -> Result<Reject, EtlError> {
    Reject::new(json, why, format!("table {table}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_read_as_id_is_and_a_deletion_is_true_or_not_null() {
        let keys = MergeKeys::new(["/id"]).hard_delete("/deleted");
        assert_eq!(key_of(r#"{"id":5}"#, &keys).unwrap(), ("5".into(), false));
        assert_eq!(
            key_of(r#"{"id":"a","deleted":true}"#, &keys).unwrap(),
            ("a".into(), true)
        );
        assert!(!key_of(r#"{"id":1,"deleted":false}"#, &keys).unwrap().1);
        assert!(!key_of(r#"{"id":1,"deleted":null}"#, &keys).unwrap().1);
        let at = MergeKeys::new(["/id"]).hard_delete("/deleted_at");
        assert!(
            key_of(r#"{"id":1,"deleted_at":"2026-01-01"}"#, &at)
                .unwrap()
                .1
        );
        let e = key_of(r#"{"name":"x"}"#, &keys).unwrap_err();
        assert!(e.contains("primary key /id: not found"), "{e}");
        let both = MergeKeys::new(["/org", "/n"]);
        assert_eq!(
            key_of(r#"{"org":"rust","n":7}"#, &both).unwrap().0,
            r#"["rust",7]"#
        );
    }

    #[test]
    fn an_older_time_never_replaces_and_an_equal_one_read_later_does() {
        let t = |s| Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert!(replaces(t(2), t(1)));
        assert!(replaces(t(1), t(1)));
        assert!(!replaces(t(1), t(2)));
        assert!(!replaces(None, t(1)));
        assert!(replaces(t(1), None));
        assert!(replaces(None, None));
    }
}
