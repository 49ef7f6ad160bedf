//! Where a run writes. [`Output`] is what `--out` names (a JSONL file, a
//! directory of them, a PostgreSQL database, a Delta table); opened for one
//! resource it gives that resource's [`Table`]. Each kind is one file of
//! this module implementing [`Destination`] (how it opens a resource's
//! table) and [`Table`] (how it writes, keeps rejects and answers the
//! cursor); [`Output::parse`] is the one place a kind is chosen.

use etl_core::content::typed::Schema;
use etl_core::content::write::Write;
use etl_core::{EtlError, Record, RejectSink, Row, Sink};
use futures_util::future::BoxFuture;
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{run_with_progress, Progress, RunError, Summary};
use crate::rest::{JsonRecord, TableShape};
use crate::Source;

#[cfg(feature = "delta")]
mod delta;
mod jsonl;
#[cfg(any(feature = "postgres", feature = "delta"))]
mod keyed;
#[cfg(feature = "postgres")]
mod postgres;

/// How an output reads one stored JSONL line's update time: the source
/// knows its records' shape ([`Source::stored_updated_at`]).
pub type StoredUpdatedAt<'s> = dyn for<'l> Fn(&'l [u8]) -> Option<Cow<'l, str>> + 's;

/// What [`Table::cursor`] answers.
pub type CursorFuture<'a> = BoxFuture<'a, Result<Option<String>, EtlError>>;

/// What [`Table::newest_record`] answers.
pub type RecordFuture<'a> = BoxFuture<'a, Result<Option<String>, EtlError>>;

/// What [`Table::cursors_by_parent`] answers.
pub type ParentCursorsFuture<'a> = BoxFuture<'a, Result<Vec<(String, String)>, EtlError>>;

/// What [`Destination::open`] answers.
pub type TableFuture<'a, T> = BoxFuture<'a, Result<Box<dyn Table<T>>, EtlError>>;

/// What [`Destination::schema`] answers.
pub type SchemaFuture<'a> = BoxFuture<'a, Result<Option<Schema>, EtlError>>;

/// What [`Table::settle`] answers.
pub type SettleFuture<'a> = BoxFuture<'a, ()>;

/// What [`Table::finish`] answers.
pub type FinishFuture<'a> = BoxFuture<'a, Result<(), EtlError>>;

/// One resource's output, opened: where its rows of type `T` and their
/// rejects go, each once.
///
/// Every kind answers the same questions, so the one pipeline
/// ([`crate::pipeline::run`], [`crate::Pipeline::run`]) drives any of
/// them alike:
/// - [`Table::sink`]: where the rows go, each distinct row once (an
///   [`etl_core::IdempotentSink`] in front of the store);
/// - [`Table::rejects`]: where the entries that did not read go;
/// - [`Table::cursor`]: the newest update time held, for an incremental
///   run;
/// - [`Table::describe`]: where it writes, in words.
///
/// Implement it (with [`Destination`] to open one a resource) for an
/// output of your own and hand it to [`crate::Pipeline::run_into`].
pub trait Table<T: Record>: Send + Sync + fmt::Debug {
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

    /// The record whose update time is the cursor ([`Table::cursor`]), as
    /// stored (its JSON text): an incremental run's source learns from it
    /// the form its records write that time in (a number of Unix seconds,
    /// or text), so that the cursor goes back to the API in that form
    /// ([`Source::held_record`]). `None` by default: the source sends it
    /// in the form its file says.
    fn newest_record(&self) -> RecordFuture<'_> {
        Box::pin(async { Ok(None) })
    }

    /// For the rows of a child resource: each `_parent` held (its compact
    /// JSON text, keys sorted) with the newest update time among its rows,
    /// the cursor of that parent's chain. Empty by default: an output that
    /// keeps JSONL lines tells its source through [`Table::cursor`]'s
    /// scan, and one that cannot tell leaves each chain to read whole.
    fn cursors_by_parent(&self) -> ParentCursorsFuture<'_> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Waits for the work its loads left running beside the next (a
    /// Delta checkpoint being written), so that the end of the run's
    /// runtime cuts nothing off. [`run`] calls it as a run ends, however
    /// it ends. Nothing to wait for by default.
    fn settle(&self) -> SettleFuture<'_> {
        Box::pin(async {})
    }

    /// Ends a complete run: [`run`] calls it once every page of the
    /// resource was read and written (never after a failure, nor with a
    /// page limit). A table whose run's records replace what it held
    /// (`write = "replace"`) switches them in here, at once; nothing by
    /// default.
    fn finish(&self) -> FinishFuture<'_> {
        Box::pin(async { Ok(()) })
    }

    /// Ends a run that failed before its pages were all read: [`run`]
    /// calls it, after [`Table::settle`], instead of [`Table::finish`]. A
    /// table whose run's records were to replace what it held removes
    /// what the run staged, the table as it was (best effort: a later
    /// replace removes what is left). Nothing by default.
    fn abandon(&self) -> SettleFuture<'_> {
        Box::pin(async {})
    }
}

