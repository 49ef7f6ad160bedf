//! `write = "replace"` into a Delta table family: the run's rows are
//! staged in tables of their own, one in a directory inside each table of
//! the family, then switched in, one commit a table, each removing every
//! file its table held and adding the staged ones as they are (no data
//! file is copied or rewritten).
//!
//! Until its table's switch commits, a reader reads the old content whole;
//! a run that fails or is killed before the switch leaves the family as it
//! was, and its staged files are never part of a table (a VACUUM removes
//! them, as it removes any uncommitted file). Delta has no commit across
//! tables: the switch commits the child tables first, the deepest first,
//! then the resource's, as a load does, so a run killed in the middle of
//! its switch leaves some child tables new and the rest old until the next
//! replace.
//!
//! The staging directory's name has no leading `_`: Delta readers list no
//! directory (they read the log), and a VACUUM, which never looks inside a
//! hidden one, removes the files of a replace once a later one removed
//! them from the table.

use deltalake::kernel::{Add, StructField};
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::{ObjectStore, Path};
use etl_core::content::typed::{loader, SchemaOptions};
use etl_core::EtlError;
use futures_util::TryStreamExt;
use std::sync::Arc;

use crate::columns::Columns;
use crate::location::Location;
use crate::table::{existing_schema, Basis, KeyedTable};
use crate::typed::{child_suffix, stored_schema, table_fields, Typed};

/// The prefix of a staging directory's name.
const STAGE_PREFIX: &str = "etl-replacing-";

/// A replace under way: the family's own resource table, and where and on
/// what schema text the run stages.
pub(crate) struct Replacing {
    /// The family's resource table (the run's rows go to its staging
    /// table until the switch).
    root: KeyedTable,
    /// The staging directory inside each table of the family.
    stage: String,
    /// The schema text the family held when the replace began: the switch
    /// is refused if another writer changed it meanwhile.
    base: String,
}

impl std::fmt::Debug for Replacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacing")
            .field("table", &self.root.shown())
            .field("stage", &self.stage)
            .finish_non_exhaustive()
    }
}

/// What [`Replacing::open`] opens: the replace, the staging table of the
/// resource, and the family staged beside it.
pub(crate) type Opened = (Replacing, KeyedTable, Typed);

impl Replacing {
    /// Opens (or creates) the family's resource table at `at`, named
    /// `name`, checks that it is typed and written by replace, and opens a
    /// staging family on its schema in a directory of this run's own.
    pub async fn open(
        at: Location,
        name: &str,
        options: SchemaOptions,
    ) -> Result<Opened, EtlError> {
        if existing_schema(&at)
            .await?
            .is_some_and(|fields| fields.field("content_key").is_some())
        {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {}: a table of the JSON shape cannot be replaced; `write = \"replace\"` makes a typed table: load into a new table (another path or resource name)",
                at.shown
            )));
        }
        let root = KeyedTable::open(at.clone(), Typed::fresh_columns(name, &options)?).await?;
        // The family as it stands: its schema read, its disposition checked.
        let exists = Typed::open(&root, at.clone(), options.clone())
            .await?
            .existed();
        let held = root.schema().await;
        let base = stored_schema(&held).unwrap_or_default().to_owned();
        let fields: Vec<StructField> = held.fields().cloned().collect();
        let stage = format!("{STAGE_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let columns = Columns::growing(fields, loader::RECORD_COLUMNS.len()).with_text(loader::ROW);
        let staging = KeyedTable::open(at.inside(&stage)?, columns).await?;
        staging.keep_adds().await;
        let typed = Typed::open(&staging, at.inside(&stage)?, options)
            .await?
            .staged(at, stage.clone(), exists);
        let replacing = Replacing { root, stage, base };
        Ok((replacing, staging, typed))
    }

    /// Where the family's resource table is, as the user wrote it.
    pub fn shown(&self) -> &str {
        self.root.shown()
    }

    /// Switches the staged rows in: each child table of the family's
    /// schema, the deepest first, then the resource's table, one commit a
    /// table holding the staged files and the removal of every old one. A
    /// table the run staged nothing in is emptied. Then the staging
    /// tables' logs are deleted (their data files are the tables' now).
    pub async fn switch(&self, staging: &KeyedTable, typed: &Typed) -> Result<(), EtlError> {
        let shown = self.root.shown();
        // Refused before any table is switched, where it can be.
        self.root.live_files(|_| ()).await?;
        if stored_schema(&self.root.schema().await) != Some(self.base.as_str()) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {shown}: another writer changed the family's schema while this run replaced it; the tables keep what they held: run again"
            )));
        }
        let schema = typed.schema().await;
        let family = Location::parse(shown)?;
        let mut staged_at = vec![staging.shown().to_owned()];
        for at in (1..schema.tables().len()).rev() {
            let name = schema.tables()[at].name();
            let place = family.beside(&child_suffix(&schema, at))?;
            let staged = typed.staged_child(name).await;
            if staged.is_none() && existing_schema(&place).await?.is_none() {
                continue;
            }
            let fields = table_fields(&schema, at, None);
            let columns = Columns::growing(fields.clone(), loader::CHILD_COLUMNS.len());
            let table = KeyedTable::open(place.clone(), columns).await?;
            let (adds, fields) = match staged {
                Some((adds, held)) => (adds, held.fields().cloned().collect()),
                None => (Vec::new(), fields),
            };
            table
                .switch(&self.moved(adds), &fields, Basis::Columns)
                .await?;
            staged_at.push(place.inside(&self.stage)?.shown);
        }
        let fields: Vec<StructField> = staging.schema().await.fields().cloned().collect();
        self.root
            .switch(
                &self.moved(staging.kept().await),
                &fields,
                Basis::Text(&self.base),
            )
            .await?;
        for at in staged_at {
            forget_log(&at).await;
        }
        Ok(())
    }

    /// `adds`, staged in this run's directory, as files of the table the
    /// directory is in.
    fn moved(&self, adds: Vec<Add>) -> Vec<Add> {
        adds.into_iter()
            .map(|add| Add {
                path: format!("{}/{}", self.stage, add.path),
                ..add
            })
            .collect()
    }
}

/// Deletes the log of the staging table at `shown` (best effort: a log
/// left behind holds no file of the table's, and is no table's part).
async fn forget_log(shown: &str) {
    let gone = async {
        let at = Location::parse(shown)?;
        let store: Arc<dyn ObjectStore> = deltalake::DeltaTableBuilder::from_url(at.url.clone())
            .and_then(|b| b.build())
            .map_err(|e| EtlError::Io(std::io::Error::other(e.to_string())))?
            .object_store();
        let log = Path::from("_delta_log");
        let entries: Vec<_> = store
            .list(Some(&log))
            .try_collect()
            .await
            .map_err(|e| EtlError::Io(std::io::Error::other(e.to_string())))?;
        for entry in entries {
            store
                .delete(&entry.location)
                .await
                .map_err(|e| EtlError::Io(std::io::Error::other(e.to_string())))?;
        }
        if let Ok(dir) = at.url.to_file_path() {
            std::fs::remove_dir_all(dir.join("_delta_log")).map_err(EtlError::Io)?;
        }
        Ok::<_, EtlError>(())
    };
    if let Err(e) = gone.await {
        tracing::debug!(table = shown, error = %e, "a replace's staging log was left behind");
    }
}
