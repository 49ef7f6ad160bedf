//! Exactly-once loads of etl-core rows into PostgreSQL, for many workers at
//! once.
//!
//! [`PostgresSink`] keeps each row (any [`Record`]: launches, or rows of your
//! own) under its [`etl_core::content_key`] as the
//! table's primary key and loads a batch with one `INSERT ... ON CONFLICT
//! (content_key) DO NOTHING`: the database itself makes "each row once" true
//! across processes and machines, in the same statement that writes the
//! data (a key is done exactly when its row is durable), with no seen-set to
//! lose. The keys are the ones a `JsonlSink` file would hash to, so the two
//! outputs agree.
//!
//! ```no_run
//! use etl_core::{IdempotentSink, Launch, Row, Sink};
//! use etl_postgres::PostgresSink;
//!
//! # async fn run() -> Result<(), etl_core::EtlError> {
//! let store = PostgresSink::connect("postgres://etl@127.0.0.1/test", "launches").await?;
//! // Optional warm start: skip known rows before they reach the database.
//! let keys = store.content_keys().await?;
//! let sink = IdempotentSink::with_seen(store, keys);
//! let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
//! sink.load(&[row]).await?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod errors;
mod table;

use async_trait::async_trait;
use etl_core::content::{canonical_batch, Canonical};
use etl_core::{EtlError, Record, Reject, RejectSink, Sink};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;
use tokio_postgres::Client;
#[cfg(not(feature = "tls"))]
use tokio_postgres::NoTls;

pub use table::TableName;

/// A [`Sink`] into one PostgreSQL table: `content_key text PRIMARY KEY,
/// row jsonb, launch_id text, loaded_at timestamptz`, created if missing.
/// Rows may be of any [`Record`] type ([`etl_core::Row`] for launches): the key is
/// [`etl_core::content_key`], `row` the record's JSON and `launch_id` its
/// [`Record::record_id`] (a launch's id; `NULL` for a type without one).
///
/// `load` writes a batch in one statement (the rows travel as three arrays
/// through `UNNEST`, not one statement a row) and returns how many rows were
/// new; rows whose key the table already holds, including rows a concurrent
/// writer just inserted, are skipped. A lost connection is a transient
/// error, and the next `load` reconnects, so `with_retry` or `#[retry]` can
/// retry the batch; a constraint or type error is permanent.
///
/// It is a [`RejectSink`] too: rejects go to the table `<table>_rejects`
/// (`reject_key text PRIMARY KEY, raw text, error text, source text,
/// rejected_at timestamptz`), created on the first reject, each entry once.
pub struct PostgresSink {
    url: String,
    table: TableName,
    client: Mutex<Option<Client>>,
    rejects_table_ready: AtomicBool,
}

