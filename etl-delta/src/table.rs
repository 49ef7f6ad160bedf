//! [`KeyedTable`]: a Delta table whose entries are known by a key column,
//! appended to so that it never holds a key twice, whoever else writes.
//!
//! An append is one log entry at the version after the last one this
//! writer knows, written only if that version is free ([`crate::log`]).
//! A writer that lost the race reads the winners' entries, keeps only the
//! entries of its own still new, and appends again at the next version.
//! So the check and the commit are one optimistic transaction, with no
//! lock of ours.
//!
//! Every entry also carries a `txn` action of one app id shared by every
//! writer of the table ([`APP_ID`]): a writer that commits through
//! delta-rs's own conflict checker (this crate's earlier releases) then
//! sees any two appends racing as `ConcurrentTransaction`, not as blind
//! appends free to pass each other.

use buoyant_kernel::snapshot::Snapshot;
use deltalake::arrow::array::{new_null_array, RecordBatch};
use deltalake::arrow::error::ArrowError;
use deltalake::checkpoints;
use deltalake::kernel::transaction::PROTOCOL;
use deltalake::kernel::{
    Add, Metadata, MetadataExt, Remove, StructField, StructType, Transaction, Version,
};
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::operations::create::CreateBuilder;
use deltalake::protocol::SaveMode;
use deltalake::table::config::TablePropertiesExt;
use deltalake::writer::{DeltaWriter, RecordBatchWriter, WriteMode};
use deltalake::{DeltaTable, DeltaTableBuilder, DeltaTableError, ObjectStore, Path};
use etl_core::EtlError;
use std::collections::HashSet;
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::columns::{arrow_schema, Columns};
use crate::errors::{from_arrow, from_delta, lost_race};
use crate::keys::{writer_properties, DataFile, KeyIndex, ROW_GROUP};
use crate::location::Location;
use crate::log;

mod merge;
pub(crate) use merge::{time_of, Holders, Rewrite};

/// The app id of the `txn` action every append commits: one for all
/// writers of a table, so that any two appends racing conflict.
pub(crate) const APP_ID: &str = "etl-delta";

/// What the caller of [`KeyedTable::append`] knows of its entries, so
/// that they need not all be looked up in the table's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    /// Nothing: every entry is looked up.
    Nothing,
    /// Every entry is distinct and was new at this version
    /// ([`KeyedTable::fresh`]): while the table is still at it, none is
    /// looked up again (a commit that loses a race looks them up against
    /// the winners' files).
    NewAt(Version),
    /// This writer never wrote any of them (the child rows of records it
    /// found new, and did not write before): only other writers' files
    /// are looked in.
    NeverWritten,
}

/// What a typed batch was made on, checked before each attempt to commit
/// it ([`KeyedTable::append`]): a batch made on columns the table no
/// longer agrees with is not committed, and its caller makes it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Basis<'a> {
    /// Nothing to check: the table is not typed, or the batch adds no
    /// column to a resource's table.
    Any,
    /// The family's schema text the resource's table held when the batch
    /// was made, which the batch grows (its fields hold the new text):
    /// committed only while the table still holds it.
    Text(&'a str),
    /// A child table's batch, made on the columns the family's schema
    /// gives it: committed only while each of them the table holds is as
    /// the table holds it ([`crate::fields::disagrees`]). The columns it
    /// adds go in the commit of its rows, or alone where it has no row of
    /// its own (the schema text that will list them never names a column
    /// its table lacks).
    Columns,
}

impl Basis<'_> {
    /// Whether the table, of the schema `have`, no longer agrees with a
    /// batch of the columns `fields` made on this basis.
    fn moved(self, have: &StructType, fields: &[StructField]) -> bool {
        match self {
            Basis::Any => false,
            Basis::Text(base) => crate::fields::stored_schema(have) != Some(base),
            Basis::Columns => crate::fields::disagrees(have, fields),
        }
    }
}

/// Data files written for the entries of an append before its commit
/// ([`KeyedTable::stage`]), so that the files of several tables are
/// written at once and committed one after another.
pub(crate) struct Staged {
    /// The version the entries were found new at.
    at: Version,
    /// The entries the files hold.
    entries: Vec<usize>,
    adds: Vec<Add>,
}

impl Staged {
    /// Files written for entries no commit will take: only to be
    /// discarded ([`KeyedTable::discard`]).
    pub(crate) fn written(adds: Vec<Add>) -> Self {
        Staged {
            at: 0,
            entries: Vec::new(),
            adds,
        }
    }
}