/// Where a [`Table`] writes, in words, for a run's summary line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// Where the rows go: a path, or `PostgreSQL table <name>`.
    pub rows: String,
    /// How many rows it holds, where that is known without counting a table.
    pub held: Option<usize>,
    /// Where the rejects go.
    pub rejects: String,
}

/// The resource a [`Destination`] opens a table for.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The resource's name.
    pub resource: &'a str,
    /// The name its table takes: the resource's, unless the run names one
    /// (`--pg-table`, [`Output::table`]).
    pub table: &'a str,
    /// Whether the run's file holds more than one resource, so that each
    /// needs a place of its own (a file in a directory, a table each).
    pub many: bool,
    /// Where its rejects go, where the run names a place
    /// ([`Output::rejects`]); else the output's own choice.
    pub rejects: Option<&'a Path>,
    /// The shape of its table in a database ([`Target::shaped`]); JSON
    /// by default.
    pub shape: &'a TableShape,
    /// The run's timeout ([`crate::RunOptions::timeout`]): an output over
    /// a network bounds each of its operations by it (PostgreSQL: a
    /// statement, a write from BEGIN to COMMIT); `None`: the output's own
    /// default.
    pub timeout: Option<Duration>,
    /// How the records change the table ([`Target::writing`]); append by
    /// default.
    pub write: &'a Write,
}

/// The shape a [`Target`] has unless it is given one.
static JSON_SHAPE: TableShape = TableShape::Json;
/// The disposition a [`Target`] has unless it is given one.
static APPEND: Write = Write::Append;

impl<'a> Target<'a> {
    /// The target of resource `resource`, its table named after it; `many`:
    /// whether the run's file holds more than one resource.
    pub fn new(resource: &'a str, many: bool) -> Self {
        Target {
            resource,
            table: resource,
            many,
            rejects: None,
            shape: &JSON_SHAPE,
            timeout: None,
            write: &APPEND,
        }
    }

    /// The target with its records changing the table as `write` says (a
    /// resource's [`crate::rest::Resource::write`]).
    pub fn writing(self, write: &'a Write) -> Self {
        Target { write, ..self }
    }

    /// The target with its table in `shape` (a resource's
    /// [`crate::rest::Resource::shape`]).
    pub fn shaped(self, shape: &'a TableShape) -> Self {
        Target { shape, ..self }
    }

    /// The target with the run's `timeout` ([`Target::timeout`]).
    pub fn within(self, timeout: Option<Duration>) -> Self {
        Target { timeout, ..self }
    }
}

