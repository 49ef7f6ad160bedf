//! `launches`: Launch Library 2 launches into a JSONL file, each distinct
//! launch once, however often it runs or is killed.

use clap::Parser;
use etl_core::IdempotentSink;
use etl_postgres::PostgresSink;
use etl_sources::pipeline;
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
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    // Not a doc comment: rustdoc would want the URL as a link, clap as text.
    #[arg(
        long,
        help = "Full URL of a list endpoint's first page, e.g. https://ll.thespacedevs.com/2.2.0/launch/upcoming/ [default: offline, bundled dataset]"
    )]
    base_url: Option<String>,

    /// Output: a JSONL file (created if missing, appended to if not), or a
    /// PostgreSQL URL (postgres://user@host/db) to load into a table.
    #[arg(long, default_value = "launches.jsonl")]
    out: PathBuf,

    /// Table to load into when --out is a PostgreSQL URL (created if missing).
    #[arg(long, default_value = "launches")]
    pg_table: String,

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
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn launches(args: Args) -> Result<(), String> {
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
    };
    let mut source = SpaceDevsSource::new(&base_url, options).map_err(|e| e.to_string())?;
    let out = args.out.to_string_lossy();
    // Each output yields the run's summary, where it went, and the rows it
    // holds now; the line printed is the same.
    let (summary, place, total) =
        if out.starts_with("postgres://") || out.starts_with("postgresql://") {
            // The database keeps each row once, whoever else loads into it; the
            // keys it holds let this run skip known rows before sending them.
            let store = PostgresSink::connect(&out, &args.pg_table)
                .await
                .map_err(|e| e.to_string())?;
            let keys = store.content_keys().await.map_err(|e| e.to_string())?;
            tracing::info!(table = %args.pg_table, rows = keys.len(), "PostgreSQL output opened");
            let sink = IdempotentSink::with_seen(store, keys);
            let summary = pipeline::run(&mut source, &sink, args.max_pages)
                .await
                .map_err(|e| e.to_string())?;
            let total = sink.inner().count().await.map_err(|e| e.to_string())?;
            (
                summary,
                format!("PostgreSQL table {}", args.pg_table),
                total,
            )
        } else {
            let sink = pipeline::open_output(&args.out).map_err(|e| e.to_string())?;
            let summary = pipeline::run(&mut source, &sink, args.max_pages)
                .await
                .map_err(|e| e.to_string())?;
            (
                summary,
                args.out.display().to_string(),
                sink.seen_count() as u64,
            )
        };
    println!(
        "done: {} pages, {} launches read, {} new rows written to {place} ({total} rows in all)",
        summary.pages, summary.rows, summary.new_rows
    );
    Ok(())
}
