//! Exactly-once loads of etl-core rows into Delta Lake tables, for many
//! writers at once, with no database server and no lock service.
//!
//! [`DeltaSink`] keeps each row (any [`Record`]: launches, or rows of your
//! own) under its [`etl_core::content_key`], as `PostgresSink` does, in a
//! Delta table that Spark, DuckDB, Polars, Trino or the Python `deltalake`
//! package read as it stands. Each load that has new rows is one Delta
//! commit holding only the rows the table lacks, and answers `Ok` only once
//! that commit is in the log. Writers racing for the table are resolved by
//! Delta's own optimistic concurrency: the loser of a race checks its rows
//! again against what the winners added and commits what is still new.
//!
//! ```no_run
//! use etl_core::{IdempotentSink, Launch, Row, Sink};
//! use etl_delta::DeltaSink;
//!
//! # async fn run() -> Result<(), etl_core::EtlError> {
//! let table = DeltaSink::open("lake/launches").await?;
//! // The table skips what it holds; the sink in front only spares it the
//! // rows met again in this process, with flat memory.
//! let sink = IdempotentSink::bounded(table, 100_000);
//! let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
//! sink.load(&[row.clone()]).await?;
//! assert_eq!(sink.load(&[row]).await?, 0);
//! # Ok(())
//! # }
//! ```
//!
//! # Memory
//!
//! A load learns which of its keys a table holds from the Parquet bloom
//! filters every data file keeps on its key column, not from the rows. The
//! process holds those filters in memory up to 32 MiB, across all its
//! tables; past that it reads the rest from the files at each load, so a
//! load's memory does not grow with the table, and each load then reads a
//! few bytes a row of the table's filters. The environment variable
//! `ETL_DELTA_KEY_FILTER_BYTES` sets that budget in bytes (`0`: no filter
//! held; more: a larger table probed in memory alone); a value that is not
//! a number fails the table's opening, naming it.

#![warn(missing_docs)]

mod builders;
mod columns;
mod deleted;
mod errors;
mod fields;
mod filter;
mod keys;
mod location;
mod log;
mod replace;
mod table;
mod typed;

/// The delta-rs this crate is built on, for reading a table or writing to
/// it by other means with the same versions of its types.
pub use deltalake;

use async_trait::async_trait;
use etl_core::content::typed::{loader, update_micros, Schema, SchemaOptions};
use etl_core::content::{CanonicalSink, KeyedJson};
use etl_core::{EtlError, Prepared, Record, Reject, RejectSink, Written};
use std::time::SystemTime;
use tokio::sync::OnceCell;

use columns::{batch, micros, text, times, Columns};
use location::Location;
use table::KeyedTable;
use typed::Typed;

/// A [`etl_core::Sink`] into one Delta table, created if missing:
///
/// | column | holds |
/// |---|---|
/// | `content_key` (string, not null) | [`etl_core::content_key`] of the row |
/// | `launch_id` or `record_id` (string) | [`Record::record_id`], in the column [`Record::ID_COLUMN`] names |
/// | `updated_at` (timestamp, UTC) | [`Record::updated_at`], to the microsecond |
/// | `loaded_at` (timestamp, UTC) | when the row was loaded |
/// | `row` (string) | the record as canonical JSON text (what its key hashes) |
///
/// The table never holds a content key twice, however many processes load
/// it at once and wherever one is killed:
/// - a `load` with new rows writes one data file and commits it as one
///   Delta version; a data file written but not committed (a kill, a full
///   disk, a failed upload) is not part of the table, and a retry writes
///   its rows again;
/// - which keys the table holds is known from a Parquet bloom filter on
///   `content_key` in each data file, checked against the file's key
///   column where it may hold a key: a load costs what it loads, not what
///   the table holds. The filters are held in memory up to a budget
///   ([memory](crate#memory)), past which each load reads them from the
///   files;
/// - a commit is the log entry of the version after the newest this sink
///   knows, written only where no entry is (the log store's conditional
///   put): of two writers racing for a version one wins, and the loser
///   checks its rows again against the files in the winners' entries and
///   commits what is still new at the next version. Every commit also
///   carries a `txn` action of one app id (`etl-delta`), so writers that
///   check conflicts through delta-rs's `CommitBuilder` see two appends
///   racing as a conflict too.
///
/// A file the table holds that another tool wrote (an OPTIMIZE, say) may
/// have no bloom filter: its key column is read once instead.
///
/// It is a [`RejectSink`] too: rejects go to the table `<location>_rejects`
/// (`reject_key`, `raw`, `error`, `source`, `rejected_at`), created on the
/// first reject, each entry once.
#[derive(Debug)]
pub struct DeltaSink {
    rows: KeyedTable,
    rejects_at: Location,
    rejects: OnceCell<KeyedTable>,
    /// The typed family the rows table is the resource's table of; `None`
    /// in the JSON shape.
    typed: Option<Typed>,
    /// A replace under way ([`DeltaSink::open_replacing`]): `rows` and
    /// `typed` are then its staging tables.
    replacing: Option<replace::Replacing>,
}