/// A kind of output: it opens the [`Table`] of each resource of a run.
/// Implemented by [`Output`] (the kinds `--out` names) and by an output
/// of your own, for [`crate::Pipeline::run_into`].
///
/// ```
/// use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, RejectSink, Sink};
/// use etl_sources::pipeline::output::{
///     CursorFuture, Described, Destination, StoredUpdatedAt, Table, TableFuture, Target,
/// };
/// use etl_sources::rest::JsonRecord;
/// use std::path::PathBuf;
///
/// /// Each resource's rows into `DIR/<resource>.ndjson`.
/// #[derive(Debug)]
/// struct Ndjson(PathBuf);
///
/// #[derive(Debug)]
/// struct File(IdempotentSink<JsonlSink>, JsonlRejects);
///
/// impl Table<JsonRecord> for File {
///     fn sink(&self) -> &dyn Sink<JsonRecord> { &self.0 }
///     fn rejects(&self) -> &dyn RejectSink { &self.1 }
///     fn cursor(&self, _: &StoredUpdatedAt<'_>) -> CursorFuture<'_> { Box::pin(async { Ok(None) }) }
///     fn describe(&self) -> Result<Described, EtlError> {
///         let rows = self.0.inner().path().display().to_string();
///         Ok(Described { rows, held: None, rejects: self.1.path().display().to_string() })
///     }
/// }
///
/// impl Destination<JsonRecord> for Ndjson {
///     fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, JsonRecord> {
///         Box::pin(async move {
///             let path = self.0.join(format!("{}.ndjson", target.resource));
///             let sink = IdempotentSink::resume_as::<JsonRecord>(&path)?;
///             let rejects = JsonlRejects::open(path.with_extension("rejects.ndjson"))?;
///             Ok(Box::new(File(sink, rejects)) as Box<dyn Table<JsonRecord>>)
///         })
///     }
/// }
/// ```
pub trait Destination<T: Record>: Send + Sync + fmt::Debug {
    /// Opens (or creates) the table of `target`. An output that cannot be
    /// opened as given (a path that is a file, a table of other columns,
    /// a name it cannot take) is [`EtlError::InvalidInput`]: the run
    /// stops before any request.
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T>;

    /// The schema of `target`'s typed table family as the output holds it
    /// (its tables, columns, types, paths and hints), read and nothing
    /// made; `None` where there is none (no typed table there, or an
    /// output of no tables, as a JSONL file). What `etl schema` prints.
    /// By default `None`.
    fn schema<'a>(&'a self, target: Target<'a>) -> SchemaFuture<'a> {
        let _ = target;
        Box::pin(std::future::ready(Ok(None)))
    }
}

/// The kinds `--out` names open tables of both row types the crate's
/// sources read: any JSON record, and Launch Library rows.
trait Kind: Destination<JsonRecord> + Destination<Row> {}

impl<K: Destination<JsonRecord> + Destination<Row>> Kind for K {}

/// Where a run writes, as `--out` names it: parsed once
/// ([`Output::parse`]), then opened for each resource of the run.
///
/// ```
/// use etl_sources::Output;
///
/// assert!(Output::parse("out/launches.jsonl").is_ok()); // one file
/// assert!(Output::parse("out").is_ok()); // a directory: out/<resource>.jsonl
/// let e = Output::parse("ftp://example.com/x").unwrap_err();
/// assert!(e.to_string().contains("ftp://"), "{e}");
/// ```
#[derive(Clone, Debug)]
pub struct Output {
    kind: Arc<dyn Kind>,
    /// As given, for messages.
    text: String,
    /// `--pg-table`: the table of a one-resource run.
    table: Option<String>,
    /// `--rejects`: where a one-resource JSONL run's rejects go.
    rejects: Option<PathBuf>,
}

impl Output {
    /// Parses what `--out` takes:
    /// - `postgres://...` or `postgresql://...`: a PostgreSQL database,
    ///   each resource's table named after it (feature `postgres`, on by
    ///   default);
    /// - `delta:PATH` or `delta:s3://BUCKET/PATH`: a Delta table, or with
    ///   many resources `PATH/<resource>` each (feature `delta`);
    /// - a path ending in `.jsonl`: one JSONL file, of a one-resource run;
    /// - any other path: a directory holding `<resource>.jsonl` files
    ///   (made on the first run).
    ///
    /// An unknown scheme, or a kind this build leaves out, is
    /// [`EtlError::InvalidInput`] naming the forms or the feature.
    pub fn parse(out: &str) -> Result<Self, EtlError> {
        Self::parse_as(out, out.ends_with(".jsonl"))
    }

