//! A merge table's side of a merge: the rows it holds for a page's keys
//! ([`KeyedTable::holders`]), and one commit that takes the replaced rows
//! out and puts the page's in ([`KeyedTable::rewrite`]).
//!
//! A merge table's key column is `_etl_id` (the primary key), so its key
//! filters answer which files hold a key. A file holding a row that goes
//! out is written again without it (copy-on-write): the commit removes
//! the old file and adds its rewrite and the new rows' file, so a reader
//! sees every key once at every version. The commit goes in only at the
//! version after the one the rows were read at: a writer that loses the
//! race reads the winners' changes and weighs its page again.
//!
//! A child table's rows of a version that left are taken out the same way
//! ([`KeyedTable::take_out`]), by their own `_etl_key`s, which the rewrite
//! that took the version out finds from the version's text
//! ([`Rewrite::Done`]).

use deltalake::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch};
use deltalake::arrow::compute::{cast, filter_record_batch};
use deltalake::arrow::datatypes::{DataType as ArrowType, Int64Type};
use etl_core::content::typed::loader;
use etl_core::content::write::merge::Held;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;
use crate::errors::from_parquet;
use crate::keys::{rows_in_slices, rows_of, READ_AHEAD, REWRITE_GROUP};
use futures_util::{StreamExt, TryStreamExt};

/// The rows a merge table holds for a page's keys, read at one version.
pub(crate) struct Holders {
    /// The version they were read at: a rewrite of them commits only at
    /// the next.
    at: Version,
    /// The files holding any of the keys: how many rows each holds, and
    /// the `_etl_key` of each of its rows of those keys.
    files: Vec<(DataFile, usize, Vec<String>)>,
    /// What the merge weighs: each held key's content key and time.
    pub held: Held,
}

/// How a [`KeyedTable::rewrite`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rewrite {
    /// Committed: with the `_etl_row` text of each row taken out that the
    /// rewrite was asked for, by content key.
    Done(Vec<(String, String)>),
    /// Another writer committed first: the page is weighed again against
    /// [`KeyedTable::holders`] read anew. The new rows' files, not
    /// committed, are handed back: where the page weighs the same again
    /// they are committed as they are, else discarded.
    Lost(Vec<Add>),
    /// The table no longer agrees with the batch's basis ([`Basis`]):
    /// the batch is made again.
    Moved,
}

impl KeyedTable {
    /// What the live files hold of the rows of `ids` (the table's key
    /// column, a merge table's `_etl_id`): their `_etl_key` and
    /// `_etl_updated_at`, and which files hold them, as this writer knows
    /// the table.
    pub async fn holders(&self, ids: &[String]) -> Result<Holders, EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        state.settle().await;
        let (files, held) = match read_holders(&mut state, ids, shown).await {
            Ok(read) => read,
            // A file compacted away and vacuumed since: look again.
            Err(_) => {
                state.refresh(&self.columns, shown).await?;
                read_holders(&mut state, ids, shown).await?
            }
        };
        Ok(Holders {
            at: state.version,
            files,
            held,
        })
    }

    /// Writes the rows `new` of the columns `fields` as data files, not yet
    /// part of the table, for a [`KeyedTable::rewrite`] to commit: written
    /// while the child tables' files are. `None` when the table no longer
    /// agrees with the batch's `basis` (the rewrite then answers so).
    pub async fn stage_new(
        &self,
        new: RecordBatch,
        fields: &[StructField],
        basis: Basis<'_>,
    ) -> Result<Option<Vec<Add>>, EtlError> {
        let shown = self.shown();
        let state = self.state.lock().await;
        if basis.moved(&state.schema, fields) {
            return Ok(None);
        }
        let grown = grown(&state.schema, fields, matches!(basis, Basis::Text(_)))
            .map_err(|why| EtlError::InvalidInput(format!("Delta table {shown}: {why}")))?;
        let schema = grown.as_ref().unwrap_or(&state.schema);
        let rows = new.num_rows();
        let new = conform(new, schema).map_err(|e| from_arrow(e, shown))?;
        state.write(new, &self.columns, rows, shown).await.map(Some)
    }

    /// Commits, at the version after the one `holders` were read at, the
    /// removal of the held rows whose content keys are `out` (each file
    /// holding one is written again without it) and the rows `new`, whose
    /// `_etl_id`s are `ids`, of the columns `fields` (those the table lacks
    /// are added by the same commit, checked against `basis`). The texts
    /// of the rows of `out` also in `texts` are handed back with
    /// [`Rewrite::Done`]. The commit carries `note`, the token of the
    /// merge's note of the child rows it makes due ([`crate::log::Entry`]).
    pub async fn rewrite(
        &self,
        holders: Holders,
        (out, texts): (&HashSet<String>, &HashSet<String>),
        (new, ids): (Vec<Add>, &[&str]),
        (fields, basis): (&[StructField], Basis<'_>),
        note: Option<&str>,
    ) -> Result<Rewrite, EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        state.settle().await;
        let store = state.table.object_store();
        if basis.moved(&state.schema, fields) {
            discard(&store, Some(Staged::written(new))).await;
            return Ok(Rewrite::Moved);
        }
        if state.version != holders.at {
            return Ok(Rewrite::Lost(new));
        }
        let grown = grown(&state.schema, fields, matches!(basis, Basis::Text(_)))
            .map_err(|why| EtlError::InvalidInput(format!("Delta table {shown}: {why}")))?;
        let schema = grown.clone().unwrap_or_else(|| state.schema.clone());
        let written = state
            .without(holders.files, (out, texts), (&schema, &self.columns), shown)
            .await;
        let Without {
            removes,
            rewritten,
            texts,
        } = match written {
            Ok(written) => written,
            Err(e) => {
                discard(&store, Some(Staged::written(new))).await;
                return Err(e);
            }
        };
        if new.is_empty() && rewritten.is_empty() && removes.is_empty() && grown.is_none() {
            return Ok(Rewrite::Done(texts));
        }
        let metadata = state.metadata_of(grown, shown)?;
        let written = (new.as_slice(), ids, rewritten);
        match state
            .commit_rewrite(written, (&removes, metadata, note), (&self.columns, shown))
            .await?
        {
            true => Ok(Rewrite::Done(texts)),
            // The new rows' files may serve the next attempt as they are.
            false => Ok(Rewrite::Lost(new)),
        }
    }
}

