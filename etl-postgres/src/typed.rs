//! Typed tables in PostgreSQL: a record's members as columns, its lists as
//! child tables, the schema kept in `_etl_schema` and grown, in a short
//! transaction of its own, before the rows that need it (etl-core's `content::typed` says
//! how records become rows; this says how they reach the server).

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use etl_core::content::naming::{fit, POSTGRES_MAX_BYTES};
use etl_core::content::typed::{
    loader, meta_json, update_micros, Cell, ColumnType, Contract, Misfit, RowKeys, RowWriter,
    Schema, SchemaOptions, ShredError, SplitWriter, Table,
};
use etl_core::content::write::merge::{key_of, Merged, Version};
use etl_core::content::write::Write;
use etl_core::content::KeyedJson;
use etl_core::{EtlError, Record, Reject, Written};
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use crate::errors;
use crate::indexes;
use crate::lock_bound;
use crate::merge;
use crate::table::{self, quote, TableName};

/// Where every typed table of a database keeps its schema: one row per
/// resource table, the schema as `Schema::to_json` writes it.
pub const SCHEMA_TABLE: &str = "_etl_schema";

/// A typed table family: the resource's table, its child tables, and the
/// schema this process last read or wrote.
pub(crate) struct Typed {
    table: TableName,
    options: SchemaOptions,
    state: Mutex<State>,
}

struct State {
    /// The schema the next batch is made on: as stored, and grown by the
    /// batches made and not yet written.
    schema: Schema,
    /// The stored text `schema` was read from, or will be written as once
    /// the batches made on it commit; empty when unknown (after a failed
    /// load): the next batch is then made again as it is written.
    stored: String,
}

/// A batch's records as a typed table's rows are made of them: their keys
/// and canonical JSON, and the loader values their [`Record`]s give.
/// Owned, so that a write can run on a task of its own.
pub(crate) struct Records {
    encoded: Vec<KeyedJson>,
    ids: Vec<Option<String>>,
    updated: Vec<Option<SystemTime>>,
}

impl Records {
    /// The records `rows`, whose keys and canonical JSON are `encoded`.
    pub(crate) fn of<T: Record>(rows: &[T], encoded: Vec<KeyedJson>) -> Records {
        let ids = rows.iter().map(Record::record_id).collect();
        let updated = (rows.iter().zip(&encoded))
            // Any offset, as a timestamp column reads it (the JSON
            // shape's reader takes UTC alone).
            .map(|(row, KeyedJson { key, .. })| update_micros(row, key).map(micros_to_time))
            .collect();
        Records {
            encoded,
            ids,
            updated,
        }
    }
}

/// A batch's rows made on one schema ([`Typed::make`]), not yet written.
pub(crate) struct Made {
    /// The stored schema's text the batch was made on.
    base: String,
    /// That schema, with what the batch adds.
    schema: Schema,
    /// What the batch adds to the stored schema, if anything.
    growth: Option<Growth>,
    /// Whether the schema counted the tables as existing (a frozen
    /// contract refuses what would change them).
    existed: bool,
    batch: Batch,
    /// Made again as it was written: the stored schema had moved.
    remade: bool,
    /// Under merge, each of the batch's records' primary key and whether
    /// it says it was deleted, or why it has none ([`key_of`]):
    /// read as the batch is made, beside the write before it, not on the
    /// write's own path.
    keys: Vec<Result<(String, bool), String>>,
}

impl Made {
    /// The stored schema's text once the batch commits.
    fn stored_text(&self) -> &str {
        match &self.growth {
            Some(growth) => &growth.text,
            None => &self.base,
        }
    }
}

/// How often a write grows the schema and tries its rows again before it
/// gives up: each round means another writer grew the schema meanwhile.
const GROWTH_ROUNDS: usize = 8;

/// Where a write's transaction got to: its rows written, or a batch that
/// adds to the schema as it is now stored, to be grown first.
enum Step {
    Written(Made, Written),
    Grow(Made),
}

/// Columns and tables a batch adds: the DDL that makes them and the
/// schema's text to store with them.
struct Growth {
    ddl: String,
    text: String,
}

fn sql_type(t: ColumnType) -> &'static str {
    match t {
        ColumnType::Bool => "boolean",
        ColumnType::Bigint => "bigint",
        ColumnType::Double => "double precision",
        ColumnType::Timestamp => "timestamptz",
        ColumnType::Date => "date",
        ColumnType::Text => "text",
        ColumnType::Json => "jsonb",
    }
}

/// The view beside `table`: `<table>_current`, cut to 63 bytes with a hash
/// of the table's name when longer.
fn current_view(table: &str) -> String {
    fit(&format!("{table}_current"), POSTGRES_MAX_BYTES, table)
}

/// The history view beside the resource's table `table`:
/// `<table>_versions`, cut to 63 bytes with a hash of the table's name
/// when longer.
fn versions_view(table: &str) -> String {
    fit(&format!("{table}_versions"), POSTGRES_MAX_BYTES, table)
}

/// A typed table found half there: made by hand, or half dropped.
enum Orphan {
    /// The table is there, its `_etl_schema` row is not: its columns'
    /// types are not known, and a guess could change one.
    NoSchemaRow,
    /// The `_etl_schema` row is there, the table is not (dropped by hand).
    NoTable,
}

impl Orphan {
    fn error(self, table: &str) -> EtlError {
        EtlError::InvalidInput(match self {
            Orphan::NoSchemaRow => format!(
                "typed table {table:?} has no row in {SCHEMA_TABLE} (deleted?): restore it, or drop the table and its child tables to start again"
            ),
            Orphan::NoTable => format!(
                "typed table {table:?} is gone but its row in {SCHEMA_TABLE} is not (dropped by hand?): delete that row, and the table's child tables, to start again"
            ),
        })
    }
}