    /// As [`Output::parse`], but a path is one JSONL file whatever its
    /// ending: `--out` of a file of one resource.
    pub fn parse_file(out: &str) -> Result<Self, EtlError> {
        Self::parse_as(out, true)
    }

    /// `out` as an output; a path is a file when `file` says so, else a
    /// directory.
    fn parse_as(out: &str, file: bool) -> Result<Self, EtlError> {
        let kind: Arc<dyn Kind> = if out.starts_with("postgres://")
            || out.starts_with("postgresql://")
        {
            postgres_kind(out)?
        } else if let Some(location) = out.strip_prefix("delta:") {
            delta_kind(location)?
        } else if let Some((scheme, _)) = out.split_once("://") {
            // The scheme alone: the rest may hold a password.
            return Err(EtlError::InvalidInput(format!(
                "--out {scheme}://...: {scheme}:// is no output this crate writes: give FILE.jsonl, a directory, postgres://... or delta:PATH (delta:s3://BUCKET/PATH for object storage)"
            )));
        } else if out.is_empty() {
            return Err(EtlError::InvalidInput(
                "--out is empty: give FILE.jsonl, a directory, postgres://... or delta:PATH"
                    .to_owned(),
            ));
        } else {
            Arc::new(jsonl::Place::new(Path::new(out), file))
        };
        Ok(Output {
            kind,
            text: shown(out),
            table: None,
            rejects: None,
        })
    }

    /// The table of a one-resource run, in place of the resource's name
    /// (`--pg-table`; PostgreSQL only).
    pub fn table(mut self, name: impl Into<String>) -> Self {
        self.table = Some(name.into());
        self
    }

    /// Where a one-resource JSONL run's rejects go (`--rejects`), in place
    /// of `<out stem>.rejects.jsonl` beside the file.
    pub fn rejects(mut self, path: impl Into<PathBuf>) -> Self {
        self.rejects = Some(path.into());
        self
    }
}

impl<T: Record + 'static> Destination<T> for Output
where
    dyn Kind: Destination<T>,
{
    /// A table name or rejects path given for one output, with a file of
    /// many resources, is [`EtlError::InvalidInput`]: each resource's is
    /// its own.
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T> {
        if target.many {
            for (given, what) in [
                (
                    self.table.is_some(),
                    "--pg-table names one output (Output::table)",
                ),
                (
                    self.rejects.is_some(),
                    "--rejects names one output (Output::rejects)",
                ),
            ] {
                if given {
                    return Box::pin(std::future::ready(Err(EtlError::InvalidInput(format!(
                        "{what}, and the file holds many resources: each resource's is its own (--out holds them)"
                    )))));
                }
            }
        }
        let target = self.given(target);
        Box::pin(async move {
            <dyn Kind as Destination<T>>::open(&*self.kind, target)
                .await
                .map_err(|e| self.named(e))
        })
    }

    fn schema<'a>(&'a self, target: Target<'a>) -> SchemaFuture<'a> {
        let target = self.given(target);
        Box::pin(async move {
            <dyn Kind as Destination<T>>::schema(&*self.kind, target)
                .await
                .map_err(|e| self.named(e))
        })
    }
}

impl Output {
    /// `target` with the table name and rejects place given for this
    /// output in place of its own.
    fn given<'a>(&'a self, target: Target<'a>) -> Target<'a> {
        Target {
            table: self.table.as_deref().unwrap_or(target.table),
            rejects: self.rejects.as_deref().or(target.rejects),
            ..target
        }
    }

    /// `e` with an invalid output named as `--out` gave it.
    fn named(&self, e: EtlError) -> EtlError {
        match e {
            EtlError::InvalidInput(m) => {
                EtlError::InvalidInput(format!("--out {}: {m}", self.text))
            }
            e => e,
        }
    }
}