/// How many races one append may lose before it gives up with a transient
/// error (the caller's retry policy then decides): each loss means another
/// writer's commit went in, so the table as a whole moves on.
pub(crate) const MAX_RACES: usize = 64;

/// A table and the keys it holds.
pub(crate) struct KeyedTable {
    location: Location,
    columns: Columns,
    state: Mutex<State>,
}

struct State {
    /// The table as last read whole: its metadata for the writer, its
    /// files for the cursor. An append does not bring it up to date.
    table: DeltaTable,
    /// The newest version this writer knows: its own last commit, or the
    /// last it read. The next append goes one past it.
    version: Version,
    /// The table's metadata and schema at `version` (a typed table's
    /// schema grows with this writer's commits and others').
    metadata: Metadata,
    schema: StructType,
    /// A checkpoint is written at every this many versions.
    checkpoint_every: u64,
    index: KeyIndex,
    /// The version of the shared `txn` the next commit carries.
    next_txn: i64,
    /// The checkpoint being written, if one is: it runs beside the
    /// writer's next work ([`State::settle`]).
    checkpointing: Option<JoinHandle<()>>,
    /// The files this writer committed, kept for a staging table's
    /// switch ([`KeyedTable::keep_adds`]); `None` for any other table.
    kept: Option<Vec<Add>>,
}

impl std::fmt::Debug for KeyedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedTable")
            .field("location", &self.location.shown)
            .finish_non_exhaustive()
    }
}

