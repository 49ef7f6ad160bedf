//! A merge's note of the child rows its commit makes due for removal, so
//! that a process killed between the resource table's commit and the child
//! tables' removal leaves them to the next run, not for ever.
//!
//! Before an attempt's commit takes versions out of the resource's table
//! for strictly newer ones, the writer puts a note in that table's
//! `_etl_pending/` (a hidden directory: no Delta reader, and no VACUUM,
//! looks inside): the version the attempt read the table at, the content
//! keys of the versions whose child rows go, and the texts of the page's
//! versions that lost their race after their child rows went in (no file
//! of the table holds those). The commit carries the note's token in its
//! `commitInfo` ([`crate::log::Entry::note`]). The writer deletes the note
//! once every child table's removal is committed.
//!
//! A merge family opened later reads each note left
//! ([`Typed::sweep_notes`]):
//! - a log entry after the note's version carries its token: the removal
//!   is due. The texts of the versions taken out are read from the files
//!   that entry removed (they stay until a VACUUM), their child rows taken
//!   out as the writer would have, and the note deleted;
//! - no entry carries it and the note is older than [`STALE`]: its writer
//!   died before its commit (the versions stayed current), and the note is
//!   deleted;
//! - else it may be a live writer's, between its note and its commit: it
//!   is left.
//!
//! A child row taken out twice (by its writer and a sweeper at once) is no
//! harm: the second finds it gone.

use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::{ObjectMeta, ObjectStore, Path};
use etl_core::EtlError;
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Typed;
use crate::errors::from_delta;
use crate::table::KeyedTable;

/// The directory of the notes, in the resource's table.
const DIR: &str = "_etl_pending";

/// How old a note no commit carries is before it is taken for a dead
/// writer's: far longer than any writer takes from its note to its commit.
pub(crate) const STALE: Duration = Duration::from_secs(60 * 60);

/// What a note holds.
#[derive(Serialize, Deserialize)]
struct Note {
    /// The resource table's version the attempt read: its commit is later.
    at: deltalake::kernel::Version,
    /// The content keys of the versions the commit takes out whose child
    /// rows go.
    outdated: Vec<String>,
    /// The page's versions whose child rows went in but that lost, as
    /// (content key, text).
    lost: Vec<(String, String)>,
}

/// One merge's note, written or not.
pub(crate) struct Pending {
    store: Arc<dyn ObjectStore>,
    token: String,
    written: bool,
}

impl Pending {
    /// A note of a new token in the resource table whose store is `store`;
    /// nothing is written.
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        Pending {
            store,
            token: uuid::Uuid::new_v4().simple().to_string(),
            written: false,
        }
    }

    /// The token the commit carries.
    pub fn token(&self) -> &str {
        &self.token
    }

    fn path(&self) -> Path {
        path_of(&self.token)
    }

    /// Writes the note (over an earlier attempt's): the attempt read the
    /// table at `at`; the child rows of the versions `outdated` and `lost`
    /// go once its commit is in.
    pub async fn write(
        &mut self,
        at: deltalake::kernel::Version,
        outdated: &HashSet<String>,
        lost: &[(String, String)],
        shown: &str,
    ) -> Result<(), EtlError> {
        let note = Note {
            at,
            outdated: outdated.iter().cloned().collect(),
            lost: lost.to_vec(),
        };
        let bytes = serde_json::to_vec(&note).map_err(|e| EtlError::Io(e.into()))?;
        self.store
            .put(&self.path(), bytes.into())
            .await
            .map_err(|e| from_delta(e.into(), "noting the child rows a merge takes out", shown))?;
        self.written = true;
        Ok(())
    }

    /// Deletes the note, if written: its removal is done, or its commit
    /// never came. Best effort: a note left is read again by the next run.
    pub async fn remove(self) {
        if self.written {
            delete(&*self.store, &self.path()).await;
        }
    }
}

