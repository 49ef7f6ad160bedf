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
//! A run costs what it loads, not what the table holds: opening a table is
//! one look at the catalog, the incremental cursor
//! ([`PostgresSink::newest_last_updated`]) one look into an index, and
//! nothing reads the table's keys or rows. Each change of a launch is a row
//! of its own, so the table is a history; the view `<table>_current` shows
//! each launch as it is now.
//!
//! ```no_run
//! use etl_core::{IdempotentSink, Launch, Row, Sink};
//! use etl_postgres::PostgresSink;
//!
//! # async fn run() -> Result<(), etl_core::EtlError> {
//! let store = PostgresSink::connect("postgres://etl@127.0.0.1/test", "launches").await?;
//! // The table skips what it holds; the sink in front only spares the
//! // database the rows met again in this process, with flat memory.
//! let sink = IdempotentSink::bounded(store, 100_000);
//! let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
//! sink.load(&[row]).await?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod errors;
mod indexes;
mod lock_bound;
mod merge;
mod replace;
mod session;
mod table;
mod typed;

use async_trait::async_trait;
use etl_core::content::typed::update_micros;
use etl_core::content::{CanonicalSink, KeyedJson};
use etl_core::{EtlError, Prepared, Record, Reject, RejectSink, Written};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::timeout;

use session::Session;
pub use session::DEFAULT_DEADLINE;
pub use table::TableName;
pub use typed::SCHEMA_TABLE;

/// A [`etl_core::Sink`] into one PostgreSQL table, created if missing:
///
/// | column | holds |
/// |---|---|
/// | `content_key text PRIMARY KEY` | [`etl_core::content_key`] of the row |
/// | `row jsonb NOT NULL` | the record's JSON |
/// | `launch_id text` or `record_id text` | [`Record::record_id`] (`NULL` for a type without one), in the column [`Record::ID_COLUMN`] names: `launch_id` for launches |
/// | `loaded_at timestamptz` | when the row was inserted |
/// | `updated_at timestamptz` | [`Record::updated_at`]: a launch's `last_updated`, indexed |
///
/// Rows may be of any [`Record`] type ([`etl_core::Row`] for launches).
/// Beside the table, the view `<table>_current` holds one row per id: the
/// newest by `updated_at`, then by `loaded_at`.
///
/// ```sql
/// SELECT launch_id, row -> 'Launches' ->> 'name' AS name, updated_at
/// FROM launches_current
/// WHERE row -> 'Launches' -> 'status' ->> 'abbrev' = 'Go';
/// ```
///
/// [`PostgresSink::connect`] upgrades a table made by an earlier release in
/// place (the `updated_at` column added and filled from the stored rows, its
/// index and the view created: once, in one transaction, however many
/// processes open it at once); no key changes. `updated_at` is a
/// `timestamptz` rather than the API's text so that analysts can compare it
/// with times (RFC 3339 at any offset, as UTC); a value that does not read
/// as one is kept as `NULL` with a warning. To drop the table, drop the view with it
/// (`DROP TABLE launches CASCADE`).
///
/// `load` writes a batch in one statement (the rows travel as four arrays
/// through `UNNEST`, not one statement a row) and returns how many rows were
/// new; rows whose key the table already holds, including rows a concurrent
/// writer just inserted, are skipped, the held ones before their JSON is
/// parsed. A lost connection is a transient
/// error, and the next `load` reconnects, so `with_retry` or `#[retry]` can
/// retry the batch; a constraint or type error is permanent.
///
/// Nothing waits for ever on a connection that went silent (a hung
/// pooler, a NAT that lost the flow): connecting, each statement and each
/// write from BEGIN to COMMIT has a deadline ([`DEFAULT_DEADLINE`], or
/// [`PostgresSink::with_deadline`]). Past it the connection is given up on
/// and the operation fails as a lost connection (transient), and the next
/// one connects anew and ends the server session the silent one left,
/// whose locks would hold it up. The server ends such a session itself a
/// few seconds past the deadline if this process is gone
/// (`idle_in_transaction_session_timeout` and `statement_timeout` on the
/// sink's sessions).
///
/// It is a [`RejectSink`] too: rejects go to the table `<table>_rejects`
/// (`reject_key text PRIMARY KEY, raw text, error text, source text,
/// rejected_at timestamptz`), created on the first reject, each entry once.
pub struct PostgresSink {
    table: TableName,
    /// The table's id column (`launch_id` or `record_id`).
    id_column: TableName,
    /// Shared with a typed write running on a task of its own.
    conn: Arc<Session>,
    rejects_table_ready: AtomicBool,
    /// The typed shape's tables; `None` in the JSON shape.
    typed: Option<Arc<typed::Typed>>,
    /// A replace under way: the rows go to its staging copy of the
    /// family until [`PostgresSink::finish`].
    replacing: Option<replace::Replacing>,
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
    /// creates `table` if it does not exist, for launch rows: a new table's
    /// id column is `launch_id` ([`PostgresSink::connect_as`] with
    /// [`etl_core::Row`]). `table` must be a plain SQL identifier (letters,
    /// digits, `_`; at most 63 bytes).
    pub async fn connect(url: &str, table: &str) -> Result<Self, EtlError> {
        Self::connect_as::<etl_core::Row>(url, table).await
    }

