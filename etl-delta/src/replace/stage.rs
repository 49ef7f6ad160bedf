//! A replace's stage: the directory `etl-replacing-<id>/` inside each
//! table of the family where one run writes its staging tables, and the
//! rule that tells a dead run's stage from a live one's, so that a later
//! replace removes what a killed run staged (a run that fails removes its
//! own: [`Stage::remove`]).
//!
//! Delta has no session or lock that dies with its process, so a stage's
//! life is read from its objects: `_etl_alive` names the run's process
//! ([`Owner`]), and a stage whose process is known to have ended (a run
//! on the same machine looks) is a dead run's at once. Otherwise its life
//! is read from its objects' times: the newest object in the resource
//! table's stage (each page's commit writes there; the run touches
//! `_etl_alive` once its staging table is made, before the switch's first
//! commit and after each). A stage none of whose objects is newer than
//! [`LEASE`] is a dead run's. Removing
//! it takes two steps, so that a run that was only slow never commits
//! files that are gone:
//! - the sweeper puts `_etl_abandoned` in the stage, then lists the stage
//!   again, and removes it only if it is still stale;
//! - before the first commit of its switch, a run touches `_etl_alive`,
//!   then checks that there is no `_etl_abandoned` and that its staging
//!   log's first entry is still there, and refuses to switch if either
//!   fails: before any table is switched.
//!
//! Whichever of the two writes comes second is seen by the other's read:
//! a sweeper that put its mark after the run's check lists the run's fresh
//! touch and leaves the stage; a run that checks after the mark refuses.
//! The mark stays until the stage's last object is removed, the staging
//! log's first entry before it, so a run that checks at any moment of a
//! removal sees one or the other. A sweeper never takes a stage touched
//! within the lease, so the touch after each of the switch's commits
//! keeps it the run's however long the switch takes, and the run checks
//! only once.
//!
//! A staging table's log is removed just before its table's switch
//! commit: a stage with no staging log was switched (its files are the
//! table's), and it is never removed here; a VACUUM removes the files the
//! table no longer holds.

use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::{ObjectMeta, ObjectStore, Path};
use etl_core::EtlError;
use futures_util::{StreamExt, TryStreamExt};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::owner::Owner;
use crate::errors::from_delta;
use crate::keys::READ_AHEAD;
use crate::location::Location;

/// The prefix of a stage's directory name. It has no leading `_`: a
/// VACUUM, which never looks inside a hidden directory, then removes the
/// files of a replace once a later one removed them from the table.
pub(crate) const PREFIX: &str = "etl-replacing-";

/// How long a stage whose process cannot be looked at (another machine's)
/// lives with no object written in it: past this, it is a dead run's, and
/// the next replace of the family removes it.
pub(crate) const LEASE: Duration = Duration::from_secs(60 * 60);

/// Touched by a run before its switch and after each of its commits.
const ALIVE: &str = "_etl_alive";
/// Put by a sweeper that found the stage stale: the run, if it lives
/// after all, refuses to switch.
const ABANDONED: &str = "_etl_abandoned";
/// A staging table's log, below its stage.
const LOG: &str = "_delta_log";
/// A staging table's first log entry: the last of its objects a sweeper
/// removes before the mark.
const FIRST_ENTRY: &str = "_delta_log/00000000000000000000.json";

/// One run's stage in a family: its directory's name, and the resource
/// table, whose stage its life is read and written in.
pub(crate) struct Stage {
    name: String,
    /// The resource table.
    family: Location,
    /// The resource table's store.
    root: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("name", &self.name)
            .field("table", &self.family.shown)
            .finish_non_exhaustive()
    }
}

impl Stage {
    /// A new stage, of a name no other run has, in the family whose
    /// resource table is at `family`. Nothing is written.
    pub fn new(family: &Location) -> Result<Self, EtlError> {
        Ok(Stage {
            name: format!("{PREFIX}{}", uuid::Uuid::new_v4().simple()),
            root: family.store()?,
            family: family.clone(),
        })
    }

    /// The stage's directory name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Removes this stage from each table of the family, the resource
    /// table's last: its run failed before its switch.
    pub async fn remove(&self) -> Result<(), EtlError> {
        let children = children(&self.family).await?;
        remove_everywhere((&*self.root, &self.family), &self.name, &children).await
    }

