//! Typed tables in Delta: a record's members as columns, its lists as
//! child tables beside it (`PATH__labels`), the family's schema kept in the
//! resource's table (etl-core's `content::typed` says how records become
//! rows; this says how they reach the tables).
//!
//! The resource's table is where the family's schema changes are decided:
//! a load whose records add columns or tables first commits the grown
//! schema there (a metaData action; the schema as `Schema::to_json`
//! writes it, in the field metadata of `_etl_row`). Of two writers growing
//! it at once, one wins the version; the other reads the winner's schema,
//! makes its rows again on it, and commits what is still new. So every
//! column has one name and one type in every table of the family, and a
//! child table's new columns go in the same commit as its rows. Child
//! tables commit before the resource's table: a record's row is only ever
//! in the table once all its child rows are.

use deltalake::arrow::array::{RecordBatch, UInt32Array};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::error::ArrowError;
use deltalake::kernel::{DataType, MetadataValue, StructField, StructType};
use etl_core::content::typed::{
    loader, update_micros, ColumnType, Schema, SchemaOptions, ShredError,
};
use etl_core::content::KeyedJson;
use etl_core::{EtlError, Record, Reject};
use futures_util::future::join_all;
use std::collections::hash_map::{Entry, HashMap};
use std::collections::HashSet;
use std::time::SystemTime;
use tokio::sync::Mutex;

use crate::builders::{Builders, TableBatch};
use crate::columns::{micros, Columns};
use crate::errors::from_arrow;
use crate::location::Location;
use crate::table::{KeyedTable, Known, Staged};

/// The field metadata key of `_etl_row` in the resource's table that holds
/// the family's schema.
pub(crate) const SCHEMA_KEY: &str = "etl.schema";
/// The field metadata key of a data column's JSON Pointer.
const PATH_KEY: &str = "etl.path";
/// The field metadata key of a data column's type as the schema names it
/// (`json` and `text` are both Delta strings).
const TYPE_KEY: &str = "etl.type";
/// The field metadata key of a data column's hint.
const HINT_KEY: &str = "etl.hint";

/// A typed table family: the child tables opened so far and the schema
/// this process last read or committed. The resource's table is the
/// sink's own.
pub(crate) struct Typed {
    at: Location,
    options: SchemaOptions,
    state: Mutex<State>,
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
    children: HashMap<String, KeyedTable>,
    /// Records of loads that failed after their child rows may have been
    /// committed: their child rows are looked up in this writer's own files
    /// too when they come again.
    unfinished: HashSet<String>,
}

/// The Delta type of a column of type `t`.
fn delta_type(t: ColumnType) -> DataType {
    match t {
        ColumnType::Bool => DataType::BOOLEAN,
        ColumnType::Bigint => DataType::LONG,
        ColumnType::Double => DataType::DOUBLE,
        ColumnType::Timestamp => DataType::TIMESTAMP,
        ColumnType::Date => DataType::DATE,
        ColumnType::Text | ColumnType::Json => DataType::STRING,
    }
}

/// The loader columns of the resource's table, in order.
fn record_fields() -> Vec<StructField> {
    vec![
        StructField::new(loader::KEY, DataType::STRING, false),
        StructField::new(loader::ID, DataType::STRING, true),
        StructField::new(loader::UPDATED_AT, DataType::TIMESTAMP, true),
        StructField::new(loader::LOADED_AT, DataType::TIMESTAMP, false),
        StructField::new(loader::ROW, DataType::STRING, false),
        StructField::new(loader::META, DataType::STRING, true),
    ]
}

/// The loader columns of a child table, in order.
fn child_fields() -> Vec<StructField> {
    vec![
        StructField::new(loader::KEY, DataType::STRING, false),
        StructField::new(loader::PARENT_KEY, DataType::STRING, false),
        StructField::new(loader::ROOT_KEY, DataType::STRING, false),
        StructField::new(loader::LIST_IDX, DataType::LONG, false),
    ]
}

