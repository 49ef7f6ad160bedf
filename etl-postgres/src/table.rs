//! The table: its name, checked, and its creation, safe to race.

use etl_core::EtlError;
use tokio_postgres::Client;

use crate::{errors, session};

/// A table name that is a plain SQL identifier: ASCII letters, digits and
/// `_`, not starting with a digit, at most 63 bytes (PostgreSQL's limit).
/// It is always quoted in SQL, so it cannot inject anything either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableName(String);

impl TableName {
    /// Checks `name`; `InvalidInput` naming it otherwise.
    pub fn new(name: &str) -> Result<Self, EtlError> {
        let ok = !name.is_empty()
            && name.len() <= 63
            && !name.as_bytes()[0].is_ascii_digit()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(TableName(name.to_string()))
        } else {
            Err(EtlError::InvalidInput(format!(
                "table name {name:?}: expected letters, digits and `_` (not first), at most 63 bytes"
            )))
        }
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The table beside this one that keeps its rejects: `<name>_rejects`
    /// (`InvalidInput` when that is longer than 63 bytes).
    pub fn rejects(&self) -> Result<TableName, EtlError> {
        TableName::new(&format!("{}_rejects", self.0))
    }

    /// The view beside this table that shows each launch as it is now:
    /// `<name>_current` (`InvalidInput` when that is longer than 63 bytes).
    pub fn current(&self) -> Result<TableName, EtlError> {
        TableName::new(&format!("{}_current", self.0))
    }

    /// The name quoted for SQL.
    pub fn quoted(&self) -> String {
        quote(&self.0)
    }
}

/// A quoted identifier: a name is data, never SQL.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Creates the rows table if it is missing and brings it to this release's
/// schema, and returns the name of its id column:
///
/// ```sql
/// content_key text PRIMARY KEY, row jsonb NOT NULL, <id column> text,
/// loaded_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz
/// -- indexes: (updated_at), (<id column>, updated_at DESC NULLS LAST, loaded_at DESC)
/// -- view <table>_current: the newest row of each id
/// ```
///
/// A new table's id column is `id_column`; a table that exists keeps the
/// one it has (`launch_id` or `record_id`), so a table made by an earlier
/// release loads as before.
///
/// One catalog look when the table is already there (every run after the
/// first): nothing that reads the rows. A table made by an earlier release
/// (no `updated_at`) is upgraded in place: the column added, filled once
/// from each launch row's `last_updated`, the indexes and the view created,
/// all in one transaction under the same advisory lock as the creation, so
/// any number of processes may open it at once and exactly one upgrades it.
/// No key changes.
///
/// Each step runs under `deadline`, but for that upgrade: it reads every
/// row once, so it has [`UPGRADE_DEADLINE`] (and the server's
/// `statement_timeout` lifted for its transaction alone).
pub async fn prepare(
    client: &Client,
    table: &TableName,
    id_column: &str,
    deadline: std::time::Duration,
) -> Result<String, EtlError> {
    let id_column = TableName::new(id_column).map_err(|_| {
        EtlError::InvalidInput(format!(
            "id column {id_column:?}: not a plain SQL identifier"
        ))
    })?;
    let current = table.current().ok();
    let (ready, held) = session::within(deadline, ready(client, table, current.as_ref())).await?;
    if let (true, Some(id)) = (ready, &held) {
        return Ok(id.clone());
    }
    let upgrading = held.is_some()
        && !session::within(deadline, async {
            has_updated_at(client, table)
                .await
                .map_err(|e| errors::from_pg_plain(&e))
        })
        .await?;
    let bound = if upgrading {
        UPGRADE_DEADLINE
    } else {
        deadline
    };
    let made = locked(client, table, async {
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {} (
                     content_key text PRIMARY KEY,
                     row jsonb NOT NULL,
                     {} text,
                     loaded_at timestamptz NOT NULL DEFAULT now())",
                table.quoted(),
                id_column.quoted()
            ))
            .await?;
        let id = id_column_of(client, table)
            .await?
            .unwrap_or(id_column.as_str().to_owned());
        let quoted = format!("\"{id}\"");
        // Under the lock: another process may have upgraded it while this
        // one waited.
        if !has_updated_at(client, table).await? {
            upgrade(client, table, &quoted).await?;
        }
        match &current {
            Some(view) => create_view(client, table, view, &quoted).await?,
            None => {
                tracing::warn!(
                    table = table.as_str(),
                    "no <table>_current view: its name would be longer than 63 bytes"
                );
            }
        }
        Ok(id)
    });
    session::within(bound, made).await
}

/// The deadline of the one-off upgrade of a table made by the first
/// release: it reads the whole table (about 27 s at a million rows).
pub(crate) const UPGRADE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The table's id column, of those a release has made (`$1`: the quoted
/// table name).
const ID_COLUMN_OF: &str = "(SELECT attname::text FROM pg_attribute
    WHERE attrelid = to_regclass($1) AND attname IN ('launch_id', 'record_id') AND NOT attisdropped
    ORDER BY attname LIMIT 1)";

async fn id_column_of(
    client: &Client,
    table: &TableName,
) -> Result<Option<String>, tokio_postgres::Error> {
    let row = client
        .query_one(&format!("SELECT {ID_COLUMN_OF}"), &[&table.quoted()])
        .await?;
    row.try_get(0)
}

/// Whether the table `$1` (quoted) has its `updated_at` column: a look at
/// the catalog, false for a missing table.
const HAS_UPDATED_AT: &str = "EXISTS (SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass($1) AND attname = 'updated_at' AND NOT attisdropped)";