impl DeltaSink {
    /// Opens the table at `location` for launch rows ([`DeltaSink::open_as`]
    /// with [`etl_core::Row`]: the id column is `launch_id`).
    pub async fn open(location: &str) -> Result<Self, EtlError> {
        Self::open_as::<etl_core::Row>(location).await
    }

    /// Opens the table at `location`, a local directory (made if missing)
    /// or `s3://BUCKET/PATH` (feature `s3`; credentials and endpoint from
    /// the environment, as delta-rs reads them: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL` or `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`), for records of type `T`. The table is created
    /// with the id column [`Record::ID_COLUMN`] if it does not exist.
    ///
    /// Fails with [`EtlError::InvalidInput`], naming the location, when it
    /// is a file, cannot be made or written, lacks S3 credentials, or holds
    /// a table of other columns.
    pub async fn open_as<T: Record>(location: &str) -> Result<Self, EtlError> {
        let at = Location::parse(location)?;
        let rejects_at = at.rejects()?;
        let rows = KeyedTable::open(at, Columns::rows(T::ID_COLUMN)).await?;
        Ok(Self::of(rows, rejects_at, None, None))
    }

    /// A sink of the rows table `rows` (of the typed family `typed`, if
    /// typed; staging the content of `replacing`, if replacing), its
    /// rejects to go to `rejects_at`.
    fn of(
        rows: KeyedTable,
        rejects_at: Location,
        typed: Option<Typed>,
        replacing: Option<replace::Replacing>,
    ) -> Self {
        DeltaSink {
            rows,
            rejects_at,
            rejects: OnceCell::new(),
            typed,
            replacing,
        }
    }

