//! The table's log, one entry at a time: an append writes one entry at the
//! version after the last one its writer knows, only if no entry is there
//! yet (Delta's optimistic concurrency: the log store's put-if-absent); a
//! writer that lost that race reads the winners' entries, not the table.
//!
//! delta-rs's `CommitBuilder` would do the same write, but after each
//! commit it brings a materialized snapshot of the whole table up to date,
//! which costs more with every file the table holds. An append that knows
//! the files it added needs none of that.

use deltalake::kernel::transaction::CommitData;
use deltalake::kernel::{Action, Add, Metadata, Remove, Transaction, Version};
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::logstore::{CommitOrBytes, LogStore};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTableError, Path};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::collections::HashMap;

use crate::keys::DataFile;

/// Where a table's log lives, below its root.
const LOG_FOLDER: &str = "_delta_log";

/// What one log entry changes: the files it adds and removes, and the
/// table's new metadata (a new schema), if any.
pub(crate) struct Entry<'a> {
    pub adds: &'a [Add],
    /// Files no longer part of the table: with any, the entry is an
    /// overwrite (a replace's switch), not an append.
    pub removes: &'a [Remove],
    pub metadata: Option<Metadata>,
    /// The token of a merge's note of child rows to remove, written in
    /// the entry's `commitInfo` (as [`NOTE_KEY`]): the entry is what makes
    /// the note due ([`crate::typed::pending`]).
    pub note: Option<&'a str>,
}

/// The `commitInfo` field of an entry that makes a merge's note due.
pub(crate) const NOTE_KEY: &str = "etl.pendingRemoval";

/// Writes `entry` and the shared `txn` as the log entry of `version`.
/// Fails with `VersionAlreadyExists` when another writer's entry holds
/// that version: nothing of ours is then in the log.
pub(crate) async fn append(
    log_store: &dyn LogStore,
    version: Version,
    entry: Entry<'_>,
    txn: Transaction,
) -> Result<(), DeltaTableError> {
    let Entry {
        adds,
        removes,
        metadata,
        note,
    } = entry;
    let mut actions: Vec<Action> = metadata.map(Action::Metadata).into_iter().collect();
    actions.extend(removes.iter().cloned().map(Action::Remove));
    actions.extend(adds.iter().cloned().map(Action::Add));
    let mode = match removes.is_empty() {
        true => SaveMode::Append,
        false => SaveMode::Overwrite,
    };
    let operation = DeltaOperation::Write {
        mode,
        partition_by: None,
        predicate: None,
    };
    let info: HashMap<String, serde_json::Value> = note
        .map(|token| (NOTE_KEY.to_owned(), token.into()))
        .into_iter()
        .collect();
    let bytes = CommitData::new(actions, operation, info, vec![txn]).get_bytes()?;
    let operation_id = uuid::Uuid::new_v4();
    // As delta-rs commits: a store with a conditional put takes the bytes;
    // any other (S3 with a lock table, say) renames a temporary file into
    // place only if the target is absent.
    let entry = if ["DefaultLogStore", "LakeFSLogStore"].contains(&log_store.name().as_str()) {
        CommitOrBytes::LogBytes(bytes)
    } else {
        let path = Path::from_iter([LOG_FOLDER, &format!("_commit_{operation_id}.json.tmp")]);
        log_store
            .object_store(Some(operation_id))
            .put(&path, bytes.into())
            .await?;
        CommitOrBytes::TmpCommit(path)
    };
    match log_store
        .write_commit_entry(version, entry.clone(), operation_id)
        .await
    {
        Ok(()) => Ok(()),
        Err(e) => {
            // A temporary entry not renamed into the log is removed (the
            // store's own clean-up; nothing for a conditional put).
            if let Err(abort) = log_store
                .abort_commit_entry(version, entry, operation_id)
                .await
            {
                tracing::debug!(error = %abort, "a temporary log entry was left behind");
            }
            Err(DeltaTableError::from(e))
        }
    }
}

/// What other writers' entries changed, read from the log alone.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// The data files they added.
    pub added: Vec<DataFile>,
    /// The data files they removed (an OPTIMIZE's inputs, say).
    pub removed: Vec<Path>,
    /// The highest version of the shared `txn` among them.
    pub txn: Option<i64>,
    /// Whether one changed the table's schema or protocol: the caller then
    /// reads the table whole and checks it again.
    pub reshaped: bool,
}