impl std::fmt::Debug for PostgresSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: not shown.
        f.debug_struct("PostgresSink")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl PostgresSink {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`) and
    /// creates `table` if it does not exist. `table` must be a plain SQL
    /// identifier (letters, digits, `_`; at most 63 bytes).
    pub async fn connect(url: &str, table: &str) -> Result<Self, EtlError> {
        let table = TableName::new(table)?;
        let client = open(url).await?;
        table::create(&client, &table).await?;
        Ok(PostgresSink {
            url: url.to_string(),
            table,
            client: Mutex::new(Some(client)),
            rejects_table_ready: AtomicBool::new(false),
        })
    }

    /// The table this sink loads into.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The content keys of every row in the table, for
    /// [`etl_core::IdempotentSink::with_seen`].
    pub async fn content_keys(&self) -> Result<Vec<String>, EtlError> {
        let sql = format!("SELECT content_key FROM {}", self.table.quoted());
        self.query(&sql).await?.iter().map(get).collect()
    }

    /// How many rejects `<table>_rejects` holds (0 before the first).
    pub async fn rejects_count(&self) -> Result<u64, EtlError> {
        let rejects = self.table.rejects()?;
        // The table is created on the first reject: ask whether it exists
        // before counting, since a count of a missing table fails to plan.
        let exists = format!("SELECT to_regclass('{}') IS NOT NULL", rejects.quoted());
        if !one::<bool>(self.query(&exists).await?)? {
            return Ok(0);
        }
        let count = format!("SELECT count(*) FROM {}", rejects.quoted());
        let n: i64 = one(self.query(&count).await?)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The newest `last_updated` among the launch rows of the table (`None`
    /// when it holds none): the cursor of an incremental load. Compared as
    /// text, which is time order for the API's `YYYY-MM-DDTHH:MM:SSZ`.
    pub async fn newest_last_updated(&self) -> Result<Option<String>, EtlError> {
        let sql = format!(
            "SELECT max(row -> 'Launches' ->> 'last_updated') FROM {}",
            self.table.quoted()
        );
        one(self.query(&sql).await?)
    }

    /// How many rows the table holds.
    pub async fn count(&self) -> Result<u64, EtlError> {
        let sql = format!("SELECT count(*) FROM {}", self.table.quoted());
        let n: i64 = one(self.query(&sql).await?)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The server-side process id of the current connection (for tests and
    /// for `pg_stat_activity`); connects first if needed.
    pub async fn backend_pid(&self) -> Result<i32, EtlError> {
        one(self.query("SELECT pg_backend_pid()").await?)
    }

    /// Runs a statement without parameters on the (re)connected client.
    async fn query(&self, sql: &str) -> Result<Vec<tokio_postgres::Row>, EtlError> {
        let mut slot = self.client.lock().await;
        let client = connected(&mut slot, &self.url).await?;
        client
            .query(sql, &[])
            .await
            .map_err(|e| errors::from_pg(e, &mut slot))
    }
}

/// The first column of a result row.
fn get<T: for<'a> tokio_postgres::types::FromSql<'a>>(
    row: &tokio_postgres::Row,
) -> Result<T, EtlError> {
    row.try_get(0).map_err(|e| errors::from_pg_plain(&e))
}

/// The first column of the only result row.
fn one<T: for<'a> tokio_postgres::types::FromSql<'a>>(
    rows: Vec<tokio_postgres::Row>,
) -> Result<T, EtlError> {
    match rows.first() {
        Some(row) => get(row),
        None => Err(EtlError::Database {
            sqlstate: None,
            message: "the query returned no row".into(),
        }),
    }
}

#[async_trait]
impl<T: Record> Sink<T> for PostgresSink {
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        // Every key and canonical form before the database sees any, on
        // every core for a large batch. Each row is serialised once: its key
        // is the hash of that same text (exactly what `content_key` computes).
        let encoded = canonical_batch(rows)?;
        let mut keys = Vec::with_capacity(rows.len());
        let mut docs = Vec::with_capacity(rows.len());
        let mut ids = Vec::with_capacity(rows.len());
        for (row, Canonical { key, json }) in rows.iter().zip(encoded) {
            keys.push(key);
            docs.push(json);
            ids.push(row.record_id());
        }
        let sql = format!(
            "INSERT INTO {} (content_key, row, launch_id) \
             SELECT k, r::jsonb, i FROM UNNEST($1::text[], $2::text[], $3::text[]) AS u(k, r, i) \
             ON CONFLICT (content_key) DO NOTHING",
            self.table.quoted()
        );
        let mut slot = self.client.lock().await;
        let client = connected(&mut slot, &self.url).await?;
        // One statement: atomic on its own, so a process killed mid-batch
        // leaves nothing of it behind.
        let inserted = client
            .execute(&sql, &[&keys, &docs, &ids])
            .await
            .map_err(|e| errors::from_pg(e, &mut slot))?;
        Ok(usize::try_from(inserted).unwrap_or(usize::MAX))
    }
}

#[async_trait]
impl RejectSink for PostgresSink {
    async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError> {
        if rejects.is_empty() {
            return Ok(0);
        }
        let table = self.table.rejects()?;
        let mut keys = Vec::with_capacity(rejects.len());
        let mut raws = Vec::with_capacity(rejects.len());
        let mut errs = Vec::with_capacity(rejects.len());
        let mut sources = Vec::with_capacity(rejects.len());
        for r in rejects {
            keys.push(r.key());
            raws.push(r.raw.get());
            errs.push(r.error.as_str());
            sources.push(r.source.as_str());
        }
        let mut slot = self.client.lock().await;
        let client = connected(&mut slot, &self.url).await?;
        if !self.rejects_table_ready.load(Ordering::Acquire) {
            table::create_rejects(client, &table).await?;
            self.rejects_table_ready.store(true, Ordering::Release);
        }
        // DISTINCT ON: a batch holding one entry twice inserts it once
        // (ON CONFLICT cannot see a row the same statement inserts).
        let sql = format!(
            "INSERT INTO {} (reject_key, raw, error, source) \
             SELECT DISTINCT ON (k) k, r, e, s \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[]) AS u(k, r, e, s) \
             ON CONFLICT (reject_key) DO NOTHING",
            table.quoted()
        );
        let inserted = client
            .execute(&sql, &[&keys, &raws, &errs, &sources])
            .await
            .map_err(|e| errors::from_pg(e, &mut slot))?;
        Ok(usize::try_from(inserted).unwrap_or(usize::MAX))
    }
}

/// Opens a connection and drives it on a task of its own.
async fn open(url: &str) -> Result<Client, EtlError> {
    // Parsed apart from connecting: a malformed URL is permanent, while a
    // connection that fails is worth another attempt.
    let config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| EtlError::InvalidInput(format!("PostgreSQL URL: {e}")))?;
    #[cfg(feature = "tls")]
    let connector = tls()?;
    #[cfg(not(feature = "tls"))]
    let connector = NoTls;
    let (client, connection) = config
        .connect(connector)
        .await
        .map_err(|e| errors::connect(&e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended");
        }
    });
    Ok(client)
}

/// The TLS connector: rustls on ring, certificates checked against the
/// platform's store. Whether TLS is used is the URL's `sslmode` (`prefer`
/// by default, `require`, `disable`).
#[cfg(feature = "tls")]
fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, EtlError> {
    use rustls_platform_verifier::ConfigVerifierExt;
    // Unless the host application installed a provider already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = rustls::ClientConfig::with_platform_verifier()
        .map_err(|e| EtlError::InvalidInput(format!("TLS configuration: {e}")))?;
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The live client in `slot`, reconnecting first if the last one was lost.
async fn connected<'a>(slot: &'a mut Option<Client>, url: &str) -> Result<&'a Client, EtlError> {
    if slot.as_ref().is_none_or(Client::is_closed) {
        *slot = Some(open(url).await?);
    }
    slot.as_ref().ok_or_else(|| EtlError::Database {
        sqlstate: None,
        message: "no connection".into(),
    })
}
