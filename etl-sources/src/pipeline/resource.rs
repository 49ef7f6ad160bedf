//! One resource's run, whatever its source: the incremental handshake
//! with its table, the load, and what it did ([`ResourceReport`]); or,
//! for a resource read only to feed its children, the read alone.

use super::output::{self, Table};
use super::{Progress, ResourceReport, RunOptions};
use crate::Source;

/// How an incremental run's first line shows the cursor of an empty
/// output.
const NO_CURSOR: &str = "none (empty output: reading everything)";

/// Loads `source` into `table` as `options` say: from the cursor the
/// table holds when incremental (a child's chains each from its parent's),
/// one `info` line where it starts and one a page. `Err`: what stopped it
/// (every page loaded before stays written).
pub(crate) async fn load<S: Source>(
    name: &str,
    table: &dyn Table<S::Row>,
    mut source: S,
    options: &RunOptions,
) -> Result<ResourceReport, String> {
    let since = if options.incremental {
        Some(handshake(table, &mut source).await?)
    } else {
        None
    };
    output::announce(
        table,
        since
            .as_ref()
            .map(|since| since.as_deref().unwrap_or(NO_CURSOR)),
    );
    let mut bar = Bar::start(options.progress);
    let result = output::run(table, &mut source, options.max_pages, |p| bar.update(p)).await;
    bar.finish();
    let summary = result.map_err(|e| e.to_string())?;
    Ok(ResourceReport {
        name: name.to_owned(),
        written: true,
        pages: summary.pages,
        read: summary.rows,
        new: summary.new_rows,
        deleted: summary.deleted,
        rejects: summary.rejected,
        new_rejects: summary.new_rejects,
        place: Some(table.describe().map_err(|e| e.to_string())?),
        since,
    })
}

/// The cursor `table` holds, handed to `source`; a child resource's
/// chains each get their parent's from the table too, where it keeps
/// them by parent.
async fn handshake<S: Source>(
    table: &dyn Table<S::Row>,
    source: &mut S,
) -> Result<Option<String>, String> {
    // The line reader is used before the future is returned: it borrows
    // the source, which need not be `Sync`, so it must not live across
    // the await.
    let cursor = table.cursor(&|line| source.stored_updated_at(line));
    let since = cursor.await.map_err(|e| e.to_string())?;
    // The cursor goes back in the form the records write it in: learnt
    // from the record it came from, where the file does not say.
    if since.is_some() {
        if let Some(record) = table.newest_record().await.map_err(|e| e.to_string())? {
            source.held_record(&record);
        }
    }
    source
        .read_since(since.as_deref())
        .map_err(|e| e.to_string())?;
    if let Some(cursors) = source.parent_cursors() {
        for (parent, newest) in table.cursors_by_parent().await.map_err(|e| e.to_string())? {
            let held = cursors.entry(parent).or_default();
            if crate::cursor::is_newer(&newest, held) {
                *held = newest;
            }
        }
    }
    Ok(since)
}

/// Reads `source` to its end (at most `options.max_pages` pages) without
/// writing it: a resource read only to feed its children. Each page is
/// "loaded" as soon as it is read.
pub(crate) async fn read_only<S: Source>(
    name: &str,
    mut source: S,
    options: &RunOptions,
) -> Result<ResourceReport, String> {
    let mut report = ResourceReport {
        name: name.to_owned(),
        ..ResourceReport::default()
    };
    while options.max_pages.is_none_or(|max| report.pages < max) {
        let Some(page) = source.next_page().await.map_err(|e| e.to_string())? else {
            break;
        };
        report.pages += 1;
        report.read += page.rows.len();
        report.rejects += page.rejects.len();
        if let Some(on_loaded) = page.on_loaded {
            on_loaded.tell();
        }
    }
    Ok(report)
}

/// The progress bar of a run that asked for one, on a terminal.
struct Bar {
    #[cfg(feature = "progress")]
    bar: Option<&'static indicatif::ProgressBar>,
}

impl Bar {
    #[cfg(feature = "progress")]
    fn start(wanted: bool) -> Self {
        Bar {
            bar: wanted.then(crate::progress::start).flatten(),
        }
    }

    #[cfg(not(feature = "progress"))]
    fn start(_wanted: bool) -> Self {
        Bar {}
    }

    fn update(&mut self, _progress: &Progress) {
        #[cfg(feature = "progress")]
        if let Some(bar) = self.bar {
            crate::progress::update(bar, _progress);
        }
    }

    fn finish(self) {
        #[cfg(feature = "progress")]
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