impl Typed {
    /// Opens the typed family of `table`, creating the table and its
    /// schema row if missing. `None` when `table` exists in the JSON shape
    /// of earlier releases: it keeps its shape.
    pub(crate) async fn open(
        client: &Client,
        table: &TableName,
        options: SchemaOptions,
    ) -> Result<Option<Typed>, EtlError> {
        if json_shape(client, table).await? {
            return Ok(None);
        }
        let fresh = Schema::new(table.as_str(), options.clone()).map_err(EtlError::InvalidInput)?;
        if fresh.tables()[0].name() != table.as_str() {
            return Err(EtlError::InvalidInput(format!(
                "typed table {:?}: its name must be as the naming rules make it, {:?}",
                table.as_str(),
                fresh.tables()[0].name()
            )));
        }
        let fresh_text = fresh.to_json();
        create_schema_table(client).await?;
        if let Write::Merge(_) = options.write {
            let deleted = TableName::new(merge::DELETED_TABLE)?;
            table::locked(client, &deleted, merge::create_deleted_table(client)).await?;
        }
        let made = make_family(client, table, &fresh, &fresh_text).await?;
        // A table this call made is still to be shaped by its first load
        // (a frozen contract holds from then on); one made before is read.
        let mut typed = Typed {
            table: table.clone(),
            options,
            state: Mutex::new(State {
                schema: fresh,
                stored: fresh_text,
            }),
        };
        if !made {
            let stored = typed.read_stored(client, false).await?;
            let schema = typed.parse(&stored)?;
            if let Some(why) = schema.write().differs(&typed.options.write) {
                return Err(EtlError::InvalidInput(format!(
                    "typed table {t}: {why}. A table keeps how it is written: load into a new table (another --pg-table or resource name), or drop {t}, its child tables and its row in {SCHEMA_TABLE} to start again",
                    t = table.as_str()
                )));
            }
            if let Some(index) = indexes::primary_key(&schema, &schema.tables()[0]) {
                make_missing(client, table, &index).await?;
            }
            *typed.state.get_mut() = State { schema, stored };
        }
        Ok(Some(typed))
    }

    /// Makes the rows of `records` on the schema as this process last
    /// knew it, touching no connection: the first half of a load, which
    /// may run while the batch before is still being written
    /// ([`Typed::write`] checks the schema it was made on).
    pub(crate) async fn make(&self, records: &Records) -> Result<Made, EtlError> {
        let mut state = self.state.lock().await;
        let base = state.stored.clone();
        match self.made_on(&mut state.schema, base, records) {
            Ok(made) => {
                // The next batch is made on this one's columns, as the
                // stored schema will hold them once this one commits; if
                // it does not, that batch is made again as it is written.
                if let Some(growth) = &made.growth {
                    state.stored.clone_from(&growth.text);
                }
                Ok(made)
            }
            Err(e) => {
                // The schema may hold some of the batch's columns: read it
                // again next time.
                state.stored.clear();
                Err(e)
            }
        }
    }

    /// Writes a batch [`Typed::make`] made: the columns and tables it adds
    /// first, in a short transaction of their own ([`Typed::grow`]), then
    /// its rows, and the child rows of those that were new, in one
    /// transaction. Made again first when the stored schema is not the
    /// one it was made on (another writer grew it, or a batch before it
    /// failed). `deadline` is the write's: a schema change waits for its
    /// lock at most half of it. Returns how many rows were new, and the
    /// records a frozen schema refused, as rejects.
    pub(crate) async fn write(
        &self,
        client: &Client,
        records: &Records,
        mut made: Made,
        deadline: Duration,
    ) -> Result<(Written, Vec<Reject>), EtlError> {
        // Another writer may grow the schema between this one's growth
        // and its rows: the rows are then made and grown again.
        for _ in 0..GROWTH_ROUNDS {
            if made.growth.is_some() {
                made = match self.grow(client, records, made, deadline / 2).await {
                    Ok(grown) => grown,
                    Err(e) => {
                        self.forget().await;
                        return Err(e);
                    }
                };
            }
            client
                .batch_execute("BEGIN")
                .await
                .map_err(|e| errors::from_pg_plain(&e))?;
            match self.write_in(client, records, made).await {
                Ok(Step::Written(made, written)) => {
                    if let Err(e) = client.batch_execute("COMMIT").await {
                        self.forget().await;
                        return Err(errors::from_pg_plain(&e));
                    }
                    let mut state = self.state.lock().await;
                    if made.remade {
                        state.stored = made.stored_text().to_owned();
                        state.schema = made.schema;
                    }
                    state.schema.set_exists(true);
                    return Ok((written, made.batch.refused));
                }
                Ok(Step::Grow(remade)) => {
                    let _ = client.batch_execute("ROLLBACK").await;
                    made = remade;
                }
                Err(e) => {
                    // The schema in memory may hold columns that were never
                    // committed: read it again next time.
                    self.forget().await;
                    let _ = client.batch_execute("ROLLBACK").await;
                    return Err(e);
                }
            }
        }
        self.forget().await;
        Err(EtlError::Database {
            sqlstate: Some("40001".into()),
            message: format!(
                "table {}: its columns changed under each of {GROWTH_ROUNDS} writes of this batch (other writers growing it)",
                self.table.as_str()
            ),
        })
    }

    /// Adds what `made` adds to the family's schema, in a transaction of
    /// its own that holds the table's strong lock only for the DDL and the
    /// schema row, waiting for that lock at most [`lock_bound::LOCK_BOUND`]
    /// a try, for `within` in all. The batch comes back made on the grown
    /// schema (made again first if another writer had grown it).
    async fn grow(
        &self,
        client: &Client,
        records: &Records,
        made: Made,
        within: Duration,
    ) -> Result<Made, EtlError> {
        let tables: Vec<&str> = made.schema.tables().iter().map(Table::name).collect();
        let remade = lock_bound::bounded(client, ("a schema change", &tables), within, || {
            self.grow_once(client, records, &made)
        })
        .await?;
        let mut grown = remade.unwrap_or(made);
        if let Some(growth) = grown.growth.take() {
            grown.base = growth.text;
        }
        Ok(grown)
    }

