//! The `launches` command: its options ([`Args`]) and a whole run ([`run`]).

use clap::Parser;
use etl_core::{EtlError, Row};
use metrics_exporter_prometheus::PrometheusHandle;
use std::path::PathBuf;
use std::time::Instant;

use super::{report_error, RunFlags, EXIT_FAILED, EXIT_USAGE};
use crate::pipeline::output::{Destination, Target};
use crate::pipeline::{Output, ResourceReport};
use crate::replay::{Replay, ReplayServer};
use crate::{LaunchLibrary, SourceOptions, SpaceDevsSource};

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

    /// Output: a JSONL file (created if missing, appended to if not), a
    /// PostgreSQL URL (postgres://user@host/db) to load into a table, or
    /// delta:PATH (a Delta table: a directory or s3://BUCKET/PATH; builds
    /// with the feature `delta`).
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

    /// Page size (the API's `limit`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: Option<u32>,

    /// API key, sent as `Authorization: Token <key>` to the base URL's origin only.
    #[arg(long, env = "LL2_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Ask only for what changed: launches updated at or after the newest
    /// `last_updated` already in the output, oldest change first. A killed
    /// run resumes from what it wrote; an empty output reads everything.
    #[arg(long)]
    pub incremental: bool,

    /// The flags every command shares: `--max-retry-after`, `--max-pages`,
    /// `--timeout-secs`, `--metrics-file`, `--log-format`.
    #[command(flatten)]
    pub run: RunFlags,
}

/// One whole run: checks the metrics file can be written (exit 2 if not,
/// before any request), loads, prints the summary (stdout), reports a
/// failure (stderr), writes the metrics file if asked (with `metrics`, the
/// handle of the recorder the run's metrics went to), and returns the exit
/// status.
pub async fn run(args: &Args, metrics: Option<&PrometheusHandle>) -> u8 {
    if let Err(code) = super::check_metrics_file(&args.run) {
        return code;
    }
    let started = Instant::now();
    let code = match load(args).await {
        Ok(entry) => {
            println!(
                "{}",
                super::summary_line(&entry, "launches", false, args.run.log_format)
            );
            entry.exit_code() as u8
        }
        Err((code, message)) => {
            report_error(args.run.log_format, code, &message);
            code
        }
    };
    super::write_metrics(&args.run, metrics, code, started);
    code
}

/// The load: the output opened first (one that cannot be opened as given
/// is exit 2, before any request), then the source, then the one
/// resource's run. `Err`: the exit status and what stopped it.
async fn load(args: &Args) -> Result<ResourceReport, (u8, String)> {
    let refused = |e: EtlError| match e {
        EtlError::InvalidInput(_) => (EXIT_USAGE, format!("{e}; nothing was requested")),
        e => (EXIT_FAILED, e.to_string()),
    };
    let mut output = Output::parse_file(&args.out.to_string_lossy())
        .map_err(refused)?
        .table(args.pg_table.clone());
    if let Some(rejects) = &args.rejects {
        output = output.rejects(rejects.clone());
    }
    let options = super::run_options(&args.run, args.incremental);
    let target = Target::new("launches", false).within(args.run.timeout());
    let table = Destination::<Row>::open(&output, target)
        .await
        .map_err(refused)?;
    let (source, _server) = source(args).await.map_err(|e| (EXIT_FAILED, e))?;
    crate::pipeline::load_resource("launches", &*table, source, &options)
        .await
        .map_err(|e| (EXIT_FAILED, e))
}

/// The source: the live API at `--base-url`, or, offline, the bundled
/// dataset served from 127.0.0.1 for as long as the run lasts (the server
/// is handed back to be kept alive).
async fn source(args: &Args) -> Result<(SpaceDevsSource, Option<ReplayServer>), String> {
    let (base_url, server) = match &args.base_url {
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
    let mut endpoint = LaunchLibrary::new(&base_url).map_err(|e| e.to_string())?;
    if let Some(limit) = args.limit {
        endpoint = endpoint.limit(limit);
    }
    if let Some(key) = &args.api_key {
        endpoint = endpoint.api_key(key.clone());
    }
    let options = SourceOptions {
        timeout: args.run.timeout(),
        max_retry_after: args.run.max_retry_after,
        throttle: Default::default(),
    };
    let source = endpoint.source(options).map_err(|e| e.to_string())?;
    Ok((source, server))
}
