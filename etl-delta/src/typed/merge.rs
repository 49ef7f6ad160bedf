//! `write = "merge"` into a typed family in Delta: one row per primary
//! key, the newest version read, deletions remembered.
//!
//! A load weighs its records ([`etl_core::content::write::merge`]) against
//! the rows the resource's table holds for their keys
//! ([`KeyedTable::holders`]) and the deletions remembered for them
//! ([`Deleted`]); then commits the deletions it makes, the child rows of
//! the versions that go in, and last the resource's table: one commit
//! that takes the replaced and deleted rows out (rewriting the files that
//! hold them) and puts the new versions in ([`KeyedTable::rewrite`]). A
//! reader joining a child table on `_etl_parent_key = _etl_key` sees each
//! current row with exactly its own version's child rows.
//!
//! The child rows of a version that left go after that commit, beside the
//! next load, each child table's in one commit of its own
//! ([`KeyedTable::take_out`]; [`Typed::settle`] waits for them): found by
//! walking the version's text again (a child row's key comes from its
//! parent's and its place in its list). Only those of a version strictly
//! older than what replaced or deleted it go: such a version never comes
//! back, whatever other writers do, as a row never goes back to an older
//! version. A version replaced at an equal time (or without one) may come
//! back, read again later, and finds its child rows where it left them.
//! A writer's version that lost its race to a strictly newer one after its
//! child rows were in has them taken out the same way ([`lost`]). Until
//! they go (and for good where a version may come back), such child rows
//! are joined to no current row. A note written before the commit says
//! which go ([`super::pending`]): a writer killed between the commits leaves it,
//! and the next merge of the family opened takes them out.
//!
//! A writer whose commit of the resource's table loses the race to
//! another's weighs its records again against the winner's rows, so of two
//! writers' versions of a key the newest stays, whatever the order of
//! their commits.

use deltalake::parquet::bloom_filter::Sbbf;
use etl_core::content::typed::{update_micros, Cell, Misfit, RowKeys, RowWriter};
use etl_core::content::write::merge::{key_of, weigh, Change, Gone, Held, Version as Weighed};
use std::sync::Arc;
use tracing::Instrument;

use super::pending::Pending;
use super::*;
use crate::deleted::Deletion;
use crate::table::{time_of, Holders, Rewrite, MAX_RACES};

/// What a merge load did.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    /// Rows inserted (new keys, or newer versions of held ones).
    pub new: usize,
    /// Rows a deletion took out.
    pub deleted: usize,
    /// Records refused (no primary key, or a frozen schema's refusal).
    pub refused: Vec<Reject>,
}

impl Merged {
    /// `new` rows inserted and `deleted` taken out, with the records
    /// `keyed` refused.
    fn of(new: usize, deleted: usize, keyed: &mut Keyed) -> Self {
        Merged {
            new,
            deleted,
            refused: std::mem::take(&mut keyed.refused),
        }
    }
}

/// A page's records as a merge knows them ([`Typed::keyed`]): each one's
/// primary key and whether it says it was deleted (`None`: it has no key,
/// and is refused). Made before the write, beside the page before's.
pub(crate) struct Keyed {
    /// The records without their key, as rejects.
    refused: Vec<Reject>,
    /// Each record's primary key, as `_etl_id` holds it.
    ids: Vec<Option<String>>,
    /// Whether each record says it was deleted (`hard_delete`).
    deletes: Vec<bool>,
    /// The distinct keys, to look up.
    distinct: Vec<String>,
    /// Each record's update time (`updated_at`), as the merge weighs it.
    times: Vec<Option<SystemTime>>,
}

/// A merge attempt's rows, made and written: its child tables' rows
/// committed, its new rows' files for the resource's table written.
struct Ready {
    /// The records whose versions go in.
    fresh: Vec<usize>,
    /// The new rows' files, not yet committed.
    new: Vec<Add>,
    /// The content keys of the rows in them (a version a frozen schema
    /// refused is not).
    landing: HashSet<String>,
    /// The records a frozen schema refused.
    frozen: Vec<Reject>,
    grows: Option<RootGrowth>,
    /// The resource's table's columns, as the rows were made.
    fields: Vec<StructField>,
}