/// The texts a rewrite is asked for: of the rows whose `_etl_key` is in
/// the set, from the table's text column (the name).
type Texts = (Arc<HashSet<String>>, String);

/// The texts a file's rewrite found, by content key, gathered from the
/// stream that reads it.
type Found = std::sync::Mutex<Vec<(String, String)>>;

/// What [`State::without`] wrote and read.
struct Without {
    /// The old files' `remove`s.
    removes: Vec<Remove>,
    /// Their rewrites' `add`s.
    rewritten: Vec<Add>,
    /// The texts of the rows taken out that were asked for, by content key.
    texts: Vec<(String, String)>,
}

impl KeyedTable {
    /// Takes the rows whose `_etl_key`s are `keys` out of the table in one
    /// commit (each file holding one written again without it), and
    /// returns how many it held. A commit that loses its race to another
    /// writer's looks again, at the winner's files.
    pub async fn take_out(&self, keys: &HashSet<String>) -> Result<usize, EtlError> {
        let shown = self.shown();
        let wanted: Vec<String> = keys.iter().cloned().collect();
        let no_texts = HashSet::new();
        for _ in 0..MAX_RACES {
            let mut state = self.state.lock().await;
            state.settle().await;
            let files = match holding(&mut state, &wanted, shown).await {
                Ok(files) => files,
                // A file compacted away and vacuumed since: look again.
                Err(_) => {
                    state.refresh(&self.columns, shown).await?;
                    holding(&mut state, &wanted, shown).await?
                }
            };
            let held: usize = files.iter().map(|(_, _, keys)| keys.len()).sum();
            if held == 0 {
                return Ok(0);
            }
            let schema = state.schema.clone();
            let Without {
                removes, rewritten, ..
            } = state
                .without(files, (keys, &no_texts), (&schema, &self.columns), shown)
                .await?;
            let written = (&[][..], &[][..], rewritten);
            if state
                .commit_rewrite(written, (&removes, None, None), (&self.columns, shown))
                .await?
            {
                return Ok(held);
            }
        }
        Err(EtlError::Network(format!(
            "Delta table {shown}: lost the commit race {MAX_RACES} times in a row to other writers"
        )))
    }
}

