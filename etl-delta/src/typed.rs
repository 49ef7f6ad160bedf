//! Typed tables in Delta: a record's members as columns, its lists as
//! child tables beside it (`PATH__labels`), the family's schema kept in the
//! resource's table (etl-core's `content::typed` says how records become
//! rows; this says how they reach the tables).
//!
//! A load is one commit a table, each holding its rows and the columns
//! they add: the child tables' first, the deepest first, then the
//! resource's, whose commit also carries the family's schema text (in the
//! field metadata of `_etl_row`, as `Schema::to_json` writes it). So a
//! record's row is only ever in once all its child rows are, and a reader
//! never sees a version with columns but not their rows.
//!
//! Every table decides its own columns: a commit goes in only while the
//! table agrees with the batch (a child table: each column the batch and
//! the table both hold has one name, type and path, [`disagrees`]; the
//! resource's table: the schema text is the one the batch was made on).
//! A writer that loses reads the schema text again, takes in what the
//! child tables it has open hold beyond it (another writer's columns whose
//! text is not in yet, or never will be: it was killed between its
//! commits), and makes its rows again. So every column has one name and
//! one type in every table of the family, and the text never names a
//! column its table lacks.

use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::error::ArrowError;
use deltalake::kernel::{Add, StructField, StructType};
use etl_core::content::typed::{loader, update_micros, Column, Schema, SchemaOptions, ShredError};
use etl_core::content::write::Write;
use etl_core::content::KeyedJson;
use etl_core::{EtlError, Record, Reject};
use futures_util::future::join_all;
use std::collections::hash_map::{Entry, HashMap};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::Mutex;

use crate::builders::{Builders, TableBatch};
use crate::columns::{micros, Columns};
use crate::deleted::Deleted;
use crate::errors::from_arrow;
use crate::fields::{
    child_suffix, held_column, meta, stored_schema, table_fields, LIST_KEY, PARENT_KEY, SCHEMA_KEY,
};
use crate::location::Location;
use crate::table::{Basis, KeyedTable, Known, Staged};

mod merge;
mod pending;
pub(crate) use merge::Keyed;

/// A typed table family: the child tables opened so far and the schema
/// this process last read or committed. The resource's table is the
/// sink's own.
pub(crate) struct Typed {
    at: Location,
    /// A replace's staging directory: the family's tables are then staged
    /// in this directory inside each of its tables ([`crate::replace`]).
    stage: Option<String>,
    options: SchemaOptions,
    state: Mutex<State>,
    /// A merge family's remembered deletions; `None` for any other.
    deleted: Option<Deleted>,
    /// A test's writer that stops as if killed between its commits: the
    /// child tables' go in, the resource's never comes.
    #[cfg(test)]
    killed_before_root: std::sync::atomic::AtomicBool,
    /// A test's merge writer that stops as if killed between the resource
    /// table's commit and the child rows' removal.
    #[cfg(test)]
    killed_before_children: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Typed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Typed")
            .field("location", &self.at.shown)
            .finish_non_exhaustive()
    }
}

struct State {
    schema: Schema,
    /// The stored text `schema` was read from or committed as.
    stored: String,
    /// `schema`'s generation when read or committed: past it, the schema
    /// holds columns or tables not yet committed.
    committed: u64,
    /// Whether the family held rows before this load (a frozen contract
    /// holds from then on).
    exists: bool,
    /// The child tables opened so far, by name (a schema read again may
    /// list its tables in another order).
    children: HashMap<String, Arc<KeyedTable>>,
    /// Under merge, the removal of the child rows of the versions the last
    /// load took out, running beside the next load ([`merge`]).
    sweeping: Option<tokio::task::JoinHandle<()>>,
    /// Records of loads that failed after their child rows may have been
    /// committed: their child rows are looked up in this writer's own files
    /// too when they come again.
    unfinished: HashSet<String>,
    /// Under merge, the content keys of the versions this writer put in
    /// (a filter: a hit may be false): a version put in again (at an
    /// equal or absent update time, read later) has its child rows in
    /// this writer's own files already ([`merge`]).
    inserted: Option<deltalake::parquet::bloom_filter::Sbbf>,
}