impl Typed {
    /// Makes the rows of the records `fresh` (their primary keys `ids`) on the
    /// schema the tables hold, commits their child tables' rows and writes
    /// the files of the resource's (not committed). `None`: a table
    /// another writer grew first no longer agreed, and the rows are to be
    /// made again.
    async fn ready<T: Record>(
        &self,
        root: &KeyedTable,
        state: &mut State,
        (rows, encoded): (&[T], &[KeyedJson]),
        (fresh, ids): (Vec<usize>, &[Option<String>]),
        children: Known,
    ) -> Result<Option<Ready>, EtlError> {
        let (mut batch, frozen, grows) = self
            .grow(root, state, rows, encoded, (&fresh, Some(ids)))
            .await?;
        let mut parts = self
            .parts(state, &mut batch, grows.as_ref(), (0, children))
            .await?;
        let resource = match parts.last() {
            Some((0, ..)) => parts.pop().map(|(_, part, _)| part),
            _ => None,
        };
        let tables: Vec<&KeyedTable> = parts
            .iter()
            .map(|&(at, ..)| &*state.children[state.schema.tables()[at].name()])
            .collect();
        let base = grows.as_ref().map(|g| g.base.as_str());
        // Every table's files written at once, the resource's too.
        let staged = join_all(
            parts
                .iter()
                .zip(&tables)
                .map(|((_, part, known), table)| stage(table, part, (*known, Basis::Columns))),
        );
        let resource_rows = async {
            match &resource {
                Some(part) if part.batch.num_rows() > 0 => {
                    let (batch, fields) = (part.batch.clone(), &part.fields);
                    root.stage_new(batch, fields, basis(0, base)).await
                }
                _ => Ok(Some(Vec::new())),
            }
        };
        let (staged, new) = futures_util::future::join(staged, resource_rows).await;
        let committed = commit_staged(&tables, parts, staged, None).await;
        let new = match (committed, new) {
            (Ok(Some(_)), Ok(Some(new))) => new,
            (committed, new) => {
                // Not to be committed: the resource's files go.
                if let Ok(Some(adds)) = &new {
                    root.discard(Some(Staged::written(adds.clone()))).await;
                }
                committed?;
                new?;
                // A table another writer grew first: made again.
                state.stored.clear();
                return Ok(None);
            }
        };
        let (landing, fields) = match resource {
            Some(part) => (part.keys.into_iter().collect(), part.fields),
            None => (HashSet::new(), Vec::new()),
        };
        Ok(Some(Ready {
            fresh,
            new,
            landing,
            frozen,
            grows,
            fields,
        }))
    }

    /// Merges `rows` (their keys and canonical JSON `encoded`, their
    /// primary keys `keyed`) into the family whose resource's table is
    /// `root`.
    pub(crate) async fn merge<T: Record>(
        &self,
        root: &KeyedTable,
        (rows, encoded): (&[T], &[KeyedJson]),
        mut keyed: Keyed,
    ) -> Result<Merged, EtlError> {
        let deleted = self.deletions()?;
        // Under the family's lock: this process's loads merge one at a time.
        let mut state = self.state.lock().await;
        let records: Vec<&str> = encoded.iter().map(|c| c.key.as_str()).collect();
        let first = started(&mut state, &records);
        let mut carried = Carried::default();
        for attempt in 0..MAX_RACES {
            // After the first, the last attempt's child rows may be in.
            let children = if attempt == 0 { first } else { Known::Nothing };
            let holders = root.holders(&keyed.distinct).await?;
            let gone = deleted.gone(&keyed.distinct).await?;
            let Weighing {
                fresh,
                deleted: taken,
                change,
                deletions,
            } = keyed.weigh(encoded, &holders.held, &gone);
            // Remembered before the rows leave: a reader of the resource's
            // table, then of the deletions, never misses one.
            deleted.remember(&deletions).await?;
            let Some(mut ready) = self
                .ready_again(
                    root,
                    &mut state,
                    carried.last.take(),
                    (rows, encoded),
                    (fresh, &keyed.ids),
                    children,
                )
                .await?
            else {
                continue;
            };
            carried.children_in.extend(ready.fresh.iter().copied());
            let new_ids = ready.new_ids(encoded, &keyed.ids);
            let leaving = Leaving::of(
                (&ready, &new_ids, &carried.children_in),
                (&holders.held, &change, &deletions),
                (encoded, &keyed),
            );
            let at = holders.at();
            let token = self.note(root, &mut carried.note, at, &leaving).await?;
            let rewrite = ready
                .commit(
                    root,
                    holders,
                    (&leaving.out, &leaving.outdated),
                    (&new_ids, token.as_deref()),
                )
                .await?;
            match rewrite {
                Rewrite::Done(texts) => {
                    let merged = Merged::of(new_ids.len(), taken, &mut keyed);
                    let done = (ready, [texts, leaving.lost].concat(), carried.note);
                    return Ok(self
                        .committed(&mut state, (&records, encoded), done, merged)
                        .await);
                }
                // Kept for the next attempt only where it grows nothing:
                // growth is weighed against the schema anew.
                Rewrite::Lost(new) if ready.grows.is_none() => {
                    ready.new = new;
                    carried.last = Some(ready);
                }
                Rewrite::Lost(new) => root.discard(Some(Staged::written(new))).await,
                Rewrite::Moved => state.stored.clear(),
            }
        }
        Err(self.gave_up(root, carried).await)
    }

