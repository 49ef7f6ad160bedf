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

    /// The name quoted for SQL.
    pub fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

/// `CREATE TABLE IF NOT EXISTS`, under a transaction-scoped advisory lock:
/// two processes creating the same table at once would otherwise race on
/// the catalog and one would fail with a unique violation.
pub async fn create(client: &Client, table: &TableName) -> Result<(), EtlError> {
    let sql = format!(
        "BEGIN;
         SELECT pg_advisory_xact_lock(hashtext('etl_postgres.create.' || '{name}'));
         CREATE TABLE IF NOT EXISTS {quoted} (
             content_key text PRIMARY KEY,
             row jsonb NOT NULL,
             launch_id text,
             loaded_at timestamptz NOT NULL DEFAULT now()
         );
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
    }
}