    /// Says the run lives ([`Stage::touch`]), then checks that no sweeper
    /// took the stage for a dead run's: called before the switch's first
    /// commit. Refused when one did (the stage's files may be gone).
    pub async fn keep_alive(&self) -> Result<(), EtlError> {
        self.touch().await?;
        let at = |object: &str| Path::from(format!("{}/{object}", self.name));
        let fail = failed("looking at the replace's stage", &self.family);
        let abandoned = exists(&*self.root, &at(ABANDONED)).await.map_err(&fail)?;
        let logged = exists(&*self.root, &at(FIRST_ENTRY)).await.map_err(&fail)?;
        if abandoned || !logged {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {}: this replace wrote nothing for longer than {}, and another run took what it staged for a dead run's, to remove it; the tables keep what they held: run again",
                self.family.shown,
                humantime::format_duration(LEASE)
            )));
        }
        Ok(())
    }

    /// Says the run lives: the stage's newest object is now, and names this
    /// process.
    pub async fn touch(&self) -> Result<(), EtlError> {
        let alive = Path::from(format!("{}/{ALIVE}", self.name));
        let owner = Owner::current()
            .and_then(|owner| serde_json::to_vec(&owner).ok())
            .unwrap_or_default();
        self.root
            .put(&alive, owner.into())
            .await
            .map(drop)
            .map_err(failed("writing to the replace's stage", &self.family))
    }
}

/// The error of a store request about the table at `at`: what was being
/// done, and the store's own words.
fn failed<'a>(
    what: &'a str,
    at: &'a Location,
) -> impl Fn(deltalake::ObjectStoreError) -> EtlError + 'a {
    move |e| from_delta(e.into(), what, &at.shown)
}

/// Whether the object at `path` is there.
async fn exists(store: &dyn ObjectStore, path: &Path) -> Result<bool, deltalake::ObjectStoreError> {
    match store.head(path).await {
        Ok(_) => Ok(true),
        Err(deltalake::ObjectStoreError::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the staging log of the stage table at `at`, just before its
/// table's switch commit, which makes its data files the table's: a stage
/// without its log is never a sweeper's. Best effort: a log left behind
/// holds no file of the table's.
pub(crate) async fn forget_log(at: &Location) {
    let gone = async {
        let store = at.store()?;
        let log = list(&*store, &Path::from(LOG), at).await?;
        delete(&*store, log, at).await?;
        if let Ok(dir) = at.url.to_file_path() {
            remove_empty_dirs(&dir.join(LOG));
        }
        Ok::<_, EtlError>(())
    };
    if let Err(e) = gone.await {
        tracing::debug!(table = at.shown, error = %e, "a replace's staging log was left behind");
    }
}

/// Removes the stages of dead runs from the family whose resource table is
/// at `family` (see the module's doc for which are dead), each child
/// table's first, the resource table's last; `now` is the time their age
/// is measured at. Returns how many were removed.
pub(crate) async fn sweep(family: &Location, now: SystemTime) -> Result<usize, EtlError> {
    let root = family.store()?;
    let listed = root
        .list_with_delimiter(None)
        .await
        .map_err(failed("looking for dead replaces' files", family))?;
    let names: Vec<String> = listed
        .common_prefixes
        .iter()
        .filter_map(|dir| dir.filename())
        .filter(|name| name.starts_with(PREFIX))
        .map(str::to_owned)
        .collect();
    // A table replaced every day holds a stage a run until a VACUUM: they
    // are looked at READ_AHEAD at a time (a round trip each on object
    // storage), and the switched ones (most) in one listing each.
    let store = &*root;
    let lives: Vec<(String, Life)> = futures_util::stream::iter(names)
        .map(|name| async move {
            let life = Life::read(store, &name, family).await?;
            Ok::<_, EtlError>((name, life))
        })
        .buffered(READ_AHEAD)
        .try_collect()
        .await?;
    let mut removed = 0;
    let mut family_children = None;
    for (name, life) in lives {
        let name = name.as_str();
        if !life.dead(now) {
            continue;
        }
        // The mark, then a second look: a run that touched the stage in
        // between lives, and sees the mark at its next check.
        root.put(
            &Path::from(format!("{name}/{ABANDONED}")),
            Vec::new().into(),
        )
        .await
        .map_err(failed("marking a dead replace's files", family))?;
        if !Life::read(&*root, name, family).await?.dead(now) {
            continue;
        }
        if family_children.is_none() {
            family_children = Some(children(family).await?);
        }
        let children = family_children.as_deref().unwrap_or_default();
        remove_everywhere((&*root, family), name, children).await?;
        removed += 1;
        tracing::info!(
            table = family.shown,
            stage = name,
            "removed what a dead replace staged"
        );
    }
    Ok(removed)
}

/// What a stage's objects in the resource table say of its run.
struct Life {
    /// Its staging log has an entry: it was not switched.
    logged: bool,
    /// When its newest object but the mark was written (ms since 1970).
    newest_ms: i64,
    /// Its `_etl_alive` names a process known to have ended.
    ended: bool,
}

impl Life {
    async fn read(store: &dyn ObjectStore, name: &str, at: &Location) -> Result<Self, EtlError> {
        let log = Path::from(format!("{name}/{LOG}"));
        // A switched stage (no log) is told by one listing of its own
        // directory, not of each of its files.
        let top = store
            .list_with_delimiter(Some(&Path::from(name)))
            .await
            .map_err(failed("looking for dead replaces' files", at))?;
        if !top.common_prefixes.contains(&log) {
            return Ok(Life {
                logged: false,
                newest_ms: i64::MIN,
                ended: false,
            });
        }
        let objects = list(store, &Path::from(name), at).await?;
        let mark = format!("{name}/{ABANDONED}");
        // An entry, not a directory: a local log emptied by a switch that
        // was cut off before the directory went is no log.
        let entries = format!("{log}/");
        let alive = Path::from(format!("{name}/{ALIVE}"));
        let ended = match store.get(&alive).await {
            Ok(got) => got
                .bytes()
                .await
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Owner>(&bytes).ok())
                .is_some_and(|owner| owner.gone()),
            Err(_) => false,
        };
        Ok(Life {
            ended,
            logged: objects
                .iter()
                .any(|o| o.location.as_ref().starts_with(&entries)),
            newest_ms: objects
                .iter()
                .filter(|o| o.location.as_ref() != mark)
                .map(|o| o.last_modified.timestamp_millis())
                .max()
                .unwrap_or(i64::MIN),
        })
    }

    /// A stage not switched whose process ended, or whose newest object is
    /// older than the lease.
    fn dead(&self, now: SystemTime) -> bool {
        if self.logged && self.ended {
            return true;
        }
        let now_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let lease_ms = i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX);
        self.logged && now_ms.saturating_sub(self.newest_ms) > lease_ms
    }
}

/// The child tables of the family at `family`: the tables beside it whose
/// names are its own and `__` (a dead run may have staged one the family's
/// schema does not name yet).
async fn children(family: &Location) -> Result<Vec<Location>, EtlError> {
    let Some((dir, name)) = family.parent() else {
        return Ok(Vec::new());
    };
    let listed = dir
        .store()?
        .list_with_delimiter(None)
        .await
        .map_err(failed("looking for its child tables", family))?;
    let own = format!("{name}__");
    listed
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename())
        .filter_map(|n| n.strip_prefix(&own))
        .map(|rest| family.beside(&format!("__{rest}")))
        .collect()
}