impl KeyedTable {
    /// Opens the table at `location`, creating it with `columns` if it does
    /// not exist; an existing table must hold exactly `columns`. Reads the
    /// keys' filters of every live file.
    pub async fn open(location: Location, columns: Columns) -> Result<Self, EtlError> {
        location.prepare()?;
        let shown = location.shown.clone();
        let fail = |e: DeltaTableError, what: &str| from_delta(e, what, &shown);
        let mut table = DeltaTableBuilder::from_url(location.url.clone())
            .map_err(|e| fail(e, "opening"))?
            .build()
            .map_err(|e| fail(e, "opening"))?;
        let exists = table
            .verify_deltatable_existence()
            .await
            .map_err(|e| fail(e, "opening"))?;
        if !exists {
            create(&location, &columns).await?;
        }
        table.load().await.map_err(|e| fail(e, "reading the log"))?;
        let schema = table
            .snapshot()
            .map_err(|e| fail(e, "reading the log"))?
            .schema();
        if let Some(why) = columns.mismatch(&schema) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {shown}: {why}"
            )));
        }
        let snapshot = table.snapshot().map_err(|e| fail(e, "reading the log"))?;
        PROTOCOL.can_write_to(snapshot).map_err(|e| {
            EtlError::InvalidInput(format!("Delta table {shown}: cannot write to it: {e}"))
        })?;
        let version = snapshot.version();
        let checkpoint_every = snapshot.table_config().checkpoint_interval().get();
        let metadata = snapshot.metadata().clone();
        let schema = StructType::clone(&snapshot.schema());
        let mut state = State {
            table,
            version,
            metadata,
            schema,
            checkpoint_every,
            index: KeyIndex::new(columns.key_filter())?,
            next_txn: 0,
            checkpointing: None,
            kept: None,
        };
        state.sync(&shown).await?;
        state.read_txn(&shown).await?;
        Ok(KeyedTable {
            location,
            columns,
            state: Mutex::new(state),
        })
    }

    /// Where the table is, as the user wrote it.
    pub fn shown(&self) -> &str {
        &self.location.shown
    }

    /// The table's columns.
    pub fn columns(&self) -> &Columns {
        &self.columns
    }

    /// Appends the entries with `keys` that the table does not hold (each
    /// once: the first of equal keys), as one commit, and returns how many
    /// it wrote. `build` makes the batch of the entries at the indexes it
    /// is given, of the columns `fields` (those the table lacks are added
    /// by the same commit). `Ok` only once the commit is in the log.
    ///
    /// `known` is what the caller knows of the entries, so that they need
    /// not all be looked up ([`Known`]). `ahead` are files
    /// [`KeyedTable::stage`] wrote for the same entries: they are
    /// committed as they are while the table is still at the version they
    /// were staged at, or while the entries still new are the same.
    ///
    /// A checkpoint this commit makes due is written beside the caller's
    /// next work; the table's next append waits for it before its commit.
    ///
    /// `basis`: what a typed batch was made on ([`Basis`]). The commit
    /// answers `None`, committing nothing, once the table no longer
    /// agrees with it (another writer grew it): the caller makes the
    /// batch again.
    pub async fn append(
        &self,
        keys: &[String],
        fields: &[StructField],
        build: impl Fn(&[usize]) -> Result<RecordBatch, ArrowError>,
        (known, ahead): (Known, Option<Staged>),
        basis: Basis<'_>,
    ) -> Result<Option<usize>, EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        state.settle().await;
        // The files written for the last attempt, and for which entries.
        let mut staged = ahead;
        // The table as this sink last saw it: another writer's commit since
        // then is found by the commit itself (the shared `txn` conflicts),
        // which costs a look at the log only when it happens.
        for _ in 0..MAX_RACES {
            let store = state.table.object_store();
            if basis.moved(&state.schema, fields) {
                discard(&store, staged.take()).await;
                return Ok(None);
            }
            let fresh = state
                .still_new(&self.columns, keys, known, staged.as_ref(), shown)
                .await?;
            let replace = matches!(basis, Basis::Text(_));
            let columns_alone = basis == Basis::Columns
                && grown(&state.schema, fields, false)
                    .map_err(|why| EtlError::InvalidInput(format!("Delta table {shown}: {why}")))?
                    .is_some();
            if fresh.is_empty() && !columns_alone {
                discard(&store, staged.take()).await;
                return Ok(Some(0));
            }
            let (adds, metadata) = state
                .stage(
                    &fresh,
                    staged.take(),
                    (fields, &build),
                    (&self.columns, replace),
                    shown,
                )
                .await?;
            let at = state.version;
            match state.commit(&adds, &[], metadata, None).await {
                Ok(()) => {
                    state.note_written(&adds, keys, &fresh);
                    return Ok(Some(fresh.len()));
                }
                Err(e) if lost_race(&e) => {
                    tracing::debug!(table = shown, error = %e, "lost a commit race; checking again against the winners");
                    staged = Some(Staged {
                        at,
                        entries: fresh,
                        adds,
                    });
                    state.catch_up(&self.columns, shown).await?;
                }
                Err(e) => {
                    discard(
                        &store,
                        Some(Staged {
                            at,
                            entries: fresh,
                            adds,
                        }),
                    )
                    .await;
                    return Err(from_delta(e, "committing", shown));
                }
            }
        }
        Err(EtlError::Network(format!(
            "Delta table {shown}: lost the commit race {MAX_RACES} times in a row to other writers"
        )))
    }

    /// Writes the data files of an append of the entries with `keys`
    /// ([`KeyedTable::append`] takes the same arguments) without
    /// committing them: the append then commits them as they are, unless
    /// the table moved on and other entries are new by then. The files
    /// are encoded on a task of their own, so the files of several tables
    /// are written at once. `None` when every entry is held, or when the
    /// table no longer agrees with the batch's `basis` (the append then
    /// answers so).
    pub async fn stage(
        &self,
        keys: &[String],
        fields: &[StructField],
        build: impl Fn(&[usize]) -> Result<RecordBatch, ArrowError>,
        (known, basis): (Known, Basis<'_>),
    ) -> Result<Option<Staged>, EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        if basis.moved(&state.schema, fields) {
            return Ok(None);
        }
        let fresh = state
            .still_new(&self.columns, keys, known, None, shown)
            .await?;
        if fresh.is_empty() {
            return Ok(None);
        }
        let (adds, _) = state
            .stage(
                &fresh,
                None,
                (fields, &build),
                (&self.columns, false),
                shown,
            )
            .await?;
        Ok(Some(Staged {
            at: state.version,
            entries: fresh,
            adds,
        }))
    }

    /// Deletes files [`KeyedTable::stage`] wrote that will not be
    /// committed (best effort, as they are not part of the table).
    pub async fn discard(&self, staged: Option<Staged>) {
        let store = self.store().await;
        discard(&store, staged).await;
    }

    /// Keeps, from now on, the files this writer commits, for
    /// [`KeyedTable::kept`]: a replace's staging table, which only its
    /// own writer writes.
    pub async fn keep_adds(&self) {
        self.state.lock().await.kept.get_or_insert_with(Vec::new);
    }

    /// The files this writer committed since [`KeyedTable::keep_adds`].
    pub async fn kept(&self) -> Vec<Add> {
        self.state.lock().await.kept.clone().unwrap_or_default()
    }

    /// Replaces the table's content with the files `adds` (already
    /// written, their paths relative to this table), and its columns with
    /// `fields` added, in one commit that removes every file the table
    /// holds when it goes in: a reader sees the old content whole, then the
    /// new whole. A writer's commit that goes in first is removed too.
    /// Refused, committing nothing, when the table no longer agrees with
    /// `basis` (another writer changed its columns or schema text since
    /// the replace began).
    pub async fn switch(
        &self,
        adds: &[Add],
        fields: &[StructField],
        basis: Basis<'_>,
    ) -> Result<(), EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        state.settle().await;
        for _ in 0..MAX_RACES {
            state.refresh(&self.columns, shown).await?;
            if basis.moved(&state.schema, fields) {
                return Err(EtlError::InvalidInput(format!(
                    "Delta table {shown}: another writer changed its columns while this run replaced it; the table keeps what it held: run again"
                )));
            }
            let grown = grown(&state.schema, fields, matches!(basis, Basis::Text(_)))
                .map_err(|why| EtlError::InvalidInput(format!("Delta table {shown}: {why}")))?;
            let metadata = state.metadata_of(grown, shown)?;
            let removes: Vec<Remove> = state
                .table
                .snapshot()
                .map_err(|e| from_delta(e, "reading the log", shown))?
                .log_data()
                .iter()
                .map(|f| f.remove_action(true))
                .collect();
            match state.commit(adds, &removes, metadata, None).await {
                Ok(()) => {
                    state.settle().await;
                    return Ok(());
                }
                Err(e) if lost_race(&e) => {
                    tracing::debug!(table = shown, error = %e, "lost a commit race; replacing again");
                }
                Err(e) => return Err(from_delta(e, "committing", shown)),
            }
        }
        Err(EtlError::Network(format!(
            "Delta table {shown}: lost the commit race {MAX_RACES} times in a row to other writers"
        )))
    }

    /// Which of the entries with `keys` the table does not hold (the index
    /// of the first of each key, in order), and the version it was at.
    pub async fn fresh(&self, keys: &[String]) -> Result<(Version, Vec<usize>), EtlError> {
        let mut state = self.state.lock().await;
        let fresh = state
            .fresh(&self.columns, keys, self.shown(), false)
            .await?;
        Ok((state.version, fresh))
    }

    /// The table's schema as this writer last read or wrote it.
    pub async fn schema(&self) -> StructType {
        self.state.lock().await.schema.clone()
    }

    /// Waits for the checkpoint this table's last commit made due, if one
    /// is being written ([`State::settle`]).
    pub async fn settle(&self) {
        self.state.lock().await.settle().await;
    }

    /// The store the table's files are in.
    pub async fn store(&self) -> Arc<dyn ObjectStore> {
        self.state.lock().await.table.object_store()
    }

    /// `each` of the live files, as the log lists them, after bringing the
    /// table up to date: what the log says of the table without reading a
    /// data file.
    pub async fn live_files<R>(
        &self,
        each: impl Fn(&deltalake::kernel::LogicalFileView) -> R,
    ) -> Result<Vec<R>, EtlError> {
        let mut state = self.state.lock().await;
        state.refresh(&self.columns, self.shown()).await?;
        let snapshot = state
            .table
            .snapshot()
            .map_err(|e| from_delta(e, "reading the log", self.shown()))?;
        Ok(snapshot.log_data().iter().map(|f| each(&f)).collect())
    }
}