impl Typed {
    /// The columns of a new family's resource table named `name`: the
    /// fresh schema's (its hinted columns), the schema in `_etl_row`.
    pub(crate) fn fresh_columns(name: &str, options: &SchemaOptions) -> Result<Columns, EtlError> {
        let fresh = Schema::new(name, options.clone()).map_err(EtlError::InvalidInput)?;
        let fields = table_fields(&fresh, 0, Some(&fresh.to_json()));
        let columns = Columns::growing(fields, loader::RECORD_COLUMNS.len()).with_text(loader::ROW);
        // A merge table holds one row per primary key: its key filters are
        // on `_etl_id`, so that a page's keys find the files holding them.
        Ok(match options.write {
            Write::Merge(_) => columns.keyed_by(loader::ID),
            _ => columns,
        })
    }

    /// The family of the resource table `root` (opened with
    /// [`Typed::fresh_columns`]), its schema read from it.
    pub(crate) async fn open(
        root: &KeyedTable,
        at: Location,
        options: SchemaOptions,
    ) -> Result<Typed, EtlError> {
        let fields = root.schema().await;
        let stored = stored_schema(&fields).ok_or_else(|| {
            EtlError::InvalidInput(format!(
                "Delta table {}: a typed table without its schema (`{SCHEMA_KEY}` in the metadata of `{}`)",
                at.shown,
                loader::ROW
            ))
        })?;
        let mut schema = read_as_written(stored, &options, &at)?;
        let exists = crate::count(root).await? > 0;
        schema.set_exists(exists);
        let state = State {
            committed: schema.generation(),
            stored: stored.to_owned(),
            schema,
            exists,
            children: HashMap::new(),
            sweeping: None,
            unfinished: HashSet::new(),
            inserted: None,
        };
        let deleted = match options.write {
            Write::Merge(_) => Some(Deleted::beside(&at)?),
            _ => None,
        };
        let typed = Typed {
            at,
            stage: None,
            options,
            state: Mutex::new(state),
            deleted,
            #[cfg(test)]
            killed_before_root: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            killed_before_children: std::sync::atomic::AtomicBool::new(false),
        };
        if typed.deleted.is_some() {
            // What a merge writer killed between its commits left.
            typed.sweep_notes(root, SystemTime::now()).await;
        }
        Ok(typed)
    }

    /// The newest time of the deletions a merge family remembers
    /// ([`Deleted::newest`]); `None` for any other family.
    pub(crate) async fn newest_deletion(&self) -> Result<Option<SystemTime>, EtlError> {
        match &self.deleted {
            Some(deleted) => deleted.newest().await,
            None => Ok(None),
        }
    }

    /// Whether the family held rows when it was opened.
    pub(crate) fn existed(&mut self) -> bool {
        self.state.get_mut().exists
    }

    /// This family, opened on a replace's staging table of the resource
    /// (`at` naming the family's own resource table), staged in the
    /// directory `stage` inside each table of the family; `exists`:
    /// whether the family held rows before the replace (a frozen contract
    /// holds to what it holds).
    pub(crate) fn staged(mut self, at: Location, stage: String, exists: bool) -> Self {
        let state = self.state.get_mut();
        state.exists = exists;
        state.schema.set_exists(exists);
        self.at = at;
        self.stage = Some(stage);
        self
    }

    /// The files the staging table of the child table `name` committed
    /// and its columns, if this replace staged any row in it.
    pub(crate) async fn staged_child(&self, name: &str) -> Option<(Vec<Add>, StructType)> {
        let state = self.state.lock().await;
        let table = state.children.get(name)?;
        Some((table.kept().await, table.schema().await))
    }

