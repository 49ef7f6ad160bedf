//! The deletions a merge family remembers, in a Delta table of their own
//! beside the resource's (`<location>_deleted`), so that a version older
//! than a deletion, read later, does not bring the row back.
//!
//! The table only grows: a deletion is appended once (known by the
//! deleting version's content key, so a page read again adds nothing),
//! and a key's deletion is the newest remembered for it. A remembered
//! deletion counts only where the resource's table holds no row for its
//! key ([`etl_core::content::write::merge::weigh`]): a newer version that
//! brought the row back needs no deletion forgotten, and a later
//! deletion is newer than every one before it.
//!
//! A deletion is committed before the resource's commit that takes its
//! row out, so a writer that reads the resource's table and then this one
//! never finds a key's row gone without its deletion.

use deltalake::Path;
use etl_core::content::write::merge::Gone;
use etl_core::EtlError;
use std::collections::{HashMap, HashSet};
use std::time::SystemTime;
use tokio::sync::{Mutex, OnceCell};

use crate::columns::{batch, micros, text, times, Columns};
use crate::keys::{read_text_and_time, DataFile};
use crate::location::Location;
use crate::table::{time_of, Basis, KeyedTable, Known};
use etl_core::content::typed::loader;

/// A merge family's remembered deletions.
#[derive(Debug)]
pub(crate) struct Deleted {
    at: Location,
    table: OnceCell<KeyedTable>,
    read: Mutex<Read>,
}

/// What this writer has read of the table: the newest deletion of each
/// key, from the files it read.
#[derive(Debug, Default)]
struct Read {
    files: HashSet<Path>,
    newest: HashMap<String, Option<i64>>,
}

/// A deletion to remember: the deleting version's content key, the key it
/// deleted, and its time.
pub(crate) struct Deletion<'a> {
    pub row: &'a str,
    pub key: &'a str,
    pub updated: Option<SystemTime>,
}

impl Deleted {
    /// The deletions of the family whose resource's table is at `root`.
    pub fn beside(root: &Location) -> Result<Self, EtlError> {
        Ok(Deleted {
            at: root.beside("_deleted")?,
            table: OnceCell::new(),
            read: Mutex::new(Read::default()),
        })
    }

    /// The newest deletion remembered for each of `keys` that has one, as
    /// the table stands now (other writers' deletions included).
    pub async fn gone(&self, keys: &[String]) -> Result<Gone, EtlError> {
        let Some(table) = self.table_if_any().await? else {
            return Ok(Gone::new());
        };
        let live = table
            .live_files(|f| DataFile {
                path: f.object_store_path(),
                size: u64::try_from(f.size()).unwrap_or(0),
            })
            .await?;
        let mut read = self.read.lock().await;
        // Rewritten by another tool (compacted): read whole again.
        let paths: HashSet<&Path> = live.iter().map(|f| &f.path).collect();
        if read.files.iter().any(|p| !paths.contains(p)) {
            *read = Read::default();
        }
        let store = table.store().await;
        let unread: Vec<&DataFile> = live
            .iter()
            .filter(|f| !read.files.contains(&f.path))
            .collect();
        for file in unread {
            let rows = read_text_and_time(
                &store,
                file,
                (loader::ID, loader::UPDATED_AT),
                &self.at.shown,
            )
            .await?;
            for (key, at) in rows {
                let newest = read.newest.entry(key).or_insert(at);
                *newest = (*newest).max(at);
            }
            read.files.insert(file.path.clone());
        }
        Ok(keys
            .iter()
            .filter_map(|k| {
                let at = read.newest.get(k)?;
                Some((k.clone(), at.and_then(time_of)))
            })
            .collect())
    }

    /// The newest time of a remembered deletion, from the log's file
    /// statistics (`None` when none has a time, or none is remembered):
    /// part of an incremental load's cursor, so that a deletion newer
    /// than every row is not read again.
    pub async fn newest(&self) -> Result<Option<SystemTime>, EtlError> {
        let Some(table) = self.table_if_any().await? else {
            return Ok(None);
        };
        let newest = table
            .live_files(|f| {
                f.stats()
                    .and_then(|stats| crate::newest_in(&stats, loader::UPDATED_AT))
            })
            .await?;
        Ok(newest.into_iter().flatten().max())
    }

    /// Remembers `deletions`, each once however often it comes.
    pub async fn remember(&self, deletions: &[Deletion<'_>]) -> Result<(), EtlError> {
        if deletions.is_empty() {
            return Ok(());
        }
        let table = self.table().await?;
        let keys: Vec<String> = deletions.iter().map(|d| d.row.to_owned()).collect();
        let at = micros(SystemTime::now());
        let schema = table.columns().arrow_schema();
        table
            .append(
                &keys,
                table.columns().fields(),
                |fresh| {
                    let each = || fresh.iter().map(|&i| &deletions[i]);
                    batch(
                        schema.clone(),
                        vec![
                            text(each().map(|d| Some(d.row))),
                            text(each().map(|d| Some(d.key))),
                            times(each().map(|d| d.updated.and_then(micros))),
                            times(each().map(|_| at)),
                        ],
                    )
                },
                (Known::Nothing, None),
                Basis::Any,
            )
            .await?;
        Ok(())
    }

    /// Waits for the checkpoint the table's last commit made due.
    pub async fn settle(&self) {
        if let Some(table) = self.table.get() {
            table.settle().await;
        }
    }

    /// The table, opened (and created) on first use.
    async fn table(&self) -> Result<&KeyedTable, EtlError> {
        self.table
            .get_or_try_init(|| KeyedTable::open(self.at.clone(), Columns::deletions()))
            .await
    }

    /// The table if this writer opened it or another made it.
    async fn table_if_any(&self) -> Result<Option<&KeyedTable>, EtlError> {
        if self.table.get().is_none() && !self.at.holds_table() {
            return Ok(None);
        }
        self.table().await.map(Some)
    }
}