/// Whether a rewrite read all `rows` of `file` (`read` of them): a
/// shorter or longer read is refused, naming the file, so that no
/// rewrite commits a file that lost or repeated a row.
fn read_whole(read: usize, rows: usize, file: &DataFile, shown: &str) -> Result<(), EtlError> {
    if read == rows {
        return Ok(());
    }
    Err(EtlError::InvalidInput(format!(
        "Delta table {shown}: {} read as {read} rows where its key column holds {rows}: \
         not written again, nothing committed",
        file.path
    )))
}

impl Holders {
    /// The version the rows were read at.
    pub fn at(&self) -> Version {
        self.at
    }
}

impl KeyedTable {
    /// The data files that the entry after version `known` carrying the
    /// note `token` removed ([`crate::log::noted`]), looked for up to the
    /// latest version; `None` when no entry carries it.
    pub async fn noted(
        &self,
        known: Version,
        token: &str,
    ) -> Result<Option<Vec<DataFile>>, EtlError> {
        let shown = self.shown();
        let mut state = self.state.lock().await;
        state.settle().await;
        state.catch_up(&self.columns, shown).await?;
        let log_store = state.table.log_store();
        crate::log::noted(log_store.as_ref(), known, state.version, token)
            .await
            .map_err(|e| from_delta(e, "reading the log", shown))
    }

    /// The texts of the rows whose `_etl_key`s are `keys` in `files` (files
    /// of this table, live or removed but not yet vacuumed), by key.
    pub async fn texts_in_files(
        &self,
        files: &[DataFile],
        keys: &HashSet<String>,
    ) -> Result<Vec<(String, String)>, EtlError> {
        let shown = self.shown();
        let Some(text) = self.columns.text() else {
            return Ok(Vec::new());
        };
        let store = self.store().await;
        let mut found = Vec::new();
        for file in files {
            found.extend(texts_of(&store, file, (keys, text), shown).await?);
        }
        Ok(found)
    }
}

impl State {
    /// Writes each of `files` (with its row count and its rows' keys of
    /// the page) that holds a row whose `_etl_key` is in `out` again
    /// without those rows, a batch at a time, conformed to `schema`: the
    /// `remove`s of the old files and the `add`s of their rewrites, and
    /// the text (the table's text column) of each row taken out whose key
    /// is in `texts`. On a failure the rewrites written so far are deleted.
    async fn without(
        &self,
        files: Vec<(DataFile, usize, Vec<String>)>,
        (out, texts): (&HashSet<String>, &HashSet<String>),
        (schema, columns): (&StructType, &Columns),
        shown: &str,
    ) -> Result<Without, EtlError> {
        let store = self.table.object_store();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let shared = Arc::new(out.clone());
        // Texts are read only where the table has a text column.
        let wanted = match columns.text() {
            Some(text) if !texts.is_empty() => Some((Arc::new(texts.clone()), text.to_owned())),
            _ => None,
        };
        let found: Arc<Found> = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut done = Without {
            removes: Vec::new(),
            rewritten: Vec::new(),
            texts: Vec::new(),
        };
        for (file, rows, keys) in files {
            let leaving = keys.iter().filter(|k| out.contains(k.as_str())).count();
            if leaving == 0 {
                continue;
            }
            done.removes.push(remove_of(&file, now));
            let asked = wanted
                .as_ref()
                .filter(|(texts, _)| keys.iter().any(|k| texts.contains(k)));
            if leaving == rows {
                // Nothing stays: the file is read only for texts asked.
                if let Some((texts, text)) = asked {
                    let read = texts_of(&store, &file, (texts, text), shown).await;
                    match read {
                        Ok(read) => done.texts.extend(read),
                        Err(e) => {
                            discard(&store, Some(Staged::written(done.rewritten))).await;
                            return Err(e);
                        }
                    }
                }
                continue;
            }
            let taken = (&shared, asked.cloned(), &found);
            let adds = self
                .rewrite(&file, (rows, leaving), taken, (schema, columns), shown)
                .await;
            match adds {
                Ok(adds) => done.rewritten.extend(adds),
                Err(e) => {
                    discard(&store, Some(Staged::written(done.rewritten))).await;
                    return Err(e);
                }
            }
        }
        done.texts.extend(std::mem::take(
            &mut *found.lock().unwrap_or_else(|e| e.into_inner()),
        ));
        Ok(done)
    }