    /// One try of [`Typed::grow`], inside its transaction: the batch made
    /// again if the stored schema moved (`Some`), and what it adds made
    /// and stored.
    async fn grow_once(
        &self,
        client: &Client,
        records: &Records,
        made: &Made,
    ) -> Result<Option<Made>, EtlError> {
        // One writer grows the schema at a time (its row locked), against
        // the schema as it is then.
        let stored = self.read_stored(client, true).await?;
        let remade = if stored != made.base || self.frozen_since(made).await {
            let mut schema = self.parse(&stored)?;
            let mut remade = self.made_on(&mut schema, stored, records)?;
            remade.remade = true;
            Some(remade)
        } else {
            None
        };
        if let Some(growth) = &remade.as_ref().unwrap_or(made).growth {
            if !growth.ddl.is_empty() {
                client
                    .batch_execute(&growth.ddl)
                    .await
                    .map_err(|e| errors::from_pg_plain(&e))?;
            }
            store_schema(client, &self.table, &growth.text).await?;
        }
        Ok(remade)
    }

    /// Whether the family is written by merge.
    pub(crate) fn merges(&self) -> bool {
        matches!(self.options.write, Write::Merge(_))
    }

    /// Forgets which stored schema the one in memory is: the next batch
    /// is made again as it is written, on the stored one.
    pub(crate) async fn forget(&self) {
        self.state.lock().await.stored.clear();
    }

    /// The batch's rows, inside the write's transaction, on the schema as
    /// stored: made again first if it moved, and handed back to be grown
    /// ([`Step::Grow`]) if it then adds to it.
    async fn write_in(
        &self,
        client: &Client,
        records: &Records,
        mut made: Made,
    ) -> Result<Step, EtlError> {
        let stored = self.read_stored(client, false).await?;
        if stored != made.base || self.frozen_since(&made).await {
            let mut schema = self.parse(&stored)?;
            made = self.made_on(&mut schema, stored, records)?;
            made.remade = true;
        }
        if made.growth.is_some() {
            return Ok(Step::Grow(made));
        }
        let merged = match made.schema.write() {
            Write::Merge(_) => Some(self.merge(client, &mut made).await?),
            _ => None,
        };
        let inserted = made
            .batch
            .insert(client, &made.schema, merged.is_some())
            .await?;
        let mut written = Written::from(inserted);
        if let Some(merged) = merged {
            written = written.deleting(merged.deleted);
        }
        Ok(Step::Written(made, written))
    }

    /// Merges the batch's records into the family ([`merge::apply`]): a
    /// record without its primary key is refused, `_etl_id` holds each
    /// record's key, and the batch keeps only the rows that go in.
    async fn merge(&self, client: &Client, made: &mut Made) -> Result<Merged, EtlError> {
        let batch = &mut made.batch;
        let n = batch.texts.len();
        let mut found = Vec::with_capacity(n);
        for (text, key) in batch.texts.iter().zip(std::mem::take(&mut made.keys)) {
            match key {
                Ok(key) => found.push(Some(key)),
                Err(why) => {
                    let reject = merge::keyless(text, why, self.table.as_str())?;
                    batch.refused.push(reject);
                    found.push(None);
                }
            }
        }
        let kept: Vec<usize> = (0..n).filter(|&i| found[i].is_some()).collect();
        let merged = {
            let versions: Vec<Version<'_>> = kept
                .iter()
                .filter_map(|&i| {
                    let (key, deleted) = found[i].as_ref()?;
                    Some(Version {
                        key,
                        row: &batch.tables[0].keys[i],
                        updated: batch.updated[i],
                        deleted: *deleted,
                    })
                })
                .collect();
            merge::apply(client, &made.schema, &versions).await?
        };
        let mut keep = vec![false; n];
        for (&i, &goes) in kept.iter().zip(&merged.insert) {
            keep[i] = goes;
        }
        for (id, key) in batch.ids.iter_mut().zip(found) {
            if let Some((key, _)) = key {
                *id = Some(key);
            }
        }
        batch.keep_records(&keep);
        Ok(merged)
    }

    /// Whether `made` was made before the tables existed, under a frozen
    /// contract, and a batch has committed since: it may add what the
    /// contract now refuses.
    async fn frozen_since(&self, made: &Made) -> bool {
        !made.existed
            && self.options.contract == Contract::Freeze
            && self.state.lock().await.schema.exists()
    }

    /// The schema stored as `text`.
    fn parse(&self, text: &str) -> Result<Schema, EtlError> {
        Schema::from_json(text, self.options.clone()).map_err(|e| {
            EtlError::InvalidInput(format!("{SCHEMA_TABLE} of {}: {e}", self.table.as_str()))
        })
    }

    /// The stored schema's text, its row locked until the transaction ends
    /// when `lock`.
    async fn read_stored(&self, client: &Client, lock: bool) -> Result<String, EtlError> {
        let sql = format!(
            "SELECT schema FROM {} WHERE table_name = $1{}",
            quote(SCHEMA_TABLE),
            if lock { " FOR UPDATE" } else { "" }
        );
        let row = client
            .query_one(&sql, &[&self.table.as_str()])
            .await
            .map_err(|e| errors::from_pg_plain(&e))?;
        row.try_get(0).map_err(|e| errors::from_pg_plain(&e))
    }

    /// The batch of `records` made on `schema`, whose stored text is
    /// `base`; `schema` grows by what the batch adds.
    fn made_on(
        &self,
        schema: &mut Schema,
        base: String,
        records: &Records,
    ) -> Result<Made, EtlError> {
        let before = Shape::of(schema);
        let generation = schema.generation();
        let existed = schema.exists();
        let batch = self.shred(schema, records)?;
        let growth = (schema.generation() != generation).then(|| Growth {
            ddl: grow_sql(schema, &before),
            text: schema.to_json(),
        });
        let keys = match &self.options.write {
            Write::Merge(keys) => batch.texts.iter().map(|text| key_of(text, keys)).collect(),
            _ => Vec::new(),
        };
        Ok(Made {
            base,
            schema: schema.clone(),
            growth,
            existed,
            batch,
            remade: false,
            keys,
        })
    }