impl State {
    /// The entries of `keys` an append commits now: those `staged` was
    /// written for while the table is still at the version they were
    /// found new at; all of them while it is at the version `known` found
    /// them new at; otherwise those the table does not hold.
    async fn still_new(
        &mut self,
        columns: &Columns,
        keys: &[String],
        known: Known,
        staged: Option<&Staged>,
        shown: &str,
    ) -> Result<Vec<usize>, EtlError> {
        match (known, staged) {
            (_, Some(staged)) if staged.at == self.version => Ok(staged.entries.clone()),
            (Known::NewAt(version), _) if version == self.version => Ok((0..keys.len()).collect()),
            (known, _) => {
                let others_only = matches!(known, Known::NeverWritten);
                self.fresh(columns, keys, shown, others_only).await
            }
        }
    }

    /// Notes the keys of the entries `fresh` as held by the files `adds`
    /// just committed. Every file gets a filter of all of them: where the
    /// writer split them over several files, a probe's hit is confirmed
    /// against the file's own key column, so an unneeded hit costs a read,
    /// never a wrong answer.
    fn note_written(&mut self, adds: &[Add], keys: &[String], fresh: &[usize]) {
        let written: Vec<&str> = fresh.iter().map(|&i| keys[i].as_str()).collect();
        for add in adds {
            self.index.add_written(data_file(add), &written);
        }
    }