    /// Writes `file` (of `rows` rows, `leaving` of them taken out) again
    /// without the rows whose `_etl_key` is in `out`, a slice at a time,
    /// conformed to `schema`; the text of each row whose key is `asked`
    /// for goes to `found`. Returns the rewrite's `add`s. A rewrite that
    /// read another count of rows than the file's keys counted is refused,
    /// its files deleted: a slice it missed would be committed as gone.
    async fn rewrite(
        &self,
        file: &DataFile,
        (rows, leaving): (usize, usize),
        (out, asked, found): (&Arc<HashSet<String>>, Option<Texts>, &Arc<Found>),
        (schema, columns): (&StructType, &Columns),
        shown: &str,
    ) -> Result<Vec<Add>, EtlError> {
        let store = self.table.object_store();
        let (out, schema, found) = (Arc::clone(out), schema.clone(), Arc::clone(found));
        let read = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&read);
        let batches = rows_in_slices(&store, file, shown).await?;
        let batches = batches.map(move |rows| {
            let rows = rows?;
            counted.fetch_add(rows.num_rows(), Ordering::Relaxed);
            if let Some((texts, text)) = &asked {
                let read = texts_in(&rows, (texts, text))?;
                found.lock().unwrap_or_else(|e| e.into_inner()).extend(read);
            }
            let keep = kept(&rows, &out)?;
            Ok(conform(filter_record_batch(&rows, &keep)?, &schema)?)
        });
        let adds = self
            .write_all(batches, columns, (rows - leaving, REWRITE_GROUP), shown)
            .await?;
        // The old file goes with this commit: its rewrite holds every row
        // it held but those taken out, or the file is not rewritten (the
        // count is the keys' read, made apart).
        if let Err(e) = read_whole(read.load(Ordering::Relaxed), rows, file, shown) {
            discard(&store, Some(Staged::written(adds))).await;
            return Err(e);
        }
        Ok(adds)
    }

    /// Commits a rewrite: the new rows' files `new` (of the keys `ids`),
    /// the files `rewritten`, the `removes`, `metadata` and `note`; then brings
    /// the key index to it (`true`). A commit that loses its race to
    /// another writer's deletes the files written again (they are of the
    /// rows read before the race) and reads the winners' commits
    /// (`false`); any other failure deletes every file.
    async fn commit_rewrite(
        &mut self,
        (new, ids, rewritten): (&[Add], &[&str], Vec<Add>),
        (removes, metadata, note): (&[Remove], Option<Metadata>, Option<&str>),
        (columns, shown): (&Columns, &str),
    ) -> Result<bool, EtlError> {
        let store = self.table.object_store();
        let adds: Vec<Add> = new.iter().chain(&rewritten).cloned().collect();
        match self.commit(&adds, removes, metadata, note).await {
            Ok(()) => {
                self.note_rewrite(removes, (new, ids), rewritten, shown)
                    .await?;
                Ok(true)
            }
            Err(e) if lost_race(&e) => {
                discard(&store, Some(Staged::written(rewritten))).await;
                tracing::debug!(table = shown, error = %e, "lost a rewrite's commit race; reading the winner's");
                self.catch_up(columns, shown).await?;
                Ok(false)
            }
            Err(e) => {
                discard(&store, Some(Staged::written(adds))).await;
                Err(from_delta(e, "committing", shown))
            }
        }
    }

    /// Brings the key index to a committed rewrite: the files `removes`
    /// removed forgotten, the new rows' files `new` (of the keys `ids`)
    /// and the `rewritten` ones (their filters read from their footers)
    /// noted.
    async fn note_rewrite(
        &mut self,
        removes: &[Remove],
        (new, ids): (&[Add], &[&str]),
        rewritten: Vec<Add>,
        shown: &str,
    ) -> Result<(), EtlError> {
        let gone: Vec<Path> = removes
            .iter()
            .map(|r| Path::from(r.path.as_str()))
            .collect();
        self.index.remove(&gone);
        for add in new {
            self.index.add_written(data_file(add), ids);
        }
        let store = self.table.object_store();
        let rewritten = rewritten.iter().map(data_file).collect();
        self.index.add(&store, rewritten, shown).await
    }
}

/// The files of `state`'s table that hold any of `ids` (each with its
/// count of rows and the `_etl_key`s of its rows of `ids`), and what the
/// merge weighs of the rows of `ids`. The files a filter may hold a key in
/// are read [`READ_AHEAD`] at a time (each a round trip or more on object
/// storage).
async fn read_holders(
    state: &mut State,
    ids: &[String],
    shown: &str,
) -> Result<(Vec<(DataFile, usize, Vec<String>)>, Held), EtlError> {
    let store = state.table.object_store();
    let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let read = each_may_hold(state, ids, shown, |file| {
        held_in(&store, file, &wanted, shown)
    })
    .await?;
    let mut files = Vec::new();
    let mut held = Held::new();
    for (file, rows, keys, of_file) in read {
        // Else a filter's false positive.
        if !keys.is_empty() {
            held.extend(of_file);
            files.push((file, rows, keys));
        }
    }
    Ok((files, held))
}