fn path_of(token: &str) -> Path {
    Path::from(format!("{DIR}/{token}.json"))
}

/// Deletes the note at `path`; one already gone is no error.
async fn delete(store: &dyn ObjectStore, path: &Path) {
    match store.delete(path).await {
        Ok(()) | Err(deltalake::ObjectStoreError::NotFound { .. }) => {}
        Err(e) => tracing::warn!(note = %path, error = %e, "a merge's note was left behind"),
    }
}

impl Typed {
    /// Takes out the child rows that the notes left in the resource's
    /// table `root` make due (see the module's doc), as seen at `now`;
    /// returns how many notes it settled. Best effort: a note it cannot
    /// settle is logged and left for the next run.
    pub(crate) async fn sweep_notes(&self, root: &KeyedTable, now: SystemTime) -> usize {
        let store = root.store().await;
        let listed: Result<Vec<ObjectMeta>, _> =
            store.list(Some(&Path::from(DIR))).try_collect().await;
        let notes = match listed {
            Ok(notes) => notes,
            Err(e) => {
                tracing::warn!(table = root.shown(), error = %e, "merges' notes of child rows to remove were not read");
                return 0;
            }
        };
        let mut settled = 0;
        for meta in notes {
            let Some(token) = meta
                .location
                .filename()
                .and_then(|name| name.strip_suffix(".json"))
            else {
                continue;
            };
            let stale = now
                .duration_since(meta.last_modified.into())
                .is_ok_and(|age| age > STALE);
            match self.settle_note(root, &store, token).await {
                Ok(true) => {}
                Ok(false) if stale => {}
                Ok(false) => continue,
                Err(e) if stale => {
                    tracing::warn!(table = root.shown(), note = token, error = %e, "a dead merge's child rows stay: its note is given up");
                }
                Err(e) => {
                    tracing::warn!(table = root.shown(), note = token, error = %e, "a dead merge's child rows stay until the next run");
                    continue;
                }
            }
            delete(&*store, &meta.location).await;
            settled += 1;
        }
        settled
    }