/// Table `at`'s columns in `schema` as Delta fields: its loader columns,
/// then its data columns (each nullable, with its path, type and hint in
/// its metadata). With `stored`, the resource's `_etl_row` carries it as
/// the family's schema.
pub(crate) fn table_fields(schema: &Schema, at: usize, stored: Option<&str>) -> Vec<StructField> {
    let table = &schema.tables()[at];
    let mut fields = match table.parent() {
        None => record_fields(),
        Some(_) => child_fields(),
    };
    if let (None, Some(stored)) = (table.parent(), stored) {
        for field in &mut fields {
            if field.name() == loader::ROW {
                *field = field.clone().with_metadata([(SCHEMA_KEY, stored)]);
            }
        }
    }
    fields.extend(table.columns().iter().map(|c| {
        let mut metadata = vec![
            (PATH_KEY, c.path.clone()),
            (TYPE_KEY, c.column_type.as_str().to_owned()),
        ];
        if let Some(hint) = c.hint {
            metadata.push((HINT_KEY, hint.as_str().to_owned()));
        }
        StructField::new(&c.name, delta_type(c.column_type), true).with_metadata(metadata)
    }));
    fields
}

/// The family's schema as the resource's table holds it, if it does.
pub(crate) fn stored_schema(fields: &StructType) -> Option<&str> {
    match fields.field(loader::ROW)?.metadata().get(SCHEMA_KEY)? {
        MetadataValue::String(text) => Some(text),
        _ => None,
    }
}

/// Where a table's child table is: beside it, its name's part past the
/// resource's name added (`lake/issues` -> `lake/issues__labels`).
fn child_suffix(schema: &Schema, at: usize) -> String {
    let root = schema.tables()[0].name();
    let name = schema.tables()[at].name();
    match name.strip_prefix(root) {
        Some(rest) if rest.starts_with("__") => rest.to_owned(),
        _ => format!("__{name}"),
    }
}

impl Typed {
    /// The columns of a new family's resource table named `name`: the
    /// fresh schema's (its hinted columns), the schema in `_etl_row`.
    pub(crate) fn fresh_columns(name: &str, options: &SchemaOptions) -> Result<Columns, EtlError> {
        let fresh = Schema::new(name, options.clone()).map_err(EtlError::InvalidInput)?;
        let fields = table_fields(&fresh, 0, Some(&fresh.to_json()));
        Ok(Columns::growing(fields, loader::RECORD_COLUMNS.len()).with_text(loader::ROW))
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
        let mut schema = read(stored, &options, &at)?;
        let exists = crate::count(root).await? > 0;
        schema.set_exists(exists);
        let state = State {
            committed: schema.generation(),
            stored: stored.to_owned(),
            schema,
            exists,
            children: HashMap::new(),
            unfinished: HashSet::new(),
        };
        Ok(Typed {
            at,
            options,
            state: Mutex::new(state),
        })
    }