    /// [`PostgresSink::connect`] for records of type `T`: a new table's id
    /// column is named [`Record::ID_COLUMN`] (`record_id` unless `T` says
    /// otherwise). A table that exists keeps its own id column, whatever
    /// `T`, so the tables of earlier releases load as before.
    pub async fn connect_as<T: Record>(url: &str, table: &str) -> Result<Self, EtlError> {
        let table = TableName::new(table)?;
        let conn = Session::open(url, DEFAULT_DEADLINE).await?;
        let id_column = {
            let mut guard = conn.lock().await;
            let client = session::within(DEFAULT_DEADLINE, guard.client()).await?;
            table::prepare(client, &table, T::ID_COLUMN, DEFAULT_DEADLINE).await?
        };
        Ok(PostgresSink {
            id_column: TableName::new(&id_column)?,
            table,
            conn: Arc::new(conn),
            rejects_table_ready: AtomicBool::new(false),
            typed: None,
            replacing: None,
        })
    }

    /// The sink with `deadline` for each operation from now on: a
    /// statement, a write from BEGIN to COMMIT, a reconnect
    /// ([`DEFAULT_DEADLINE`] until then). Past it the connection is given up
    /// on and the operation fails as a lost connection, which a retry
    /// answers with a new connection. Give it room for the largest batch
    /// and for a concurrent writer's transaction it may wait on.
    ///
    /// ```no_run
    /// use etl_postgres::PostgresSink;
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), etl_core::EtlError> {
    /// let sink = PostgresSink::connect("postgres://etl@127.0.0.1/test", "launches")
    ///     .await?
    ///     .with_deadline(Duration::from_secs(10));
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_deadline(self, deadline: Duration) -> Self {
        self.conn.set_deadline(deadline);
        if let Some(replacing) = &self.replacing {
            replacing.set_deadline(deadline);
        }
        self
    }

    /// Connects to `url` and opens `table` in the typed shape, created if
    /// missing: each record's members as typed columns, its lists as child
    /// tables `<table>__<member>`, the schema kept in [`SCHEMA_TABLE`] and
    /// grown, as `options` say, before the rows that need it, in a short
    /// transaction that waits for the table's lock at most a second a try
    /// (no reader is held behind it longer) and fails, transient, naming
    /// the session that holds the table when it cannot have it
    /// ([`etl_core::content::typed`] says how records become rows).
    ///
    /// | column | holds |
    /// |---|---|
    /// | `_etl_key text PRIMARY KEY` | [`etl_core::content_key`] of the record |
    /// | `_etl_id text` | [`Record::record_id`] |
    /// | `_etl_updated_at timestamptz` | [`Record::updated_at`] |
    /// | `_etl_loaded_at timestamptz` | when the row was inserted |
    /// | `_etl_row text` | the record's canonical JSON (`_etl_row::jsonb` reads it) |
    /// | `_etl_meta jsonb` | null, or the values that did not fit their column |
    /// | the members | one nullable column each, typed by the first value |
    ///
    /// A child table has `_etl_key` (of the element), `_etl_parent_key`,
    /// `_etl_root_key` and `_etl_list_idx` before its members. Every table
    /// has a view `<table>_current`: the resource's newest row per id, and
    /// the child rows of those rows. The resource's table also has
    /// `<table>_versions`: every version, with the time it held from
    /// (`_etl_valid_from`) and until (`_etl_valid_to`, NULL for the
    /// newest).
    ///
    /// A table of the JSON shape ([`PostgresSink::connect_as`]) that exists
    /// already keeps that shape and loads as before. A record a frozen
    /// schema refuses goes to `<table>_rejects`, naming the member; the
    /// rest of its batch loads.
    ///
    /// ```no_run
    /// use etl_core::content::typed::{ColumnType, SchemaOptions};
    /// use etl_core::Sink;
    /// use etl_postgres::PostgresSink;
    ///
    /// #[derive(serde::Serialize)]
    /// struct Issue { id: u64, title: String, labels: Vec<Label> }
    /// #[derive(serde::Serialize)]
    /// struct Label { name: String }
    /// impl etl_core::Record for Issue {
    ///     fn record_id(&self) -> Option<String> { Some(self.id.to_string()) }
    /// }
    ///
    /// # async fn run() -> Result<(), etl_core::EtlError> {
    /// let options = SchemaOptions::postgres().hint("score", ColumnType::Double);
    /// let issues = PostgresSink::connect_typed::<Issue>("postgres://etl@127.0.0.1/test", "issues", options).await?;
    /// let issue = Issue { id: 1, title: "It breaks".into(), labels: vec![Label { name: "bug".into() }] };
    /// issues.load(&[issue]).await?;
    /// // SELECT i.title, l.name FROM issues_current i
    /// //   JOIN issues__labels l ON l._etl_parent_key = i._etl_key;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_typed<T: Record>(
        url: &str,
        table: &str,
        options: etl_core::content::typed::SchemaOptions,
    ) -> Result<Self, EtlError> {
        Self::connect_typed_in::<T>(url, table, options, None).await
    }

    /// [`PostgresSink::connect_typed`], its names resolving in the schema
    /// `search_path` where one is given.
    async fn connect_typed_in<T: Record>(
        url: &str,
        table: &str,
        options: etl_core::content::typed::SchemaOptions,
        search_path: Option<&str>,
    ) -> Result<Self, EtlError> {
        let name = TableName::new(table)?;
        let (conn, typed) = session::within(DEFAULT_DEADLINE, async {
            let conn = Session::open_in(url, DEFAULT_DEADLINE, search_path).await?;
            let typed = {
                let mut guard = conn.lock().await;
                typed::Typed::open(guard.client().await?, &name, options).await?
            };
            Ok((conn, typed))
        })
        .await?;
        match typed {
            Some(typed) => Ok(PostgresSink {
                id_column: TableName::new(etl_core::content::typed::loader::ID)?,
                table: name,
                conn: Arc::new(conn),
                rejects_table_ready: AtomicBool::new(false),
                typed: Some(Arc::new(typed)),
                replacing: None,
            }),
            None => {
                drop(conn);
                Self::connect_as::<T>(url, table).await
            }
        }
    }

    /// Opens a replace of the typed table family `table` (`write =
    /// "replace"`; made if missing): the rows loaded through the sink go
    /// to a copy of the family in a schema of its own, and
    /// [`PostgresSink::finish`] makes them the family's rows, in one
    /// transaction, once the run has loaded every one. Until then readers
    /// of the tables see the old rows and are not held up; a run that
    /// fails or is killed before leaves them as they were
    /// ([`PostgresSink::abandon`] drops what a failed run staged, the next
    /// replace what a killed one did). The tables are emptied and filled
    /// in place, so views, grants and indexes users put on them stay.
    ///
    /// `InvalidInput` when `table` exists in the JSON shape.
    pub async fn connect_replacing<T: Record>(
        url: &str,
        table: &str,
        options: etl_core::content::typed::SchemaOptions,
    ) -> Result<Self, EtlError> {
        let name = TableName::new(table)?;
        let replacing = replace::Replacing::begin(url, &name, options.clone()).await?;
        let staging = replacing.staging().to_owned();
        let mut sink = Self::connect_typed_in::<T>(url, table, options, Some(&staging)).await?;
        sink.replacing = Some(replacing);
        Ok(sink)
    }

    /// Ends a complete run: a replace ([`PostgresSink::connect_replacing`])
    /// makes its rows the family's, in one transaction. Nothing for any
    /// other sink. Call it once, after the last load.
    pub async fn finish(&self) -> Result<(), EtlError> {
        match &self.replacing {
            Some(replacing) => replacing.switch().await,
            None => Ok(()),
        }
    }

    /// Ends a run that failed before its last load: a replace
    /// ([`PostgresSink::connect_replacing`]) drops the copy its rows went
    /// to, the family as it was, and a later `finish` is refused. Nothing
    /// for any other sink. Best effort: a copy left behind is dropped by
    /// the next replace of the table once this sink's connection is gone.
    pub async fn abandon(&self) {
        if let Some(replacing) = &self.replacing {
            replacing.abandon().await;
        }
    }

    /// The schema of the typed table family `table` in the database at
    /// `url` (as [`PostgresSink::connect_typed`] stores it in
    /// [`SCHEMA_TABLE`]), read and nothing made: `None` when the
    /// database holds none for it (no such table, or one of the JSON
    /// shape). What `etl schema` prints.
    pub async fn stored_schema(
        url: &str,
        table: &str,
        options: etl_core::content::typed::SchemaOptions,
    ) -> Result<Option<etl_core::content::typed::Schema>, EtlError> {
        let name = TableName::new(table)?;
        session::within(DEFAULT_DEADLINE, async {
            let conn = Session::open(url, DEFAULT_DEADLINE).await?;
            let mut guard = conn.lock().await;
            typed::stored_schema(guard.client().await?, &name, options).await
        })
        .await
    }

    /// Whether the table has the typed shape
    /// ([`PostgresSink::connect_typed`]).
    pub fn is_typed(&self) -> bool {
        self.typed.is_some()
    }

    /// The content key column of the table's shape.
    fn key_column(&self) -> &'static str {
        match self.typed {
            Some(_) => "\"_etl_key\"",
            None => "content_key",
        }
    }

    /// The update time column of the table's shape.
    fn updated_column(&self) -> &'static str {
        match self.typed {
            Some(_) => "\"_etl_updated_at\"",
            None => "updated_at",
        }
    }

    /// The record as jsonb, in the table's shape.
    fn row_json(&self) -> &'static str {
        match self.typed {
            Some(_) => "(\"_etl_row\"::jsonb)",
            None => "row",
        }
    }

    /// The table this sink loads into.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// The table's id column: where [`Record::record_id`] goes.
    pub fn id_column(&self) -> &str {
        self.id_column.as_str()
    }

    /// The content keys of every row in the table, for
    /// [`etl_core::IdempotentSink::with_seen`].
    ///
    /// This reads the whole table: its time and memory grow with what the
    /// table holds (about 270 MB and a second at a million rows). The table
    /// needs no such warm start, since its primary key already skips every
    /// row it holds: wrap it in [`IdempotentSink::bounded`](etl_core::IdempotentSink::bounded)
    /// instead, as `launches` does. Kept for small tables and for tests.
    pub async fn content_keys(&self) -> Result<Vec<String>, EtlError> {
        let sql = format!("SELECT {} FROM {}", self.key_column(), self.table.quoted());
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

    /// The newest `updated_at` of the table (a launch's `last_updated`;
    /// `None` when no row has one), in the API's form
    /// (`2026-11-12T12:00:00Z`): the cursor of an incremental load. One
    /// look into the column's index, whatever the table holds. For a merge
    /// table, the newest deletion remembered counts too.
    pub async fn newest_last_updated(&self) -> Result<Option<String>, EtlError> {
        let mut sql = format!(
            "SELECT max({}) FROM {}",
            self.updated_column(),
            self.table.quoted()
        );
        // A merge table's deletions count too: the newest version read may
        // be one that took its row out. (A table name is an identifier of
        // letters, digits and `_`: safe as a literal.)
        if self.typed.as_ref().is_some_and(|t| t.merges()) {
            sql = format!(
                "SELECT max(t) FROM ({sql} UNION ALL SELECT max(updated_at) FROM {} \
                 WHERE table_name = '{}') AS newest(t)",
                table::quote(merge::DELETED_TABLE),
                self.table.as_str()
            );
        }
        let newest: Option<SystemTime> = one(self.query(&sql).await?)?;
        Ok(newest.map(|t| humantime::format_rfc3339(t).to_string()))
    }

    /// The stored record (its JSON text) of the newest `updated_at`
    /// ([`PostgresSink::newest_last_updated`]), `None` when no row has one:
    /// what a source reads the form of its records' update time from. One
    /// look into the column's index.
    pub async fn newest_record(&self) -> Result<Option<String>, EtlError> {
        // The typed shape keeps the record's text as is; the JSON shape's
        // jsonb is written out as text.
        let row = match self.typed {
            Some(_) => "\"_etl_row\"",
            None => "row::text",
        };
        let sql = format!(
            "SELECT {row} FROM {t} WHERE {at} IS NOT NULL ORDER BY {at} DESC LIMIT 1",
            t = self.table.quoted(),
            at = self.updated_column(),
        );
        self.query(&sql).await?.first().map(get).transpose()
    }

    /// For each value of the rows' top-level member `member` (a child
    /// resource's `_parent`), the newest `updated_at` of the rows holding
    /// it: the value as compact JSON text with its keys sorted, the time in
    /// RFC 3339. Rows without the member, or without an update time, are
    /// left out. One grouped read of the table's rows that hold it.
    pub async fn newest_by_member(&self, member: &str) -> Result<Vec<(String, String)>, EtlError> {
        let key = format!("'{}'", member.replace('\'', "''"));
        let sql = format!(
            "SELECT ({row} -> {key})::text, max({at}) FROM {} \
             WHERE {row} ? {key} AND {at} IS NOT NULL GROUP BY {row} -> {key}",
            self.table.quoted(),
            row = self.row_json(),
            at = self.updated_column(),
        );
        let mut newest = Vec::new();
        for row in self.query(&sql).await? {
            let value: String = row.try_get(0).map_err(|e| errors::from_pg_plain(&e))?;
            let at: SystemTime = row.try_get(1).map_err(|e| errors::from_pg_plain(&e))?;
            // jsonb writes `{"a": 1}`; the key is the compact, sorted form.
            let value: serde_json::Value = serde_json::from_str(&value)
                .map_err(|e| EtlError::Parse(format!("{member} of a stored row: {e}")))?;
            newest.push((value.to_string(), humantime::format_rfc3339(at).to_string()));
        }
        Ok(newest)
    }

    /// How many rows the table holds. A `count(*)`: it reads the whole
    /// table (`launches` does not call it), so keep it for small tables and
    /// tests.
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

    /// Runs a statement without parameters on the (re)connected client,
    /// under the deadline.
    async fn query(&self, sql: &str) -> Result<Vec<tokio_postgres::Row>, EtlError> {
        let mut guard = self.conn.lock().await;
        let done = timeout(guard.deadline(), async {
            let client = guard.client().await?;
            let rows = client.query(sql, &[]).await;
            rows.map_err(|e| guard.error(e))
        })
        .await;
        guard.settle(done)
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

/// A [`etl_core::Sink`] for any [`Record`]: each row's key and canonical JSON made
/// once (on every core for a large batch), before the database sees any.
#[async_trait]
impl CanonicalSink for PostgresSink {
    /// Inserts `rows`, whose keys and JSON are `encoded`, in one statement.
    async fn store<T: Record>(
        &self,
        rows: &[T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Written, EtlError> {
        if self.typed.is_some() {
            return self.prepare_store(rows, encoded).await?.write().await;
        }
        let mut keys = Vec::with_capacity(rows.len());
        let mut docs = Vec::with_capacity(rows.len());
        let mut ids = Vec::with_capacity(rows.len());
        let mut updated = Vec::with_capacity(rows.len());
        for (row, KeyedJson { key, json }) in rows.iter().zip(encoded) {
            updated.push(update_micros(row, &key).map(typed::micros_to_time));
            keys.push(key);
            docs.push(json);
            ids.push(row.record_id());
        }
        // The NOT EXISTS probe skips a row the table holds before its text
        // is parsed as jsonb, which ON CONFLICT alone would do first: 2.4x
        // the rows/s of a batch the table already holds, the same for new
        // rows, in the same one round trip (BENCHMARKS.md section 6). ON
        // CONFLICT stays for the rows a concurrent writer inserts meanwhile.
        let sql = format!(
            "INSERT INTO {t} (content_key, row, {id}, updated_at) \
             SELECT k, r::jsonb, i, u.t \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[]) AS u(k, r, i, t) \
             WHERE NOT EXISTS (SELECT 1 FROM {t} WHERE content_key = u.k) \
             ON CONFLICT (content_key) DO NOTHING",
            t = self.table.quoted(),
            id = self.id_column.quoted()
        );
        let mut guard = self.conn.lock().await;
        // One statement: atomic on its own, so a process killed mid-batch
        // (or a connection given up on) leaves nothing of it behind.
        let done = timeout(guard.deadline(), async {
            let client = guard.client().await?;
            let inserted = client.execute(&sql, &[&keys, &docs, &ids, &updated]).await;
            inserted.map_err(|e| guard.error(e))
        })
        .await;
        let inserted = guard.settle(done)?;
        Ok(usize::try_from(inserted).unwrap_or(usize::MAX).into())
    }

    /// In the typed shape, the batch's rows are made now (on the schema
    /// as this process knows it; remade as they are written if it moved),
    /// and nothing touches the connection until the write, which runs on
    /// a task of its own: the next batch is made while it runs, without
    /// holding it up. A write, once started, runs to its commit or
    /// rollback even if its future is dropped. The JSON shape makes
    /// nothing ahead.
    async fn prepare_store<'a, T: Record>(
        &'a self,
        rows: &'a [T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Prepared<'a>, EtlError> {
        let Some(typed) = &self.typed else {
            return Ok(Prepared::new(self.store(rows, encoded)));
        };
        let records = typed::Records::of(rows, encoded);
        let made = typed.make(&records).await?;
        let (typed, conn) = (Arc::clone(typed), Arc::clone(&self.conn));
        Ok(Prepared::new(async move {
            let write = tokio::spawn(async move {
                let mut guard = conn.lock().await;
                // BEGIN to COMMIT under one deadline: a connection that
                // goes silent mid-write is given up on, and the retry's
                // new connection ends the session holding its locks.
                let done = timeout(guard.deadline(), async {
                    let deadline = guard.deadline();
                    let client = guard.client().await?;
                    let done = typed.write(client, &records, made, deadline).await;
                    if let Err(e) = &done {
                        guard.lost_if(e);
                    }
                    done
                })
                .await;
                if done.is_err() {
                    typed.forget().await;
                }
                guard.settle(done)
            });
            let (written, refused) = write.await.map_err(|e| EtlError::Database {
                sqlstate: None,
                message: format!("the write's task ended before the write: {e}"),
            })??;
            // The records a frozen schema refused are kept as rejects,
            // and counted: the run exits 3 for them.
            let kept = self.reject(&refused).await?;
            if let Some(replacing) = &self.replacing {
                replacing.staged(written.new);
            }
            Ok(written.refusing(refused.len(), kept))
        }))
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
        let mut guard = self.conn.lock().await;
        // DISTINCT ON: a batch holding one entry twice inserts it once
        // (ON CONFLICT cannot see a row the same statement inserts).
        let sql = format!(
            "INSERT INTO {} (reject_key, raw, error, source) \
             SELECT DISTINCT ON (k) k, r, e, s \
             FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[]) AS u(k, r, e, s) \
             ON CONFLICT (reject_key) DO NOTHING",
            table.quoted()
        );
        let done = timeout(guard.deadline(), async {
            let client = guard.client().await?;
            if !self.rejects_table_ready.load(Ordering::Acquire) {
                table::create_rejects(client, &table).await?;
                self.rejects_table_ready.store(true, Ordering::Release);
            }
            let inserted = client.execute(&sql, &[&keys, &raws, &errs, &sources]).await;
            inserted.map_err(|e| guard.error(e))
        })
        .await;
        let inserted = guard.settle(done)?;
        #[cfg(feature = "metrics")]
        etl_core::metrics::rejects_kept(inserted);
        Ok(usize::try_from(inserted).unwrap_or(usize::MAX))
    }
}

/// The TLS connector: rustls on ring, certificates checked against the
/// platform's store. Whether TLS is used is the URL's `sslmode` (`prefer`
/// by default, `require`, `disable`).
#[cfg(feature = "tls")]
pub(crate) fn tls() -> Result<tokio_postgres_rustls::MakeRustlsConnect, EtlError> {
    use rustls_platform_verifier::ConfigVerifierExt;
    // Unless the host application installed a provider already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = rustls::ClientConfig::with_platform_verifier()
        .map_err(|e| EtlError::InvalidInput(format!("TLS configuration: {e}")))?;
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