    /// The batch's rows of `records`, on every core when they are many;
    /// the records a frozen schema refused are its rejects.
    fn shred(&self, schema: &mut Schema, records: &Records) -> Result<Batch, EtlError> {
        let (batch, _) =
            schema.shred_batch(records.encoded.len(), |schema, batch: &mut Batch, i| {
                let KeyedJson { key, json } = &records.encoded[i];
                match schema.shred(json, key, batch) {
                    Ok(()) => batch.record(records, i),
                    // Refused before the batch saw any of it.
                    Err(ShredError::Refused(refused)) => {
                        let reject = Reject::new(
                            json.as_str(),
                            refused.to_string(),
                            format!("table {}", self.table.as_str()),
                        )?;
                        batch.refused.push(reject);
                    }
                    Err(ShredError::Json(e)) => {
                        return Err(EtlError::Parse(format!("record {key}: {e}")));
                    }
                }
                Ok(())
            })?;
        Ok(batch)
    }
}

/// Whether `table` exists in the JSON shape of earlier releases.
async fn json_shape(client: &Client, table: &TableName) -> Result<bool, EtlError> {
    let sql = "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) \
               AND attname = 'content_key' AND NOT attisdropped)";
    let row = client
        .query_one(sql, &[&table.quoted()])
        .await
        .map_err(|e| errors::from_pg_plain(&e))?;
    row.try_get::<_, bool>(0)
        .map_err(|e| errors::from_pg_plain(&e))
}

/// Creates the table of every family's schema row if missing, under a
/// lock of its own: every family shares it.
async fn create_schema_table(client: &Client) -> Result<(), EtlError> {
    let schema_table = TableName::new(SCHEMA_TABLE)?;
    table::locked(client, &schema_table, async {
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {} (
                     table_name text PRIMARY KEY,
                     schema text NOT NULL,
                     changed_at timestamptz NOT NULL DEFAULT now())",
                quote(SCHEMA_TABLE)
            ))
            .await
    })
    .await
}

/// Makes `table` and its schema row (`fresh`, stored as `fresh_text`)
/// where neither exists; returns whether this call made them. The table
/// and its row are made in one transaction, so one without the other was
/// changed by hand: it is named, and nothing is written.
async fn make_family(
    client: &Client,
    table: &TableName,
    fresh: &Schema,
    fresh_text: &str,
) -> Result<bool, EtlError> {
    table::locked(client, table, async {
        // Read from pg_class under this statement's snapshot: taken after
        // the lock, it sees a table another opener just made (`to_regclass`
        // may answer from a catalog cache that does not).
        let exists: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_class \
                 WHERE relname = $1 AND relnamespace = current_schema()::regnamespace)",
                &[&table.as_str()],
            )
            .await?
            .try_get(0)?;
        if exists {
            let row = client
                .query_opt(
                    &format!(
                        "SELECT 1 FROM {} WHERE table_name = $1",
                        quote(SCHEMA_TABLE)
                    ),
                    &[&table.as_str()],
                )
                .await?;
            if row.is_none() {
                return Ok(Err(Orphan::NoSchemaRow));
            }
            // A table an earlier release made has no `_versions` view.
            let view: bool = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_class \
                     WHERE relname = $1 AND relnamespace = current_schema()::regnamespace)",
                    &[&versions_view(table.as_str())],
                )
                .await?
                .try_get(0)?;
            if !view {
                client.batch_execute(&versions_sql(table.as_str())).await?;
            }
            return Ok(Ok(false));
        }
        let inserted = client
            .execute(
                &format!(
                    "INSERT INTO {} (table_name, schema) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    quote(SCHEMA_TABLE)
                ),
                &[&table.as_str(), &fresh_text],
            )
            .await?;
        if inserted == 0 {
            return Ok(Err(Orphan::NoTable));
        }
        client.batch_execute(&create_sql(fresh, 0)).await?;
        Ok(Ok(true))
    })
    .await?
    .map_err(|orphan| orphan.error(table.as_str()))
}

/// Stores `text` as the schema of the family of `table` (its row in
/// [`SCHEMA_TABLE`]), in the caller's transaction.
pub(crate) async fn store_schema(
    client: &Client,
    table: &TableName,
    text: &str,
) -> Result<(), EtlError> {
    client
        .execute(
            &format!(
                "UPDATE {} SET schema = $2, changed_at = now() WHERE table_name = $1",
                quote(SCHEMA_TABLE)
            ),
            &[&table.as_str(), &text],
        )
        .await
        .map(drop)
        .map_err(|e| errors::from_pg_plain(&e))
}

/// Makes `index` on `table` where it is missing: a merge table made by
/// a release before the index. Not under the lock bound: an index build
/// takes a lock that writers wait on, not readers.
async fn make_missing(
    client: &Client,
    table: &TableName,
    index: &indexes::Index,
) -> Result<(), EtlError> {
    let Some(name) = index.name() else {
        return Ok(());
    };
    // Under the table's lock: two writers opening an old table at once
    // would both make it, and one would fail on the catalog.
    table::locked(client, table, async {
        let missing: bool = client
            .query_one("SELECT to_regclass($1) IS NULL", &[&quote(name)])
            .await?
            .try_get(0)?;
        if missing {
            tracing::info!(
                table = table.as_str(),
                index = name,
                "indexing the merge table's primary key columns"
            );
            client
                .batch_execute(&index.create_sql(table.as_str()))
                .await?;
        }
        Ok(())
    })
    .await
}