/// The changes of the entries after `known` up to `latest`, or `None` when
/// one cannot be read as an entry of its own (cleaned up past a
/// checkpoint): the caller then reads the table whole.
pub(crate) async fn changes_since(
    log_store: &dyn LogStore,
    known: Version,
    latest: Version,
    app_id: &str,
) -> Result<Option<Changes>, DeltaTableError> {
    let mut changes = Changes::default();
    for version in known + 1..=latest {
        let Some(bytes) = log_store.read_commit_entry(version).await? else {
            return Ok(None);
        };
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(line) = serde_json::from_slice::<Line>(line) else {
                return Ok(None);
            };
            if let Some(add) = line.add {
                let Ok(path) = Path::from_url_path(&add.path) else {
                    return Ok(None);
                };
                let size = u64::try_from(add.size.unwrap_or(0)).unwrap_or(0);
                changes.added.push(DataFile { path, size });
            }
            if let Some(remove) = line.remove {
                let Ok(path) = Path::from_url_path(&remove.path) else {
                    return Ok(None);
                };
                changes.removed.push(path);
            }
            if let Some(txn) = line.txn.filter(|t| t.app_id == app_id) {
                changes.txn = changes.txn.max(Some(txn.version));
            }
            changes.reshaped |= line.meta_data.is_some() || line.protocol.is_some();
        }
    }
    Ok(Some(changes))
}

/// The entry after `known` up to `latest` whose `commitInfo` holds the
/// note `token` ([`Entry::note`]): the data files it removed. `None` when
/// no entry holds it, or one cannot be read (cleaned up past a
/// checkpoint).
pub(crate) async fn noted(
    log_store: &dyn LogStore,
    known: Version,
    latest: Version,
    token: &str,
) -> Result<Option<Vec<DataFile>>, DeltaTableError> {
    for version in known + 1..=latest {
        let Some(bytes) = log_store.read_commit_entry(version).await? else {
            return Ok(None);
        };
        // Tokens are UUIDs: a plain search finds only the entry's own.
        if !String::from_utf8_lossy(&bytes).contains(token) {
            continue;
        }
        let mut removed = Vec::new();
        for line in bytes.split(|&b| b == b'\n') {
            let Ok(Line {
                remove: Some(remove),
                ..
            }) = serde_json::from_slice::<Line>(line)
            else {
                continue;
            };
            if let Ok(path) = Path::from_url_path(&remove.path) {
                let size = u64::try_from(remove.size.unwrap_or(0)).unwrap_or(0);
                removed.push(DataFile { path, size });
            }
        }
        return Ok(Some(removed));
    }
    Ok(None)
}

/// One line of a log entry: the actions an append needs to know of, any
/// other (commitInfo, domainMetadata, ...) ignored.
#[derive(Deserialize)]
struct Line {
    add: Option<FileAction>,
    remove: Option<FileAction>,
    txn: Option<Txn>,
    #[serde(rename = "metaData")]
    meta_data: Option<IgnoredAny>,
    protocol: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct FileAction {
    path: String,
    size: Option<i64>,
}

#[derive(Deserialize)]
struct Txn {
    #[serde(rename = "appId")]
    app_id: String,
    version: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_reads_the_actions_an_append_needs() {
        let add = r#"{"add":{"path":"part-1%20a.parquet","size":12,"partitionValues":{},"modificationTime":1,"dataChange":true}}"#;
        let line: Line = serde_json::from_str(add).unwrap();
        let path = Path::from_url_path(&line.add.unwrap().path).unwrap();
        assert_eq!(path.as_ref(), "part-1 a.parquet");
        let txn: Line =
            serde_json::from_str(r#"{"txn":{"appId":"etl-delta","version":7}}"#).unwrap();
        assert_eq!(txn.txn.unwrap().version, 7);
        let other: Line =
            serde_json::from_str(r#"{"commitInfo":{"operation":"OPTIMIZE"}}"#).unwrap();
        assert!(other.add.is_none() && other.meta_data.is_none());
    }
}
