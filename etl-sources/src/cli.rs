//! The `launches` command: its options ([`Args`]) and a whole run ([`run`]),
//! here in the library so that tests can drive a run on tokio's paused
//! clock. The binary parses the arguments, sets up logging and the metrics
//! recorder, and calls [`run`].

use clap::{Parser, ValueEnum};
use etl_core::{IdempotentSink, JsonlRejects, JsonlSink};
use etl_postgres::PostgresSink;
use metrics_exporter_prometheus::PrometheusHandle;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pipeline::{self, Progress, RunError, Summary};
use crate::replay::{Replay, ReplayServer};
use crate::{cursor, progress, SourceOptions, SpaceDevsSource};

/// Load Launch Library 2 launches into a JSONL file, each distinct launch
/// once: a re-run appends only new or changed launches.
///
/// Without --base-url it runs offline, on a bundled dataset served from
/// 127.0.0.1 (with one 429 and one 503 along the way, to show the retries).
///
/// An entry the reader does not understand never stops the load: it goes to
/// the rejects file (or table) as sent, with what did not read.
///
/// Exit status: 0 a clean run; 1 the run failed (the rows of the pages loaded
/// before stay written); 2 a usage error; 3 the run completed but rejected
/// at least one entry.
#[derive(Debug, Parser)]
#[command(name = "launches", version)]
pub struct Args {
    /// The list endpoint's first page (`--base-url`); `None`: offline.
    // The help as text, apart from the doc comment: rustdoc would want the
    // URL as a link, clap as text.
    #[arg(
        long,
        help = "Full URL of a list endpoint's first page, e.g. https://ll.thespacedevs.com/2.3.0/launches/upcoming/ (2.2.0's /2.2.0/launch/upcoming/ reads too) [default: offline, bundled dataset]"
    )]
    pub base_url: Option<String>,

    /// Output: a JSONL file (created if missing, appended to if not), or a
    /// PostgreSQL URL (postgres://user@host/db) to load into a table.
    #[arg(long, default_value = "launches.jsonl")]
    pub out: PathBuf,

    /// The table a PostgreSQL output loads into (`--pg-table`).
    // The help as text, apart from the doc comment: rustdoc would read
    // `<table>` as HTML.
    #[arg(
        long,
        default_value = "launches",
        help = "Table to load into when --out is a PostgreSQL URL (created if missing; rejects go to <table>_rejects)"
    )]
    pub pg_table: String,

    /// Where the rejects of a JSONL output go (`--rejects`).
    #[arg(
        long,
        help = "Where entries that do not read as launches go (JSONL, each entry once) [default: <out stem>.rejects.jsonl beside --out]"
    )]
    pub rejects: Option<PathBuf>,

    /// The longest server-requested wait (429 Retry-After) to sit out, e.g.
    /// 10m; a longer one ends the run with an error naming the wait
    /// [default: every wait is honoured].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_retry_after: Option<Duration>,

    /// Page size (the API's `limit`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: Option<u32>,

    /// Stop after this many pages.
    #[arg(long)]
    pub max_pages: Option<u32>,

    /// API key, sent as `Authorization: Token <key>` to the base URL's origin only.
    #[arg(long, env = "LL2_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Timeout of one request, in seconds (0: none).
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,

    /// Ask only for what changed: launches updated at or after the newest
    /// `last_updated` already in the output, oldest change first. A killed
    /// run resumes from what it wrote; an empty output reads everything.
    #[arg(long)]
    pub incremental: bool,

    /// At the end of the run (whatever its exit status), write the run's
    /// metrics to this file in the Prometheus text format, for the
    /// node_exporter textfile collector; replaced atomically.
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,

    /// How stderr's log lines are written: `text` for a person, `json` (one
    /// JSON object a line, the run's summary included) for a log pipeline.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How the log lines on stderr are written ([`Args::log_format`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line an event, for a person; a progress bar on a terminal.
    #[default]
    Text,
    /// One JSON object a line: timestamp, level, target, message and the
    /// event's fields. Never a progress bar.
    Json,
}