/// `read` of each file of `state`'s table whose filters may hold any of
/// `keys`, [`READ_AHEAD`] files at a time (each a round trip or more on
/// object storage).
async fn each_may_hold<R, F, Fut>(
    state: &mut State,
    keys: &[String],
    shown: &str,
    read: F,
) -> Result<Vec<R>, EtlError>
where
    F: Fn(DataFile) -> Fut,
    Fut: std::future::Future<Output = Result<R, EtlError>>,
{
    let store = state.table.object_store();
    let files = state.index.may_hold(&store, keys, shown).await?;
    futures_util::stream::iter(files)
        .map(read)
        .buffered(READ_AHEAD)
        .try_collect()
        .await
}

/// One file's rows of the keys `wanted`: the file, its count of rows, the
/// `_etl_key`s of its rows of `wanted`, and what the merge weighs of them.
async fn held_in(
    store: &Arc<dyn ObjectStore>,
    file: DataFile,
    wanted: &HashSet<&str>,
    shown: &str,
) -> Result<(DataFile, usize, Vec<String>, Held), EtlError> {
    // Only what a merge weighs: the rows are read again, whole, only
    // where the page takes one out.
    let weighed = [loader::ID, loader::KEY, loader::UPDATED_AT];
    let mut batches = rows_of(store, &file, &weighed, shown).await?;
    let (mut rows, mut keys, mut held) = (0, Vec::new(), Held::new());
    while let Some(batch) = batches.next().await {
        let batch = batch.map_err(|e| from_parquet(e, file.path.as_ref(), shown))?;
        rows += batch.num_rows();
        let found = note_held(&batch, wanted, &mut held).map_err(|e| from_arrow(e, shown))?;
        keys.extend(found);
    }
    Ok((file, rows, keys, held))
}

/// The files of `state`'s table that hold any of the `_etl_key`s `keys`,
/// each with its count of rows and those of its rows' keys, read
/// [`READ_AHEAD`] at a time.
async fn holding(
    state: &mut State,
    keys: &[String],
    shown: &str,
) -> Result<Vec<(DataFile, usize, Vec<String>)>, EtlError> {
    let store = state.table.object_store();
    let wanted: HashSet<&str> = keys.iter().map(String::as_str).collect();
    let read = each_may_hold(state, keys, shown, |file| {
        keys_in(&store, file, &wanted, shown)
    })
    .await?;
    // A file without any: a filter's false positive.
    Ok(read
        .into_iter()
        .filter(|(_, _, keys)| !keys.is_empty())
        .collect())
}

/// One file, its count of rows and the `_etl_key`s of its rows that are
/// `wanted`: its key column only.
async fn keys_in(
    store: &Arc<dyn ObjectStore>,
    file: DataFile,
    wanted: &HashSet<&str>,
    shown: &str,
) -> Result<(DataFile, usize, Vec<String>), EtlError> {
    let mut batches = rows_of(store, &file, &[loader::KEY], shown).await?;
    let (mut rows, mut keys) = (0, Vec::new());
    while let Some(batch) = batches.next().await {
        let batch = batch.map_err(|e| from_parquet(e, file.path.as_ref(), shown))?;
        rows += batch.num_rows();
        let column = utf8(&batch, loader::KEY).map_err(|e| from_arrow(e, shown))?;
        let column = column.as_string::<i32>();
        keys.extend(
            (0..batch.num_rows())
                .filter(|&i| column.is_valid(i) && wanted.contains(column.value(i)))
                .map(|i| column.value(i).to_owned()),
        );
    }
    Ok((file, rows, keys))
}

/// The texts (the column `text`) of `file`'s rows whose `_etl_key`s are
/// `wanted`, by key: its key and text columns only.
async fn texts_of(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    (wanted, text): (&HashSet<String>, &str),
    shown: &str,
) -> Result<Vec<(String, String)>, EtlError> {
    let mut batches = rows_of(store, file, &[loader::KEY, text], shown).await?;
    let mut found = Vec::new();
    while let Some(batch) = batches.next().await {
        let batch = batch.map_err(|e| from_parquet(e, file.path.as_ref(), shown))?;
        found.extend(texts_in(&batch, (wanted, text)).map_err(|e| from_arrow(e, shown))?);
    }
    Ok(found)
}