/// The schema stored for `table`, if any, read and nothing made.
pub(crate) async fn stored_schema(
    client: &Client,
    table: &TableName,
    options: SchemaOptions,
) -> Result<Option<Schema>, EtlError> {
    let sql = format!(
        "SELECT schema FROM {} WHERE table_name = $1",
        quote(SCHEMA_TABLE)
    );
    let exists = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL",
            &[&quote(SCHEMA_TABLE)],
        )
        .await
        .and_then(|row| row.try_get::<_, bool>(0))
        .map_err(|e| errors::from_pg_plain(&e))?;
    if !exists {
        return Ok(None);
    }
    let Some(row) = client
        .query_opt(&sql, &[&table.as_str()])
        .await
        .map_err(|e| errors::from_pg_plain(&e))?
    else {
        return Ok(None);
    };
    let stored: String = row.try_get(0).map_err(|e| errors::from_pg_plain(&e))?;
    Schema::from_json(&stored, options)
        .map(Some)
        .map_err(|e| EtlError::InvalidInput(format!("{SCHEMA_TABLE} of {}: {e}", table.as_str())))
}

/// How many tables, and columns in each, a schema had.
pub(crate) struct Shape(Vec<usize>);

impl Shape {
    pub(crate) fn of(schema: &Schema) -> Shape {
        Shape(schema.tables().iter().map(|t| t.columns().len()).collect())
    }
}

/// The DDL that makes `schema`'s tables and columns out of those `before`
/// counts, the resource's table first (the order rows are inserted in, so
/// that a load and a schema change never wait on each other in a circle).
pub(crate) fn grow_sql(schema: &Schema, before: &Shape) -> String {
    let mut sql = String::new();
    for (at, table) in schema.tables().iter().enumerate() {
        match before.0.get(at) {
            None => sql.push_str(&create_sql(schema, at)),
            Some(&known) if known < table.columns().len() => {
                let adds: Vec<String> = table.columns()[known..]
                    .iter()
                    .map(|c| {
                        format!(
                            "ADD COLUMN IF NOT EXISTS {} {}",
                            quote(&c.name),
                            sql_type(c.column_type)
                        )
                    })
                    .collect();
                sql.push_str(&format!(
                    "ALTER TABLE {} {};\n",
                    quote(table.name()),
                    adds.join(", ")
                ));
                // A view's `*` was expanded when it was made.
                sql.push_str(&view_sql(schema, table));
                if let Some(index) = indexes::primary_key_grown(schema, table, known) {
                    sql.push_str(&index.create_sql(table.name()));
                }
            }
            Some(_) => {}
        }
    }
    sql
}

/// The table `at` of `schema` with its columns, its index and its view.
fn create_sql(schema: &Schema, at: usize) -> String {
    let table = &schema.tables()[at];
    let mut columns: Vec<String> = match table.parent() {
        None => vec![
            format!("{} text PRIMARY KEY", quote(loader::KEY)),
            format!("{} text", quote(loader::ID)),
            format!("{} timestamptz", quote(loader::UPDATED_AT)),
            format!(
                "{} timestamptz NOT NULL DEFAULT now()",
                quote(loader::LOADED_AT)
            ),
            format!("{} text NOT NULL", quote(loader::ROW)),
            format!("{} jsonb", quote(loader::META)),
        ],
        Some(_) => vec![
            // No key constraint: a record's child rows are written once,
            // with its row (see `Batch::insert`).
            format!("{} text NOT NULL", quote(loader::KEY)),
            format!("{} text NOT NULL", quote(loader::PARENT_KEY)),
            format!("{} text NOT NULL", quote(loader::ROOT_KEY)),
            format!("{} bigint NOT NULL", quote(loader::LIST_IDX)),
        ],
    };
    columns.extend(
        table
            .columns()
            .iter()
            .map(|c| format!("{} {}", quote(&c.name), sql_type(c.column_type))),
    );
    let t = quote(table.name());
    let indexes = indexes::create_sql(schema, table);
    format!(
        "CREATE TABLE IF NOT EXISTS {t} ({});\n{indexes}{}",
        columns.join(", "),
        view_sql(schema, table)
    )
}

/// `<table>_current`: for the resource's table, one row per id, the newest
/// by update time, then load time, then key; for a child table, the rows
/// whose record is a row of the resource's view. The resource's table
/// also has `<table>_versions` ([`versions_sql`]).
fn view_sql(schema: &Schema, table: &Table) -> String {
    let view = quote(&current_view(table.name()));
    let t = quote(table.name());
    match table.parent() {
        None => format!(
            "CREATE OR REPLACE VIEW {view} AS SELECT DISTINCT ON ({i}) * FROM {t} \
             WHERE {i} IS NOT NULL ORDER BY {i}, {u} DESC NULLS LAST, {l} DESC, {k};\n{}",
            versions_sql(table.name()),
            i = quote(loader::ID),
            u = quote(loader::UPDATED_AT),
            l = quote(loader::LOADED_AT),
            k = quote(loader::KEY),
        ),
        Some(_) => format!(
            "CREATE OR REPLACE VIEW {view} AS SELECT c.* FROM {t} c \
             WHERE c.{r} IN (SELECT {k} FROM {root});\n",
            r = quote(loader::ROOT_KEY),
            k = quote(loader::KEY),
            root = quote(&current_view(schema.tables()[0].name())),
        ),
    }
}

/// `<table>_versions`: every version of each id, oldest first, with the
/// time it held from (`_etl_valid_from`: its update time, else its load
/// time) and until (`_etl_valid_to`: the next version's `_etl_valid_from`;
/// NULL for the newest, the row `<table>_current` holds). The versions are
/// ordered as `_current` picks the newest, so the two agree. The validity
/// columns come first: a view's columns may only grow at the end, and
/// the table's grow.
fn versions_sql(table: &str) -> String {
    format!(
        "CREATE OR REPLACE VIEW {view} AS SELECT \
         coalesce({u}, {l}) AS {from}, \
         lead(coalesce({u}, {l})) OVER (PARTITION BY {i} ORDER BY {u} NULLS FIRST, {l}, {k} DESC) AS {to}, \
         * FROM {t} WHERE {i} IS NOT NULL;\n",
        view = quote(&versions_view(table)),
        t = quote(table),
        i = quote(loader::ID),
        u = quote(loader::UPDATED_AT),
        l = quote(loader::LOADED_AT),
        k = quote(loader::KEY),
        from = quote(loader::VALID_FROM),
        to = quote(loader::VALID_TO),
    )
}

