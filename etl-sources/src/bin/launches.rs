//! `launches`: Launch Library 2 launches into a JSONL file, each distinct
//! launch once, however often it runs or is killed.

use clap::Parser;
use etl_core::IdempotentSink;
use etl_postgres::PostgresSink;
use etl_sources::pipeline::{self, Summary};
use etl_sources::replay::{Replay, ReplayServer};
use etl_sources::{SourceOptions, SpaceDevsSource};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
#[command(version)]
struct Args {
    // Not a doc comment: rustdoc would want the URL as a link, clap as text.
    #[arg(
        long,
        help = "Full URL of a list endpoint's first page, e.g. https://ll.thespacedevs.com/2.3.0/launches/upcoming/ (2.2.0's /2.2.0/launch/upcoming/ reads too) [default: offline, bundled dataset]"
    )]
    base_url: Option<String>,

    /// Output: a JSONL file (created if missing, appended to if not), or a
    /// PostgreSQL URL (postgres://user@host/db) to load into a table.
    #[arg(long, default_value = "launches.jsonl")]
    out: PathBuf,

    // Help as text, not doc comments: rustdoc would read `<table>` as HTML.
    #[arg(
        long,
        default_value = "launches",
        help = "Table to load into when --out is a PostgreSQL URL (created if missing; rejects go to <table>_rejects)"
    )]
    pg_table: String,

    #[arg(
        long,
        help = "Where entries that do not read as launches go (JSONL, each entry once) [default: <out stem>.rejects.jsonl beside --out]"
    )]
    rejects: Option<PathBuf>,

    /// The longest server-requested wait (429 Retry-After) to sit out, e.g.
    /// 10m; a longer one ends the run with an error naming the wait
    /// [default: every wait is honoured].
    #[arg(long, value_parser = humantime::parse_duration)]
    max_retry_after: Option<Duration>,

    /// Page size (the API's `limit`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: Option<u32>,

    /// Stop after this many pages.
    #[arg(long)]
    max_pages: Option<u32>,

    /// API key, sent as `Authorization: Token <key>` to the base URL's origin only.
    #[arg(long, env = "LL2_API_KEY", hide_env_values = true)]
    api_key: Option<String>,

    /// Timeout of one request, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout_secs: u64,
}

#[tokio::main]
async fn main() -> ExitCode {
    let colour = std::io::stderr().is_terminal();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .init();
    let args = Args::parse();
    match launches(args).await {
        Ok(summary) if summary.rejected > 0 => ExitCode::from(EXIT_REJECTED),
        Ok(_) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The run completed but rejected at least one entry: cron and CI notice.
const EXIT_REJECTED: u8 = 3;

async fn launches(args: Args) -> Result<Summary, String> {
    // Offline: serve the bundled dataset ourselves, for as long as we run.
    let (base_url, _server) = match args.base_url {
        Some(url) => (url, None),
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
        api_key: args.api_key,
        timeout: Some(Duration::from_secs(args.timeout_secs)),
        max_retry_after: args.max_retry_after,
    };
    let mut source = SpaceDevsSource::new(&base_url, options).map_err(|e| e.to_string())?;
    let out = args.out.to_string_lossy();
    // Each output yields the run's summary, where it went, and the rows it
    // holds now; the line printed is the same.
    let (summary, place, total, rejects_place) =
        if out.starts_with("postgres://") || out.starts_with("postgresql://") {
            // The database keeps each row once, whoever else loads into it; the
            // keys it holds let this run skip known rows before sending them.
            let store = PostgresSink::connect(&out, &args.pg_table)
                .await
                .map_err(|e| e.to_string())?;
            let keys = store.content_keys().await.map_err(|e| e.to_string())?;
            tracing::info!(table = %args.pg_table, rows = keys.len(), "PostgreSQL output opened");
            let sink = IdempotentSink::with_seen(store, keys);
            let summary = pipeline::run(&mut source, &sink, sink.inner(), args.max_pages)
                .await
                .map_err(|e| e.to_string())?;
            let total = sink.inner().count().await.map_err(|e| e.to_string())?;
            let rejects = sink.inner().table().rejects().map_err(|e| e.to_string())?;
            (
                summary,
                format!("PostgreSQL table {}", args.pg_table),
                total,
                format!("table {}", rejects.as_str()),
            )
        } else {
            let sink = pipeline::open_output(&args.out).map_err(|e| e.to_string())?;
            let rejects_path = args
                .rejects
                .clone()
                .unwrap_or_else(|| pipeline::rejects_path(&args.out));
            let rejects = pipeline::open_rejects(&rejects_path).map_err(|e| e.to_string())?;
            let summary = pipeline::run(&mut source, &sink, &rejects, args.max_pages)
                .await
                .map_err(|e| e.to_string())?;
            (
                summary,
                args.out.display().to_string(),
                sink.seen_count() as u64,
                rejects_path.display().to_string(),
            )
        };
    let rejected = if summary.rejected == 0 {
        String::new()
    } else {
        format!(
            "; {} entries rejected ({} new) into {rejects_place}",
            summary.rejected, summary.new_rejects
        )
    };
    println!(
        "done: {} pages, {} launches read, {} new rows written to {place} ({total} rows in all){rejected}",
        summary.pages, summary.rows, summary.new_rows
    );
    Ok(summary)
}