    /// Waits for the removal of replaced versions' child rows under way,
    /// and the checkpoints the child tables' last commits made due.
    pub(crate) async fn settle(&self) {
        let mut state = self.state.lock().await;
        merge::swept(&mut state).await;
        for child in state.children.values() {
            child.settle().await;
        }
        if let Some(deleted) = &self.deleted {
            deleted.settle().await;
        }
    }

    /// The family's schema as this process last read or committed it.
    pub(crate) async fn schema(&self) -> Schema {
        self.state.lock().await.schema.clone()
    }

    /// Loads `rows` (their keys and canonical JSON `encoded`) that the
    /// resource's table `root` lacks: the schema they grow first, then
    /// their child tables' rows, then theirs. Returns how many rows were
    /// new, and the records a frozen schema refused, as rejects.
    pub(crate) async fn store<T: Record>(
        &self,
        root: &KeyedTable,
        rows: &[T],
        encoded: &[KeyedJson],
    ) -> Result<(usize, Vec<Reject>), EtlError> {
        // Under the family's lock from the look-up on: what it finds new is
        // new to every load of this process, whose child rows it writes.
        let mut state = self.state.lock().await;
        let keys: Vec<String> = encoded.iter().map(|c| c.key.clone()).collect();
        let (at_version, fresh) = root.fresh(&keys).await?;
        if fresh.is_empty() {
            return Ok((0, Vec::new()));
        }
        let records: Vec<&str> = fresh.iter().map(|&i| keys[i].as_str()).collect();
        for _ in 0..crate::table::MAX_RACES {
            let (batch, refused, grows) = self
                .grow(root, &mut state, rows, encoded, (&fresh, None))
                .await?;
            // This writer wrote no child row of a record it finds new,
            // unless a load of it failed (or was made again) after its
            // child rows were in: only other writers' files (a killed
            // run's, a concurrent one's) are looked in.
            let children = match records.iter().any(|k| state.unfinished.contains(*k)) {
                true => Known::Nothing,
                false => Known::NeverWritten,
            };
            let committed = self
                .commit(
                    root,
                    &mut state,
                    batch,
                    (at_version, children),
                    grows.as_ref(),
                )
                .await;
            match committed {
                Ok(Some(new)) => {
                    for k in &records {
                        state.unfinished.remove(*k);
                    }
                    // Committed with the rows, if there were any new.
                    if let Some(grows) = grows.filter(|_| new > 0) {
                        state.stored = grows.text;
                        state.committed = state.schema.generation();
                    }
                    state.exists = true;
                    state.schema.set_exists(true);
                    return Ok((new, refused));
                }
                // Another writer grew a table first: the batch is made
                // again on what the tables hold (its child rows, in, are
                // found held). The schema is read again, whatever text
                // the resource's table holds.
                Ok(None) => {
                    state
                        .unfinished
                        .extend(records.iter().map(|k| k.to_string()));
                    state.stored.clear();
                }
                Err(e) => {
                    state
                        .unfinished
                        .extend(records.iter().map(|k| k.to_string()));
                    return Err(e);
                }
            }
        }
        Err(EtlError::Network(format!(
            "Delta table {}: the schema moved under this load {} times in a row (other writers growing it)",
            self.at.shown,
            crate::table::MAX_RACES
        )))
    }