    /// Opens the typed table family at `location` (as
    /// [`DeltaSink::open_as`] takes it) for records of type `T`, the
    /// resource's table named `name`: each member of a record is a column,
    /// each list a child table beside it (`PATH__labels`), as etl-core's
    /// [`etl_core::content::typed`] makes them under `options`. A table
    /// that exists in the JSON shape keeps it ([`DeltaSink::is_typed`]).
    ///
    /// | column | holds |
    /// |---|---|
    /// | `_etl_key` (string, not null) | [`etl_core::content_key`] of the record |
    /// | `_etl_id` (string) | [`Record::record_id`] |
    /// | `_etl_updated_at` (timestamp) | [`Record::updated_at`], at any offset, in UTC |
    /// | `_etl_loaded_at` (timestamp, not null) | when the row was loaded |
    /// | `_etl_row` (string, not null) | the record as canonical JSON text |
    /// | `_etl_meta` (string) | null, or the JSON of the values that did not fit their column |
    /// | the data columns | the members, objects flattened with `__` |
    ///
    /// A child table has `_etl_key`, `_etl_parent_key`, `_etl_root_key`,
    /// `_etl_list_idx` and its data columns.
    ///
    /// With `options.write` a merge ([`etl_core::content::write::Write::Merge`]),
    /// the table holds one row per primary key (in `_etl_id`), the newest
    /// version loaded, as [`etl_core::content::write::merge`] weighs them:
    /// each load is one commit of the resource's table that removes the
    /// files holding the rows it replaces or deletes, adds them written
    /// again without those rows, and adds its new rows, after its child
    /// rows' commits; then the child rows of each version it took out for a
    /// strictly newer one (or a strictly newer deletion) leave their
    /// tables, one commit a child table. A note written before the commit
    /// (in the table's hidden `_etl_pending/`) names those versions, so
    /// that opening a merge family finishes a removal that a process killed
    /// between the commits left. Deletions are remembered in the
    /// table `<location>_deleted`. A writer that loses the race for a
    /// commit weighs its load again against the winner's rows.
    ///
    /// The family's schema lives in the resource's table (the field
    /// metadata of `_etl_row`; each data column's own metadata holds its
    /// `etl.path`, `etl.type` and `etl.hint`). A load that adds columns or
    /// tables commits the grown schema to the resource's table before its
    /// rows, and each child table's new columns in the same commit as its
    /// rows; a writer that loses a race for the schema reads the winner's
    /// and makes its rows again. Child tables commit before the resource's
    /// table, so a record's row is in the table only with all its child
    /// rows, and a killed load, run again, writes each once.
    ///
    /// ```no_run
    /// use etl_core::content::typed::SchemaOptions;
    /// use etl_core::Sink;
    /// use etl_delta::DeltaSink;
    /// # #[derive(serde::Serialize)]
    /// # struct Issue { id: u64, title: String }
    /// # impl etl_core::Record for Issue {
    /// #     const ID_COLUMN: &'static str = "record_id";
    /// #     fn record_id(&self) -> Option<String> { Some(self.id.to_string()) }
    /// #     fn updated_at(&self) -> Option<String> { None }
    /// # }
    ///
    /// # async fn run() -> Result<(), etl_core::EtlError> {
    /// let issues = DeltaSink::open_typed::<Issue>("lake/issues", "issues", SchemaOptions::default()).await?;
    /// issues.load(&[Issue { id: 1, title: "It breaks".into() }]).await?;
    /// // duckdb: SELECT title FROM delta_scan('lake/issues');
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_typed<T: Record>(
        location: &str,
        name: &str,
        options: SchemaOptions,
    ) -> Result<Self, EtlError> {
        let at = Location::parse(location)?;
        let existing = table::existing_schema(&at).await?;
        if existing
            .as_ref()
            .is_some_and(|fields| fields.field("content_key").is_some())
        {
            return Self::open_as::<T>(location).await;
        }
        // Refused before the table's key filters are read: a merge table's
        // are on another column than an append table's.
        if let Some(stored) = existing.as_ref().and_then(fields::stored_schema) {
            typed::read_as_written(stored, &options, &at)?;
        }
        let rejects_at = at.rejects()?;
        let columns = Typed::fresh_columns(name, &options)?;
        let rows = KeyedTable::open(at.clone(), columns).await?;
        let typed = Typed::open(&rows, at, options).await?;
        Ok(Self::of(rows, rejects_at, Some(typed), None))
    }

