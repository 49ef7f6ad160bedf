//! `write = "replace"` into a Delta table family: the run's rows are
//! staged in tables of their own, one in a directory inside each table of
//! the family, then switched in, one commit a table, each removing every
//! file its table held and adding the staged ones as they are (no data
//! file is copied or rewritten).
//!
//! Until its table's switch commits, a reader reads the old content whole;
//! a run that fails or is killed before the switch leaves the family as it
//! was, and its staged files are never part of a table: the next replace
//! of the family removes them, at once where the dead run's process is
//! known to have ended (a run on the same machine), else once its stage
//! has been still for an hour ([`stage`]). Delta has no commit across tables: the switch
//! commits the child tables first, the deepest first, then the resource's,
//! as a load does, so a run killed in the middle of its switch leaves some
//! child tables new and the rest old until the next replace.

mod owner;
mod stage;

use deltalake::kernel::{Add, StructField};
use etl_core::content::typed::{loader, SchemaOptions};
use etl_core::EtlError;
use std::time::SystemTime;

use crate::columns::Columns;
use crate::fields::{child_suffix, stored_schema, table_fields};
use crate::location::Location;
use crate::table::{existing_schema, Basis, KeyedTable};
use crate::typed::Typed;

use stage::Stage;

/// A replace under way: the family's own resource table, and where and on
/// what schema text the run stages.
pub(crate) struct Replacing {
    /// The family's resource table (the run's rows go to its staging
    /// table until the switch).
    root: KeyedTable,
    /// The staging directory inside each table of the family.
    stage: Stage,
    /// The schema text the family held when the replace began: the switch
    /// is refused if another writer changed it meanwhile.
    base: String,
}

impl std::fmt::Debug for Replacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacing")
            .field("table", &self.root.shown())
            .field("stage", &self.stage.name())
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
        // What dead runs staged goes first (a failure to look is no
        // reason to refuse this run: their files are no table's part).
        match stage::sweep(&at, SystemTime::now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                table = at.shown,
                stages = n,
                "removed what dead replaces staged"
            ),
            Err(e) => {
                tracing::warn!(table = at.shown, error = %e, "could not look for what dead replaces staged")
            }
        }
        let stage = Stage::new(&at)?;
        let columns = Columns::growing(fields, loader::RECORD_COLUMNS.len()).with_text(loader::ROW);
        let staging = KeyedTable::open(at.inside(stage.name())?, columns).await?;
        // The stage names this run's process: a later run on this machine
        // tells at once that a killed run's stage is dead.
        stage.touch().await?;
        staging.keep_adds().await;
        let typed = Typed::open(&staging, at.inside(stage.name())?, options)
            .await?
            .staged(at, stage.name().to_owned(), exists);
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
    /// table the run staged nothing in is emptied. Before the first commit
    /// the run checks that no other run took its stage for a dead one's
    /// (refused, nothing switched, when one did), after each it says it
    /// lives, and before each it deletes the staging table's log (its data
    /// files are the table's from the commit on).
    pub async fn switch(&self, staging: &KeyedTable, typed: &Typed) -> Result<(), EtlError> {
        let shown = self.root.shown();
        // Refused before any table is switched, where it can be.
        self.root.live_files(|_| ()).await?;
        if stored_schema(&self.root.schema().await) != Some(self.base.as_str()) {
            return Err(EtlError::InvalidInput(format!(
                "Delta table {shown}: another writer changed the family's schema while this run replaced it; the tables keep what they held: run again"
            )));
        }
        self.stage.keep_alive().await?;
        let schema = typed.schema().await;
        let family = Location::parse(shown)?;
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
                Some((adds, held)) => {
                    stage::forget_log(&place.inside(self.stage.name())?).await;
                    (adds, held.fields().cloned().collect())
                }
                None => (Vec::new(), fields),
            };
            table
                .switch(&self.moved(adds), &fields, Basis::Columns)
                .await?;
            // The stage stays the run's until its next commit.
            self.stage.touch().await?;
        }
        let fields: Vec<StructField> = staging.schema().await.fields().cloned().collect();
        stage::forget_log(&Location::parse(staging.shown())?).await;
        self.root
            .switch(
                &self.moved(staging.kept().await),
                &fields,
                Basis::Text(&self.base),
            )
            .await
    }

    /// Removes what this run staged, from every table of the family: the
    /// run failed before its switch. Best effort: what a failure leaves, a
    /// later replace removes once it has been still for an hour.
    pub async fn abandon(&self) {
        match self.stage.remove().await {
            Ok(()) => tracing::debug!(
                table = self.root.shown(),
                "removed what the failed replace staged"
            ),
            Err(e) => {
                tracing::warn!(table = self.root.shown(), error = %e, "what the failed replace staged was left for a later one to remove")
            }
        }
    }

    /// `adds`, staged in this run's directory, as files of the table the
    /// directory is in.
    fn moved(&self, adds: Vec<Add>) -> Vec<Add> {
        adds.into_iter()
            .map(|add| Add {
                path: format!("{}/{}", self.stage.name(), add.path),
                ..add
            })
            .collect()
    }
}
