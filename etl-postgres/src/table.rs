//! The table: its name, checked, and its creation, safe to race.

use etl_core::EtlError;
use tokio_postgres::Client;

use crate::errors;

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

    /// The name quoted for SQL.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

/// The rows table: `content_key text PRIMARY KEY, row jsonb, launch_id
/// text, loaded_at timestamptz`, created if missing.
pub async fn create(client: &Client, table: &TableName) -> Result<(), EtlError> {
    create_if_missing(
        client,
        table,
        "content_key text PRIMARY KEY,
         row jsonb NOT NULL,
         launch_id text,
         loaded_at timestamptz NOT NULL DEFAULT now()",
    )
    .await
}

/// The rejects table: `reject_key text PRIMARY KEY, raw text, error text,
/// source text, rejected_at timestamptz`, created if missing. `raw` is text,
/// not jsonb, to keep the entry byte for byte as the source sent it
/// (`raw::jsonb` reads it as JSON).
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

/// `CREATE TABLE IF NOT EXISTS`, under a transaction-scoped advisory lock:
/// two processes creating the same table at once would otherwise race on
/// the catalog and one would fail with a unique violation.
async fn create_if_missing(
    client: &Client,
    table: &TableName,
    columns: &str,
) -> Result<(), EtlError> {
    let sql = format!(
        "BEGIN;
         SELECT pg_advisory_xact_lock(hashtext('etl_postgres.create.' || '{name}'));
         CREATE TABLE IF NOT EXISTS {quoted} ({columns});
         COMMIT;",
        name = table.as_str(),
        quoted = table.quoted()
    );
    if let Err(e) = client.batch_execute(&sql).await {
        // Leave the connection usable for the caller's next statement.
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(errors::from_pg_plain(&e));
    }
    Ok(())
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