    /// Opens the typed table family at `location` (as
    /// [`DeltaSink::open_typed`] does) to replace its content with what
    /// this sink loads, switched in by [`DeltaSink::finish`]. Until then
    /// the family's tables hold what they held, and readers read it whole:
    /// the loads go to staging tables, one in a directory of this sink's
    /// own inside each table of the family (`etl-replacing-…`), whose data
    /// files the switch commits as they are, removing the old ones. A
    /// sink ended by [`DeltaSink::abandon`] (a failed run) or dropped
    /// without its `finish` (a killed one) leaves the family as it was.
    /// `abandon` removes what it staged; what a dropped sink staged is no
    /// table's, and the next replace of the family removes it: at once
    /// where the sink's process is known to have ended (the directory
    /// names it, and a replace on the same machine looks), else once
    /// nothing was written in that directory for an hour (Delta has no
    /// lock that dies with a process).
    ///
    /// The switch is one commit a table, the child tables first, then the
    /// resource's: Delta commits one table at a time, so a process killed
    /// during the switch leaves some child tables new until the next
    /// replace. It is refused, switching nothing, when another writer
    /// changed the family's schema since this sink opened, or when another
    /// sink took this one's directory for a dead run's (nothing written in
    /// it for an hour) to remove it.
    ///
    /// Fails with [`EtlError::InvalidInput`] when the table exists in the
    /// JSON shape or is written otherwise than by replace (the schema
    /// stored with the family says how: [`SchemaOptions::write`]).
    ///
    /// ```no_run
    /// use etl_core::content::typed::SchemaOptions;
    /// use etl_core::content::write::Write;
    /// use etl_core::Sink;
    /// use etl_delta::DeltaSink;
    /// # #[derive(serde::Serialize)]
    /// # struct Plan { id: u64, name: String }
    /// # impl etl_core::Record for Plan {
    /// #     const ID_COLUMN: &'static str = "record_id";
    /// #     fn record_id(&self) -> Option<String> { Some(self.id.to_string()) }
    /// #     fn updated_at(&self) -> Option<String> { None }
    /// # }
    ///
    /// # async fn run() -> Result<(), etl_core::EtlError> {
    /// let options = SchemaOptions::default().write(Write::Replace);
    /// let plans = DeltaSink::open_replacing::<Plan>("lake/plans", "plans", options).await?;
    /// plans.load(&[Plan { id: 1, name: "Pro".into() }]).await?;
    /// // The table still holds the plans it held.
    /// plans.finish().await?;
    /// // Now it holds the one plan loaded.
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_replacing<T: Record>(
        location: &str,
        name: &str,
        options: SchemaOptions,
    ) -> Result<Self, EtlError> {
        let at = Location::parse(location)?;
        let rejects_at = at.rejects()?;
        let (replacing, rows, typed) = replace::Replacing::open(at, name, options).await?;
        Ok(Self::of(rows, rejects_at, Some(typed), Some(replacing)))
    }

    /// Ends a sink's loads. For a sink of [`DeltaSink::open_replacing`],
    /// switches what it loaded in as the family's content (an empty
    /// replace empties the tables); for any other, only waits for its
    /// checkpoints ([`DeltaSink::settle`]).
    pub async fn finish(&self) -> Result<(), EtlError> {
        self.settle().await;
        match (&self.replacing, &self.typed) {
            (Some(replacing), Some(typed)) => replacing.switch(&self.rows, typed).await,
            _ => Ok(()),
        }
    }

    /// Ends a sink's loads without finishing them: for a sink of
    /// [`DeltaSink::open_replacing`], removes what it staged (the family
    /// keeps what it held, and a later `finish` is refused); nothing for
    /// any other. Best effort: what a failure leaves, a later replace
    /// removes once it has been still for an hour.
    pub async fn abandon(&self) {
        self.settle().await;
        if let Some(replacing) = &self.replacing {
            replacing.abandon().await;
        }
    }

    /// The schema of the typed family at `location` (as
    /// [`DeltaSink::open_typed`] stores it), read and nothing made: `None`
    /// when there is no table there, or a table of the JSON shape. What
    /// `etl schema` prints.
    pub async fn stored_schema(
        location: &str,
        options: SchemaOptions,
    ) -> Result<Option<Schema>, EtlError> {
        let at = Location::parse(location)?;
        let Some(fields) = table::existing_schema(&at).await? else {
            return Ok(None);
        };
        match fields::stored_schema(&fields) {
            Some(stored) => typed::read(stored, &options, &at).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the table has the typed shape ([`DeltaSink::open_typed`]).
    pub fn is_typed(&self) -> bool {
        self.typed.is_some()
    }

    /// The typed family's schema as this sink last read or committed it:
    /// its tables, their columns with types, paths and hints, and the
    /// members kept untyped. `None` in the JSON shape.
    pub async fn schema(&self) -> Option<Schema> {
        match &self.typed {
            Some(typed) => Some(typed.schema().await),
            None => None,
        }
    }

    /// The update time column of the table's shape.
    fn updated_column(&self) -> &'static str {
        match self.typed {
            Some(_) => loader::UPDATED_AT,
            None => "updated_at",
        }
    }

    /// The record text column of the table's shape.
    fn row_column(&self) -> &'static str {
        match self.typed {
            Some(_) => loader::ROW,
            None => "row",
        }
    }