    /// The index of the first of each of `keys` the table does not hold,
    /// as this writer knows the table (`others_only`: as
    /// [`KeyIndex::held`] takes it).
    async fn fresh(
        &mut self,
        columns: &Columns,
        keys: &[String],
        shown: &str,
        others_only: bool,
    ) -> Result<Vec<usize>, EtlError> {
        let store = self.table.object_store();
        let held = match self.index.held(&store, keys, shown, others_only).await {
            Ok(held) => held,
            // A file compacted away and vacuumed since: look again.
            Err(_) => {
                self.refresh(columns, shown).await?;
                self.index.held(&store, keys, shown, others_only).await?
            }
        };
        Ok(first_unheld(keys, &held))
    }

    /// Reads the log's new commits, then the new files' key filters.
    async fn refresh(&mut self, columns: &Columns, shown: &str) -> Result<(), EtlError> {
        self.table
            .update_incremental(None)
            .await
            .map_err(|e| from_delta(e, "reading the log", shown))?;
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| from_delta(e, "reading the log", shown))?;
        let schema = StructType::clone(&snapshot.schema());
        if let Some(why) = columns.mismatch(&schema) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {shown}: changed by another writer: {why}"
            )));
        }
        self.metadata = snapshot.metadata().clone();
        self.schema = schema;
        self.sync(shown).await
    }

    /// After a lost race: the winners' entries, read one by one, bring the
    /// index up to date; where one cannot be read so (or changed the
    /// table's schema), the table is read whole.
    async fn catch_up(&mut self, columns: &Columns, shown: &str) -> Result<(), EtlError> {
        let log_store = self.table.log_store();
        let fail = |e| from_delta(e, "reading the log", shown);
        let latest = log_store
            .get_latest_version(self.version)
            .await
            .map_err(fail)?;
        let changes = log::changes_since(log_store.as_ref(), self.version, latest, APP_ID)
            .await
            .map_err(fail)?;
        match changes {
            Some(changes) if !changes.reshaped => {
                let removed: HashSet<&Path> = changes.removed.iter().collect();
                let added = changes
                    .added
                    .iter()
                    .filter(|f| !removed.contains(&f.path))
                    .cloned()
                    .collect();
                self.index.remove(&changes.removed);
                let store = self.table.object_store();
                self.index.add(&store, added, shown).await?;
                if let Some(txn) = changes.txn {
                    self.next_txn = self.next_txn.max(txn + 1);
                }
                self.version = latest;
                Ok(())
            }
            _ => {
                self.refresh(columns, shown).await?;
                self.read_txn(shown).await
            }
        }
    }

    /// Brings the key index to the live files of the table as last read.
    async fn sync(&mut self, shown: &str) -> Result<(), EtlError> {
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| from_delta(e, "reading the log", shown))?;
        self.version = snapshot.version();
        let live: Vec<DataFile> = snapshot
            .log_data()
            .iter()
            .map(|f| DataFile {
                path: f.object_store_path(),
                size: u64::try_from(f.size()).unwrap_or(0),
            })
            .collect();
        let store = self.table.object_store();
        self.index.sync(&store, live, shown).await
    }

    /// The data files and schema change of an append of the entries
    /// `fresh`: the files the last attempt `staged` for the same entries,
    /// or new ones of the batch `build` makes of them (the files staged for
    /// others deleted); and, where `fields` (the batch's columns) has
    /// columns the table lacks (a typed table's new members), a metaData
    /// action to commit with them, on the schema as this writer last read
    /// it; with `replace`, also where a field of `fields` holds other
    /// metadata than the table's (the typed schema's new text).
    async fn stage(
        &mut self,
        fresh: &[usize],
        staged: Option<Staged>,
        (fields, build): (
            &[StructField],
            &impl Fn(&[usize]) -> Result<RecordBatch, ArrowError>,
        ),
        (columns, replace): (&Columns, bool),
        shown: &str,
    ) -> Result<(Vec<Add>, Option<Metadata>), EtlError> {
        let grown = grown(&self.schema, fields, replace)
            .map_err(|why| EtlError::InvalidInput(format!("Delta table {shown}: {why}")))?;
        let adds = match staged {
            // Columns alone: no row to write.
            earlier if fresh.is_empty() => {
                discard(&self.table.object_store(), earlier).await;
                Vec::new()
            }
            Some(Staged { entries, adds, .. }) if entries == fresh => adds,
            earlier => {
                discard(&self.table.object_store(), earlier).await;
                let batch = build(fresh).map_err(|e| from_arrow(e, shown))?;
                let schema = grown.as_ref().unwrap_or(&self.schema);
                let batch = conform(batch, schema).map_err(|e| from_arrow(e, shown))?;
                self.write(batch, columns, fresh.len(), shown).await?
            }
        };
        let metadata = self.metadata_of(grown, shown)?;
        Ok((adds, metadata))
    }

    /// The metaData action of the schema `grown` to, on the table's
    /// metadata as this writer last read it; `None` when nothing grew.
    fn metadata_of(
        &self,
        grown: Option<StructType>,
        shown: &str,
    ) -> Result<Option<Metadata>, EtlError> {
        grown
            .map(|schema| {
                self.metadata
                    .clone()
                    .with_schema(&schema)
                    .map_err(|e| from_delta(e.into(), "changing the schema", shown))
            })
            .transpose()
    }

    /// Writes `batch` as data files, not yet part of the table. Its
    /// columns may be more than the table's: a commit with a metaData
    /// action adds them. The encoding runs on a blocking thread of its
    /// own, so that several tables' files are encoded on as many cores,
    /// and the runtime's workers stay free for the I/O beside it (the
    /// next page's fetch): an encode is milliseconds of CPU with no await.
    async fn write(
        &self,
        batch: RecordBatch,
        columns: &Columns,
        rows: usize,
        shown: &str,
    ) -> Result<Vec<Add>, EtlError> {
        let batches = futures_util::stream::once(async { Ok(batch) });
        self.write_all(batches, columns, (rows, ROW_GROUP), shown)
            .await
    }

    /// Writes the `batches` (about `rows` rows in all, in row groups of at
    /// most `group`) as data files, as [`State::write`] does, each batch
    /// taken as the encoding task is ready for it: a file a merge rewrites
    /// costs a batch of memory and a row group encoded, not its rows
    /// decoded whole.
    async fn write_all(
        &self,
        batches: impl futures_util::Stream<Item = Result<RecordBatch, DeltaTableError>> + Send + 'static,
        columns: &Columns,
        (rows, group): (usize, usize),
        shown: &str,
    ) -> Result<Vec<Add>, EtlError> {
        let fail = |e| from_delta(e, "writing a data file", shown);
        let mut writer = RecordBatchWriter::for_table(&self.table)
            .map_err(fail)?
            .with_writer_properties(writer_properties(
                columns.key_filter(),
                columns.text(),
                (rows, group),
            ));
        // The writer's API is async (its flush puts the file), so the
        // blocking thread drives it on the runtime it came from.
        let runtime = tokio::runtime::Handle::current();
        let span = tracing::Span::current();
        let written = tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            runtime.block_on(async move {
                let mut batches = std::pin::pin!(batches);
                while let Some(batch) = futures_util::StreamExt::next(&mut batches).await {
                    writer
                        .write_with_mode(batch?, WriteMode::MergeSchema)
                        .await?;
                }
                writer.flush().await
            })
        });
        match written.await {
            Ok(adds) => adds.map_err(fail),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down.
            Err(e) => Err(EtlError::Io(std::io::Error::other(format!(
                "Delta table {shown}: writing a data file: {e}"
            )))),
        }
    }

    /// The shared `txn`'s version the table holds, plus one.
    async fn read_txn(&mut self, shown: &str) -> Result<(), EtlError> {
        let log_store = self.table.log_store();
        let snapshot = self
            .table
            .snapshot()
            .map_err(|e| from_delta(e, "reading the log", shown))?;
        self.next_txn = snapshot
            .transaction_version(log_store.as_ref(), APP_ID)
            .await
            .map_err(|e| from_delta(e, "reading the log", shown))?
            .map_or(0, |v| v + 1);
        Ok(())
    }

    /// Commits `adds` and `removes` (and `metadata`, a new schema; `note`,
    /// the token of a merge's note the commit makes due, [`log::Entry`])
    /// with the next version of the shared `txn` as the version after
    /// [`State::version`], and writes a checkpoint where one is due.
    async fn commit(
        &mut self,
        adds: &[Add],
        removes: &[Remove],
        metadata: Option<Metadata>,
        note: Option<&str>,
    ) -> Result<(), DeltaTableError> {
        let log_store = self.table.log_store();
        let version = self.version + 1;
        let txn = Transaction::new(APP_ID, self.next_txn);
        let entry = log::Entry {
            adds,
            removes,
            metadata: metadata.clone(),
            note,
        };
        log::append(log_store.as_ref(), version, entry, txn).await?;
        self.version = version;
        self.next_txn += 1;
        if let Some(kept) = &mut self.kept {
            kept.extend(adds.iter().cloned());
        }
        if let Some(metadata) = metadata {
            self.schema = metadata.parse_schema()?;
            self.metadata = metadata;
        }
        if (version + 1).is_multiple_of(self.checkpoint_every) {
            // One checkpoint at a time (an earlier one is long done: they
            // are this many commits apart).
            self.settle().await;
            self.checkpointing = Some(checkpoint(&self.table, version));
        }
        Ok(())
    }

    /// Waits for the checkpoint being written, if one is, so that a
    /// commit is never more than one checkpoint ahead of the store (and a
    /// load that follows the one that made it due finds it written).
    async fn settle(&mut self) {
        let Some(pending) = self.checkpointing.take() else {
            return;
        };
        match pending.await {
            Ok(()) => {}
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down.
            Err(e) => tracing::warn!(error = %e, "a Delta checkpoint was not written"),
        }
    }
}

