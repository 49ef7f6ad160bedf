//! [`Pipeline`]: a whole pipeline file (every resource, every top-level
//! key), and its run: parents and children side by side, one throttle,
//! each resource into its table of the output.

use etl_core::content::write::Write;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use tracing::Instrument;

use super::output::{Destination, Output, Table, Target};
use super::report::{Failure, PipelineError, ResourceReport, RunReport};
use super::{resource, RunOptions};
use crate::rest::Tapped;
use crate::rest::{feed, ChildSource, ConfigError, Feed, Feeder, JsonRecord, Resource, RestSource};
use crate::throttle::{RateLimit, Throttle};
use crate::{Source, SourceOptions};

/// A pipeline file, read and checked: its resources in file order, and
/// the keys of the whole run (`concurrency`, `rate_limit`). Run it with
/// [`Pipeline::run`]: the library call behind `etl run`.
///
/// ```no_run
/// use etl_sources::{Output, Pipeline, RunOptions};
/// use std::path::Path;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pipeline = Pipeline::load(Path::new("github.toml"))?;
/// let output = Output::parse("postgres://127.0.0.1/test")?;
/// let report = pipeline.run(&output, RunOptions::default().incremental(true)).await?;
/// for r in report.resources() {
///     println!("{}: {} pages, {} new, {} seen, {} rejects", r.name(), r.pages(), r.new(), r.seen(), r.rejects());
/// }
/// std::process::exit(report.exit_code());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Pipeline {
    resources: Vec<Resource>,
    /// The file's name in messages.
    origin: String,
}