/// The run completed: exit 0.
pub const EXIT_OK: u8 = 0;
/// The run failed; the rows of the pages loaded before stay written.
pub const EXIT_FAILED: u8 = 1;
/// The run completed but rejected at least one entry: cron and CI notice.
pub const EXIT_REJECTED: u8 = 3;

/// How the first line shows the cursor of an incremental run over an empty
/// output.
const NO_CURSOR: &str = "none (empty output: reading everything)";

/// How many written rows a PostgreSQL run remembers (about 9 MB): enough
/// for the pages a run re-reads, while the table decides the rest.
const PG_REMEMBERED_KEYS: usize = 100_000;

/// One whole run: loads, prints the summary (stdout), reports a failure
/// (stderr), writes the metrics file if asked (with `metrics`, the handle
/// of the recorder the run's metrics went to), and returns the exit status.
pub async fn run(args: &Args, metrics: Option<&PrometheusHandle>) -> u8 {
    let started = Instant::now();
    let code = match launches(args).await {
        Ok(summary) => completed(&summary),
        Err(message) => {
            match args.log_format {
                LogFormat::Text => eprintln!("error: {message}"),
                LogFormat::Json => tracing::error!(exit_code = EXIT_FAILED, "{message}"),
            }
            EXIT_FAILED
        }
    };
    if let (Some(path), Some(handle)) = (&args.metrics_file, metrics) {
        crate::metrics::run_finished(code != EXIT_FAILED, started.elapsed());
        if let Err(e) = crate::metrics::write_atomically(path, &handle.render()) {
            // The run's own outcome stands; the missing file says the rest.
            tracing::error!(path = %path.display(), error = %e, "cannot write the metrics file");
        }
    }
    code
}

/// The exit status of a run that completed: 3 when it rejected an entry.
fn completed(summary: &Summary) -> u8 {
    if summary.rejected > 0 {
        EXIT_REJECTED
    } else {
        EXIT_OK
    }
}

/// Where the run writes: the output, its rejects, and how to describe them.
enum Output {
    Jsonl {
        sink: IdempotentSink<JsonlSink>,
        rejects: JsonlRejects,
    },
    Postgres {
        sink: IdempotentSink<PostgresSink>,
    },
}

impl Output {
    async fn open(args: &Args) -> Result<Self, String> {
        let out = args.out.to_string_lossy();
        if out.starts_with("postgres://") || out.starts_with("postgresql://") {
            // The table keeps each row once, whoever else loads into it, and
            // decides what is new: nothing of it is read at start, and the
            // bounded memory in front only spares it rows met again in this
            // run (a page re-read at the cursor, a retried batch).
            let store = PostgresSink::connect(&out, &args.pg_table)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Output::Postgres {
                sink: IdempotentSink::bounded(store, PG_REMEMBERED_KEYS),
            })
        } else {
            let sink = IdempotentSink::resume(&args.out).map_err(|e| e.to_string())?;
            let path = (args.rejects.clone()).unwrap_or_else(|| pipeline::rejects_path(&args.out));
            let rejects = JsonlRejects::open(&path).map_err(|e| e.to_string())?;
            Ok(Output::Jsonl { sink, rejects })
        }
    }

    /// The run's first log line: what the output holds, and the cursor of
    /// an incremental run (`None`: not incremental).
    fn announce(&self, cursor: Option<&str>) {
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

    /// The newest `last_updated` the output holds.
    async fn cursor(&self) -> Result<Option<String>, String> {
        match self {
            Output::Jsonl { sink, .. } => cursor::jsonl_cursor(sink.inner().path()),
            Output::Postgres { sink } => sink.inner().newest_last_updated().await,
        }
        .map_err(|e| e.to_string())
    }

    async fn run(
        &self,
        source: &mut SpaceDevsSource,
        max_pages: Option<u32>,
        on_page: impl FnMut(&Progress),
    ) -> Result<Summary, RunError> {
        match self {
            Output::Jsonl { sink, rejects } => {
                pipeline::run_with_progress(source, sink, rejects, max_pages, on_page).await
            }
            Output::Postgres { sink } => {
                pipeline::run_with_progress(source, sink, sink.inner(), max_pages, on_page).await
            }
        }
    }

    /// Where the rows went, how many the output holds where that is known
    /// without counting a table, and where the rejects went.
    fn describe(&self) -> Result<(String, Option<usize>, String), String> {
        Ok(match self {
            Output::Jsonl { sink, rejects } => (
                sink.inner().path().display().to_string(),
                Some(sink.seen_count()),
                rejects.path().display().to_string(),
            ),
            Output::Postgres { sink } => {
                // No count(*): it would read the whole table.
                let store = sink.inner();
                let rejects = store.table().rejects().map_err(|e| e.to_string())?;
                (
                    format!("PostgreSQL table {}", store.table().as_str()),
                    None,
                    format!("table {}", rejects.as_str()),
                )
            }
        })
    }
}

