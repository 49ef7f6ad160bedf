//! `launches`: Launch Library 2 launches into a JSONL file (or a PostgreSQL
//! table), each distinct launch once, however often it runs or is killed.
//! The options and the run are `etl_sources::cli`; this sets up the log
//! and the metrics recorder around it.

use clap::Parser;
use etl_sources::cli::{self, Args};
use std::process::ExitCode;

fn main() -> ExitCode {
    cli::cap_malloc_arenas();
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let args = Args::parse();
    cli::init_logging(args.run.log_format);
    let metrics = match &args.run.metrics_file {
        Some(_) => match cli::install_recorder() {
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