/// Removes the stage `name` from the child tables `children` of the family
/// at `family` (whose store is `root`), then from the resource table: each
/// where its staging log has an entry (a stage without is a switched one,
/// whose files are its table's).
async fn remove_everywhere(
    (root, family): (&dyn ObjectStore, &Location),
    name: &str,
    children: &[Location],
) -> Result<(), EtlError> {
    let log = Path::from(format!("{name}/{LOG}"));
    for child in children {
        let store = child.store()?;
        if logged(&*store, &log, child).await? {
            remove_stage(&*store, name, child).await?;
        }
    }
    if logged(root, &log, family).await? {
        remove_stage(root, name, family).await?;
    }
    Ok(())
}

/// Whether the log at `log` in `store` (of the table at `at`) has an entry.
async fn logged(store: &dyn ObjectStore, log: &Path, at: &Location) -> Result<bool, EtlError> {
    let first = store.list(Some(log)).try_next().await;
    first
        .map(|entry| entry.is_some())
        .map_err(failed("looking at a replace's staging log", at))
}

/// Removes the stage `name` of the table at `at`: its data files, then its
/// touch, its log, and its mark last (see the module's doc).
async fn remove_stage(store: &dyn ObjectStore, name: &str, at: &Location) -> Result<(), EtlError> {
    let data_first = |o: &ObjectMeta| {
        let rest = o.location.as_ref().strip_prefix(name).unwrap_or_default();
        match rest.trim_start_matches('/') {
            r if r == ABANDONED => 3,
            r if r.starts_with(LOG) => 2,
            r if r == ALIVE => 1,
            _ => 0,
        }
    };
    let mut objects = list(store, &Path::from(name), at).await?;
    // The first entry last of the log: it is what a run checks.
    objects.sort_by_key(|o| (data_first(o), std::cmp::Reverse(o.location.clone())));
    delete(store, objects, at).await?;
    if let Ok(dir) = at.url.to_file_path() {
        // The directories a local store leaves behind, if empty.
        remove_empty_dirs(&dir.join(name));
    }
    Ok(())
}