    /// Writes the note of the child rows an attempt's commit makes due,
    /// where it takes any version out for good (or an earlier attempt's
    /// note is there, to be brought to this attempt), and returns the token
    /// the commit carries; the attempt read the resource's table `root` at
    /// `at`.
    async fn note(
        &self,
        root: &KeyedTable,
        note: &mut Option<Pending>,
        at: deltalake::kernel::Version,
        leaving: &Leaving,
    ) -> Result<Option<String>, EtlError> {
        if note.is_none() && leaving.outdated.is_empty() && leaving.lost.is_empty() {
            return Ok(None);
        }
        if note.is_none() {
            *note = Some(Pending::new(root.store().await));
        }
        let Some(note) = note else {
            return Ok(None);
        };
        note.write(at, &leaving.outdated, &leaving.lost, root.shown())
            .await?;
        Ok(Some(note.token().to_owned()))
    }

    /// Ends a merge that lost its commit race every time: the last
    /// attempt's new rows' files, if kept, deleted.
    async fn gave_up(&self, root: &KeyedTable, carried: Carried) -> EtlError {
        if let Some(earlier) = carried.last {
            root.discard(Some(Staged::written(earlier.new))).await;
        }
        // No commit carried the note.
        if let Some(note) = carried.note {
            note.remove().await;
        }
        EtlError::Network(format!(
            "Delta table {}: lost the merge's commit race {MAX_RACES} times in a row to other writers",
            self.at.shown
        ))
    }

    /// The family's remembered deletions: a merge family's.
    fn deletions(&self) -> Result<&Deleted, EtlError> {
        self.deleted.as_ref().ok_or_else(|| {
            EtlError::InvalidInput(format!(
                "Delta table {}: a merge into a family not opened for merge",
                self.at.shown
            ))
        })
    }

    /// Each record's primary key, deletion mark and time, on the keys the
    /// family is merged on; a record without its key is refused, naming
    /// the pointer. `None` for a family not written by merge.
    pub(crate) fn keyed<T: Record>(
        &self,
        rows: &[T],
        encoded: &[KeyedJson],
    ) -> Result<Option<Keyed>, EtlError> {
        let Write::Merge(keys) = &self.options.write else {
            return Ok(None);
        };
        let mut refused = Vec::new();
        let mut ids = Vec::with_capacity(encoded.len());
        let mut deletes = Vec::with_capacity(encoded.len());
        for c in encoded {
            let (id, deleted) = match key_of(&c.json, keys) {
                Ok((key, deleted)) => (Some(key), deleted),
                Err(why) => {
                    let source = format!("Delta table {}", self.at.shown);
                    refused.push(Reject::new(c.json.as_str(), why, source)?);
                    (None, false)
                }
            };
            ids.push(id);
            deletes.push(deleted);
        }
        let mut distinct: Vec<String> = ids.iter().flatten().cloned().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let times = rows
            .iter()
            .zip(encoded)
            .map(|(row, c)| update_micros(row, &c.key).and_then(time_of))
            .collect();
        Ok(Some(Keyed {
            refused,
            ids,
            deletes,
            distinct,
            times,
        }))
    }
}

