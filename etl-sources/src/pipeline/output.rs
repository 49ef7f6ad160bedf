//! [`Output`]: where a run writes, a JSONL file or a PostgreSQL table, each
//! with its rejects, opened once for every source.

use etl_core::{EtlError, IdempotentSink, JsonlRejects, JsonlSink, Record};
use etl_postgres::PostgresSink;
use std::path::{Path, PathBuf};

use super::{rejects_path, run_with_progress, Progress, RunError, Summary};
use crate::{cursor, Source};

/// How many written rows a PostgreSQL output remembers (about 9 MB): enough
/// for the pages a run re-reads, while the table decides the rest.
const PG_REMEMBERED_KEYS: usize = 100_000;

/// Where a run writes its rows and its rejects.
///
/// A JSONL output is resumed: a torn last line left by a crash is cut off,
/// and the rows and rejects it holds are not written again. A PostgreSQL
/// table decides what is new itself, whoever else loads into it: nothing
/// of it is read at start, and the bounded memory in front only spares it
/// rows met again in this run (a page re-read at the cursor, a retried
/// batch).
///
/// ```
/// use etl_core::Row;
/// use etl_sources::pipeline::Output;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), etl_core::EtlError> {
/// # let dir = tempfile::tempdir()?;
/// let out = dir.path().join("launches.jsonl");
/// let output = Output::open::<Row>(&out.to_string_lossy(), "launches", None).await?;
/// assert_eq!(output.describe()?.rejects, dir.path().join("launches.rejects.jsonl").display().to_string());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub enum Output {
    /// A JSONL file and its rejects file.
    Jsonl {
        /// The rows.
        sink: IdempotentSink<JsonlSink>,
        /// The rejects.
        rejects: JsonlRejects,
    },
    /// A PostgreSQL table; its rejects go to `<table>_rejects`.
    Postgres {
        /// The rows (and, through [`IdempotentSink::inner`], the rejects).
        sink: IdempotentSink<PostgresSink>,
    },
}

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

impl Output {
    /// Opens `out`: a PostgreSQL URL (`postgres://` or `postgresql://`) to
    /// load into `pg_table`, else the path of a JSONL file of rows of type
    /// `T`, whose rejects go to `rejects` (default [`rejects_path`]).
    pub async fn open<T: Record>(
        out: &str,
        pg_table: &str,
        rejects: Option<&Path>,
    ) -> Result<Self, EtlError> {
        if out.starts_with("postgres://") || out.starts_with("postgresql://") {
            let store = PostgresSink::connect_as::<T>(out, pg_table).await?;
            Ok(Output::Postgres {
                sink: IdempotentSink::bounded(store, PG_REMEMBERED_KEYS),
            })
        } else {
            let path = Path::new(out);
            let sink = IdempotentSink::resume_as::<T>(path)?;
            let rejects_at = rejects.map_or_else(|| rejects_path(path), PathBuf::from);
            let rejects = JsonlRejects::open(&rejects_at)?;
            Ok(Output::Jsonl { sink, rejects })
        }
    }

    /// The cursor of an incremental run: the newest update time the output
    /// holds (an index look in PostgreSQL; a scan of the file by
    /// [`Source::stored_updated_at`] for JSONL).
    pub async fn cursor<S: Source>(&self, source: &S) -> Result<Option<String>, EtlError> {
        match self {
            Output::Jsonl { sink, .. } => {
                cursor::jsonl_cursor(sink.inner().path(), |line| source.stored_updated_at(line))
            }
            Output::Postgres { sink } => sink.inner().newest_last_updated().await,
        }
    }

    /// Runs the pipeline from `source` into this output
    /// ([`run_with_progress`]).
    pub async fn run<S: Source>(
        &self,
        source: &mut S,
        max_pages: Option<u32>,
        on_page: impl FnMut(&Progress),
    ) -> Result<Summary, RunError> {
        match self {
            Output::Jsonl { sink, rejects } => {
                run_with_progress(source, sink, rejects, max_pages, on_page).await
            }
            Output::Postgres { sink } => {
                run_with_progress(source, sink, sink.inner(), max_pages, on_page).await
            }
        }
    }

    /// Logs what the output holds as the run's first line, with the cursor
    /// of an incremental run (`None`: not incremental).
    pub fn announce(&self, cursor: Option<&str>) {
        match (self, cursor) {
            (Output::Jsonl { sink, rejects }, Some(cursor)) => {
                tracing::info!(path = %sink.inner().path().display(), rows = sink.seen_count(), rejects = rejects.len(), %cursor, "output opened; incremental")
            }
            (Output::Jsonl { sink, rejects }, None) => {
                tracing::info!(path = %sink.inner().path().display(), rows = sink.seen_count(), rejects = rejects.len(), "output opened")
            }
            (Output::Postgres { sink }, Some(cursor)) => {
                tracing::info!(table = %sink.inner().table().as_str(), %cursor, "PostgreSQL output opened; incremental")
            }
            (Output::Postgres { sink }, None) => {
                tracing::info!(table = %sink.inner().table().as_str(), "PostgreSQL output opened")
            }
        }
    }

    /// Where the rows and rejects go, in words. Fails only for a table
    /// whose rejects table name would be too long.
    pub fn describe(&self) -> Result<Described, EtlError> {
        Ok(match self {
            Output::Jsonl { sink, rejects } => Described {
                rows: sink.inner().path().display().to_string(),
                held: Some(sink.seen_count()),
                rejects: rejects.path().display().to_string(),
            },
            Output::Postgres { sink } => {
                // No count(*): it would read the whole table.
                let store = sink.inner();
                Described {
                    rows: format!("PostgreSQL table {}", store.table().as_str()),
                    held: None,
                    rejects: format!("table {}", store.table().rejects()?.as_str()),
                }
            }
        })
    }
}