impl Pipeline {
    /// Reads and checks the pipeline file at `path`, with secrets from the
    /// process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Ok(Pipeline {
            resources: Resource::load_every(path)?,
            origin: path.display().to_string(),
        })
    }

    /// Parses and checks the text of a pipeline file, with secrets from
    /// the process environment.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::parse_with(text, "the pipeline file", |name| std::env::var(name).ok())
    }

    /// Parses and checks `text` (named `origin` in errors), reading
    /// secrets with `env`: each `[[resource]]` entry with the top level's
    /// keys as its defaults, or, with none, the top level as the one
    /// resource.
    ///
    /// ```
    /// use etl_sources::Pipeline;
    ///
    /// let file = r#"
    /// name = "shop"
    /// url = "http://127.0.0.1:8080/"
    /// records = "/data"
    /// id = "/id"
    /// [[resource]]
    /// name = "orders"
    /// path = "orders"
    /// [[resource]]
    /// name = "lines"
    /// parent = "orders"
    /// path = "orders/{order}/lines"
    /// from_parent = { order = "/id" }
    /// "#;
    /// let pipeline = Pipeline::parse_with(file, "shop.toml", |_| None)?;
    /// let names: Vec<&str> = pipeline.resources().iter().map(|r| r.name.as_str()).collect();
    /// assert_eq!(names, ["orders", "lines"]);
    /// # Ok::<(), etl_sources::rest::ConfigError>(())
    /// ```
    pub fn parse_with(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Ok(Pipeline {
            resources: Resource::parse_every(text, origin, env)?,
            origin: origin.to_owned(),
        })
    }

    /// The file's resources, in file order.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// The file's resources, in file order, taken out.
    pub fn into_resources(self) -> Vec<Resource> {
        self.resources
    }

    /// The run's one rate limit (`rate_limit`), if the file sets one.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        self.resources.first().and_then(|r| r.rate_limit)
    }

    /// Whether the file holds more than one resource: each then writes to
    /// a place of its own in the output (a file in a directory, a table
    /// each).
    pub fn is_many(&self) -> bool {
        self.resources.len() > 1
    }

    /// Runs the file into `output`: what `etl run` does. Every table is
    /// opened before any request; then each family (a resource and its
    /// descendants) in file order, the resources of a family side by
    /// side, a parent's page written once its children's chains are. A
    /// failure ends the run once the family it stopped has ended; the
    /// rows of every page loaded before stay written.
    pub async fn run(
        &self,
        output: &Output,
        options: RunOptions,
    ) -> Result<RunReport, PipelineError> {
        self.run_into(output, options).await
    }

    /// [`Pipeline::run`] into an output of your own: each written
    /// resource's table opened by `destination`.
    pub async fn run_into(
        &self,
        destination: &dyn Destination<JsonRecord>,
        options: RunOptions,
    ) -> Result<RunReport, PipelineError> {
        let run = self.selected(&options.resources)?;
        // A replace needs every page: what a run left unread would leave
        // the table.
        let replaced = run
            .iter()
            .find(|(resource, written)| *written && resource.write == Write::Replace);
        if let Some((resource, _)) = replaced {
            let flag = match (options.max_pages, options.incremental) {
                (Some(_), _) => Some("--max-pages"),
                (None, true) => Some("--incremental"),
                (None, false) => None,
            };
            if let Some(flag) = flag {
                return Err(PipelineError::refused(format!(
                    "{flag}: resource {} has `write = \"replace\"`, which needs every page (the table becomes what the run read); nothing was requested",
                    resource.name
                )));
            }
        }
        if options.incremental {
            for (resource, written) in &run {
                if *written {
                    resource
                        .check_incremental()
                        .map_err(|e| PipelineError::refused(e.to_string()))?;
                }
            }
        }
        let tables = self.open_tables(&run, destination, options.timeout).await?;
        let sources = SourceOptions {
            timeout: options.timeout,
            max_retry_after: options.max_retry_after,
            throttle: Arc::new(Throttle::new(self.rate_limit())),
        };
        // What each resource did, by its place in the run.
        let mut ended: Vec<(usize, ResourceReport)> = Vec::new();
        let report = |mut ended: Vec<(usize, ResourceReport)>| {
            ended.sort_by_key(|(at, _)| *at);
            RunReport {
                entries: ended.into_iter().map(|(_, entry)| entry).collect(),
            }
        };
        for family in families(&run) {
            let mut failures = Vec::new();
            let runs = match self
                .run_family(&family, &run, &tables, &sources, &options)
                .await
            {
                Ok(runs) => runs,
                Err((at, message)) => {
                    let failure = Failure::of(&run[at].0.name, message);
                    return Err(PipelineError::failed(vec![failure], report(ended)));
                }
            };
            for (&at, outcome) in family.iter().zip(runs) {
                match outcome {
                    Ok(entry) => ended.push((at, entry)),
                    Err(message) => failures.push(Failure::of(&run[at].0.name, message)),
                }
            }
            if !failures.is_empty() {
                return Err(PipelineError::failed(failures, report(ended)));
            }
        }
        Ok(report(ended))
    }

    /// The table of each written resource of `run`, opened before any
    /// request (`None` for a resource read only), each bounding its
    /// operations by the run's `timeout`. One that cannot be opened as
    /// given refuses the run.
    async fn open_tables(
        &self,
        run: &[(&Resource, bool)],
        destination: &dyn Destination<JsonRecord>,
        timeout: Option<std::time::Duration>,
    ) -> Result<Vec<Option<Box<dyn Table<JsonRecord>>>>, PipelineError> {
        let mut tables = Vec::with_capacity(run.len());
        for (resource, written) in run {
            if !written {
                tables.push(None);
                continue;
            }
            let target = Target::new(&resource.name, self.is_many())
                .shaped(&resource.shape)
                .writing(&resource.write)
                .within(timeout);
            let table = destination.open(target).await.map_err(|e| match e {
                etl_core::EtlError::InvalidInput(_) => {
                    PipelineError::refused(format!("{e}; nothing was requested"))
                }
                e => PipelineError::failed(
                    vec![Failure::of(&resource.name, e.to_string())],
                    RunReport::default(),
                ),
            })?;
            tables.push(Some(table));
        }
        Ok(tables)
    }

    /// The resources a run reads, parents before their children, each
    /// with whether it is written: the ones `wanted` names (every one with
    /// `load` not false when it names none), and their ancestors, read to
    /// feed them (written only if named too). A name the file lacks
    /// refuses the run, naming the file's.
    fn selected(&self, wanted: &[String]) -> Result<Vec<(&Resource, bool)>, PipelineError> {
        let all = &self.resources;
        if let Some(unknown) = wanted.iter().find(|w| !all.iter().any(|p| &p.name == *w)) {
            let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
            return Err(PipelineError::refused(format!(
                "--resource {unknown}: {} has no such resource (it has {})",
                self.origin,
                names.join(", ")
            )));
        }
        let written = |p: &Resource| {
            if wanted.is_empty() {
                p.load
            } else {
                wanted.contains(&p.name)
            }
        };
        let by_name: HashMap<&str, &Resource> = all.iter().map(|p| (p.name.as_str(), p)).collect();
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
            .map(|name| (by_name[name], written(by_name[name])))
            .collect())
    }

    /// One family's resources side by side, each fed by its parent; what
    /// each did, or what stopped it, in the family's order. Every source is
    /// made before any starts: one that cannot be made (`Err`: its place in
    /// `run` and why) stops the family before any request.
    async fn run_family(
        &self,
        family: &[usize],
        run: &[(&Resource, bool)],
        tables: &[Option<Box<dyn Table<JsonRecord>>>],
        sources: &SourceOptions,
        options: &RunOptions,
    ) -> Result<Vec<Result<ResourceReport, String>>, (usize, String)> {
        let (mut feeders, feeds) = wire_family(family, run);
        let mut runs: Vec<BoxFuture<'_, Result<ResourceReport, String>>> = Vec::new();
        for (&at, fed) in family.iter().zip(feeds) {
            let resource = run[at].0;
            let name = resource.name.as_str();
            let feeders = std::mem::take(&mut feeders[runs.len()]);
            let table = tables[at].as_deref();
            // With many resources in the file, each log line names its
            // own (a span, in the text and the JSON format alike).
            let span = if self.is_many() {
                tracing::info_span!("resource", resource = name)
            } else {
                tracing::Span::none()
            };
            runs.push(match fed {
                Some(fed) => {
                    let source = ChildSource::new(resource.clone(), sources.clone(), fed);
                    one(
                        name,
                        table,
                        Tapped::new(source, name, feeders),
                        options,
                        span,
                    )
                }
                None => {
                    let source = RestSource::new(resource.clone(), sources.clone())
                        .map_err(|e| (at, e.to_string()))?;
                    one(
                        name,
                        table,
                        Tapped::new(source, name, feeders),
                        options,
                        span,
                    )
                }
            });
        }
        Ok(futures_util::future::join_all(runs).await)
    }
}