    /// Commits a load's rows: the child tables' first, then the resource's
    /// (`known`: the version its records were found new at, and what is
    /// known of their child rows), with the schema they grow where `grows`
    /// says. Returns how many records were new (`None`: a table another
    /// writer grew first no longer agreed with the batch, and the tables
    /// from it on were not committed).
    ///
    /// Every table's data files are written at once (each on a task of its
    /// own), then committed one table after another, the deepest first: a
    /// row is only ever committed after every row below it.
    async fn commit(
        &self,
        root: &KeyedTable,
        state: &mut State,
        mut batch: Builders,
        (at_version, children): (deltalake::kernel::Version, Known),
        grows: Option<&RootGrowth>,
    ) -> Result<Option<usize>, EtlError> {
        let parts = self
            .parts(state, &mut batch, grows, (at_version, children))
            .await?;
        let tables: Vec<&KeyedTable> = parts
            .iter()
            .map(|&(at, ..)| match at {
                0 => root,
                _ => &state.children[state.schema.tables()[at].name()],
            })
            .collect();
        let base = grows.map(|g| g.base.as_str());
        let staged = join_all(
            parts
                .iter()
                .zip(&tables)
                .map(|((at, part, known), table)| stage(table, part, (*known, basis(*at, base)))),
        )
        .await;
        #[cfg(test)]
        if self
            .killed_before_root
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            let (mut parts, mut staged, last) = (parts, staged, tables.len() - 1);
            parts.pop();
            root.discard(staged.pop().and_then(Result::ok).flatten())
                .await;
            commit_staged(&tables[..last], parts, staged, None).await?;
            return Err(EtlError::Io(std::io::Error::other("killed")));
        }
        commit_staged(&tables, parts, staged, base).await
    }

    /// Each table's rows of `batch`, the deepest table first, with what is
    /// known of them (the resource's: new at `at_version`; the child
    /// tables': `children`), the resource's with the schema's new text
    /// where it `grows`; a child table with no row is left out, and one
    /// with rows opened (made) first.
    async fn parts(
        &self,
        state: &mut State,
        batch: &mut Builders,
        grows: Option<&RootGrowth>,
        (at_version, children): (deltalake::kernel::Version, Known),
    ) -> Result<Vec<(usize, TableBatch, Known)>, EtlError> {
        let loaded_at = micros(SystemTime::now()).unwrap_or(0);
        let shown = &self.at.shown;
        let mut parts = Vec::new();
        for at in (0..batch.tables()).rev() {
            let mut part = batch
                .finish(at, &state.schema, loaded_at)
                .map_err(|e| from_arrow(e, shown))?;
            if let (0, Some(grows)) = (at, grows) {
                // The resource's new columns and the schema's new text go
                // in the commit of its rows.
                part.fields = table_fields(&state.schema, 0, Some(&grows.text));
            }
            if at > 0 {
                if part.keys.is_empty() {
                    continue;
                }
                self.child(state, at).await?;
            }
            let known = match at {
                // Every row is of a record new at `at_version`.
                0 => Known::NewAt(at_version),
                _ => children,
            };
            parts.push((at, part, known));
        }
        Ok(parts)
    }

    /// Makes the batch's rows on the schema the resource's table holds,
    /// with what the open child tables hold beyond it taken in, and the
    /// growth to commit with them, if any ([`RootGrowth`]).
    async fn grow<T: Record>(
        &self,
        root: &KeyedTable,
        state: &mut State,
        rows: &[T],
        encoded: &[KeyedJson],
        (fresh, ids): (&[usize], Option<&[Option<String>]>),
    ) -> Result<(Builders, Vec<Reject>, Option<RootGrowth>), EtlError> {
        let fields = root.schema().await;
        let stored = stored_schema(&fields).unwrap_or_default();
        // The schema a batch is made on is the one the tables hold: read
        // again when another writer moved it, or when this one holds
        // growth no commit took (a load that failed, or whose records
        // were all another writer's), which would otherwise be taken for
        // this batch's own.
        if stored != state.stored || state.schema.generation() != state.committed {
            state.schema = read(stored, &self.options, &self.at)?;
            state.stored = stored.to_owned();
            state.committed = state.schema.generation();
            self.take_in(state).await?;
        }
        // A schema read back counts its tables as existing; a family that
        // holds no row yet is still shaped by its first load.
        state.schema.set_exists(state.exists);
        let (batch, refused) = self.shred(&mut state.schema, rows, encoded, (fresh, ids))?;
        let grows = (state.schema.generation() != state.committed).then(|| RootGrowth {
            base: state.stored.clone(),
            text: state.schema.to_json(),
        });
        Ok((batch, refused, grows))
    }

    /// Takes into the schema what the child tables this writer has open
    /// hold beyond it: tables and columns another writer committed whose
    /// schema text is not in yet (it is about to commit it, or was killed
    /// before it could). They count as growth, which the next commit of
    /// the resource's table writes into the text.
    async fn take_in(&self, state: &mut State) -> Result<(), EtlError> {
        let mut held = Vec::new();
        for (name, table) in &state.children {
            let fields = table.schema().await;
            let identity = fields.field(loader::PARENT_KEY).and_then(|f| {
                Some((
                    meta(f, PARENT_KEY)?.to_owned(),
                    meta(f, LIST_KEY)?.to_owned(),
                ))
            });
            // A table an earlier release made says not what it is: the
            // text, which listed it before it was made, does.
            let identity = identity.or_else(|| {
                let schema = &state.schema;
                let table = schema.tables().iter().find(|t| t.name() == name)?;
                let parent = schema.tables()[table.parent()?].name();
                Some((parent.to_owned(), table.path().to_owned()))
            });
            let Some((parent, path)) = identity else {
                continue;
            };
            let columns: Vec<Column> = fields
                .fields()
                .skip(loader::CHILD_COLUMNS.len())
                .filter_map(held_column)
                .collect();
            held.push((name.clone(), parent, path, columns));
        }
        // A parent before its children: each pass takes in those whose
        // parent the schema has.
        while !held.is_empty() {
            let before = held.len();
            let mut waiting = Vec::new();
            for (name, parent, path, columns) in held {
                if !state.schema.tables().iter().any(|t| t.name() == parent) {
                    waiting.push((name, parent, path, columns));
                    continue;
                }
                state
                    .schema
                    .keep_child(&name, &parent, &path, &columns)
                    .map_err(|e| {
                        EtlError::InvalidInput(format!(
                            "Delta table {}: the child table {name} disagrees with the family's schema: {e}",
                            self.at.shown
                        ))
                    })?;
            }
            if waiting.len() == before {
                break;
            }
            held = waiting;
        }
        Ok(())
    }

    /// The batch's rows of the records `fresh`, on every core when they
    /// are many, and the records a frozen schema refused, as rejects.
    /// `_etl_id` holds each record's `ids` entry where given (a merge's
    /// primary keys), else its [`Record::record_id`].
    fn shred<T: Record>(
        &self,
        schema: &mut Schema,
        rows: &[T],
        encoded: &[KeyedJson],
        (fresh, ids): (&[usize], Option<&[Option<String>]>),
    ) -> Result<(Builders, Vec<Reject>), EtlError> {
        let (batch, refused) =
            schema.shred_batch(fresh.len(), |schema, batch: &mut Builders, n| {
                let i = fresh[n];
                let (row, KeyedJson { key, json }) = (&rows[i], &encoded[i]);
                match schema.shred(json, key, batch) {
                    Ok(()) => {
                        let id = match ids {
                            Some(ids) => ids[i].clone(),
                            None => row.record_id(),
                        };
                        batch.record(id.as_deref(), update_micros(row, key), json);
                        Ok(None)
                    }
                    // Refused before the batch saw any of it.
                    Err(ShredError::Refused(why)) => Reject::new(
                        json.as_str(),
                        why.to_string(),
                        format!("Delta table {}", self.at.shown),
                    )
                    .map(Some),
                    Err(ShredError::Json(e)) => Err(EtlError::Parse(format!("record {key}: {e}"))),
                }
            })?;
        Ok((batch, refused.into_iter().flatten().collect()))
    }

    /// The child table `at` of the family, opened (and created) on first
    /// use with the columns the schema gives it now.
    async fn child<'s>(&self, state: &'s mut State, at: usize) -> Result<&'s KeyedTable, EtlError> {
        let name = state.schema.tables()[at].name().to_owned();
        let table = match state.children.entry(name) {
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(slot) => {
                let place = self.at.beside(&child_suffix(&state.schema, at))?;
                let place = match &self.stage {
                    Some(stage) => place.inside(stage)?,
                    None => place,
                };
                let fields = table_fields(&state.schema, at, None);
                let columns = Columns::growing(fields, loader::CHILD_COLUMNS.len());
                let table = KeyedTable::open(place, columns).await?;
                if self.stage.is_some() {
                    table.keep_adds().await;
                }
                slot.insert(Arc::new(table))
            }
        };
        Ok(table)
    }
}