/// One column's values in a batch, as the array PostgreSQL receives.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Values {
    Bool(Vec<Option<bool>>),
    Bigint(Vec<Option<i64>>),
    Double(Vec<Option<f64>>),
    Timestamp(Vec<Option<SystemTime>>),
    /// Days since 1970-01-01, added to that date in SQL.
    Date(Vec<Option<i32>>),
    Text(Vec<Option<String>>),
    /// JSON text, cast to jsonb in SQL.
    Json(Vec<Option<String>>),
}

impl Values {
    fn new(t: ColumnType) -> Values {
        match t {
            ColumnType::Bool => Values::Bool(Vec::new()),
            ColumnType::Bigint => Values::Bigint(Vec::new()),
            ColumnType::Double => Values::Double(Vec::new()),
            ColumnType::Timestamp => Values::Timestamp(Vec::new()),
            ColumnType::Date => Values::Date(Vec::new()),
            ColumnType::Text => Values::Text(Vec::new()),
            ColumnType::Json => Values::Json(Vec::new()),
        }
    }

    /// No values, of this one's type.
    fn empty(&self) -> Values {
        match self {
            Values::Bool(_) => Values::Bool(Vec::new()),
            Values::Bigint(_) => Values::Bigint(Vec::new()),
            Values::Double(_) => Values::Double(Vec::new()),
            Values::Timestamp(_) => Values::Timestamp(Vec::new()),
            Values::Date(_) => Values::Date(Vec::new()),
            Values::Text(_) => Values::Text(Vec::new()),
            Values::Json(_) => Values::Json(Vec::new()),
        }
    }

    /// Pads with NULLs to `rows` values.
    fn pad(&mut self, rows: usize) {
        match self {
            Values::Bool(v) => v.resize(rows, None),
            Values::Bigint(v) => v.resize(rows, None),
            Values::Double(v) => v.resize(rows, None),
            Values::Timestamp(v) => v.resize(rows, None),
            Values::Date(v) => v.resize(rows, None),
            Values::Text(v) => v.resize(rows, None),
            Values::Json(v) => v.resize(rows, None),
        }
    }

    /// Sets the value of row `row` (the last), NULLs before it.
    fn set(&mut self, row: usize, cell: Cell<'_>) {
        self.pad(row);
        match (self, cell) {
            (Values::Bool(v), Cell::Bool(b)) => v.push(Some(b)),
            (Values::Bigint(v), Cell::Bigint(i)) => v.push(Some(i)),
            (Values::Double(v), Cell::Double(f)) => v.push(Some(f)),
            (Values::Timestamp(v), Cell::Timestamp(t)) => v.push(Some(micros_to_time(t))),
            (Values::Date(v), Cell::Date(d)) => v.push(Some(d)),
            (Values::Text(v), Cell::Text(t)) => v.push(Some(t.into_owned())),
            (Values::Json(v), Cell::Json(t)) => v.push(Some(t.into_owned())),
            // A column's cells are of its type (the schema says so); any
            // other stays NULL rather than failing the load.
            (values, _) => values.pad(row + 1),
        }
    }

    /// Keeps the values whose place in `keep` is true.
    fn retain(&mut self, keep: &[bool]) {
        match self {
            Values::Bool(v) => retain(v, keep),
            Values::Bigint(v) => retain(v, keep),
            Values::Double(v) => retain(v, keep),
            Values::Timestamp(v) => retain(v, keep),
            Values::Date(v) => retain(v, keep),
            Values::Text(v) => retain(v, keep),
            Values::Json(v) => retain(v, keep),
        }
    }

    /// Appends `later`'s values after these (of the same column: the
    /// same type).
    fn append(&mut self, later: Values) {
        match (self, later) {
            (Values::Bool(v), Values::Bool(w)) => v.extend(w),
            (Values::Bigint(v), Values::Bigint(w)) => v.extend(w),
            (Values::Double(v), Values::Double(w)) => v.extend(w),
            (Values::Timestamp(v), Values::Timestamp(w)) => v.extend(w),
            (Values::Date(v), Values::Date(w)) => v.extend(w),
            (Values::Text(v), Values::Text(w)) | (Values::Json(v), Values::Json(w)) => v.extend(w),
            // One column has one type in every part of a batch (they share
            // the schema); were it not so, NULLs rather than a failed load.
            (_, _) => {}
        }
    }

    /// The array parameter, its SQL array type, and how a value of it is
    /// selected (`{}` is the value).
    fn param(&self) -> (&(dyn ToSql + Sync), &'static str, &'static str) {
        match self {
            Values::Bool(v) => (v, "boolean[]", "{}"),
            Values::Bigint(v) => (v, "bigint[]", "{}"),
            Values::Double(v) => (v, "float8[]", "{}"),
            Values::Timestamp(v) => (v, "timestamptz[]", "{}"),
            Values::Date(v) => (v, "int4[]", "DATE '1970-01-01' + {}"),
            Values::Text(v) => (v, "text[]", "{}"),
            Values::Json(v) => (v, "text[]", "{}::jsonb"),
        }
    }
}

pub(crate) fn micros_to_time(micros: i64) -> SystemTime {
    let magnitude = Duration::from_micros(micros.unsigned_abs());
    if micros >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

/// One table's rows of a batch.
#[derive(Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct TableRows {
    keys: Vec<String>,
    parents: Vec<String>,
    roots: Vec<String>,
    idx: Vec<i64>,
    columns: Vec<Option<Values>>,
}