/// Starts writing the checkpoint of `version` and removing the log entries
/// past the table's retention, as Delta writers do every so many commits,
/// so that readers (and this writer's next open) read one file, not the
/// whole log. The commit is in already: a checkpoint that fails is only a
/// slower read, and is logged, not returned.
///
/// The kernel reads the log at `version` itself (delta-rs's own
/// checkpoint wants the table read into its state at that version first,
/// which read the log a second time), on a blocking thread: writing it is
/// CPU work that would otherwise hold a runtime worker, and with it the
/// I/O of the load beside it, for tens of milliseconds.
fn checkpoint(table: &DeltaTable, version: Version) -> JoinHandle<()> {
    let log_store = table.log_store();
    // The engine takes the runtime it is made on, so it is made here.
    let engine = log_store.engine(None);
    let root = log_store.config().location().clone();
    let retention = table
        .snapshot()
        .map(|s| s.table_config().log_retention_duration())
        .unwrap_or(std::time::Duration::from_secs(30 * 24 * 3600));
    let written = tokio::task::spawn_blocking(move || {
        Snapshot::builder_for(root.as_str())
            .at_version(version)
            .build(engine.as_ref())
            .and_then(|snapshot| snapshot.checkpoint(engine.as_ref(), None))
            .map(|_| ())
    });
    let cleaned = async move {
        let failed = match written.await {
            Ok(done) => done.err().map(|e| e.to_string()),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down.
            Err(e) => Some(e.to_string()),
        };
        if let Some(error) = failed {
            tracing::warn!(version, %error, "a Delta checkpoint was not written");
            return;
        }
        let now = crate::columns::micros(std::time::SystemTime::now()).unwrap_or(0) / 1000;
        let cutoff = now.saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
        if let Err(e) =
            checkpoints::cleanup_expired_logs_for(version, log_store.as_ref(), cutoff, None).await
        {
            tracing::warn!(version, error = %e, "expired Delta log entries were not removed");
        }
    };
    tokio::spawn(cleaned.in_current_span())
}

