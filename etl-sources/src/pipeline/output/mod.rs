//! [`Output`]: where a run writes its rows and its rejects. Each kind is
//! one implementation in a file of its own (a JSONL file, a PostgreSQL
//! table, a Delta table), chosen by the form of `--out` in [`open`].

use etl_core::{EtlError, Record, RejectSink, Sink};
use futures_util::future::BoxFuture;
use std::borrow::Cow;
use std::path::Path;

use super::{run_with_progress, Progress, RunError, Summary};
use crate::Source;

#[cfg(feature = "delta")]
mod delta;
mod jsonl;
#[cfg(feature = "postgres")]
mod postgres;

/// How many written rows a table output (PostgreSQL, Delta) remembers
/// (about 9 MB): enough for the pages a run re-reads, while the table
/// decides the rest.
#[cfg(any(feature = "postgres", feature = "delta"))]
const REMEMBERED_KEYS: usize = 100_000;

/// How an output reads one stored JSONL line's update time: the source
/// knows its records' shape ([`Source::stored_updated_at`]).
pub type StoredUpdatedAt<'s> = dyn for<'l> Fn(&'l [u8]) -> Option<Cow<'l, str>> + 's;

/// What [`Output::cursor`] answers.
pub type CursorFuture<'a> = BoxFuture<'a, Result<Option<String>, EtlError>>;

/// A place a run writes rows of type `T` and their rejects, each row once.
///
/// Every output answers the same four questions, so the one pipeline
/// ([`run`]) and the commands drive any of them alike:
/// - [`Output::sink`]: where the rows go, each distinct row once (an
///   [`etl_core::IdempotentSink`] in front of the store);
/// - [`Output::rejects`]: where the entries that did not read go;
/// - [`Output::cursor`]: the newest update time held, for an incremental
///   run;
/// - [`Output::describe`]: where it writes, in words.
///
/// ```
/// use etl_core::Row;
/// use etl_sources::pipeline::output::{self, Options};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), etl_core::EtlError> {
/// # let dir = tempfile::tempdir()?;
/// let out = dir.path().join("launches.jsonl");
/// let options = Options { table: "launches", rejects: None };
/// let output = output::open::<Row>(&out.to_string_lossy(), &options).await?;
/// assert_eq!(output.describe()?.rejects, dir.path().join("launches.rejects.jsonl").display().to_string());
/// # Ok(())
/// # }
/// ```
pub trait Output<T: Record>: Send + Sync + std::fmt::Debug {
    /// Where the rows go, each distinct row once.
    fn sink(&self) -> &dyn Sink<T>;

    /// Where the rejects go, each distinct entry once.
    fn rejects(&self) -> &dyn RejectSink;

    /// The cursor of an incremental run: the newest update time the output
    /// holds (`None`: it holds none). `stored` reads a stored JSONL line's
    /// update time, for an output that keeps lines; it is used before the
    /// future is returned, never by it (a source need not be `Sync`).
    fn cursor(&self, stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_>;

    /// Where the rows and rejects go, in words. Fails only for a table
    /// whose rejects table name would be too long.
    fn describe(&self) -> Result<Described, EtlError>;

    /// For the rows of a child resource: each `_parent` held (its compact
    /// JSON text, keys sorted) with the newest update time among its rows,
    /// the cursor of that parent's chain. Empty by default: an output that
    /// keeps JSONL lines tells its source through [`Output::cursor`]'s
    /// scan, and one that cannot tell leaves each chain to read whole.
    fn cursors_by_parent(&self) -> ParentCursorsFuture<'_> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// What [`Output::cursors_by_parent`] answers.
pub type ParentCursorsFuture<'a> = BoxFuture<'a, Result<Vec<(String, String)>, EtlError>>;

/// Where an [`Output`] writes, in words, for a run's summary line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// Where the rows go: a path, or `PostgreSQL table <name>`.
    pub rows: String,
    /// How many rows it holds, where that is known without counting a table.
    pub held: Option<usize>,
    /// Where the rejects go.
    pub rejects: String,
}

/// What an output is opened with besides `--out`.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// The table a PostgreSQL output loads into (`--pg-table`).
    pub table: &'a str,
    /// Where a JSONL output's rejects go (`--rejects`; default
    /// [`super::rejects_path`]).
    pub rejects: Option<&'a Path>,
}

/// Opens `out`, by its form:
/// - `postgres://...` or `postgresql://...`: a PostgreSQL table,
///   [`Options::table`] (feature `postgres`, on by default);
/// - `delta:PATH` or `delta:s3://BUCKET/PATH`: a Delta table (feature
///   `delta`);
/// - anything else: the path of a JSONL file, resumed where a run left it.
pub async fn open<T: Record + Clone>(
    out: &str,
    options: &Options<'_>,
) -> Result<Box<dyn Output<T>>, EtlError> {
    if out.starts_with("postgres://") || out.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Box::new(postgres::Postgres::open::<T>(out, options).await?));
        #[cfg(not(feature = "postgres"))]
        return Err(missing_feature("a PostgreSQL output", "postgres"));
    }
    if let Some(location) = out.strip_prefix("delta:") {
        #[cfg(feature = "delta")]
        return Ok(Box::new(delta::Delta::open::<T>(location).await?));
        #[cfg(not(feature = "delta"))]
        {
            let _ = location;
            return Err(missing_feature("a Delta table output", "delta"));
        }
    }
    Ok(Box::new(jsonl::Jsonl::open::<T>(Path::new(out), options)?))
}

/// The output of resource `name` when a file holds many: `--out` names a
/// place that holds one output a resource. A PostgreSQL URL stays as it
/// is (the resource's table is `name`); `delta:PATH` becomes
/// `delta:PATH/name`; anything else is a directory, and the resource's
/// file is `DIR/name.jsonl` (its rejects beside it).
pub fn for_resource(out: &str, name: &str) -> String {
    if out.starts_with("postgres://") || out.starts_with("postgresql://") {
        return out.to_owned();
    }
    if let Some(location) = out.strip_prefix("delta:") {
        return format!("delta:{}/{name}", location.trim_end_matches('/'));
    }
    Path::new(out)
        .join(format!("{name}.jsonl"))
        .display()
        .to_string()
}

/// The error of an output this build leaves out.
#[cfg(not(all(feature = "postgres", feature = "delta")))]
fn missing_feature(what: &str, feature: &str) -> EtlError {
    EtlError::InvalidInput(format!(
        "--out: {what} needs etl-sources built with its feature `{feature}`"
    ))
}

/// Logs what `output` holds as the run's first line, with the cursor of an
/// incremental run (`None`: not incremental).
pub fn announce<T: Record>(output: &dyn Output<T>, cursor: Option<&str>) {
    match output.describe() {
        Ok(place) => match cursor {
            Some(cursor) => {
                tracing::info!(output = %place.rows, rows = place.held, rejects = %place.rejects, %cursor, "output opened; incremental")
            }
            None => {
                tracing::info!(output = %place.rows, rows = place.held, rejects = %place.rejects, "output opened")
            }
        },
        Err(e) => tracing::warn!(error = %e, "output opened"),
    }
}

/// Runs the pipeline from `source` into `output` ([`run_with_progress`]).
pub async fn run<S: Source>(
    output: &dyn Output<S::Row>,
    source: &mut S,
    max_pages: Option<u32>,
    on_page: impl FnMut(&Progress),
) -> Result<Summary, RunError> {
    run_with_progress(source, output.sink(), output.rejects(), max_pages, on_page).await
}