    /// Where the rows go, as given to [`DeltaSink::open_as`].
    pub fn location(&self) -> &str {
        match &self.replacing {
            Some(replacing) => replacing.shown(),
            None => self.rows.shown(),
        }
    }

    /// Where the rejects go: the location with `_rejects` added.
    pub fn rejects_location(&self) -> &str {
        &self.rejects_at.shown
    }

    /// The newest `updated_at` of the table (`None` when no row has one),
    /// in RFC 3339 (`2026-11-12T12:00:00Z`): the cursor of an incremental
    /// load. Read from the log's file statistics, not from the data files.
    /// A merge table's remembered deletions count too: a deletion newer
    /// than every row is not read again.
    pub async fn newest_updated_at(&self) -> Result<Option<String>, EtlError> {
        let deleted = match &self.typed {
            Some(typed) => typed.newest_deletion().await?,
            None => None,
        };
        let newest = self
            .rows
            .live_files(|f| {
                f.stats()
                    .and_then(|stats| newest_in(&stats, self.updated_column()))
            })
            .await?
            .into_iter()
            .flatten()
            .chain(deleted)
            .max();
        Ok(newest.map(|t| humantime::format_rfc3339(t).to_string()))
    }

    /// The stored record (its JSON text) of the newest `updated_at`
    /// ([`DeltaSink::newest_updated_at`]), `None` when no row has one: what
    /// a source reads the form of its records' update time from. Reads the
    /// update time column of the one file whose statistics hold that time,
    /// then the one record of it.
    pub async fn newest_record(&self) -> Result<Option<String>, EtlError> {
        let newest = self
            .rows
            .live_files(|f| {
                let at = f
                    .stats()
                    .and_then(|stats| newest_in(&stats, self.updated_column()))?;
                let file = keys::DataFile {
                    path: f.object_store_path(),
                    size: u64::try_from(f.size()).unwrap_or(0),
                };
                Some((at, file))
            })
            .await?
            .into_iter()
            .flatten()
            .max_by_key(|(at, _)| *at);
        let Some((_, file)) = newest else {
            return Ok(None);
        };
        let store = self.rows.store().await;
        keys::text_of_newest(
            &store,
            &file,
            (self.row_column(), self.updated_column()),
            self.location(),
        )
        .await
    }