impl TableRows {
    /// Appends `later`'s rows after these.
    fn append(&mut self, later: TableRows) {
        // Each column is padded to the rows before `later`'s first: a
        // column holds a value a row up to its last value only.
        let n = self.keys.len();
        if self.columns.len() < later.columns.len() {
            self.columns.resize_with(later.columns.len(), || None);
        }
        for (values, more) in self.columns.iter_mut().zip(later.columns) {
            let Some(more) = more else { continue };
            let values = values.get_or_insert_with(|| more.empty());
            values.pad(n);
            values.append(more);
        }
        self.keys.extend(later.keys);
        self.parents.extend(later.parents);
        self.roots.extend(later.roots);
        self.idx.extend(later.idx);
    }

    /// Keeps the child rows whose record's key is in `roots`.
    fn keep_children_of(&mut self, roots: &HashSet<String>) {
        let keep: Vec<bool> = self.roots.iter().map(|r| roots.contains(r)).collect();
        self.keep(&keep);
    }

    /// Keeps the rows whose place in `keep` is true.
    fn keep(&mut self, keep: &[bool]) {
        if keep.iter().all(|k| *k) {
            return;
        }
        let n = self.keys.len();
        retain(&mut self.keys, keep);
        retain(&mut self.parents, keep);
        retain(&mut self.roots, keep);
        retain(&mut self.idx, keep);
        for values in self.columns.iter_mut().flatten() {
            values.pad(n);
            values.retain(keep);
        }
    }
}

/// Keeps the items of `v` whose place in `keep` is true.
fn retain<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut at = 0;
    v.retain(|_| {
        at += 1;
        keep[at - 1]
    });
}

/// A batch's rows, by table, as arrays: what [`Schema::shred`] writes.
#[derive(Default)]
struct Batch {
    tables: Vec<TableRows>,
    /// The resource's rows' loader values `shred` does not know.
    ids: Vec<Option<String>>,
    updated: Vec<Option<SystemTime>>,
    texts: Vec<String>,
    metas: Vec<Option<String>>,
    refused: Vec<Reject>,
}

impl RowWriter for Batch {
    fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
        if self.tables.len() <= table {
            self.tables.resize_with(table + 1, TableRows::default);
        }
        let rows = &mut self.tables[table];
        rows.keys.push(keys.key.to_owned());
        if let (Some(parent), Some(idx)) = (keys.parent_key, keys.list_idx) {
            rows.parents.push(parent.to_owned());
            rows.roots.push(keys.root_key.to_owned());
            rows.idx.push(i64::try_from(idx).unwrap_or(i64::MAX));
        }
    }

    fn cell(&mut self, table: usize, column: usize, cell: Cell<'_>) {
        let rows = &mut self.tables[table];
        if rows.columns.len() <= column {
            rows.columns.resize_with(column + 1, || None);
        }
        let row = rows.keys.len() - 1;
        rows.columns[column]
            .get_or_insert_with(|| Values::new(cell.column_type()))
            .set(row, cell);
    }

    fn end_row(&mut self, table: usize, misfits: &[Misfit]) {
        if table == 0 {
            self.metas.push(meta_json(misfits));
        }
    }
}

impl SplitWriter for Batch {
    fn append(&mut self, later: Batch) {
        if self.tables.len() < later.tables.len() {
            self.tables
                .resize_with(later.tables.len(), TableRows::default);
        }
        for (rows, more) in self.tables.iter_mut().zip(later.tables) {
            rows.append(more);
        }
        self.ids.extend(later.ids);
        self.updated.extend(later.updated);
        self.texts.extend(later.texts);
        self.metas.extend(later.metas);
        self.refused.extend(later.refused);
    }
}

impl Batch {
    /// The resource's row just shredded, record `i` of `records`: its
    /// id, update time and text.
    fn record(&mut self, records: &Records, i: usize) {
        self.ids.push(records.ids[i].clone());
        self.updated.push(records.updated[i]);
        self.texts.push(records.encoded[i].json.clone());
    }

    /// Keeps the resource's rows whose place in `keep` is true (their
    /// child rows go with them when the batch is inserted).
    fn keep_records(&mut self, keep: &[bool]) {
        if let Some(rows) = self.tables.first_mut() {
            rows.keep(keep);
        }
        retain(&mut self.ids, keep);
        retain(&mut self.updated, keep);
        retain(&mut self.texts, keep);
        retain(&mut self.metas, keep);
    }

    /// Inserts the resource's rows, then the child rows of those that were
    /// new; returns how many were. Under a merge every row goes in (the
    /// merge weighed their keys under their locks), and another writer's
    /// insert of one of their keys meanwhile fails the page as overtaken
    /// (`_etl_id` is unique), to be merged again.
    async fn insert(
        &mut self,
        client: &Client,
        schema: &Schema,
        merge: bool,
    ) -> Result<usize, EtlError> {
        let mut new_keys = HashSet::new();
        for at in 0..self.tables.len() {
            let rows = &mut self.tables[at];
            if at > 0 {
                // Only the child rows of records that are new here: a held
                // record has its child rows already (they came in its
                // transaction), so child tables need no key of their own.
                rows.keep_children_of(&new_keys);
            }
            let n = rows.keys.len();
            if n == 0 {
                continue;
            }
            for values in rows.columns.iter_mut().flatten() {
                values.pad(n);
            }
            let table = &schema.tables()[at];
            let insert = self.arrays(at, table);
            if at == 0 && merge {
                // The page's merge locked and weighed every key it
                // inserts: a row is in only if no other writer's was. A
                // plain INSERT, then (ON CONFLICT's speculative insertion
                // is costly, BENCHMARKS.md): a concurrent writer's insert
                // of a key waits here until it commits, then fails this
                // page, to be merged again on its rows.
                client
                    .execute(&insert.sql(table, ""), &insert.params)
                    .await
                    .map_err(|e| match e.code() {
                        Some(&SqlState::UNIQUE_VIOLATION) => merge::overtaken(table.name(), &e),
                        _ => errors::from_pg_plain(&e),
                    })?;
                // The child tables still hold the rows of every version
                // of the page: only those of the versions that went in
                // follow.
                new_keys.extend(self.tables[at].keys.iter().cloned());
            } else if at == 0 {
                // A concurrent writer's insert of the same record waits
                // here until it commits, and is then not returned: its
                // child rows are that writer's to write.
                let k = quote(loader::KEY);
                let sql = insert.sql(
                    table,
                    &format!(" ON CONFLICT ({k}) DO NOTHING RETURNING {k}"),
                );
                for row in client
                    .query(&sql, &insert.params)
                    .await
                    .map_err(|e| errors::from_pg_plain(&e))?
                {
                    new_keys.insert(
                        row.try_get::<_, String>(0)
                            .map_err(|e| errors::from_pg_plain(&e))?,
                    );
                }
            } else {
                client
                    .execute(&insert.sql(table, ""), &insert.params)
                    .await
                    .map_err(|e| errors::from_pg_plain(&e))?;
            }
        }
        Ok(new_keys.len())
    }

