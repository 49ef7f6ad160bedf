//! A replace of a typed family (`write = "replace"`): the run writes its
//! rows into a copy of the family in a schema of its own (the staging
//! schema), and [`Replacing::switch`] makes them the family's rows in one
//! transaction.
//!
//! So readers of the tables see the old rows, and are never held up: not
//! while the run reads the API, nor at the switch. The switch takes no lock
//! a reader waits on: it deletes the records the run did not read as they
//! were and inserts those it read anew (`DELETE` and `INSERT ... SELECT`,
//! records matched by content key, [`Replacing::copy_sql`]), which readers
//! see all at once at its commit, as MVCC has it. A `TRUNCATE` would take the
//! table's `ACCESS EXCLUSIVE` lock and hold every reader for the whole
//! copy, a time that grows with the table; one reader's open transaction
//! would hold the switch, and every reader behind it, for as long as it
//! lasted. The tables are never dropped and renamed either: a view, grant
//! or index a user put on them stays. A re-run that finds most records as
//! they were writes only what changed.
//!
//! Columns the run added are added before the switch, in a short
//! transaction of their own that waits for its lock only a bounded time
//! ([`lock_bound`]): readers see them, empty, a moment before the rows.
//!
//! The copy's tables are `UNLOGGED`: the run's rows are written once, to
//! the table, and to the write-ahead log only by the switch. A server
//! that restarts during the run empties them; the switch then finds fewer
//! rows than the run wrote, and refuses.
//!
//! A run that fails or is killed leaves the tables as they were. Its
//! staging schema is held by a session-level advisory lock for as long as
//! the run's connection lives; the next replace of the table drops every
//! staging schema of it whose lock is free.

use etl_core::content::typed::{loader, Schema, SchemaOptions};
use etl_core::EtlError;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::errors;
use crate::lock_bound;
use crate::session::{self, Session};
use crate::table::{quote, TableName};
use crate::typed::{self, grow_sql, Shape, SCHEMA_TABLE};

/// How long the switch may take: the copy of every row of the run.
const SWITCH_DEADLINE: Duration = Duration::from_secs(3600);

/// The switch's temporary table of the records that leave (`gone`) and
/// come (`came`), dropped at its commit.
const SWITCH: &str = "_etl_switch";

/// A replace of one family, under way.
pub(crate) struct Replacing {
    /// The connection in the table's own schema: it holds the staging
    /// schema's lock, and switches.
    admin: Session,
    table: TableName,
    options: SchemaOptions,
    /// The staging schema.
    staging: String,
    /// The family's schema text when the staging copy was made of it.
    seeded: String,
    /// Rows of the resource's table the run wrote into the copy.
    written: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Replacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacing")
            .field("table", &self.table)
            .field("staging", &self.staging)
            .finish_non_exhaustive()
    }
}

/// The prefix of the staging schemas of `table`: a hash of its name, so
/// that it fits PostgreSQL's 63 bytes whatever the name.
fn staging_prefix(table: &TableName) -> String {
    let hash = etl_core::content_id("replace staging", table.as_str());
    format!("_etl_replace_{}_", &hash[..12])
}