/// Whether the table, its `updated_at` column and its view all exist, and
/// its id column: one round trip to the catalog.
async fn ready(
    client: &Client,
    table: &TableName,
    current: Option<&TableName>,
) -> Result<(bool, Option<String>), EtlError> {
    let view = current.map(TableName::quoted);
    let sql = format!(
        "SELECT {HAS_UPDATED_AT} AND ($2::text IS NULL OR to_regclass($2) IS NOT NULL), {ID_COLUMN_OF}"
    );
    let row = client
        .query_one(&sql, &[&table.quoted(), &view])
        .await
        .map_err(|e| errors::from_pg_plain(&e))?;
    let ready = row.try_get(0).map_err(|e| errors::from_pg_plain(&e))?;
    let id = row.try_get(1).map_err(|e| errors::from_pg_plain(&e))?;
    Ok((ready, id))
}

async fn has_updated_at(client: &Client, table: &TableName) -> Result<bool, tokio_postgres::Error> {
    let row = client
        .query_one(&format!("SELECT {HAS_UPDATED_AT}"), &[&table.quoted()])
        .await?;
    row.try_get(0)
}

/// Adds `updated_at`, fills it from the launch rows' `last_updated` (those
/// in the API's format; any other value stays NULL rather than failing the
/// upgrade), and indexes it. A new, empty table takes the same path, so a
/// table has one history whichever release made it.
///
/// The indexes are named by PostgreSQL (`CREATE INDEX ON`): a name derived
/// from a 63-byte table name would be cut, and could collide.
async fn upgrade(
    client: &Client,
    table: &TableName,
    id: &str,
) -> Result<(), tokio_postgres::Error> {
    let t = table.quoted();
    client
        .batch_execute(&format!(
            r#"SET LOCAL statement_timeout = 0;
               ALTER TABLE {t} ADD COLUMN updated_at timestamptz;
               UPDATE {t} SET updated_at = (row -> 'Launches' ->> 'last_updated')::timestamptz
                WHERE row -> 'Launches' ->> 'last_updated'
                      ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}(\.[0-9]+)?(Z|\+00:00)$';
               CREATE INDEX ON {t} (updated_at);
               CREATE INDEX ON {t} ({id}, updated_at DESC NULLS LAST, loaded_at DESC);"#
        ))
        .await
}

/// `<table>_current`: one row per id (`id`, quoted), the newest by update time,
/// then by load time (then by key, so the choice is the same every time).
async fn create_view(
    client: &Client,
    table: &TableName,
    view: &TableName,
    id: &str,
) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(&format!(
            "CREATE OR REPLACE VIEW {view} AS
             SELECT DISTINCT ON ({id}) content_key, row, {id}, updated_at, loaded_at
             FROM {t}
             WHERE {id} IS NOT NULL
             ORDER BY {id}, updated_at DESC NULLS LAST, loaded_at DESC, content_key",
            view = view.quoted(),
            t = table.quoted()
        ))
        .await
}

/// The rejects table: `reject_key text PRIMARY KEY, raw text, error text,
/// source text, rejected_at timestamptz`, created if missing. `raw` is text,
/// not jsonb, to keep the entry as the reject holds it, canonical JSON,
/// numbers jsonb would rewrite included (`raw::jsonb` reads it as JSON).
pub async fn create_rejects(client: &Client, table: &TableName) -> Result<(), EtlError> {
    create_if_missing(
        client,
        table,
        "reject_key text PRIMARY KEY,
         raw text NOT NULL,
         error text NOT NULL,
         source text NOT NULL,
         rejected_at timestamptz NOT NULL DEFAULT now()",
    )
    .await
}

/// `CREATE TABLE IF NOT EXISTS`, under the table's lock.
async fn create_if_missing(
    client: &Client,
    table: &TableName,
    columns: &str,
) -> Result<(), EtlError> {
    let sql = format!("CREATE TABLE IF NOT EXISTS {} ({columns})", table.quoted());
    locked(client, table, client.batch_execute(&sql)).await
}

/// Runs `work` in a transaction holding a transaction-scoped advisory lock
/// on the table's name: two processes creating or upgrading the same table
/// at once would otherwise race on the catalog, and one would fail with a
/// unique violation.
pub(crate) async fn locked<T>(
    client: &Client,
    table: &TableName,
    work: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, EtlError> {
    let begin = format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtext('etl_postgres.create.' || '{}'))",
        table.as_str()
    );
    let done = async {
        client.batch_execute(&begin).await?;
        let value = work.await?;
        client.batch_execute("COMMIT").await?;
        Ok(value)
    };
    match done.await {
        Ok(value) => Ok(value),
        Err(e) => {
            // Leave the connection usable for the caller's next statement.
            let _ = client.batch_execute("ROLLBACK").await;
            Err(match errors::from_pg_plain(&e) {
                EtlError::Database { sqlstate, message } => EtlError::Database {
                    sqlstate,
                    message: format!("preparing table {}: {message}", table.as_str()),
                },
                other => other,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        for good in ["launches", "_t", "Launches_2026", &"a".repeat(63)] {
            assert_eq!(TableName::new(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "1st",
            "a-b",
            "x\"; DROP TABLE y; --",
            "tab le",
            &"a".repeat(64),
            "é",
        ] {
            let e = TableName::new(bad).unwrap_err();
            assert!(matches!(e, EtlError::InvalidInput(_)), "{bad}: {e}");
        }
        assert_eq!(TableName::new("t").unwrap().quoted(), "\"t\"");
        let t = TableName::new("launches").unwrap();
        assert_eq!(t.rejects().unwrap().as_str(), "launches_rejects");
        assert!(TableName::new(&"a".repeat(60)).unwrap().rejects().is_err());
    }
}
