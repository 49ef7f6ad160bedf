//! `launches`: Launch Library 2 launches into a JSONL file (or a PostgreSQL
//! table), each distinct launch once, however often it runs or is killed.
//! The options and the run are `etl_sources::cli`; this sets up the log
//! and the metrics recorder around it.

use clap::Parser;
use etl_sources::cli::{self, Args, LogFormat};
use etl_sources::progress;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::io::IsTerminal;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match args.log_format {
        LogFormat::Text => {
            tracing_subscriber::fmt()
                .with_writer(progress::Stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false)
                .init();
        }
        LogFormat::Json => {
            tracing_subscriber::fmt()
                .json()
                .with_writer(std::io::stderr)
                .with_current_span(false)
                .with_span_list(false)
                .init();
        }
    }
    let metrics = match &args.metrics_file {
        Some(_) => match install_recorder() {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::error!(error = %e, "cannot install the metrics recorder");
                return ExitCode::from(cli::EXIT_FAILED);
            }
        },
        None => None,
    };
    ExitCode::from(cli::run(&args, metrics.as_ref()).await)
}

/// The Prometheus recorder, for the whole process (every runtime thread),
/// with every metric's help text.
fn install_recorder() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| e.to_string())?;
    etl_sources::metrics::describe();
    Ok(handle)
}