#[cfg(feature = "postgres")]
fn postgres_kind(url: &str) -> Result<Arc<dyn Kind>, EtlError> {
    Ok(Arc::new(keyed::Place::<etl_postgres::PostgresSink>::new(
        url,
    )))
}

#[cfg(not(feature = "postgres"))]
fn postgres_kind(_url: &str) -> Result<Arc<dyn Kind>, EtlError> {
    Err(missing_feature(
        "postgres://...",
        "a PostgreSQL table",
        "postgres",
    ))
}

#[cfg(feature = "delta")]
fn delta_kind(location: &str) -> Result<Arc<dyn Kind>, EtlError> {
    Ok(Arc::new(keyed::Place::<etl_delta::DeltaSink>::new(
        location,
    )))
}

#[cfg(not(feature = "delta"))]
fn delta_kind(location: &str) -> Result<Arc<dyn Kind>, EtlError> {
    let (form, feature) = if location.starts_with("s3://") {
        ("delta:s3://BUCKET/PATH", "delta-s3")
    } else {
        ("delta:PATH", "delta")
    };
    Err(missing_feature(form, "a Delta table", feature))
}

/// `out` as messages show it: a URL without its password, in its user
/// part or its query (`postgres://u@h/db?password=...`, as libpq takes it):
/// a query is shown as `?...`.
fn shown(out: &str) -> String {
    match url::Url::parse(out) {
        Ok(mut url) if url.password().is_some() || url.query().is_some() => {
            if url.password().is_some() {
                let _ = url.set_password(Some("***"));
            }
            let had_query = url.query().is_some();
            url.set_query(None);
            let mut text = url.to_string();
            if had_query {
                text.push_str("?...");
            }
            text
        }
        _ => out.to_owned(),
    }
}

/// The error of an output this build leaves out: its form (never the
/// URL given, which may hold a password) and the feature to enable.
#[cfg(not(all(feature = "postgres", feature = "delta")))]
fn missing_feature(form: &str, what: &str, feature: &str) -> EtlError {
    EtlError::InvalidInput(format!(
        "--out {form}: {what} needs etl-sources built with its feature `{feature}` (features = [\"{feature}\"])"
    ))
}

/// Logs what `table` holds as the run's first line, with the cursor of an
/// incremental run (`None`: not incremental).
pub fn announce<T: Record>(table: &dyn Table<T>, cursor: Option<&str>) {
    match table.describe() {
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

/// Runs the pipeline from `source` into `table` ([`run_with_progress`]),
/// then waits for what its loads left running ([`Table::settle`]) and,
/// when every page was read, ends the run ([`Table::finish`]); a run that
/// failed is ended by [`Table::abandon`].
pub async fn run<S: Source>(
    table: &dyn Table<S::Row>,
    source: &mut S,
    max_pages: Option<u32>,
    on_page: impl FnMut(&Progress),
) -> Result<Summary, RunError> {
    let done = run_with_progress(source, table.sink(), table.rejects(), max_pages, on_page).await;
    table.settle().await;
    if done.is_err() {
        table.abandon().await;
    }
    let summary = done?;
    if max_pages.is_none() {
        table.finish().await.map_err(|error| RunError {
            done: summary,
            error,
        })?;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_no_kind_takes_is_an_error_naming_the_forms() {
        for out in ["ftp://example.com/x", "s3://bucket/t", ""] {
            let e = Output::parse(out).unwrap_err().to_string();
            assert!(
                e.contains("postgres://") && e.contains("delta:PATH"),
                "{out}: {e}"
            );
        }
        let e = Output::parse("mysql://root:hunter2@db/x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mysql://") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn a_password_never_shows_in_an_output_s_messages() {
        for url in [
            "postgres://u:s3cret@127.0.0.1:1/db",
            "postgres://u@127.0.0.1:1/db?password=s3cret",
        ] {
            let out = Output::parse(url).unwrap();
            assert!(!format!("{out:?}").contains("s3cret"), "{out:?}");
        }
    }
}