    /// The arrays of table `at`'s rows: its loader columns, then each data
    /// column that has a value in the batch.
    fn arrays<'a>(&'a self, at: usize, table: &Table) -> Arrays<'a> {
        let rows = &self.tables[at];
        let mut arrays = Arrays::default();
        if at == 0 {
            arrays.push(loader::KEY, &rows.keys, "text[]", "{}");
            arrays.push(loader::ID, &self.ids, "text[]", "{}");
            arrays.push(loader::UPDATED_AT, &self.updated, "timestamptz[]", "{}");
            arrays.push(loader::ROW, &self.texts, "text[]", "{}");
            arrays.push(loader::META, &self.metas, "text[]", "{}::jsonb");
        } else {
            arrays.push(loader::KEY, &rows.keys, "text[]", "{}");
            arrays.push(loader::PARENT_KEY, &rows.parents, "text[]", "{}");
            arrays.push(loader::ROOT_KEY, &rows.roots, "text[]", "{}");
            arrays.push(loader::LIST_IDX, &rows.idx, "bigint[]", "{}");
        }
        for (column, values) in table.columns().iter().zip(&rows.columns) {
            if let Some(values) = values {
                let (param, ty, select) = values.param();
                arrays.push(&column.name, param, ty, select);
            }
        }
        arrays
    }
}

/// One INSERT's columns: each one's name, array, array type, and how a
/// value of it is selected (`{}` is the value).
#[derive(Default)]
struct Arrays<'a> {
    names: Vec<String>,
    params: Vec<&'a (dyn ToSql + Sync)>,
    types: Vec<&'static str>,
    selects: Vec<&'static str>,
}

impl<'a> Arrays<'a> {
    fn push(
        &mut self,
        name: &str,
        param: &'a (dyn ToSql + Sync),
        ty: &'static str,
        select: &'static str,
    ) {
        self.names.push(quote(name));
        self.params.push(param);
        self.types.push(ty);
        self.selects.push(select);
    }

    /// `INSERT INTO table (...) SELECT ... FROM UNNEST($1::..., ...)`,
    /// then `tail`.
    fn sql(&self, table: &Table, tail: &str) -> String {
        let arrays: Vec<String> = (self.types.iter().enumerate())
            .map(|(i, t)| format!("${}::{t}", i + 1))
            .collect();
        let aliases: Vec<String> = (0..self.types.len()).map(|i| format!("c{i}")).collect();
        let picks: Vec<String> = (self.selects.iter().enumerate())
            .map(|(i, s)| s.replace("{}", &format!("u.c{i}")))
            .collect();
        format!(
            "INSERT INTO {} ({}) SELECT {} FROM UNNEST({}) AS u({}){tail}",
            quote(table.name()),
            self.names.join(", "),
            picks.join(", "),
            arrays.join(", "),
            aliases.join(", "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records with a nested object, lists of objects and of scalars, a
    /// member that arrives late and a misfit.
    fn records(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let late = match i {
                    1_700 => r#","late":{"n":1.5}"#,
                    _ => "",
                };
                let number = match i % 500 {
                    7 => format!("\"#{i}\""),
                    _ => i.to_string(),
                };
                format!(
                    r#"{{"number":{number},"user":{{"login":"u{i}"}},"labels":[{{"name":"l{i}"}},{{"id":{i}}}],"tags":["a","b{i}"]{late}}}"#
                )
            })
            .collect()
    }

    /// Each load's tables, each column padded to its rows: the records
    /// in two loads, split on the cores or one after another.
    fn loads(records: &[String], split: bool) -> Vec<(Vec<TableRows>, Vec<Option<String>>)> {
        let mut schema = Schema::new("issues", SchemaOptions::postgres()).unwrap();
        let each = |schema: &mut Schema, batch: &mut Batch, i: usize| {
            let key = etl_core::content_id("row", &records[i]);
            schema.shred(&records[i], &key, batch)
        };
        let mut loads = Vec::new();
        for range in [0..1_000, 1_000..records.len()] {
            let mut batch = Batch::default();
            if split {
                let at = range.start;
                batch = schema
                    .shred_batch(range.len(), |schema, batch, i| each(schema, batch, at + i))
                    .unwrap()
                    .0;
            } else {
                for i in range {
                    each(&mut schema, &mut batch, i).unwrap();
                }
            }
            for rows in &mut batch.tables {
                let n = rows.keys.len();
                for values in rows.columns.iter_mut().flatten() {
                    values.pad(n);
                }
            }
            loads.push((batch.tables, batch.metas));
        }
        loads
    }

    #[test]
    fn rows_made_on_several_cores_are_the_rows_of_one_pass() {
        let records = records(3_000);
        let one = loads(&records, false);
        assert_eq!(loads(&records, true), one);
        assert_eq!(one[0].0[0].keys.len() + one[1].0[0].keys.len(), 3_000);
        assert_eq!(one[1].0[2].keys.len(), 4_000, "two tags a record");
    }
}