/// Reads the family's stored schema, refused where the family is written
/// otherwise than `options` asks (a table keeps its write disposition).
pub(crate) fn read_as_written(
    stored: &str,
    options: &SchemaOptions,
    at: &Location,
) -> Result<Schema, EtlError> {
    let schema = read(stored, options, at)?;
    match schema.write().differs(&options.write) {
        Some(why) => Err(EtlError::InvalidInput(format!(
            "Delta table {}: {why}. A table keeps how it is written: load into a new table (another path or resource name), or delete this one and its child tables to start again",
            at.shown
        ))),
        None => Ok(schema),
    }
}

/// Reads the family's stored schema.
pub(crate) fn read(
    stored: &str,
    options: &SchemaOptions,
    at: &Location,
) -> Result<Schema, EtlError> {
    Schema::from_json(stored, options.clone()).map_err(|e| {
        EtlError::InvalidInput(format!("Delta table {}: its typed schema: {e}", at.shown))
    })
}

/// A batch's growth of the family's schema, committed with the resource's
/// rows: the stored schema's text it was made on, and the text with what
/// it adds.
struct RootGrowth {
    base: String,
    text: String,
}

/// What the batch of table `at` of a family is made on, `grows` being
/// the schema text the resource's grows from, if it does.
fn basis(at: usize, grows: Option<&str>) -> Basis<'_> {
    match (at, grows) {
        (0, Some(base)) => Basis::Text(base),
        (0, None) => Basis::Any,
        _ => Basis::Columns,
    }
}