    /// For each value of the rows' top-level member `member` (a child
    /// resource's `_parent`), the newest `updated_at` of the rows holding
    /// it: the value as compact JSON text with its keys sorted, the time in
    /// RFC 3339. Reads the `row` and `updated_at` columns of every live
    /// file: a scan of the table, for a child's incremental cursors.
    pub async fn newest_by_member(&self, member: &str) -> Result<Vec<(String, String)>, EtlError> {
        let files = self
            .rows
            .live_files(|f| keys::DataFile {
                path: f.object_store_path(),
                size: u64::try_from(f.size()).unwrap_or(0),
            })
            .await?;
        let store = self.rows.store().await;
        let mut newest: std::collections::HashMap<String, i64> = Default::default();
        for file in &files {
            let rows = keys::read_text_and_time(
                &store,
                file,
                (self.row_column(), self.updated_column()),
                self.location(),
            )
            .await?;
            for (row, at) in rows {
                let Some(at) = at else { continue };
                let Ok(row) = serde_json::from_str::<serde_json::Value>(&row) else {
                    continue;
                };
                if let Some(value) = row.get(member) {
                    let held = newest.entry(value.to_string()).or_insert(at);
                    *held = (*held).max(at);
                }
            }
        }
        Ok(newest
            .into_iter()
            .filter_map(|(value, micros)| {
                let at = std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_micros(
                    u64::try_from(micros).ok()?,
                ))?;
                Some((value, humantime::format_rfc3339(at).to_string()))
            })
            .collect())
    }

    /// Waits for the work a load left running beside the caller's next
    /// one: the checkpoint of the log that a load's commit made due, in
    /// this table or its child or rejects tables. The next load waits for
    /// it anyway; call this after the last load, before the runtime ends.
    /// A checkpoint the runtime's end cuts off is not written (the table
    /// is whole, and readers read the log entries since the one before),
    /// and delta-kernel reports the cut as a panic on its own thread.
    /// `etl run` settles each table at the end of its run.
    ///
    /// ```no_run
    /// use etl_core::{Launch, Row, Sink};
    /// use etl_delta::DeltaSink;
    ///
    /// # async fn run() -> Result<(), etl_core::EtlError> {
    /// let sink = DeltaSink::open("/data/launches").await?;
    /// let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
    /// sink.load(&[row]).await?;
    /// sink.settle().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(&self) {
        self.rows.settle().await;
        if let Some(typed) = &self.typed {
            typed.settle().await;
        }
        if let Some(rejects) = self.rejects.get() {
            rejects.settle().await;
        }
    }

    /// How many rows the table holds, from the log's file statistics (for
    /// a sink of [`DeltaSink::open_replacing`], the rows it staged so far).
    pub async fn count(&self) -> Result<u64, EtlError> {
        count(&self.rows).await
    }

    /// How many rejects the rejects table holds (0 before the first).
    pub async fn rejects_count(&self) -> Result<u64, EtlError> {
        match self.rejects_table_if_any().await? {
            Some(table) => count(table).await,
            None => Ok(0),
        }
    }

    /// The rejects table, opened (and created) on first use.
    async fn rejects_table(&self) -> Result<&KeyedTable, EtlError> {
        self.rejects
            .get_or_try_init(|| KeyedTable::open(self.rejects_at.clone(), Columns::rejects()))
            .await
    }

    /// The rejects table if this sink opened it or an earlier run made it.
    async fn rejects_table_if_any(&self) -> Result<Option<&KeyedTable>, EtlError> {
        if let Some(table) = self.rejects.get() {
            return Ok(Some(table));
        }
        if self.rejects_at.holds_table() {
            self.rejects_table().await.map(Some)
        } else {
            Ok(None)
        }
    }
}

/// How many entries `table` holds, by the log's statistics.
pub(crate) async fn count(table: &KeyedTable) -> Result<u64, EtlError> {
    let records = table.live_files(|f| f.num_records().unwrap_or(0)).await?;
    Ok(records.into_iter().map(|n| n as u64).sum())
}

/// The `column` maximum in one file's statistics (Delta's stats JSON:
/// `{"maxValues": {"updated_at": "2026-11-12T12:00:00.000Z"}, ...}`).
fn newest_in(stats: &str, column: &str) -> Option<SystemTime> {
    let stats: serde_json::Value = serde_json::from_str(stats).ok()?;
    let max = stats.get("maxValues")?.get(column)?.as_str()?;
    humantime::parse_rfc3339_weak(max.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(max).ok())
}