/// One resource's run, boxed (its source's type is its own), logging in
/// `span`: into `table`, or read only when it has none.
fn one<'a, S: Source<Row = JsonRecord> + 'a>(
    name: &'a str,
    table: Option<&'a dyn Table<JsonRecord>>,
    source: S,
    options: &'a RunOptions,
    span: tracing::Span,
) -> BoxFuture<'a, Result<ResourceReport, String>> {
    async move {
        match table {
            Some(table) => resource::load(name, table, source, options).await,
            None => resource::read_only(name, source, options).await,
        }
    }
    .instrument(span)
    .boxed()
}

/// The feeds of a family: for each resource (by its place in `family`),
/// the feeders its page hands its children's records through, and the feed
/// it reads its parents from (`None` for the family's root).
fn wire_family(
    family: &[usize],
    run: &[(&Resource, bool)],
) -> (Vec<Vec<Feeder>>, Vec<Option<Feed>>) {
    let mut feeders: Vec<Vec<Feeder>> = family.iter().map(|_| Vec::new()).collect();
    let mut feeds: Vec<Option<Feed>> = family.iter().map(|_| None).collect();
    for (at, &child) in family.iter().enumerate() {
        let child = run[child].0;
        if let Some(parent) = &child.parent {
            let (feeder, fed) = feed(&child.name, child.from_parent.clone());
            if let Some(from) = family.iter().position(|&p| &run[p].0.name == parent) {
                feeders[from].push(feeder);
            }
            feeds[at] = Some(fed);
        }
    }
    (feeders, feeds)
}

/// The run's resources by family, each family in the run's order (parents
/// before children), as indices into `run`: a resource with no parent in
/// the run, then every resource descended from it.
fn families(run: &[(&Resource, bool)]) -> Vec<Vec<usize>> {
    let mut families: Vec<Vec<usize>> = Vec::new();
    for (at, (resource, _)) in run.iter().enumerate() {
        let family = resource.parent.as_deref().and_then(|parent| {
            families
                .iter()
                .position(|f| f.iter().any(|&p| run[p].0.name == parent))
        });
        match family {
            Some(family) => families[family].push(at),
            None => families.push(vec![at]),
        }
    }
    families
}