/// Notes a merge load's `records` as unfinished until its commit, and
/// says what is known of their child rows: this writer wrote none unless a
/// load of them failed, or lost its race, after their child rows were in,
/// or it put one of these versions in before (and another since); only
/// then are its own files looked in too.
fn started(state: &mut State, records: &[&str]) -> Known {
    let again = |k: &str| state.inserted.as_ref().is_some_and(|f| f.check(k));
    let known = match records
        .iter()
        .any(|k| state.unfinished.contains(*k) || again(k))
    {
        true => Known::Nothing,
        false => Known::NeverWritten,
    };
    state
        .unfinished
        .extend(records.iter().map(|k| k.to_string()));
    known
}

impl Typed {
    /// The rows of the records `fresh` ready to commit: `last`'s, where
    /// the last attempt (which lost its race) weighed the same versions in
    /// (its child rows are in, its new rows' file written); else made
    /// now ([`Typed::ready`]), `last`'s files deleted.
    async fn ready_again<T: Record>(
        &self,
        root: &KeyedTable,
        state: &mut State,
        last: Option<Ready>,
        (rows, encoded): (&[T], &[KeyedJson]),
        (fresh, ids): (Vec<usize>, &[Option<String>]),
        children: Known,
    ) -> Result<Option<Ready>, EtlError> {
        match last {
            Some(ready) if ready.fresh == fresh => Ok(Some(ready)),
            earlier => {
                if let Some(earlier) = earlier {
                    root.discard(Some(Staged::written(earlier.new))).await;
                }
                self.ready(root, state, (rows, encoded), (fresh, ids), children)
                    .await
            }
        }
    }
}

/// A page weighed against what the table holds.
struct Weighing<'a> {
    /// The records whose versions go in.
    fresh: Vec<usize>,
    /// Held rows a deletion takes out.
    deleted: usize,
    change: Change<'a>,
    /// The deletions to remember.
    deletions: Vec<Deletion<'a>>,
}

impl Keyed {
    /// Weighs the versions of `encoded` that have their key against the
    /// rows `held` for their keys and the deletions remembered (`gone`).
    fn weigh<'a>(&'a self, encoded: &'a [KeyedJson], held: &'a Held, gone: &Gone) -> Weighing<'a> {
        let (order, versions): (Vec<usize>, Vec<Weighed<'a>>) = (0..encoded.len())
            .filter_map(|i| {
                let version = Weighed {
                    key: self.ids[i].as_ref()?,
                    row: &encoded[i].key,
                    updated: self.times[i],
                    deleted: self.deletes[i],
                };
                Some((i, version))
            })
            .unzip();
        let (weighed, change) = weigh(&versions, held, gone);
        let fresh = order
            .iter()
            .zip(&weighed.insert)
            .filter(|(_, &goes)| goes)
            .map(|(&i, _)| i)
            .collect();
        let deletions = deletions(&change, &versions);
        Weighing {
            fresh,
            deleted: weighed.deleted,
            change,
            deletions,
        }
    }
}

impl Ready {
    /// Commits these rows into the resource's table `root`, taking `out`
    /// (the content keys of held rows leaving) out of the files `holders`
    /// read ([`KeyedTable::rewrite`]), and handing back the texts of those
    /// of them `outdated`; the new rows' files are handed back where the
    /// race is lost. The commit carries the token of the merge's `note`.
    async fn commit(
        &mut self,
        root: &KeyedTable,
        holders: Holders,
        (out, outdated): (&HashSet<String>, &HashSet<String>),
        (new_ids, note): (&[&str], Option<&str>),
    ) -> Result<Rewrite, EtlError> {
        let base = self.grows.as_ref().map(|g| g.base.as_str());
        let new = std::mem::take(&mut self.new);
        let basis = basis(0, base);
        root.rewrite(
            holders,
            (out, outdated),
            (new, new_ids),
            (&self.fields, basis),
            note,
        )
        .await
    }

