//! The `etl` command: `etl run PIPELINE.toml` loads any JSON API that a
//! pipeline file describes ([`crate::Pipeline`]); `etl demo` runs one
//! against the bundled dataset, with no network; `etl schema` prints the
//! typed tables an output holds ([`super::schema`]).

use clap::{Args as ClapArgs, Parser, Subcommand};
use metrics_exporter_prometheus::PrometheusHandle;
use std::path::PathBuf;
use std::time::Instant;

use super::schema::SchemaArgs;
use super::{report_error, LogFormat, RunFlags, EXIT_FAILED, EXIT_USAGE};
use crate::pipeline::{Output, Pipeline};
use crate::replay::{Replay, ReplayServer};

/// Load any JSON API into a JSONL file (or a PostgreSQL table), each
/// distinct record once: a re-run appends only new or changed records.
///
/// Exit status: 0 a clean run; 1 the run failed (the rows of the pages loaded
/// before stay written); 2 a usage error or an invalid pipeline file; 3 the
/// run completed but rejected at least one entry.
#[derive(Debug, Parser)]
#[command(name = "etl", version)]
pub struct Etl {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `etl`'s commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the pipeline a TOML file describes.
    Run(RunArgs),
    /// Run a pipeline file against the bundled Launch Library dataset,
    /// served from 127.0.0.1 (no network); prints the file first.
    Demo(DemoArgs),
    /// Print the typed tables an output holds for a pipeline file's
    /// resources: each table's columns, their types, JSON paths and hints,
    /// and the members kept untyped. Reads only.
    Schema(SchemaArgs),
}

/// `etl demo`'s arguments.
#[derive(Debug, ClapArgs)]
pub struct DemoArgs {
    /// A file of a parent and a child resource: the launches, and for each
    /// launch its provider's upcoming launches (one request chain a
    /// launch), into --out as a directory [default: .].
    #[arg(long)]
    pub parent_child: bool,
    /// Everything else.
    #[command(flatten)]
    pub flags: Flags,
}

/// `etl run`'s arguments.
#[derive(Debug, ClapArgs)]
pub struct RunArgs {
    /// The pipeline file (TOML): the API's URL, where its records are, how
    /// it pages and authenticates.
    pub pipeline: PathBuf,
    /// Run only this resource of the file (again for more) [default: every
    /// resource].
    #[arg(long = "resource", value_name = "NAME")]
    pub resources: Vec<String>,
    /// Everything else.
    #[command(flatten)]
    pub flags: Flags,
}

/// What `etl run` and `etl demo` share: the flags of `launches`.
#[derive(Debug, ClapArgs)]
pub struct Flags {
    /// Output: a JSONL file, a PostgreSQL URL (postgres://user@host/db) to
    /// load into a table, or delta:PATH (a Delta table: a directory or
    /// s3://BUCKET/PATH; builds with the feature `delta`) [default:
    /// NAME.jsonl, NAME from the file]. With many resources: a directory
    /// of NAME.jsonl files [default: .], a table NAME each, or a Delta
    /// table PATH/NAME each.
    #[arg(long)]
    pub out: Option<String>,

    /// The table a PostgreSQL output loads into [default: NAME].
    #[arg(long)]
    pub pg_table: Option<String>,

    /// Where the entries that do not read as records go (JSONL, each once)
    /// [default: the output's stem + .rejects.jsonl].
    #[arg(long)]
    pub rejects: Option<PathBuf>,

    /// Ask only for what changed since the newest `updated_at` already in
    /// the output (needs `[incremental]` and `updated_at` in the file).
    #[arg(long)]
    pub incremental: bool,

    /// The flags every command shares.
    #[command(flatten)]
    pub run: RunFlags,
}

impl Etl {
    /// The log format the command asks for.
    pub fn log_format(&self) -> LogFormat {
        self.flags().map(|f| f.run.log_format).unwrap_or_default()
    }

    /// Whether a metrics file is asked for.
    pub fn wants_metrics(&self) -> bool {
        self.flags().is_some_and(|f| f.run.metrics_file.is_some())
    }

    /// The flags of a command that runs a pipeline.
    fn flags(&self) -> Option<&Flags> {
        match &self.command {
            Command::Run(run) => Some(&run.flags),
            Command::Demo(demo) => Some(&demo.flags),
            Command::Schema(_) => None,
        }
    }
}

/// What both demo files read: Launch Library 2's list pages from the
/// bundled replay server (its URL put in for `REPLAY_URL`).
const DEMO_LAUNCHES: &str = r#"name = "launches_demo"
url = "REPLAY_URL"
records = "/results"
id = "/id"
updated_at = "/last_updated"

[params]
limit = "5"

[paginate]
style = "next_url"
next = "/next"
"#;

/// The resources of `etl demo --parent-child`: the launches, and for each
/// launch the upcoming launches of its launch service provider.
const DEMO_FAMILY: &str = r#"
[[resource]]
name = "launches"

[[resource]]
name = "same_provider"
parent = "launches"
params = { lsp__id = "{provider}" }
[resource.from_parent]
provider = "/launch_service_provider/id"
"#;

