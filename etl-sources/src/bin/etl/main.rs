//! `etl run PIPELINE.toml`: any JSON API into a JSONL file (or a PostgreSQL
//! table), each distinct record once. The options and the run are
//! `etl_sources::cli::etl`; this sets up the log and the metrics recorder
//! around it.

use clap::Parser;
use etl_sources::cli::{self, etl::Etl};
use std::process::ExitCode;

fn main() -> ExitCode {
    cli::cap_malloc_arenas();
    run()
}

#[tokio::main]
async fn run() -> ExitCode {
    let args = Etl::parse();
    cli::init_logging(args.log_format());
    let metrics = if args.wants_metrics() {
        match cli::install_recorder() {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::error!(error = %e, "cannot install the metrics recorder");
                return ExitCode::from(cli::EXIT_FAILED);
            }
        }
    } else {
        None
    };
    ExitCode::from(cli::etl::run(&args, metrics.as_ref()).await)
}
