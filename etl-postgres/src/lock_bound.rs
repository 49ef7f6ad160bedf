//! Statements of ours that need a strong lock on a table others read (an
//! `ALTER TABLE` that adds a column, a `CREATE OR REPLACE VIEW`): how long
//! they wait for it, and what they do when it cannot be had. The same
//! bound holds every lock wait of a replace's switch.
//!
//! PostgreSQL queues a lock request ahead of every later one it conflicts
//! with. An `ACCESS EXCLUSIVE` request waiting behind one reader's open
//! transaction (an analyst's notebook left `idle in transaction`) holds
//! every reader that comes after it, for as long as it waits. So such a
//! statement waits only [`LOCK_BOUND`] (`lock_timeout`), then gives way:
//! its transaction is rolled back, the readers queued behind it go on, and
//! it tries again with backoff (pgroll's and pg-osc's way of changing a
//! schema that is in use). A lock that cannot be had within the time
//! given fails with an error naming the sessions that hold the table.
//!
//! The transaction that takes such a lock holds it only for its own short
//! work (the DDL and the schema row): rows are written in a transaction of
//! their own, which takes no lock a reader waits on. A replace's switch,
//! which takes none either, still has its lock waits bounded the same way:
//! a user's `CREATE INDEX` or `LOCK TABLE` on the family costs it a try,
//! not an hour.

use std::future::Future;
use std::time::Duration;

use etl_core::retry::{Jitter, Retry};
use etl_core::{EtlError, RetryPolicy};
use tokio_postgres::Client;

use crate::errors;
use crate::table::quote;

/// How long a statement of ours waits for a strong lock before it gives
/// way: the longest a reader that comes meanwhile is held behind it.
pub(crate) const LOCK_BOUND: Duration = Duration::from_secs(1);

/// The SQLSTATE of a lock not had within `lock_timeout`.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// The waits between tries: from 100 ms, doubling to 2 s, jittered so that
/// two writers waiting on one table do not try in step.
const BETWEEN_TRIES: RetryPolicy = RetryPolicy {
    max_attempts: u32::MAX,
    base_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(2),
};

/// The statement that bounds every lock wait of the transaction it runs
/// in.
fn bound_sql() -> String {
    format!("SET LOCAL lock_timeout = {}", LOCK_BOUND.as_millis())
}

/// Whether `error` is a lock not had within the bound.
pub(crate) fn not_had(error: &EtlError) -> bool {
    matches!(error, EtlError::Database { sqlstate: Some(code), .. } if code == LOCK_NOT_AVAILABLE)
}

/// Runs `work` (`what` it is, for the error) in a transaction whose every
/// lock wait is bounded by [`LOCK_BOUND`], committed when it succeeds and
/// rolled back when it fails; again, with backoff, while it fails on a
/// lock not had, until `within` has passed since its first failure. Each
/// such failure names the sessions holding `tables` (names in the
/// connection's search path); the last one is returned, a transient error,
/// so that the caller's own retries try again.
pub(crate) async fn bounded<T, F, Fut>(
    client: &Client,
    (what, tables): (&str, &[&str]),
    within: Duration,
    mut work: F,
) -> Result<T, EtlError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, EtlError>>,
{
    Retry::new(BETWEEN_TRIES)
        .jitter(Jitter::Equal)
        .deadline(within)
        .name("postgres_lock")
        .when(not_had)
        .run(|| {
            let work = work();
            async move {
                match in_transaction(client, work).await {
                    Err(e) if not_had(&e) => Err(named(client, (what, tables), e).await),
                    done => done,
                }
            }
        })
        .await
}

/// `work` in a transaction with its lock waits bounded: committed, or
/// rolled back on any error (the connection is used again between tries).
async fn in_transaction<T>(
    client: &Client,
    work: impl Future<Output = Result<T, EtlError>>,
) -> Result<T, EtlError> {
    let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
    let done = async {
        // Inside the rollback's reach: a BEGIN that ran and a bound that
        // failed leave an open, aborted transaction on the connection.
        client
            .batch_execute(&format!("BEGIN; {}", bound_sql()))
            .await
            .map_err(fail)?;
        let value = work.await?;
        client.batch_execute("COMMIT").await.map_err(fail)?;
        Ok(value)
    }
    .await;
    if done.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    done
}