/// A [`etl_core::Sink`] for any [`Record`]: every key and canonical form first (on
/// every core for a large batch), so a row that cannot be serialised
/// writes nothing.
#[async_trait]
impl CanonicalSink for DeltaSink {
    /// Appends the `rows` the table lacks; `encoded` are their keys and JSON.
    async fn store<T: Record>(
        &self,
        rows: &[T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Written, EtlError> {
        if let Some(typed) = &self.typed {
            if let Some(keyed) = typed.keyed(rows, &encoded)? {
                return self.merge(typed, (rows, &encoded), keyed).await;
            }
            let (new, refused) = typed.store(&self.rows, rows, &encoded).await?;
            // Kept as rejects, and counted: the run exits 3 for them.
            let kept = self.reject(&refused).await?;
            return Ok(Written::from(new).refusing(refused.len(), kept));
        }
        let updated: Vec<Option<i64>> = rows
            .iter()
            .zip(&encoded)
            .map(|(row, c)| update_micros(row, &c.key))
            .collect();
        let ids: Vec<Option<String>> = rows.iter().map(Record::record_id).collect();
        let keys: Vec<String> = encoded.iter().map(|c| c.key.clone()).collect();
        let loaded_at = micros(SystemTime::now());
        let schema = self.rows.columns().arrow_schema();
        self.rows
            .append(
                &keys,
                self.rows.columns().fields(),
                |fresh| {
                    let each = || fresh.iter().map(|&i| (&encoded[i], i));
                    batch(
                        schema.clone(),
                        vec![
                            text(each().map(|(c, _)| Some(c.key.as_str()))),
                            text(each().map(|(_, i)| ids[i].as_deref())),
                            times(each().map(|(_, i)| updated[i])),
                            times(each().map(|_| loaded_at)),
                            text(each().map(|(c, _)| Some(c.json.as_str()))),
                        ],
                    )
                },
                (table::Known::Nothing, None),
                table::Basis::Any,
            )
            .await
            .map(|new| Written::from(new.unwrap_or_default()))
    }

    /// A merge family's records: their primary keys read now, beside the
    /// write before (what [`CanonicalSink::store`] would read first on
    /// the write's own path), the merge in the [`Prepared`].
    async fn prepare_store<'a, T: Record>(
        &'a self,
        rows: &'a [T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Prepared<'a>, EtlError> {
        let keyed = match &self.typed {
            Some(typed) => typed.keyed(rows, &encoded)?.map(|keyed| (typed, keyed)),
            None => None,
        };
        Ok(match keyed {
            Some((typed, keyed)) => {
                Prepared::new(async move { self.merge(typed, (rows, &encoded), keyed).await })
            }
            None => Prepared::new(self.store(rows, encoded)),
        })
    }
}

impl DeltaSink {
    /// Merges `rows` into this sink's typed family `typed`, their keys
    /// `keyed`; the records without their key, or refused by a frozen
    /// schema, kept as rejects.
    async fn merge<T: Record>(
        &self,
        typed: &Typed,
        (rows, encoded): (&[T], &[KeyedJson]),
        keyed: typed::Keyed,
    ) -> Result<Written, EtlError> {
        let merged = typed.merge(&self.rows, (rows, encoded), keyed).await?;
        let kept = self.reject(&merged.refused).await?;
        Ok(Written::from(merged.new)
            .deleting(merged.deleted)
            .refusing(merged.refused.len(), kept))
    }
}

#[async_trait]
impl RejectSink for DeltaSink {
    async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError> {
        if rejects.is_empty() {
            return Ok(0);
        }
        let table = self.rejects_table().await?;
        let keys: Vec<String> = rejects.iter().map(Reject::key).collect();
        let at = micros(SystemTime::now());
        let schema = table.columns().arrow_schema();
        let kept = table
            .append(
                &keys,
                table.columns().fields(),
                |fresh| {
                    let each = || fresh.iter().map(|&i| (&rejects[i], i));
                    batch(
                        schema.clone(),
                        vec![
                            text(each().map(|(_, i)| Some(keys[i].as_str()))),
                            text(each().map(|(r, _)| Some(r.raw.get()))),
                            text(each().map(|(r, _)| Some(r.error.as_str()))),
                            text(each().map(|(r, _)| Some(r.source.as_str()))),
                            times(each().map(|_| at)),
                        ],
                    )
                },
                (table::Known::Nothing, None),
                table::Basis::Any,
            )
            .await?
            .unwrap_or_default();
        #[cfg(feature = "metrics")]
        etl_core::metrics::rejects_kept(kept as u64);
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_reads_delta_stats_times() {
        let stats = r#"{"numRecords":2,"maxValues":{"updated_at":"2026-11-12T12:00:00.000Z"}}"#;
        let t = newest_in(stats, "updated_at").unwrap();
        assert_eq!(
            humantime::format_rfc3339(t).to_string(),
            "2026-11-12T12:00:00Z"
        );
        assert_eq!(newest_in(r#"{"numRecords":2}"#, "updated_at"), None);
    }
}