    /// The primary keys (of `ids`, a page's) of the rows that go in.
    fn new_ids<'a>(&self, encoded: &[KeyedJson], ids: &'a [Option<String>]) -> Vec<&'a str> {
        self.fresh
            .iter()
            .filter(|&&i| self.landing.contains(encoded[i].key.as_str()))
            .filter_map(|&i| ids[i].as_deref())
            .collect()
    }
}

impl Typed {
    /// Notes a merge's committed load `ready` in the family's state (its
    /// records finished and put in, its schema growth stored), starts
    /// taking out the child rows of the versions `texts` that left (then
    /// deleting their `note`), and returns what it did, `merged` with the
    /// rejects of a frozen schema added.
    async fn committed(
        &self,
        state: &mut State,
        (records, encoded): (&[&str], &[KeyedJson]),
        (ready, texts, note): (Ready, Vec<(String, String)>, Option<Pending>),
        mut merged: Merged,
    ) -> Merged {
        for k in records {
            state.unfinished.remove(*k);
        }
        let inserted = state.inserted.get_or_insert_with(inserted_filter);
        for &i in &ready.fresh {
            inserted.insert(encoded[i].key.as_str());
        }
        if let Some(grows) = ready.grows {
            state.stored = grows.text;
            state.committed = state.schema.generation();
        }
        if merged.new > 0 {
            state.exists = true;
            state.schema.set_exists(true);
        }
        merged.refused.extend(ready.frozen);
        self.take_out_children(state, texts, note).await;
        merged
    }
}

