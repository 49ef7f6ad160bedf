//! The `etl` command: `etl run PIPELINE.toml` loads any JSON API that a
//! pipeline file describes ([`crate::rest::Pipeline`]); `etl demo` runs one
//! against the bundled dataset, with no network.

use clap::{Args as ClapArgs, Parser, Subcommand};
use metrics_exporter_prometheus::PrometheusHandle;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use tracing::Instrument;

use super::{report_error, Ended, Job, LogFormat, RunFlags, EXIT_USAGE};
use crate::pipeline::output;
use crate::replay::{Replay, ReplayServer};
use crate::rest::{
    feed, ChildSource, ConfigError, Feed, Feeder, JsonRecord, Pipeline, RestSource, Tapped,
};
use crate::throttle::Throttle;
use crate::Source;
use crate::SourceOptions;

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
        self.flags().run.log_format
    }

    /// Whether a metrics file is asked for.
    pub fn wants_metrics(&self) -> bool {
        self.flags().run.metrics_file.is_some()
    }

    fn flags(&self) -> &Flags {
        match &self.command {
            Command::Run(run) => &run.flags,
            Command::Demo(demo) => &demo.flags,
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
/// metrics file are exit 2 before any request.
pub async fn run(args: &Etl, metrics: Option<&PrometheusHandle>) -> u8 {
    let flags = args.flags();
    let usage = |message: &str| {
        report_error(flags.run.log_format, EXIT_USAGE, message);
        EXIT_USAGE
    };
    // Whether the file holds many resources decides the outputs' layout,
    // whichever of them `--resource` runs.
    let mut many = false;
    let (pipelines, server) = match &args.command {
        Command::Run(run) => (
            Pipeline::load_all(&run.pipeline).and_then(|all| {
                many = all.len() > 1;
                selected(all, &run.resources, &run.pipeline)
            }),
            None,
        ),
        Command::Demo(demo) => match ReplayServer::start(Replay::bundled()).await {
            Ok(server) => {
                many = demo.parent_child;
                let text = demo_file(demo.parent_child, server.url().as_str());
                println!("{text}");
                (
                    Pipeline::parse_all(&text, "demo.toml", |_| None)
                        .and_then(|all| selected(all, &[], "demo.toml".as_ref())),
                    Some(server),
                )
            }
            Err(e) => {
                report_error(
                    flags.run.log_format,
                    super::EXIT_FAILED,
                    &format!("cannot start the offline server on 127.0.0.1: {e}"),
                );
                return super::EXIT_FAILED;
            }
        },
    };
    let pipelines = match pipelines.and_then(|all| {
        if flags.incremental {
            for (p, written) in &all {
                if *written {
                    p.check_incremental()?;
                }
            }
        }
        Ok(all)
    }) {
        Ok(pipelines) => pipelines,
        Err(e) => return usage(&e.to_string()),
    };
    if many {
        for (given, flag) in [
            (flags.pg_table.is_some(), "--pg-table"),
            (flags.rejects.is_some(), "--rejects"),
        ] {
            if given {
                return usage(&format!(
                    "{flag} names one output, and this file holds many resources: each resource's is its own (--out holds them)"
                ));
            }
        }
    }
    let place = flags.out.clone().unwrap_or_else(|| ".".to_owned());
    if many && !place.contains("://") && !place.starts_with("delta:") {
        if let Err(e) = std::fs::create_dir_all(&place) {
            return usage(&format!(
                "--out {place}: cannot be made a directory ({e}); nothing was requested"
            ));
        }
    }
    // One throttle for the run: the file's rate limit, and the waits the
    // servers ask, held across every resource and request.
    let rate_limit = pipelines.first().and_then(|(p, _)| p.rate_limit);
    let options = SourceOptions {
        timeout: flags.run.timeout(),
        max_retry_after: flags.run.max_retry_after,
        throttle: std::sync::Arc::new(Throttle::new(rate_limit)),
        ..SourceOptions::default()
    };
    // Each family (a resource and its descendants) in file order; the
    // resources of one family run side by side, a parent's page written
    // once its children's are. One summary line each, in file order (each
    // printed once every line before it is); a failed family ends the run
    // (the rows of every page loaded before stay written).
    let mut code = super::EXIT_OK;
    // By resource: `None` until its family ended, then its line (if any).
    let mut lines: Vec<Option<Option<String>>> = pipelines.iter().map(|_| None).collect();
    let mut printed = 0;
    for family in families(&pipelines) {
        let mut feeders: Vec<Vec<Feeder>> = family.iter().map(|_| Vec::new()).collect();
        let mut feeds: Vec<Option<Feed>> = family.iter().map(|_| None).collect();
        for (at, &child) in family.iter().enumerate() {
            let child = &pipelines[child].0;
            if let Some(parent) = &child.parent {
                let (feeder, fed) = feed(&child.name, child.from_parent.clone());
                if let Some(from) = family.iter().position(|&p| &pipelines[p].0.name == parent) {
                    feeders[from].push(feeder);
                }
                feeds[at] = Some(fed);
            }
        }
        // Every source made before any request: one that cannot be made
        // stops the run before the family starts.
        let mut runs: Vec<Pin<Box<dyn Future<Output = Ended> + '_>>> = Vec::new();
        // The resources of a family log side by side: with many in the
        // file, each line names its own (a span, in the text and the JSON
        // format alike).
        let logged = |name: &str| {
            if many {
                tracing::info_span!("resource", resource = name)
            } else {
                tracing::Span::none()
            }
        };
        for ((&at, feeders), fed) in family.iter().zip(feeders).zip(feeds) {
            let (pipeline, written) = &pipelines[at];
            let name = pipeline.name.clone();
            let job = Job {
                out: match (&flags.out, many) {
                    (_, true) => output::for_resource(&place, &name),
                    (Some(out), false) => out.clone(),
                    (None, false) => format!("{name}.jsonl"),
                },
                pg_table: (flags.pg_table.clone()).unwrap_or_else(|| name.clone()),
                rejects: flags.rejects.clone(),
                incremental: flags.incremental,
                max_pages: flags.run.max_pages,
                metrics_file: flags.run.metrics_file.clone(),
                log_format: flags.run.log_format,
                noun: "records",
                resource: many.then(|| name.clone()),
            };
            let written = *written;
            let span = logged(&name);
            runs.push(match fed {
                Some(fed) => {
                    let source = ChildSource::new(pipeline.clone(), options.clone(), fed);
                    resource_run(
                        job,
                        written,
                        metrics,
                        Tapped::new(source, &name, feeders),
                        span,
                    )
                }
                None => match RestSource::new(pipeline.clone(), options.clone()) {
                    Ok(source) => resource_run(
                        job,
                        written,
                        metrics,
                        Tapped::new(source, &name, feeders),
                        span,
                    ),
                    Err(e) => {
                        report_error(flags.run.log_format, super::EXIT_FAILED, &e.to_string());
                        return super::EXIT_FAILED;
                    }
                },
            });
        }
        let mut failed = None;
        for (&at, run) in family
            .iter()
            .zip(futures_util::future::join_all(runs).await)
        {
            match run.code {
                super::EXIT_OK => {}
                super::EXIT_REJECTED => code = super::EXIT_REJECTED,
                other => {
                    failed.get_or_insert(other);
                }
            }
            lines[at] = Some(run.summary);
        }
        while let Some(Some(line)) = lines.get(printed) {
            if let Some(line) = line {
                println!("{line}");
            }
            printed += 1;
        }
        if let Some(failed) = failed {
            // The lines of what did end, after a resource still to run.
            for line in lines.iter().skip(printed).flatten().flatten() {
                println!("{line}");
            }
            return failed;
        }
    }
    drop(server);
    code
}

/// The run's resources by family, each family in the run's order (parents
/// before children), as indices into `pipelines`: a resource with no
/// parent in the run, then every resource descended from it.
fn families(pipelines: &[(Pipeline, bool)]) -> Vec<Vec<usize>> {
    let mut families: Vec<Vec<usize>> = Vec::new();
    for (at, (pipeline, _)) in pipelines.iter().enumerate() {
        let family = pipeline.parent.as_deref().and_then(|parent| {
            families
                .iter()
                .position(|f| f.iter().any(|&p| pipelines[p].0.name == parent))
        });
        match family {
            Some(family) => families[family].push(at),
            None => families.push(vec![at]),
        }
    }
    families
}

/// [`resource`] as one of a family's runs, boxed (its source's type is
/// its own), logging in `span`.
fn resource_run<'a, S: Source<Row = JsonRecord> + 'a>(
    job: Job,
    written: bool,
    metrics: Option<&'a PrometheusHandle>,
    source: S,
    span: tracing::Span,
) -> Pin<Box<dyn Future<Output = Ended> + 'a>> {
    Box::pin(async move { resource(&job, written, metrics, source).await }.instrument(span))
}

/// One resource's run: through its output when it is written, else read
/// only (to feed its children), with a summary line either way.
async fn resource<S: Source<Row = JsonRecord>>(
    job: &Job,
    written: bool,
    metrics: Option<&PrometheusHandle>,
    mut source: S,
) -> Ended {
    if written {
        return job.execute(metrics, async move { Ok((source, ())) }).await;
    }
    let (mut pages, mut read, mut rejected) = (0u32, 0usize, 0usize);
    loop {
        if job.max_pages.is_some_and(|max| pages >= max) {
            break;
        }
        match source.next_page().await {
            Ok(Some(page)) => {
                pages += 1;
                read += page.rows.len();
                rejected += page.rejects.len();
                // Nothing to write: "loaded" as soon as read.
                if let Some(on_loaded) = page.on_loaded {
                    on_loaded.tell();
                }
            }
            Ok(None) => break,
            Err(e) => {
                report_error(job.log_format, super::EXIT_FAILED, &e.to_string());
                return Ended {
                    code: super::EXIT_FAILED,
                    summary: None,
                };
            }
        }
    }
    let name = job.resource.as_deref().unwrap_or("");
    let summary = format!(
        "done: {name}: {pages} pages, {read} records read, none written (load = false){}",
        if rejected > 0 {
            format!(
                "; {rejected} entries did not read (not kept: nothing of this resource is written)"
            )
        } else {
            String::new()
        }
    );
    Ended {
        code: super::EXIT_OK,
        summary: Some(summary),
    }
}

/// The resources a run reads, parents before their children, each with
/// whether it is written: the ones `wanted` names (every one with `load`
/// not false when it names none), and their ancestors, read to feed them
/// (written only if named too). A name the file lacks is an error naming
/// the file's.
fn selected(
    all: Vec<Pipeline>,
    wanted: &[String],
    file: &std::path::Path,
) -> Result<Vec<(Pipeline, bool)>, ConfigError> {
    if let Some(unknown) = wanted.iter().find(|w| !all.iter().any(|p| &p.name == *w)) {
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        return Err(ConfigError::new(format!(
            "--resource {unknown}: {} has no such resource (it has {})",
            file.display(),
            names.join(", ")
        )));
    }
    let written = |p: &Pipeline| {
        if wanted.is_empty() {
            p.load
        } else {
            wanted.contains(&p.name)
        }
    };
    let by_name: std::collections::HashMap<&str, &Pipeline> =
        all.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut order: Vec<&str> = Vec::new();
    for p in all.iter().filter(|p| written(p)) {
        // The chain of ancestors, oldest first (the file has no cycle).
        let mut chain = vec![p.name.as_str()];
        while let Some(parent) = by_name[chain[chain.len() - 1]].parent.as_deref() {
            chain.push(parent);
        }
        for name in chain.into_iter().rev() {
            if !order.contains(&name) {
                order.push(name);
            }
        }
    }
    Ok(order
        .into_iter()
        .map(|name| {
            let p = by_name[name];
            (p.clone(), written(p))
        })
        .collect())
}