/// The schema of the table at `location`, read and nothing made; `None`
/// when there is no table.
pub(crate) async fn existing_schema(location: &Location) -> Result<Option<StructType>, EtlError> {
    let shown = &location.shown;
    let fail = |e: DeltaTableError, what: &str| from_delta(e, what, shown);
    if location.url.scheme() == "file" && location.url.to_file_path().is_ok_and(|p| !p.exists()) {
        return Ok(None);
    }
    let mut table = DeltaTableBuilder::from_url(location.url.clone())
        .map_err(|e| fail(e, "opening"))?
        .build()
        .map_err(|e| fail(e, "opening"))?;
    if !table
        .verify_deltatable_existence()
        .await
        .map_err(|e| fail(e, "opening"))?
    {
        return Ok(None);
    }
    table.load().await.map_err(|e| fail(e, "reading the log"))?;
    let schema = table
        .snapshot()
        .map_err(|e| fail(e, "reading the log"))?
        .schema();
    Ok(Some(StructType::clone(&schema)))
}

/// Creates the table at `location`. Another writer creating it at the same
/// moment is no error: the table is then opened as it made it.
async fn create(location: &Location, columns: &Columns) -> Result<(), EtlError> {
    let made = CreateBuilder::new()
        .with_location(location.url.as_str())
        .with_columns(columns.fields().iter().cloned())
        .with_save_mode(SaveMode::Ignore)
        .await;
    match made {
        Ok(_) => Ok(()),
        Err(e) => {
            let exists = DeltaTableBuilder::from_url(location.url.clone()).and_then(|b| b.build());
            match exists {
                Ok(table) if table.verify_deltatable_existence().await.unwrap_or(false) => Ok(()),
                _ => Err(from_delta(e, "creating", &location.shown)),
            }
        }
    }
}