/// Removes `dir` and the directories below it that hold no file.
fn remove_empty_dirs(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The objects below `prefix` in `store` (of the table at `at`).
async fn list(
    store: &dyn ObjectStore,
    prefix: &Path,
    at: &Location,
) -> Result<Vec<ObjectMeta>, EtlError> {
    store
        .list(Some(prefix))
        .try_collect()
        .await
        .map_err(failed("listing a replace's files", at))
}

/// Deletes `objects` from `store` (of the table at `at`), in their order;
/// one already gone is no error (two sweepers may remove one stage).
async fn delete(
    store: &dyn ObjectStore,
    objects: Vec<ObjectMeta>,
    at: &Location,
) -> Result<(), EtlError> {
    for object in objects {
        match store.delete(&object.location).await {
            Ok(()) | Err(deltalake::ObjectStoreError::NotFound { .. }) => {}
            Err(e) => return Err(failed("removing a replace's files", at)(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path as FsPath;

    /// Writes the (empty) file `rel` below `dir`.
    fn file(dir: &FsPath, rel: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"x").unwrap();
    }

    /// The stage `name` of the family at `dir`, as its run holds it.
    fn stage_of(family: &Location, name: &str) -> Stage {
        Stage {
            name: name.to_owned(),
            root: family.store().unwrap(),
            family: family.clone(),
        }
    }

    /// A family `items` in `dir` with one stage `etl-replacing-a`: staged
    /// in the resource table and in the child table `items__labels`, and
    /// switched already in the child table `items__x` (no staging log).
    fn family(dir: &FsPath) -> Location {
        let items = dir.join("items");
        file(&items, "_delta_log/00000000000000000000.json");
        file(&items, "part-0.parquet");
        file(
            &items,
            "etl-replacing-a/_delta_log/00000000000000000000.json",
        );
        file(
            &items,
            "etl-replacing-a/_delta_log/00000000000000000001.json",
        );
        file(&items, "etl-replacing-a/part-1.parquet");
        let labels = dir.join("items__labels");
        file(
            &labels,
            "etl-replacing-a/_delta_log/00000000000000000000.json",
        );
        file(&labels, "etl-replacing-a/part-2.parquet");
        file(&dir.join("items__x"), "etl-replacing-a/part-3.parquet");
        file(
            &dir.join("other__labels"),
            "etl-replacing-a/_delta_log/0.json",
        );
        Location::parse(items.to_str().unwrap()).unwrap()
    }

    fn later(by: Duration) -> SystemTime {
        SystemTime::now() + by
    }

    #[tokio::test]
    async fn a_stage_still_for_longer_than_the_lease_goes_with_its_child_tables_stages() {
        let dir = tempfile::tempdir().unwrap();
        let items = family(dir.path());
        let removed = sweep(&items, later(LEASE + Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(removed, 1);
        assert!(!dir.path().join("items/etl-replacing-a").exists());
        assert!(!dir.path().join("items__labels/etl-replacing-a").exists());
        // The table's own files, a switched stage's files (the child
        // table's own now) and another family's stay.
        assert!(dir.path().join("items/part-0.parquet").exists());
        assert!(dir.path().join("items/_delta_log").exists());
        assert!(dir
            .path()
            .join("items__x/etl-replacing-a/part-3.parquet")
            .exists());
        assert!(dir
            .path()
            .join("other__labels/etl-replacing-a/_delta_log/0.json")
            .exists());
        // The run, were it alive after all, refuses to switch.
        let run = stage_of(&items, "etl-replacing-a");
        let refused = run.keep_alive().await.unwrap_err().to_string();
        assert!(refused.contains("run again"), "{refused}");
    }

    #[tokio::test]
    async fn a_stage_written_within_the_lease_or_switched_stays() {
        let dir = tempfile::tempdir().unwrap();
        let items = family(dir.path());
        let removed = sweep(&items, later(LEASE - Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(removed, 0);
        assert!(dir
            .path()
            .join("items/etl-replacing-a/part-1.parquet")
            .exists());
        assert!(!dir
            .path()
            .join("items/etl-replacing-a")
            .join(ABANDONED)
            .exists());
        // Alive: the run switches.
        stage_of(&items, "etl-replacing-a")
            .keep_alive()
            .await
            .unwrap();
        assert!(dir
            .path()
            .join("items/etl-replacing-a")
            .join(ALIVE)
            .exists());

        // Its resource table's log gone: it reached its last commit, and
        // its files are the table's. (A switch cut off between the log's
        // entries and its directory leaves the directory: no log either.)
        let log = dir.path().join("items/etl-replacing-a/_delta_log");
        std::fs::remove_dir_all(&log).unwrap();
        std::fs::create_dir(&log).unwrap();
        let removed = sweep(&items, later(LEASE * 2)).await.unwrap();
        assert_eq!(removed, 0);
        assert!(dir
            .path()
            .join("items/etl-replacing-a/part-1.parquet")
            .exists());
    }

    /// A stage whose `_etl_alive` names a process of this machine that
    /// ended is a dead run's at once; one naming a running process (this
    /// one) stays within the lease.
    #[tokio::test]
    async fn a_stage_whose_process_ended_goes_at_once() {
        let Some(ended) = super::super::owner::ended() else {
            return; // No /proc here: only the lease tells.
        };
        let dir = tempfile::tempdir().unwrap();
        let items = family(dir.path());
        let run = stage_of(&items, "etl-replacing-a");
        run.touch().await.unwrap();
        assert_eq!(sweep(&items, SystemTime::now()).await.unwrap(), 0);
        assert!(dir.path().join("items/etl-replacing-a").exists());

        let alive = dir.path().join("items/etl-replacing-a").join(ALIVE);
        std::fs::write(&alive, serde_json::to_vec(&ended).unwrap()).unwrap();
        assert_eq!(sweep(&items, SystemTime::now()).await.unwrap(), 1);
        assert!(!dir.path().join("items/etl-replacing-a").exists());
        assert!(!dir.path().join("items__labels/etl-replacing-a").exists());
    }

    #[tokio::test]
    async fn a_run_whose_stage_was_marked_abandoned_refuses_to_switch() {
        let dir = tempfile::tempdir().unwrap();
        let items = family(dir.path());
        let run = stage_of(&items, "etl-replacing-a");
        run.keep_alive().await.unwrap();
        // A sweeper's mark, put before the run's check: whatever the
        // sweeper's second look decides, the run does not switch.
        file(&dir.path().join("items/etl-replacing-a"), ABANDONED);
        assert!(run.keep_alive().await.is_err());
    }

    /// The sweep on object storage: a dead run's stage in the resource
    /// table and in a child table goes, a switched one stays.
    #[cfg(feature = "s3")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs ETL_DELTA_S3_URL and an S3-compatible server"]
    async fn a_dead_stage_on_s3_goes_with_its_child_tables_stage() {
        let base = std::env::var("ETL_DELTA_S3_URL").unwrap();
        let unique = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            Location::parse(&format!("{}/sweep-{unique}", base.trim_end_matches('/'))).unwrap();
        let store = dir.store().unwrap();
        let objects = [
            "items/_delta_log/00000000000000000000.json",
            "items/etl-replacing-a/_delta_log/00000000000000000000.json",
            "items/etl-replacing-a/part-1.parquet",
            "items__labels/etl-replacing-a/_delta_log/00000000000000000000.json",
            "items__labels/etl-replacing-a/part-2.parquet",
            "items__x/etl-replacing-a/part-3.parquet",
        ];
        for object in objects {
            store
                .put(&Path::from(object), b"x".to_vec().into())
                .await
                .unwrap();
        }
        let items = dir.inside("items").unwrap();
        assert_eq!(sweep(&items, SystemTime::now()).await.unwrap(), 0);
        let removed = sweep(&items, later(LEASE * 2)).await.unwrap();
        assert_eq!(removed, 1);
        let left: Vec<String> = store
            .list(None)
            .map_ok(|o| o.location.to_string())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            left.iter()
                .map(String::as_str)
                .collect::<std::collections::BTreeSet<_>>(),
            [
                "items/_delta_log/00000000000000000000.json",
                "items__x/etl-replacing-a/part-3.parquet"
            ]
            .into_iter()
            .collect()
        );
    }

    #[test]
    fn a_table_s_directory_and_name() {
        let (dir, name) = Location::parse("lake/items").unwrap().parent().unwrap();
        assert_eq!((dir.shown.as_str(), name.as_str()), ("lake", "items"));
        assert!(dir.url.path().ends_with("/lake/"));
        let (dir, name) = Location::parse("items/").unwrap().parent().unwrap();
        assert_eq!((dir.shown.as_str(), name.as_str()), (".", "items"));
    }
}