/// The pipeline file `etl demo` runs (with `parent_child`, `etl demo
/// --parent-child`), its URL the replay server's (`url`).
pub fn demo_file(parent_child: bool, url: &str) -> String {
    let file = if parent_child {
        format!(
            "# Launch Library 2's upcoming launches, and for each launch the upcoming\n\
             # launches of its provider (lsp__id), as the bundled replay server serves them.\n\
             {DEMO_LAUNCHES}{DEMO_FAMILY}"
        )
    } else {
        format!("# Launch Library 2's list pages, as the bundled replay server serves them.\n{DEMO_LAUNCHES}")
    };
    file.replace("REPLAY_URL", url)
}

/// One whole `etl` run; the exit status. As [`super::run`] for `launches`:
/// an invalid file (or `--incremental` it cannot serve) and an unwritable
/// metrics file are exit 2 before any request. The run itself is
/// [`Pipeline::run`]; this maps the flags onto it and prints its report.
pub async fn run(args: &Etl, metrics: Option<&PrometheusHandle>) -> u8 {
    let (flags, runs) = match &args.command {
        Command::Run(run) => (&run.flags, Runs::File(run)),
        Command::Demo(demo) => (&demo.flags, Runs::Demo(demo)),
        Command::Schema(schema) => return super::schema::run(schema).await,
    };
    let usage = |message: &str| {
        report_error(flags.run.log_format, EXIT_USAGE, message);
        EXIT_USAGE
    };
    if let Err(code) = super::check_metrics_file(&flags.run) {
        return code;
    }
    let (pipeline, resources, _server) = match runs {
        Runs::File(run) => (Pipeline::load(&run.pipeline), run.resources.clone(), None),
        Runs::Demo(demo) => match ReplayServer::start(Replay::bundled()).await {
            Ok(server) => {
                let text = demo_file(demo.parent_child, server.url().as_str());
                println!("{text}");
                let pipeline = Pipeline::parse_with(&text, "demo.toml", |_| None);
                (pipeline, Vec::new(), Some(server))
            }
            Err(e) => {
                report_error(
                    flags.run.log_format,
                    EXIT_FAILED,
                    &format!("cannot start the offline server on 127.0.0.1: {e}"),
                );
                return EXIT_FAILED;
            }
        },
    };
    let pipeline = match pipeline {
        Ok(pipeline) => pipeline,
        Err(e) => return usage(&e.to_string()),
    };
    let output = match output(flags, &pipeline) {
        Ok(output) => output,
        Err(message) => return usage(&message),
    };
    let options = super::run_options(&flags.run, flags.incremental).resources(resources);
    let started = Instant::now();
    let named = pipeline.is_many();
    let (report, code) = match pipeline.run(&output, options).await {
        Ok(report) => {
            let code = report.exit_code() as u8;
            (report, code)
        }
        Err(e) => {
            for failure in e.failures() {
                in_span(named, failure.resource.as_deref(), || {
                    report_error(flags.run.log_format, e.exit_code() as u8, &failure.message)
                });
            }
            (e.report().clone(), e.exit_code() as u8)
        }
    };
    for entry in report.entries() {
        let line = in_span(named, Some(entry.name()), || {
            super::summary_line(entry, "records", named, flags.run.log_format)
        });
        println!("{line}");
    }
    if code != EXIT_USAGE {
        super::write_metrics(&flags.run, metrics, code, started);
    }
    code
}

/// The pipeline a command runs: a file's, or the demo's.
enum Runs<'a> {
    File(&'a RunArgs),
    Demo(&'a DemoArgs),
}

/// `f` inside the span of `resource`'s log lines when the file holds
/// many (`named`), as its run logged them.
fn in_span<R>(named: bool, resource: Option<&str>, f: impl FnOnce() -> R) -> R {
    match resource.filter(|_| named) {
        Some(resource) => tracing::info_span!("resource", resource).in_scope(f),
        None => f(),
    }
}

/// The output the flags name for `pipeline`: `--out` as the file's
/// resources need it (with one resource a path is its file; with many, a
/// directory unless it ends in `.jsonl`), its default (`NAME.jsonl`, or
/// the working directory), `--pg-table` and `--rejects`.
fn output(flags: &Flags, pipeline: &Pipeline) -> Result<Output, String> {
    // `--pg-table` or `--rejects` with many resources is refused by the
    // run itself (`Output`'s check), before any request.
    let many = pipeline.is_many();
    let output = match (&flags.out, many) {
        (Some(out), true) => Output::parse(out),
        (Some(out), false) => Output::parse_file(out),
        (None, true) => Output::parse("."),
        (None, false) => Output::parse_file(&format!("{}.jsonl", pipeline.resources()[0].name)),
    }
    .map_err(|e| e.to_string())?;
    let output = match &flags.pg_table {
        Some(table) => output.table(table.clone()),
        None => output,
    };
    Ok(match &flags.rejects {
        Some(rejects) => output.rejects(rejects.clone()),
        None => output,
    })
}