    /// Takes out the child rows the note `token` makes due, if a commit
    /// carries it (`true`); `false` when none does (yet).
    async fn settle_note(
        &self,
        root: &KeyedTable,
        store: &Arc<dyn ObjectStore>,
        token: &str,
    ) -> Result<bool, EtlError> {
        let shown = root.shown();
        let bytes = match store.get(&path_of(token)).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        let bytes = match bytes {
            Ok(bytes) => bytes,
            // Settled by another run, or its writer, meanwhile.
            Err(deltalake::ObjectStoreError::NotFound { .. }) => return Ok(true),
            Err(e) => return Err(from_delta(e.into(), "reading a merge's note", shown)),
        };
        let note: Note = serde_json::from_slice(&bytes).map_err(|e| {
            EtlError::InvalidInput(format!("Delta table {shown}: a merge's note {token}: {e}"))
        })?;
        let Some(removed) = root.noted(note.at, token).await? else {
            return Ok(false);
        };
        let outdated: HashSet<String> = note.outdated.into_iter().collect();
        let mut texts = root.texts_in_files(&removed, &outdated).await?;
        texts.extend(note.lost);
        let mut state = self.state.lock().await;
        match self.take_out_now(&mut state, texts).await {
            true => Ok(true),
            false => Err(EtlError::Io(std::io::Error::other(
                "a child table's removal failed",
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::Doc;
    use super::*;
    use crate::columns::Columns;
    use crate::location::Location;
    use crate::DeltaSink;
    use etl_core::content::typed::{loader, SchemaOptions};
    use etl_core::content::write::{MergeKeys, Write};
    use etl_core::Sink;
    use serde_json::{json, Value};
    use std::sync::atomic::Ordering;

    fn version(id: i64, secs: u64, labels: &[&str]) -> Doc {
        let labels: Vec<Value> = labels.iter().map(|l| json!({"name": l})).collect();
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600 + secs);
        Doc(json!({"id": id, "labels": labels,
                   "updated_at": humantime::format_rfc3339(at).to_string()}))
    }

    fn merging() -> SchemaOptions {
        SchemaOptions::default().write(Write::Merge(MergeKeys::new(["/id".parse().unwrap()])))
    }

    /// How many rows the child table at `location` holds.
    async fn rows_of(location: &str) -> u64 {
        let at = Location::parse(location).unwrap();
        let columns = Columns::growing(crate::fields::child_fields(), loader::CHILD_COLUMNS.len());
        crate::count(&KeyedTable::open(at, columns).await.unwrap())
            .await
            .unwrap()
    }

    /// The notes left in the resource's table at `root`.
    fn notes(root: &str) -> usize {
        std::fs::read_dir(std::path::Path::new(root).join(DIR)).map_or(0, |d| d.count())
    }

    /// A writer killed after the commit that replaced a version and before
    /// its child rows left: the next merge of the family opened takes them
    /// out, by the note the writer left; a merge that lives deletes its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_child_rows_a_killed_merge_left_go_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("gh").to_str().unwrap().to_owned();
        let labels = format!("{root}__labels");
        let open = || DeltaSink::open_typed::<Doc>(&root, "gh", merging());
        let sink = open().await.unwrap();
        let first = [version(1, 10, &["a", "b"]), version(2, 10, &["x"])];
        assert_eq!(sink.load(&first).await.unwrap(), 2);
        assert_eq!(notes(&root), 0, "nothing replaced, nothing noted");

        let killed = open().await.unwrap();
        let typed = killed.typed.as_ref().unwrap();
        typed.killed_before_children.store(true, Ordering::Relaxed);
        assert_eq!(killed.load(&[version(1, 20, &["c"])]).await.unwrap(), 1);
        killed.settle().await;
        assert_eq!(rows_of(&labels).await, 4, "a and b stay: the writer died");
        assert_eq!(notes(&root), 1);

        let next = open().await.unwrap();
        assert_eq!(rows_of(&labels).await, 2, "c and x");
        assert_eq!(notes(&root), 0);

        // A writer that lives takes its own out and deletes its note.
        assert_eq!(next.load(&[version(2, 30, &["y"])]).await.unwrap(), 1);
        next.settle().await;
        assert_eq!(rows_of(&labels).await, 2, "c and y");
        assert_eq!(notes(&root), 0);
    }

    /// A note no commit carries (its writer died before its commit, or is
    /// between its note and its commit): nothing is taken out, and it is
    /// deleted only once stale.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_note_no_commit_carries_is_left_until_stale() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("gh").to_str().unwrap().to_owned();
        let labels = format!("{root}__labels");
        let sink = DeltaSink::open_typed::<Doc>(&root, "gh", merging())
            .await
            .unwrap();
        assert_eq!(sink.load(&[version(1, 10, &["a"])]).await.unwrap(), 1);
        let (typed, root_table) = (sink.typed.as_ref().unwrap(), &sink.rows);
        let mut note = Pending::new(root_table.store().await);
        let held = {
            let at = Location::parse(&root).unwrap();
            let table = deltalake::open_table(at.url.clone()).await.unwrap();
            table.version().unwrap()
        };
        let text = version(1, 10, &["a"]).0.to_string();
        let lost = [("k".repeat(64), text)];
        note.write(held, &HashSet::new(), &lost, "gh")
            .await
            .unwrap();

        let now = SystemTime::now();
        assert_eq!(typed.sweep_notes(root_table, now).await, 0);
        assert_eq!(notes(&root), 1, "it may be a live writer's");
        let later = now + STALE + Duration::from_secs(1);
        assert_eq!(typed.sweep_notes(root_table, later).await, 1);
        assert_eq!(notes(&root), 0);
        assert_eq!(rows_of(&labels).await, 1, "nothing taken out");
    }
}