/// A session holding a lock on one of our tables, as `pg_stat_activity`
/// shows it.
#[derive(Debug, PartialEq, Eq)]
struct Holder {
    pid: i32,
    application_name: String,
    /// `active`, `idle in transaction`, ...
    state: String,
    /// When it entered that state.
    since: String,
    /// When its transaction began, if it is in one.
    transaction_since: Option<String>,
    table: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "session pid {} (application_name {:?}), {} since {}",
            self.pid, self.application_name, self.state, self.since
        )?;
        if let Some(began) = &self.transaction_since {
            write!(f, " in a transaction open since {began}")?;
        }
        write!(f, ", on {}", self.table)
    }
}

/// The sessions other than ours holding a granted lock on any of `tables`:
/// every one of them stands in the way of an `ACCESS EXCLUSIVE` lock.
const HOLDERS: &str = "\
SELECT DISTINCT a.pid, coalesce(a.application_name, ''), coalesce(a.state, 'unknown'),
       coalesce(a.state_change, a.backend_start)::text, a.xact_start::text, l.relation::regclass::text
FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.locktype = 'relation' AND a.pid <> pg_backend_pid()
  AND l.relation IN (SELECT to_regclass(t) FROM unnest($1::text[]) AS t)
ORDER BY 1";

/// The lock error `error` of `what`, naming who holds `tables` (as far as
/// the catalog says: the holder may have ended since).
async fn named(client: &Client, (what, tables): (&str, &[&str]), error: EtlError) -> EtlError {
    let quoted: Vec<String> = tables.iter().map(|t| quote(t)).collect();
    let holders = match client.query(HOLDERS, &[&quoted]).await {
        Ok(rows) => rows
            .iter()
            .filter_map(|row| {
                Some(Holder {
                    pid: row.try_get(0).ok()?,
                    application_name: row.try_get(1).ok()?,
                    state: row.try_get(2).ok()?,
                    since: row.try_get(3).ok()?,
                    transaction_since: row.try_get(4).ok()?,
                    table: row.try_get(5).ok()?,
                })
            })
            .map(|h| h.to_string())
            .collect::<Vec<_>>(),
        Err(e) => vec![format!(
            "a session the catalog could not name ({})",
            errors::from_pg_plain(&e)
        )],
    };
    let by = if holders.is_empty() {
        "a session that has ended since".to_owned()
    } else {
        holders.join("; ")
    };
    let server = match &error {
        EtlError::Database { message, .. } => message.clone(),
        other => other.to_string(),
    };
    EtlError::Database {
        sqlstate: Some(LOCK_NOT_AVAILABLE.to_owned()),
        message: format!(
            "table {}: the lock {what} needs was not had within {} ({server}); held by {by}. Nothing was changed",
            tables.first().copied().unwrap_or("?"),
            humantime::format_duration(LOCK_BOUND)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_named_by_pid_application_state_and_since_when() {
        let holder = Holder {
            pid: 4242,
            application_name: "metabase".into(),
            state: "idle in transaction".into(),
            since: "2026-12-07 18:40:01+00".into(),
            transaction_since: Some("2026-12-07 18:39:58+00".into()),
            table: "issues".into(),
        };
        assert_eq!(
            holder.to_string(),
            "session pid 4242 (application_name \"metabase\"), idle in transaction since \
             2026-12-07 18:40:01+00 in a transaction open since 2026-12-07 18:39:58+00, on issues"
        );
    }

    #[test]
    fn only_a_lock_timeout_is_a_lock_not_had() {
        let db = |code: &str| EtlError::Database {
            sqlstate: Some(code.into()),
            message: "x".into(),
        };
        assert!(not_had(&db("55P03")));
        assert!(!not_had(&db("40001")));
        assert!(!not_had(&EtlError::Network("reset".into())));
        assert_eq!(bound_sql(), "SET LOCAL lock_timeout = 1000");
    }
}