async fn launches(args: &Args) -> Result<Summary, String> {
    // The output first: an incremental run's cursor is what it holds.
    let output = Output::open(args).await?;
    let since = if args.incremental {
        output.cursor().await?
    } else {
        None
    };
    output.announce(
        args.incremental
            .then(|| since.as_deref().unwrap_or(NO_CURSOR)),
    );
    // Offline: serve the bundled dataset ourselves, for as long as we run.
    let (base_url, _server) = match &args.base_url {
        Some(url) => (url.clone(), None),
        None => {
            let server = ReplayServer::start(Replay::bundled())
                .await
                .map_err(|e| format!("cannot start the offline server on 127.0.0.1: {e}"))?;
            let url = server.url().to_string();
            tracing::info!(%url, "offline: serving the bundled dataset (pass --base-url for the live API)");
            (url, Some(server))
        }
    };
    let options = SourceOptions {
        limit: args.limit,
        api_key: args.api_key.clone(),
        timeout: (args.timeout_secs > 0).then(|| Duration::from_secs(args.timeout_secs)),
        max_retry_after: args.max_retry_after,
        incremental: args.incremental,
        since: since.clone(),
    };
    let mut source = SpaceDevsSource::new(&base_url, options).map_err(|e| e.to_string())?;
    // A bar only for a person at a terminal: never among JSON lines.
    let bar = match args.log_format {
        LogFormat::Text => progress::start(),
        LogFormat::Json => None,
    };
    let result = output
        .run(&mut source, args.max_pages, |p| {
            if let Some(bar) = bar {
                progress::update(bar, p);
            }
        })
        .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let summary = result.map_err(|e| e.to_string())?;
    let (place, total, rejects_place) = output.describe()?;
    let in_all = total.map_or(String::new(), |n| format!(" ({n} rows in all)"));
    let rejected = if summary.rejected == 0 {
        String::new()
    } else {
        format!(
            "; {} entries rejected ({} new) into {rejects_place}",
            summary.rejected, summary.new_rejects
        )
    };
    let incremental = match (args.incremental, &since) {
        (false, _) => String::new(),
        (true, Some(cursor)) => format!("; incremental since {cursor}"),
        (true, None) => "; incremental from the start".to_string(),
    };
    println!(
        "done: {} pages, {} launches read, {} new rows written to {place}{in_all}{rejected}{incremental}",
        summary.pages, summary.rows, summary.new_rows
    );
    if args.log_format == LogFormat::Json {
        // The summary among the log lines too, its figures as fields.
        let exit_code = completed(&summary);
        tracing::info!(
            pages = summary.pages,
            read = summary.rows,
            new = summary.new_rows,
            rejected = summary.rejected,
            new_rejects = summary.new_rejects,
            rows = total,
            output = %place,
            since = since.as_deref(),
            exit_code,
            "done"
        );
    }
    Ok(summary)
}
