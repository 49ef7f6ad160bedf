//! A whole pipeline file run from your own `main`, without the CLI: every
//! resource of the file, parents and children, into one output.
//!
//! ```sh
//! export GITHUB_TOKEN=ghp_...
//! cargo run -p etl-sources --example library_run -- examples/github-issues-comments.toml lake/ --incremental
//! ```
//!
//! The output is what `etl run --out` takes: a directory (a
//! `<resource>.jsonl` file each), `postgres://...` (a table each) or
//! `delta:PATH` (with the feature `delta`). In your own crate,
//! `etl-sources = { version = "0.1", default-features = false, features = ["postgres"] }`
//! is all these calls need.

use etl_sources::{Output, Pipeline, RunOptions};
use std::path::Path;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(out)) = (args.next(), args.next()) else {
        eprintln!("usage: library_run PIPELINE.toml OUT [--incremental]");
        std::process::exit(2);
    };
    let incremental = args.any(|a| a == "--incremental");
    // Every problem of the file, and an output that cannot be, before any
    // request.
    let pipeline = Pipeline::load(Path::new(&file)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let output = Output::parse(&out).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let options = RunOptions::default().incremental(incremental);
    match pipeline.run(&output, options).await {
        Ok(report) => {
            for r in report.resources() {
                println!(
                    "{}: {} pages, {} new, {} seen, {} rejects",
                    r.name(),
                    r.pages(),
                    r.new(),
                    r.seen(),
                    r.rejects()
                );
            }
            std::process::exit(report.exit_code());
        }
        Err(e) => {
            // What did end is written, and reported.
            for r in e.report().resources() {
                println!("{}: {} new before the failure", r.name(), r.new());
            }
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