impl Replacing {
    /// Makes the family of `table` if it is missing, then its staging
    /// copy: a new schema holding each of its tables empty (their columns
    /// and the resource's key, [`staging_table_sql`]) and its
    /// `_etl_schema` row. Returns the replace
    /// and the staging schema, for the sink the run writes through.
    pub(crate) async fn begin(
        url: &str,
        table: &TableName,
        options: SchemaOptions,
    ) -> Result<Replacing, EtlError> {
        let deadline = session::DEFAULT_DEADLINE;
        let admin = Session::open(url, deadline).await?;
        let prefix = staging_prefix(table);
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let unique = etl_core::content_id(
            "replace staging",
            &format!("{}/{nonce}", std::process::id()),
        );
        let staging = format!("{prefix}{}", &unique[..12]);
        let seeded = session::within(deadline, async {
            let mut guard = admin.lock().await;
            let client = guard.client().await?;
            if typed::Typed::open(client, table, options.clone())
                .await?
                .is_none()
            {
                return Err(EtlError::InvalidInput(format!(
                    "table {} is of the JSON shape, and `write = \"replace\"` makes typed tables: load into a new table",
                    table.as_str()
                )));
            }
            drop_abandoned(client, &prefix).await?;
            let stored = typed::stored_schema(client, table, options.clone())
                .await?
                .ok_or_else(|| EtlError::InvalidInput(format!(
                    "table {}: no row in {SCHEMA_TABLE}",
                    table.as_str()
                )))?;
            let text = stored.to_json();
            let home: String = client
                .query_one("SELECT current_schema()", &[])
                .await
                .and_then(|r| r.try_get(0))
                .map_err(|e| errors::from_pg_plain(&e))?;
            let (home, to) = (quote(&home), quote(&staging));
            let mut sql = format!(
                "SELECT pg_advisory_lock(hashtext('{staging}'));\n\
                 CREATE SCHEMA {to};\n\
                 CREATE TABLE {to}.{s} (LIKE {home}.{s} INCLUDING ALL);\n",
                s = quote(SCHEMA_TABLE),
            );
            for t in stored.tables() {
                sql.push_str(&staging_table_sql((&home, &to), t));
            }
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| errors::from_pg_plain(&e))?;
            client
                .execute(
                    &format!(
                        "INSERT INTO {to}.{s} (table_name, schema) VALUES ($1, $2)",
                        s = quote(SCHEMA_TABLE)
                    ),
                    &[&table.as_str(), &text],
                )
                .await
                .map_err(|e| errors::from_pg_plain(&e))?;
            Ok(text)
        })
        .await?;
        Ok(Replacing {
            admin,
            table: table.clone(),
            options,
            staging,
            seeded,
            written: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Sets the deadline of the replace's own operations: its switch's
    /// wait for a lock a schema change needs is bounded by it (the switch
    /// itself by [`SWITCH_DEADLINE`]).
    pub(crate) fn set_deadline(&self, deadline: Duration) {
        self.admin.set_deadline(deadline);
    }

    /// Notes `rows` more rows of the resource's table written to the copy.
    pub(crate) fn staged(&self, rows: usize) {
        self.written
            .fetch_add(rows, std::sync::atomic::Ordering::Relaxed);
    }

    /// The staging schema the run's rows go to.
    pub(crate) fn staging(&self) -> &str {
        &self.staging
    }

    /// Makes the run's rows the family's: the columns and tables the run
    /// added are added to the family ([`Replacing::grow`]), then, in one
    /// transaction whose lock waits are bounded as the growth's are
    /// ([`lock_bound::bounded`]), every table of it is given exactly the staging copy's
    /// rows (a table the run made no row of is emptied), the family's
    /// schema becomes the staging copy's, and the run's rejects join the
    /// table's. Then the staging schema is dropped.
    ///
    /// Refused, changing nothing, when another writer changed the family's
    /// schema during the run: its columns might clash with the run's.
    pub(crate) async fn switch(&self) -> Result<(), EtlError> {
        let mut guard = self.admin.lock().await;
        let within = guard.deadline();
        let done = tokio::time::timeout(SWITCH_DEADLINE, async {
            let client = guard.client().await?;
            let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
            let staged = self.staged_schema(client).await?;
            let held = self.grow(client, &staged, within).await?;
            // Every lock wait of the switch is bounded too: a user's own
            // `CREATE INDEX` or `LOCK TABLE` on the family costs a try, and
            // a switch that cannot have its locks names who holds them.
            let names = self.tables(&staged)?;
            let tables: Vec<&str> = names.iter().map(String::as_str).collect();
            lock_bound::bounded(
                client,
                ("the replace's switch", &tables),
                within,
                || async {
                    client
                        .batch_execute("SET LOCAL statement_timeout = 0")
                        .await
                        .map_err(fail)?;
                    self.switch_in(client, &held, &staged).await
                },
            )
            .await?;
            client
                .batch_execute(&drop_staging(&self.staging))
                .await
                .map_err(fail)
        })
        .await;
        guard.settle(done)
    }

    /// Drops the staging schema: the run failed before its switch, and the
    /// family keeps what it held (a later switch is refused: the copy is
    /// gone). Best effort, within the session's deadline: a schema left
    /// behind is dropped by the next replace once this session ends.
    pub(crate) async fn abandon(&self) {
        let mut guard = self.admin.lock().await;
        let deadline = guard.deadline();
        let done = tokio::time::timeout(deadline, async {
            let client = guard.client().await?;
            client
                .batch_execute(&drop_staging(&self.staging))
                .await
                .map_err(|e| errors::from_pg_plain(&e))
        })
        .await;
        if let Err(e) = guard.settle(done) {
            tracing::warn!(schema = self.staging, error = %e, "a failed replace's staging copy was left for the next one to drop");
        }
    }

    /// The names of the family's tables in the schema `text`.
    fn tables(&self, text: &str) -> Result<Vec<String>, EtlError> {
        Ok(self
            .parse(text)?
            .tables()
            .iter()
            .map(|t| t.name().to_owned())
            .collect())
    }

    /// The staging copy's schema text: the family's as the run grew it.
    async fn staged_schema(&self, client: &tokio_postgres::Client) -> Result<String, EtlError> {
        one(
            client,
            &format!(
                "SELECT schema FROM {}.{} WHERE table_name = $1",
                quote(&self.staging),
                quote(SCHEMA_TABLE)
            ),
            &[&self.table.as_str()],
        )
        .await
    }

    /// Adds to the family the columns and tables the run added (`staged`
    /// is the copy's schema), in a transaction of its own that waits for
    /// the tables' lock at most [`lock_bound::LOCK_BOUND`] a try, for
    /// `within` in all. Returns the family's schema text as it then is.
    async fn grow(
        &self,
        client: &tokio_postgres::Client,
        staged: &str,
        within: Duration,
    ) -> Result<String, EtlError> {
        let (before, after) = (self.parse(&self.seeded)?, self.parse(staged)?);
        let ddl = grow_sql(&after, &Shape::of(&before));
        if ddl.is_empty() {
            return Ok(self.seeded.clone());
        }
        let tables: Vec<&str> = before.tables().iter().map(|t| t.name()).collect();
        lock_bound::bounded(client, ("a schema change", &tables), within, || async {
            self.check_held(client, &self.seeded).await?;
            client
                .batch_execute(&ddl)
                .await
                .map_err(|e| errors::from_pg_plain(&e))?;
            typed::store_schema(client, &self.table, staged).await
        })
        .await?;
        Ok(staged.to_owned())
    }

    /// Locks the family's schema row until the transaction ends, and
    /// refuses unless it holds `expected` (the schema this replace knows
    /// the family by).
    async fn check_held(
        &self,
        client: &tokio_postgres::Client,
        expected: &str,
    ) -> Result<(), EtlError> {
        let name = self.table.as_str();
        let held: String = one(
            client,
            &format!(
                "SELECT schema FROM {} WHERE table_name = $1 FOR UPDATE",
                quote(SCHEMA_TABLE)
            ),
            &[&name],
        )
        .await?;
        if held != expected && self.parse(&held)?.to_json() != expected {
            return Err(refused(
                name,
                "another writer changed its columns during this replace",
            ));
        }
        Ok(())
    }

    /// The switch, inside its transaction: refused unless the family's
    /// schema is `held` (as the replace found it, grown by the run) and
    /// the copy holds what the run wrote; then the family given the
    /// copy's rows, the copy's schema (`staged`) stored, and the copy's
    /// rejects kept.
    async fn switch_in(
        &self,
        client: &tokio_postgres::Client,
        held: &str,
        staged: &str,
    ) -> Result<(), EtlError> {
        let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
        self.check_held(client, held).await?;
        let after = self.parse(staged)?;
        self.check_copy(client, &after).await?;
        client
            .batch_execute(&self.copy_sql(&after))
            .await
            .map_err(fail)?;
        typed::store_schema(client, &self.table, staged).await?;
        self.keep_rejects(client).await
    }

    /// Refuses a copy holding fewer rows than the run wrote: the server
    /// restarted and emptied it (its tables are unlogged). More is no
    /// error: a write whose commit went in unanswered, then found its rows
    /// held when retried.
    async fn check_copy(
        &self,
        client: &tokio_postgres::Client,
        after: &Schema,
    ) -> Result<(), EtlError> {
        let copied: i64 = one(
            client,
            &format!(
                "SELECT count(*) FROM {}.{}",
                quote(&self.staging),
                quote(after.tables()[0].name())
            ),
            &[],
        )
        .await?;
        let written = self.written.load(std::sync::atomic::Ordering::Relaxed);
        if usize::try_from(copied).unwrap_or(0) < written {
            return Err(refused(
                self.table.as_str(),
                &format!("the replace's copy holds {copied} rows of the {written} the run wrote (a server restart empties it)"),
            ));
        }
        Ok(())
    }

    /// The SQL that gives each table of the family (as `after`, the
    /// copy's schema, has it) exactly the copy's rows, record by record:
    /// the resource's rows are matched by content key, and a record the
    /// table holds as the run read it (the same key, id and update time)
    /// stays as it is, with its child rows and its first load time. The
    /// others change: the table's rows the copy does not hold (`gone`)
    /// leave with their child rows, and the copy's rows the table does not
    /// hold (`came`) come in with theirs. A key is the hash of the record's
    /// whole text, and a record's columns are made from its text alone
    /// (a column, once made, keeps its type), so a row is not compared
    /// column by column: reading both tables' keys is the whole cost of a
    /// re-run that finds every record as it was.
    ///
    /// JIT is off for the transaction: each statement runs once, and
    /// compiling it cost more than it saved.
    fn copy_sql(&self, after: &Schema) -> String {
        let to = quote(&self.staging);
        let (key, id, updated) = (
            quote(loader::KEY),
            quote(loader::ID),
            quote(loader::UPDATED_AT),
        );
        let root = quote(after.tables()[0].name());
        let mut sql = format!(
            "SET LOCAL jit = off;\n\
             CREATE TEMP TABLE {SWITCH} ON COMMIT DROP AS \
             SELECT t.{key} AS gone, s.{key} AS came \
             FROM {root} AS t FULL JOIN {to}.{root} AS s ON s.{key} = t.{key} \
             WHERE t.{key} IS NULL OR s.{key} IS NULL \
             OR (s.{id}, s.{updated}) IS DISTINCT FROM (t.{id}, t.{updated});\n"
        );
        // The child tables first, then the resource's own: each table's
        // rows by its record's key (`_etl_root_key`, or the key itself).
        let mut tables: Vec<&etl_core::content::typed::Table> = after.tables().iter().collect();
        tables.rotate_left(1);
        for table in tables {
            let columns: Vec<String> = table
                .loader_columns()
                .iter()
                .copied()
                .chain(table.columns().iter().map(|c| c.name.as_str()))
                .map(quote)
                .collect();
            let (t, columns) = (quote(table.name()), columns.join(", "));
            let by = match table.parent() {
                None => &key,
                Some(_) => &quote(loader::ROOT_KEY),
            };
            sql.push_str(&format!(
                "DELETE FROM {t} WHERE {by} IN (SELECT gone FROM {SWITCH});\n\
                 INSERT INTO {t} ({columns}) SELECT {columns} FROM {to}.{t} \
                 WHERE {by} IN (SELECT came FROM {SWITCH});\n"
            ));
        }
        sql
    }

    /// Keeps the rejects the run wrote into the copy, in the family's
    /// rejects table (made if it is missing).
    async fn keep_rejects(&self, client: &tokio_postgres::Client) -> Result<(), EtlError> {
        let to = quote(&self.staging);
        let r = quote(self.table.rejects()?.as_str());
        client
            .batch_execute(&format!(
                "DO $$ BEGIN IF to_regclass('{to}.{r}') IS NOT NULL THEN \
                 CREATE TABLE IF NOT EXISTS {r} (LIKE {to}.{r} INCLUDING ALL); \
                 INSERT INTO {r} SELECT * FROM {to}.{r} ON CONFLICT DO NOTHING; \
                 END IF; END $$"
            ))
            .await
            .map_err(|e| errors::from_pg_plain(&e))
    }

    fn parse(&self, text: &str) -> Result<Schema, EtlError> {
        Schema::from_json(text, self.options.clone()).map_err(|e| {
            EtlError::InvalidInput(format!("{SCHEMA_TABLE} of {}: {e}", self.table.as_str()))
        })
    }
}

/// The staging copy (in schema `to`) of the family's table `table` (in
/// `home`): its columns, their defaults and checks, and the resource's
/// key, which makes a retried write's rows land once. No other index: the
/// run only inserts into the copy, and the switch's copy into the table
/// brings the table's own indexes (a user's among them) up to date, so an
/// index on the copy would be paid for twice.
fn staging_table_sql((home, to): (&str, &str), table: &etl_core::content::typed::Table) -> String {
    let t = quote(table.name());
    let mut sql = format!(
        "CREATE UNLOGGED TABLE {to}.{t} (LIKE {home}.{t} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE);\n"
    );
    if table.parent().is_none() {
        sql.push_str(&format!(
            "ALTER TABLE {to}.{t} ADD PRIMARY KEY ({});\n",
            quote(loader::KEY)
        ));
    }
    sql
}

/// Drops the staging schemas of the table (those named from `prefix`)
/// that no run holds: a run that failed or was killed left them.
async fn drop_abandoned(client: &tokio_postgres::Client, prefix: &str) -> Result<(), EtlError> {
    let fail = |e: tokio_postgres::Error| errors::from_pg_plain(&e);
    let left = client
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, $1)",
            &[&prefix],
        )
        .await
        .map_err(fail)?;
    for row in left {
        let schema: String = row.try_get(0).map_err(fail)?;
        let free: bool = client
            .query_one("SELECT pg_try_advisory_lock(hashtext($1))", &[&schema])
            .await
            .and_then(|r| r.try_get(0))
            .map_err(fail)?;
        if free {
            client
                .batch_execute(&drop_staging(&schema))
                .await
                .map_err(fail)?;
        }
    }
    Ok(())
}

/// Drops the staging schema `schema` with its tables, and lets go of the
/// advisory lock that held it (a no-op on a session that does not hold
/// it). The name is one this crate made: no quote in it to escape.
fn drop_staging(schema: &str) -> String {
    format!(
        "DROP SCHEMA IF EXISTS {} CASCADE; SELECT pg_advisory_unlock(hashtext('{schema}'))",
        quote(schema)
    )
}

/// The one value of the one row `sql` answers.
async fn one<T: for<'a> tokio_postgres::types::FromSql<'a>>(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<T, EtlError> {
    client
        .query_one(sql, params)
        .await
        .and_then(|r| r.try_get(0))
        .map_err(|e| errors::from_pg_plain(&e))
}

/// A switch refused for `why`: the table is left as it was.
fn refused(table: &str, why: &str) -> EtlError {
    EtlError::Database {
        sqlstate: None,
        message: format!("table {table}: {why}; the table is as it was: run again"),
    }
}