    /// Waits for the checkpoints the child tables' last commits made due.
    pub(crate) async fn settle(&self) {
        for child in self.state.lock().await.children.values() {
            child.settle().await;
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
            let (batch, refused, grows) =
                self.grow(root, &mut state, rows, encoded, &fresh).await?;
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
                // Another writer grew the schema first: the batch is made
                // again on the schema it committed (its child rows, in,
                // are found held).
                Ok(None) => {
                    state
                        .unfinished
                        .extend(records.iter().map(|k| k.to_string()));
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
    /// says (`None`: the schema moved under it first, and the resource's
    /// rows were not committed). Returns how many records were new.
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
        let tables: Vec<&KeyedTable> = parts
            .iter()
            .map(|&(at, ..)| match at {
                0 => root,
                _ => &state.children[state.schema.tables()[at].name()],
            })
            .collect();
        let staged = join_all(
            parts
                .iter()
                .zip(&tables)
                .map(|((_, part, known), table)| stage(table, part, *known)),
        )
        .await;
        commit_staged(&tables, parts, staged, grows.map(|g| g.base.as_str())).await
    }

    /// Makes the batch's rows on the schema the resource's table holds.
    ///
    /// Where they grow the resource's table alone, the new schema is
    /// committed with its rows ([`RootGrowth`], one version). Where they
    /// grow a child table (a column, or a new table), the schema is
    /// committed to the resource's table first, with no rows: the child
    /// tables' rows are committed before the resource's, under names and
    /// types every writer must agree on before any of them is in. A
    /// writer that loses that commit to another reads the schema the
    /// winner committed and makes the rows again.
    async fn grow<T: Record>(
        &self,
        root: &KeyedTable,
        state: &mut State,
        rows: &[T],
        encoded: &[KeyedJson],
        fresh: &[usize],
    ) -> Result<(Builders, Vec<Reject>, Option<RootGrowth>), EtlError> {
        loop {
            let fields = root.schema().await;
            let stored = stored_schema(&fields).unwrap_or_default();
            // The schema a batch is made on is the one the table holds:
            // read again when another writer moved it, or when this one
            // holds growth no commit took (a load that failed, or whose
            // records were all another writer's), which would otherwise
            // be taken for this batch's own.
            if stored != state.stored || state.schema.generation() != state.committed {
                state.schema = read(stored, &self.options, &self.at)?;
                state.stored = stored.to_owned();
                state.committed = state.schema.generation();
            }
            // A schema read back counts its tables as existing; a family
            // that holds no row yet is still shaped by its first load.
            state.schema.set_exists(state.exists);
            let before = ChildShape::of(&state.schema);
            let (batch, refused) = self.shred(&mut state.schema, rows, encoded, fresh)?;
            if state.schema.generation() == state.committed {
                return Ok((batch, refused, None));
            }
            let text = state.schema.to_json();
            if before == ChildShape::of(&state.schema) {
                let grows = RootGrowth {
                    base: state.stored.clone(),
                    text,
                };
                return Ok((batch, refused, Some(grows)));
            }
            if root
                .reshape(&table_fields(&state.schema, 0, Some(&text)))
                .await?
            {
                state.stored = text;
                state.committed = state.schema.generation();
                return Ok((batch, refused, None));
            }
        }
    }

    /// The batch's rows of the records `fresh`, on every core when they
    /// are many, and the records a frozen schema refused, as rejects.
    fn shred<T: Record>(
        &self,
        schema: &mut Schema,
        rows: &[T],
        encoded: &[KeyedJson],
        fresh: &[usize],
    ) -> Result<(Builders, Vec<Reject>), EtlError> {
        let (batch, refused) =
            schema.shred_batch(fresh.len(), |schema, batch: &mut Builders, n| {
                let i = fresh[n];
                let (row, KeyedJson { key, json }) = (&rows[i], &encoded[i]);
                match schema.shred(json, key, batch) {
                    Ok(()) => {
                        let id = row.record_id();
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
                let fields = table_fields(&state.schema, at, None);
                let columns = Columns::growing(fields, loader::CHILD_COLUMNS.len());
                slot.insert(KeyedTable::open(place, columns).await?)
            }
        };
        Ok(table)
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

/// A batch's growth of the resource's table alone, committed with its
/// rows: the stored schema's text it was made on, and the text with what
/// it adds.
struct RootGrowth {
    base: String,
    text: String,
}

/// What a batch may change in the child tables: how many there are and
/// how many columns each has. A batch that leaves it as it was grows the
/// resource's table alone.
#[derive(PartialEq, Eq)]
struct ChildShape(Vec<usize>);

impl ChildShape {
    fn of(schema: &Schema) -> Self {
        ChildShape(
            schema.tables()[1..]
                .iter()
                .map(|t| t.columns().len())
                .collect(),
        )
    }
}

/// Writes the data files of the rows of `part` that `table` lacks,
/// not yet committed (`known`: as [`KeyedTable::append`] takes it).
async fn stage(
    table: &KeyedTable,
    part: &TableBatch,
    known: Known,
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
/// many rows of the last (the resource's) were new (`None`: the schema
/// moved from `grows` first, and its rows were not committed). A failure
/// leaves the tables after it untouched, their files deleted.
async fn commit_staged(
    tables: &[&KeyedTable],
    parts: Vec<(usize, TableBatch, Known)>,
    staged: Vec<Result<Option<Staged>, EtlError>>,
    grows: Option<&str>,
) -> Result<Option<usize>, EtlError> {
    let mut failed = None;
    let mut ready = Vec::with_capacity(staged.len());
    for files in staged {
        match files {
            Ok(files) => ready.push(files),
            Err(e) => {
                failed.get_or_insert(e);
                ready.push(None);
            }
        }
    }
    let mut new = Some(0);
    for ((table, (at, part, known)), files) in tables.iter().zip(parts).zip(ready) {
        if failed.is_some() {
            table.discard(files).await;
            continue;
        }
        let TableBatch {
            keys,
            fields,
            batch,
        } = part;
        // The resource's table (the last) commits the schema it grows.
        let grows = grows.filter(|_| at == 0);
        match table
            .append(
                &keys,
                &fields,
                |fresh| rows_at(&batch, fresh),
                (known, files),
                grows,
            )
            .await
        {
            Ok(n) => new = n,
            Err(e) => failed = Some(e),
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(new),
    }
}

/// The rows of `batch` at `fresh` (all of them without a copy).
fn rows_at(batch: &RecordBatch, fresh: &[usize]) -> Result<RecordBatch, ArrowError> {
    if fresh.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    let at: Vec<u32> = fresh.iter().map(|&i| i as u32).collect();
    take_record_batch(batch, &UInt32Array::from(at))
}