/// `have`'s fields, then each of `want`'s it lacks, or `None` when it
/// lacks none (and, with `replace`, holds each as it is in `want`). A field
/// of `want` that `have` holds with another type is an error naming it:
/// a column's type never changes.
fn grown(
    have: &StructType,
    want: &[StructField],
    replace: bool,
) -> Result<Option<StructType>, String> {
    let mut fields: Vec<StructField> = have.fields().cloned().collect();
    let mut changed = false;
    for field in want {
        match fields.iter_mut().find(|f| f.name() == field.name()) {
            Some(held) if held.data_type() != field.data_type() => {
                return Err(format!(
                    "column `{}` is {} in the table, not {}",
                    field.name(),
                    held.data_type(),
                    field.data_type()
                ));
            }
            Some(held) if replace && held != field => {
                *held = field.clone();
                changed = true;
            }
            Some(_) => {}
            None => {
                fields.push(field.clone());
                changed = true;
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    StructType::try_new(fields)
        .map(Some)
        .map_err(|e| format!("its schema: {e}"))
}

/// `batch` with `schema`'s columns in its order: a column it lacks is all
/// null (another writer's new column).
fn conform(batch: RecordBatch, schema: &StructType) -> Result<RecordBatch, ArrowError> {
    let fields: Vec<StructField> = schema.fields().cloned().collect();
    let target = arrow_schema(&fields);
    if batch.schema().fields() == target.fields() {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let columns = target
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(column) => column.clone(),
            None => new_null_array(f.data_type(), rows),
        })
        .collect();
    RecordBatch::try_new(target, columns)
}

/// The indexes of the first entry of each key not held.
fn first_unheld(keys: &[String], held: &[bool]) -> Vec<usize> {
    // foldhash, not std's SipHash: content keys are hashes already, and
    // this runs over every key of every load.
    let mut seen: HashSet<&str, foldhash::fast::RandomState> =
        HashSet::with_capacity_and_hasher(keys.len(), Default::default());
    (0..keys.len())
        .filter(|&i| !held[i] && seen.insert(keys[i].as_str()))
        .collect()
}

fn data_file(add: &Add) -> DataFile {
    DataFile {
        path: Path::from(add.path.as_str()),
        size: u64::try_from(add.size).unwrap_or(0),
    }
}

/// Deletes data files that were written but will never be committed (best
/// effort: a file left behind is not part of the table, and VACUUM removes
/// it).
async fn discard(store: &Arc<dyn ObjectStore>, staged: Option<Staged>) {
    for add in staged.map(|s| s.adds).unwrap_or_default() {
        let path = data_file(&add).path;
        if let Err(e) = store.delete(&path).await {
            tracing::debug!(file = %path, error = %e, "an uncommitted data file was left behind");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_equal_unheld_keys_is_kept() {
        let keys: Vec<String> = ["a", "b", "a", "c", "b"].map(String::from).to_vec();
        assert_eq!(
            first_unheld(&keys, &[false, false, false, true, false]),
            [0, 1]
        );
        assert_eq!(first_unheld(&keys, &[true; 5]), Vec::<usize>::new());
    }
}