/// The deletions a page's `change` remembers, each with the content key of
/// the version (of `versions`) that made it: of equal deleting versions,
/// the last read.
fn deletions<'a>(change: &Change<'a>, versions: &[Weighed<'a>]) -> Vec<Deletion<'a>> {
    // Looked up, not searched for each deletion: a page of deletions
    // would cost its versions squared.
    let made_by: HashMap<(&str, Option<SystemTime>), &str> = versions
        .iter()
        .filter(|v| v.deleted)
        .map(|v| ((v.key, v.updated), v.row))
        .collect();
    change
        .remember
        .iter()
        .filter_map(|&(key, updated)| {
            Some(Deletion {
                row: made_by.get(&(key, updated))?,
                key,
                updated,
            })
        })
        .collect()
}

/// The content keys of the `held` rows that leave: those the `change`
/// replaces whose key gets a new row (`new_ids`; a version a frozen
/// schema refused leaves its row) or is deleted.
fn taken_out(
    held: &Held,
    change: &Change<'_>,
    new_ids: &[&str],
    deletions: &[Deletion<'_>],
) -> HashSet<String> {
    let leaving: HashSet<&str> = new_ids
        .iter()
        .copied()
        .chain(deletions.iter().map(|d| d.key))
        .collect();
    let replaced: HashSet<&str> = change.out.iter().copied().collect();
    held.iter()
        .filter(|(id, (row, _))| leaving.contains(id.as_str()) && replaced.contains(row.as_str()))
        .map(|(_, (row, _))| row.clone())
        .collect()
}

/// What a merge's attempts carry from one to the next.
#[derive(Default)]
struct Carried {
    /// A lost attempt's rows, its child rows in ([`Typed::ready_again`]).
    last: Option<Ready>,
    /// The records whose child rows an attempt committed.
    children_in: HashSet<usize>,
    /// The note of the child rows the commit makes due, once one attempt
    /// had any ([`super::pending`]).
    note: Option<Pending>,
}

/// What an attempt's commit takes out of the resource's table, and the
/// versions whose child rows go after it.
struct Leaving {
    /// The content keys of the held rows that leave ([`taken_out`]).
    out: HashSet<String>,
    /// Those of them strictly older than what replaced them ([`outdated`]).
    outdated: HashSet<String>,
    /// The page's versions whose child rows went in but that lost
    /// ([`lost`]), as (content key, text).
    lost: Vec<(String, String)>,
}

impl Leaving {
    /// What the attempt `ready` (its new rows' keys `new_ids`; the records
    /// whose child rows any attempt committed, `children_in`) takes out of
    /// the rows `held`, as the page's `change` and `deletions` say.
    fn of<'a>(
        (ready, new_ids, children_in): (&Ready, &[&str], &HashSet<usize>),
        (held, change, deletions): (&Held, &Change<'_>, &[Deletion<'a>]),
        (encoded, keyed): (&[KeyedJson], &'a Keyed),
    ) -> Self {
        let out = taken_out(held, change, new_ids, deletions);
        let replaced = replaced_at(ready, (encoded, keyed), deletions);
        Leaving {
            outdated: outdated(held, &out, &replaced),
            lost: lost(children_in, ready, (encoded, keyed), (held, &replaced)),
            out,
        }
    }
}

/// When each primary key's row was replaced or deleted by a page: the
/// update time of its version that goes in (`ready`'s, of `encoded` and
/// `keyed`), or of its deletion.
fn replaced_at<'a>(
    ready: &Ready,
    (encoded, keyed): (&[KeyedJson], &'a Keyed),
    deletions: &[Deletion<'a>],
) -> HashMap<&'a str, Option<SystemTime>> {
    let landing = ready
        .fresh
        .iter()
        .filter(|&&i| ready.landing.contains(encoded[i].key.as_str()))
        .filter_map(|&i| Some((keyed.ids[i].as_deref()?, keyed.times[i])));
    let deleted = deletions.iter().map(|d| (d.key, d.updated));
    landing.chain(deleted).collect()
}

/// The content keys of the `held` rows of `out` that are strictly older
/// than what replaced or deleted them (`replaced`): versions that can never
/// be current again, whose child rows go.
fn outdated(
    held: &Held,
    out: &HashSet<String>,
    replaced: &HashMap<&str, Option<SystemTime>>,
) -> HashSet<String> {
    held.iter()
        .filter(|(id, (row, old))| {
            let newer = replaced.get(id.as_str()).copied().flatten();
            out.contains(row) && matches!((old, newer), (Some(old), Some(new)) if *old < new)
        })
        .map(|(_, (row, _))| row.clone())
        .collect()
}

/// The records of `encoded` whose child rows an attempt of this load
/// committed (`children_in`) but whose versions do not go in (`ready`'s
/// last attempt), strictly older than their key's row now (the version
/// going in or the deletion, `replaced`; else the one `held`), as (content
/// key, text): such a version never goes in, and its child rows go as a
/// replaced version's do. (A version another writer put in is its key's
/// row, at its own time: its child rows stay.)
fn lost(
    children_in: &HashSet<usize>,
    ready: &Ready,
    (encoded, keyed): (&[KeyedJson], &Keyed),
    (held, replaced): (&Held, &HashMap<&str, Option<SystemTime>>),
) -> Vec<(String, String)> {
    children_in
        .iter()
        .filter(|&&i| !ready.landing.contains(encoded[i].key.as_str()))
        .filter_map(|&i| {
            let (id, at) = (keyed.ids[i].as_deref()?, keyed.times[i]?);
            let now = match replaced.get(id) {
                Some(&time) => time,
                None => held.get(id)?.1,
            }?;
            (at < now).then(|| (encoded[i].key.clone(), encoded[i].json.clone()))
        })
        .collect()
}

/// Each child row's `_etl_key`, by table (an index into the schema the
/// walk was made on): what a walk of a record's text hands a writer,
/// rows and no cells.
#[derive(Default)]
struct ChildKeys(HashMap<usize, HashSet<String>>);

impl RowWriter for ChildKeys {
    fn begin_row(&mut self, table: usize, keys: RowKeys<'_>) {
        if table > 0 {
            self.0.entry(table).or_default().insert(keys.key.to_owned());
        }
    }
    fn cell(&mut self, _: usize, _: usize, _: Cell<'_>) {}
    fn end_row(&mut self, _: usize, _: &[Misfit]) {}
}

/// The `_etl_key`s of the child rows of the versions `texts` (content key,
/// text), by child table name: each text walked again as it was loaded,
/// on a copy of `schema` (a walk may add to the schema it walks on).
fn child_keys(schema: &Schema, texts: &[(String, String)]) -> HashMap<String, HashSet<String>> {
    let mut walked = schema.clone();
    let mut keys = ChildKeys::default();
    for (key, text) in texts {
        if let Err(e) = walked.shred(text, key, &mut keys) {
            tracing::debug!(record = %key, error = %e, "a replaced version's child rows cannot be found: they stay");
        }
    }
    keys.0
        .into_iter()
        .map(|(at, keys)| (walked.tables()[at].name().to_owned(), keys))
        .collect()
}

impl Typed {
    /// Starts taking the child rows of the versions `texts` (content key,
    /// text: rows that left the resource's table for good) out of their
    /// child tables, each table in one commit, the tables at once: beside
    /// the next load, which waits only where it commits to the same table
    /// (the last load's removal is waited for first, [`swept`]). The
    /// merge's `note` is deleted once every table's removal is in. Best
    /// effort: a failure is logged, and the rows it leaves, joined to no
    /// current row, are the next run's to take out (the note stays).
    async fn take_out_children(
        &self,
        state: &mut State,
        texts: Vec<(String, String)>,
        note: Option<Pending>,
    ) {
        swept(state).await;
        #[cfg(test)]
        if self
            .killed_before_children
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // As a process killed here leaves it: the note stays.
            return;
        }
        if texts.is_empty() {
            if let Some(note) = note {
                note.remove().await;
            }
            return;
        }
        let Some(removal) = self.removal(state, texts).await else {
            return;
        };
        let task = async move {
            if removal.await {
                if let Some(note) = note {
                    note.remove().await;
                }
            }
        };
        state.sweeping = Some(tokio::spawn(task.in_current_span()));
    }

    /// Takes the child rows of the versions `texts` out of their tables, as
    /// [`Typed::take_out_children`] does, and waits for it: whether every
    /// table's removal is in.
    pub(super) async fn take_out_now(
        &self,
        state: &mut State,
        texts: Vec<(String, String)>,
    ) -> bool {
        swept(state).await;
        match self.removal(state, texts).await {
            Some(removal) => removal.await,
            None => false,
        }
    }

    /// The removal of the child rows of the versions `texts`, every child
    /// table opened first so that it finds whichever holds them; the
    /// removal says whether every table's went in. `None` when a child
    /// table cannot be opened.
    async fn removal(
        &self,
        state: &mut State,
        texts: Vec<(String, String)>,
    ) -> Option<impl std::future::Future<Output = bool> + Send + 'static> {
        for at in 1..state.schema.tables().len() {
            if let Err(e) = self.child(state, at).await {
                let table = state.schema.tables()[at].name();
                tracing::warn!(table, error = %e, "the child rows of replaced versions stay: the table cannot be opened");
                return None;
            }
        }
        let (schema, children) = (state.schema.clone(), state.children.clone());
        Some(async move {
            let mut tables = Vec::new();
            for (name, keys) in child_keys(&schema, &texts) {
                match children.get(&name) {
                    Some(table) => tables.push((name, Arc::clone(table), keys)),
                    None => {
                        tracing::debug!(table = %name, "no such child table: nothing to take out")
                    }
                }
            }
            let taken = join_all(tables.iter().map(|(_, table, keys)| table.take_out(keys))).await;
            let mut all = true;
            for ((name, ..), taken) in tables.iter().zip(taken) {
                match taken {
                    Ok(n) => {
                        tracing::debug!(table = %name, rows = n, "took out the child rows of replaced versions")
                    }
                    Err(e) => {
                        all = false;
                        tracing::warn!(table = %name, error = %e, "the child rows of replaced versions stay, joined to no current row, until the next run")
                    }
                }
            }
            all
        })
    }
}

/// Waits for the removal of child rows [`Typed::take_out_children`] left
/// running, if one is.
pub(super) async fn swept(state: &mut State) {
    if let Some(task) = state.sweeping.take() {
        if let Err(e) = task.await {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// The filter of the versions a writer put in: a hit only makes a load
/// look its child rows up in the writer's own files too, so it is sized
/// for a million versions at 1% and grows no further (past that, more
/// loads take the look-up).
fn inserted_filter() -> Sbbf {
    Sbbf::new_with_ndv_fpp(1_000_000, 0.01).unwrap_or_else(|_| Sbbf::new_with_num_of_bytes(1 << 20))
}