/// Writes the data files of the rows of `part` that `table` lacks, not
/// yet committed (`known` and `basis`: as [`KeyedTable::append`] takes
/// them).
async fn stage(
    table: &KeyedTable,
    part: &TableBatch,
    known: (Known, Basis<'_>),
) -> Result<Option<Staged>, EtlError> {
    let TableBatch {
        keys,
        fields,
        batch,
    } = part;
    table
        .stage(keys, fields, |fresh| rows_at(batch, fresh), known)
        .await
}

/// Commits the `staged` files of each table's `parts`, in order, the
/// resource's with the schema it `grows` from that text, and returns how
/// many rows of the last (the resource's) were new (`None`: a table no
/// longer agreed with the batch, [`Basis`], and neither it nor the tables
/// after it were committed). A failure leaves the tables after it
/// untouched, their files deleted.
async fn commit_staged(
    tables: &[&KeyedTable],
    parts: Vec<(usize, TableBatch, Known)>,
    staged: Vec<Result<Option<Staged>, EtlError>>,
    grows: Option<&str>,
) -> Result<Option<usize>, EtlError> {
    let mut ended = None;
    let mut ready = Vec::with_capacity(staged.len());
    for files in staged {
        match files {
            Ok(files) => ready.push(files),
            Err(e) => {
                ended.get_or_insert(Err(e));
                ready.push(None);
            }
        }
    }
    let mut new = 0;
    for ((table, (at, part, known)), files) in tables.iter().zip(parts).zip(ready) {
        if ended.is_some() {
            table.discard(files).await;
            continue;
        }
        let TableBatch {
            keys,
            fields,
            batch,
        } = part;
        // The resource's table (the last) commits the schema it grows.
        let basis = basis(at, grows);
        match table
            .append(
                &keys,
                &fields,
                |fresh| rows_at(&batch, fresh),
                (known, files),
                basis,
            )
            .await
        {
            Ok(Some(n)) => new = n,
            Ok(None) => ended = Some(Ok(None)),
            Err(e) => ended = Some(Err(e)),
        }
    }
    ended.unwrap_or(Ok(Some(new)))
}

/// The rows of `batch` at `fresh` (all of them without a copy).
fn rows_at(batch: &RecordBatch, fresh: &[usize]) -> Result<RecordBatch, ArrowError> {
    if fresh.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    let at: Vec<u32> = fresh.iter().map(|&i| i as u32).collect();
    take_record_batch(batch, &UInt32Array::from(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeltaSink;
    use etl_core::Sink;
    use serde_json::{json, Value};
    use std::sync::atomic::Ordering;

    /// A JSON record known by its `id`, updated at its `updated_at` (if
    /// any).
    #[derive(serde::Serialize)]
    #[serde(transparent)]
    pub(super) struct Doc(pub Value);

    impl Record for Doc {
        fn record_id(&self) -> Option<String> {
            self.0.get("id").map(|id| id.to_string())
        }
        fn updated_at(&self) -> Option<String> {
            self.0.get("updated_at")?.as_str().map(str::to_owned)
        }
    }

    /// The data columns of the Delta table at `location`, as
    /// `name type path`.
    async fn columns_of(location: &str) -> Vec<String> {
        let at = Location::parse(location).unwrap();
        let schema = crate::table::existing_schema(&at).await.unwrap().unwrap();
        schema
            .fields()
            .filter_map(|f| {
                let column = held_column(f)?;
                Some(format!(
                    "{} {} {}",
                    column.name, column.column_type, column.path
                ))
            })
            .collect()
    }

    /// A writer killed after its child table took a new column (and rows)
    /// and before the resource's table took the schema text that lists it:
    /// the next writer, whose record would name another member the same,
    /// takes the column in, names its own apart, and writes the text that
    /// lists both; the killed record's child row is not written twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_child_tables_columns_whose_text_never_came_are_taken_in() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("grow").to_str().unwrap().to_owned();
        let labels = format!("{root}__tags");
        let open = || DeltaSink::open_typed::<Doc>(&root, "grow", SchemaOptions::default());
        let first = open().await.unwrap();
        let one = [Doc(json!({"id": 1, "tags": [{"x": 1}]}))];
        assert_eq!(first.load(&one).await.unwrap(), 1);

        let killed = open().await.unwrap();
        let typed = killed.typed.as_ref().unwrap();
        typed.killed_before_root.store(true, Ordering::Relaxed);
        let two = [Doc(json!({"id": 2, "tags": [{"x": 2, "yy": true}]}))];
        assert!(killed.load(&two).await.is_err());
        assert_eq!(
            columns_of(&labels).await,
            ["x bigint /x", "yy bool /yy"],
            "the child table took the column"
        );
        let stored = DeltaSink::stored_schema(&root, SchemaOptions::default())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.tables()[1].columns().len(), 1, "the text did not");

        let next = open().await.unwrap();
        let three = [Doc(json!({"id": 3, "tags": [{"x": 3, "YY": "text"}]}))];
        assert_eq!(next.load(&three).await.unwrap(), 1);
        let held = columns_of(&labels).await;
        assert_eq!(held.len(), 3, "{held:?}");
        assert_eq!(held[..2], ["x bigint /x", "yy bool /yy"]);
        assert!(held[2].ends_with(" text /YY"), "{held:?}");
        let stored = DeltaSink::stored_schema(&root, SchemaOptions::default())
            .await
            .unwrap()
            .unwrap();
        let listed: Vec<String> = stored.tables()[1]
            .columns()
            .iter()
            .map(|c| format!("{} {} {}", c.name, c.column_type, c.path))
            .collect();
        assert_eq!(listed, held, "the text lists what the table holds");

        // The killed writer's record again: its child row is in already.
        typed.killed_before_root.store(false, Ordering::Relaxed);
        assert_eq!(killed.load(&two).await.unwrap(), 1);
        let at = Location::parse(&labels).unwrap();
        let columns = Columns::growing(crate::fields::child_fields(), loader::CHILD_COLUMNS.len());
        let child = KeyedTable::open(at, columns).await.unwrap();
        assert_eq!(
            crate::count(&child).await.unwrap(),
            3,
            "each child row once"
        );
    }
}