/// The texts (the column `text`) of the rows of `rows` whose `_etl_key`s
/// are `wanted`, by key.
fn texts_in(
    rows: &RecordBatch,
    (wanted, text): (&HashSet<String>, &str),
) -> Result<Vec<(String, String)>, ArrowError> {
    let (keys, texts) = (utf8(rows, loader::KEY)?, utf8(rows, text)?);
    let (keys, texts) = (keys.as_string::<i32>(), texts.as_string::<i32>());
    Ok((0..rows.num_rows())
        .filter(|&i| keys.is_valid(i) && texts.is_valid(i) && wanted.contains(keys.value(i)))
        .map(|i| (keys.value(i).to_owned(), texts.value(i).to_owned()))
        .collect())
}

/// The column `name` of `rows`, as `to`.
fn column_as(rows: &RecordBatch, name: &str, to: &ArrowType) -> Result<ArrayRef, ArrowError> {
    let found = rows
        .column_by_name(name)
        .ok_or_else(|| ArrowError::SchemaError(format!("no `{name}` column")))?;
    cast(found, to)
}

/// The column `name` of `rows`, as text.
fn utf8(rows: &RecordBatch, name: &str) -> Result<ArrayRef, ArrowError> {
    column_as(rows, name, &ArrowType::Utf8)
}

/// Notes each row of `rows` (a merge table's file) whose `_etl_id` is
/// `wanted` in `held`: its `_etl_key` and `_etl_updated_at`. Returns those
/// rows' `_etl_key`s.
fn note_held(
    rows: &RecordBatch,
    wanted: &HashSet<&str>,
    held: &mut Held,
) -> Result<Vec<String>, ArrowError> {
    let (ids, keys) = (utf8(rows, loader::ID)?, utf8(rows, loader::KEY)?);
    let times = column_as(rows, loader::UPDATED_AT, &ArrowType::Int64)?;
    let (ids, keys) = (ids.as_string::<i32>(), keys.as_string::<i32>());
    let times = times.as_primitive::<Int64Type>();
    let mut found = Vec::new();
    for i in 0..rows.num_rows() {
        if !(ids.is_valid(i) && keys.is_valid(i) && wanted.contains(ids.value(i))) {
            continue;
        }
        let at = times.is_valid(i).then(|| time_of(times.value(i))).flatten();
        held.insert(ids.value(i).to_owned(), (keys.value(i).to_owned(), at));
        found.push(keys.value(i).to_owned());
    }
    Ok(found)
}

/// A time read as microseconds since the epoch.
pub(crate) fn time_of(micros: i64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_micros(u64::try_from(micros).ok()?))
}

/// Which rows of `rows` stay: those whose `_etl_key` is not in `out`.
fn kept(rows: &RecordBatch, out: &HashSet<String>) -> Result<BooleanArray, ArrowError> {
    let keys = utf8(rows, loader::KEY)?;
    let keys = keys.as_string::<i32>();
    Ok((0..rows.num_rows())
        .map(|i| Some(!(keys.is_valid(i) && out.contains(keys.value(i)))))
        .collect())
}

/// The `remove` action of the live file `file`, removed at `now` (ms).
fn remove_of(file: &DataFile, now: i64) -> Remove {
    Remove {
        path: file.path.to_string(),
        data_change: true,
        deletion_timestamp: Some(now),
        extended_file_metadata: Some(true),
        partition_values: Some(Default::default()),
        size: i64::try_from(file.size).ok(),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_that_read_more_or_fewer_rows_than_the_file_holds_is_refused() {
        let file = DataFile {
            path: Path::from("part-1.parquet"),
            size: 1,
        };
        assert!(read_whole(99_000, 99_000, &file, "lake/t").is_ok());
        for read in [0, 98_999, 99_001] {
            let e = read_whole(read, 99_000, &file, "lake/t").unwrap_err();
            let message = e.to_string();
            assert!(message.contains("part-1.parquet"), "{message}");
            assert!(
                message.contains(&format!("read as {read} rows")),
                "{message}"
            );
            assert!(message.contains("holds 99000"), "{message}");
            assert!(matches!(e, EtlError::InvalidInput(_)), "{e:?}");
        }
    }
}
