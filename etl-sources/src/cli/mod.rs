//! The two commands, `launches` ([`Args`], [`run`]) and `etl run`
//! ([`etl`]), here in the library so that tests can drive a run on tokio's
//! paused clock. Both run one job: the same output, cursor, progress
//! bar, summary, metrics file and exit codes for any [`Source`]. The
//! binaries parse the arguments, set up logging ([`init_logging`]) and the
//! metrics recorder ([`install_recorder`]), and call a `run`.

use clap::ValueEnum;
use etl_core::EtlError;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::future::Future;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pipeline::output::{self, Options, Output};
use crate::pipeline::Summary;
use crate::{progress, Source};

pub mod etl;
mod launches;

pub use launches::{run, Args};

/// How the log lines on stderr are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One line an event, for a person; a progress bar on a terminal.
    #[default]
    Text,
    /// One JSON object a line: timestamp, level, target, message and the
    /// event's fields. Never a progress bar.
    Json,
}

/// The flags `launches` and `etl run` share, meaning the same in both.
#[derive(Debug, clap::Args)]
pub struct RunFlags {
    /// The longest server-requested wait (429 Retry-After) to sit out, e.g.
    /// 10m; a longer one ends the run with an error naming the wait
    /// [default: every wait is honoured].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_retry_after: Option<Duration>,

    /// Stop after this many pages.
    #[arg(long)]
    pub max_pages: Option<u32>,

    /// Timeout of one request, in seconds (0: none).
    #[arg(long, default_value_t = 30)]
    pub timeout_secs: u64,

    /// At the end of the run (whatever its exit status), write the run's
    /// metrics to this file in the Prometheus text format, for the
    /// node_exporter textfile collector; replaced atomically. A path that
    /// cannot be written is a usage error (exit 2) before any request.
    #[arg(long)]
    pub metrics_file: Option<PathBuf>,

    /// How stderr's log lines are written: `text` for a person, `json` (one
    /// JSON object a line, the run's summary included) for a log pipeline.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl RunFlags {
    /// The timeout of one request (`None` for `--timeout-secs 0`).
    pub fn timeout(&self) -> Option<Duration> {
        (self.timeout_secs > 0).then(|| Duration::from_secs(self.timeout_secs))
    }
}

/// The run completed: exit 0.
pub const EXIT_OK: u8 = 0;
/// The run failed; the rows of the pages loaded before stay written.
pub const EXIT_FAILED: u8 = 1;
/// A usage error, an invalid pipeline file or a metrics file that cannot
/// be written: nothing was requested.
pub const EXIT_USAGE: u8 = 2;
/// The run completed but rejected at least one entry: cron and CI notice.
pub const EXIT_REJECTED: u8 = 3;

/// How the first line shows the cursor of an incremental run over an empty
/// output.
const NO_CURSOR: &str = "none (empty output: reading everything)";

/// Sets up the log on stderr: text (printed above a progress bar, if one
/// is drawn) or one JSON object a line.
pub fn init_logging(format: LogFormat) {
    match format {
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
                // The resource a line is of, where a file's run many.
                .with_current_span(true)
                .with_span_list(false)
                .init();
        }
    }
}

/// The Prometheus recorder, for the whole process (every runtime thread),
/// with every metric's help text.
pub fn install_recorder() -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(crate::metrics::RATE_LIMIT_WAIT.to_string()),
            crate::metrics::RATE_LIMIT_WAIT_BUCKETS,
        )
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    crate::metrics::describe();
    Ok(handle)
}

/// Reports a run's failure as the log format says: a line on stderr, or a
/// JSON log line carrying the exit code.
pub fn report_error(format: LogFormat, code: u8, message: &str) {
    match format {
        LogFormat::Text => eprintln!("error: {message}"),
        LogFormat::Json => tracing::error!(exit_code = code, "{message}"),
    }
}

/// How a job ended: its exit status, and the summary line it has for
/// stdout (none when it failed; the failure is reported on stderr).
#[derive(Debug)]
pub(crate) struct Ended {
    pub code: u8,
    pub summary: Option<String>,
}

impl Ended {
    /// The summary line printed; the exit status.
    pub fn print(self) -> u8 {
        if let Some(line) = self.summary {
            println!("{line}");
        }
        self.code
    }
}

/// One run of a command, whatever its source: where it writes and how.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    /// `--out`: a JSONL path or a PostgreSQL URL.
    pub out: String,
    pub pg_table: String,
    pub rejects: Option<PathBuf>,
    pub incremental: bool,
    pub max_pages: Option<u32>,
    pub metrics_file: Option<PathBuf>,
    pub log_format: LogFormat,
    /// What the summary calls the rows read ("launches", "records").
    pub noun: &'static str,
    /// The resource the summary line names, when a file holds many.
    pub resource: Option<String>,
}

impl Job {
    /// The whole run: the metrics file checked (exit 2 before any request),
    /// the source made, the output opened, the load, the summary line (for
    /// the caller to print, so that runs side by side print theirs in
    /// order), a failure reported (stderr), the metrics file written.
    /// `source` makes the source and anything that must live as long as
    /// the run (the offline server).
    pub async fn execute<S: Source, G>(
        &self,
        metrics: Option<&PrometheusHandle>,
        source: impl Future<Output = Result<(S, G), String>>,
    ) -> Ended {
        if let Some(path) = &self.metrics_file {
            if let Err(e) = crate::metrics::check_writable(path) {
                report_error(
                    self.log_format,
                    EXIT_USAGE,
                    &format!(
                        "--metrics-file {}: cannot be written ({e}); nothing was requested",
                        path.display()
                    ),
                );
                return Ended {
                    code: EXIT_USAGE,
                    summary: None,
                };
            }
        }
        let started = Instant::now();
        let (code, line) = match self.load(source).await {
            Ok((summary, line)) => (completed(&summary), Some(line)),
            Err((code, message)) => {
                report_error(self.log_format, code, &message);
                (code, None)
            }
        };
        if let (Some(path), Some(handle)) = (&self.metrics_file, metrics) {
            crate::metrics::run_finished(code != EXIT_FAILED, started.elapsed());
            if let Err(e) = crate::metrics::write_atomically(path, &handle.render()) {
                // The run's own outcome stands; the missing file says the rest.
                tracing::error!(path = %path.display(), error = %e, "cannot write the metrics file");
            }
        }
        Ended {
            code,
            summary: line,
        }
    }

    /// The run, or its exit status and error: an output that cannot be
    /// opened as given (a path that is a file, a table of other columns,
    /// missing credentials) is a usage error, exit 2, before any request.
    async fn load<S: Source, G>(
        &self,
        source: impl Future<Output = Result<(S, G), String>>,
    ) -> Result<(Summary, String), (u8, String)> {
        let failed = |e: String| (EXIT_FAILED, e);
        // The output first: an incremental run's cursor is what it holds.
        let options = Options {
            table: &self.pg_table,
            rejects: self.rejects.as_deref(),
        };
        let output = output::open::<S::Row>(&self.out, &options)
            .await
            .map_err(|e| match e {
                EtlError::InvalidInput(_) => (
                    EXIT_USAGE,
                    format!("--out {}: {e}; nothing was requested", self.out),
                ),
                e => (EXIT_FAILED, e.to_string()),
            })?;
        let (mut source, _guard) = source.await.map_err(failed)?;
        let since = if self.incremental {
            let since = output
                .cursor(&|line| source.stored_updated_at(line))
                .await
                .map_err(|e| failed(e.to_string()))?;
            source
                .read_since(since.as_deref())
                .map_err(|e| failed(e.to_string()))?;
            // A child resource: each parent's chain from its own cursor,
            // where the output keeps them by parent (a table).
            if let Some(cursors) = source.parent_cursors() {
                for (parent, newest) in output
                    .cursors_by_parent()
                    .await
                    .map_err(|e| failed(e.to_string()))?
                {
                    let held = cursors.entry(parent).or_default();
                    if crate::cursor::is_newer(&newest, held) {
                        *held = newest;
                    }
                }
            }
            since
        } else {
            None
        };
        output::announce(
            &*output,
            self.incremental
                .then(|| since.as_deref().unwrap_or(NO_CURSOR)),
        );
        // A bar only for a person at a terminal: never among JSON lines.
        let bar = match self.log_format {
            LogFormat::Text => progress::start(),
            LogFormat::Json => None,
        };
        let result = output::run(&*output, &mut source, self.max_pages, |p| {
            if let Some(bar) = bar {
                progress::update(bar, p);
            }
        })
        .await;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        let summary = result.map_err(|e| failed(e.to_string()))?;
        let line = self
            .summarise(&*output, &summary, since.as_deref())
            .map_err(failed)?;
        Ok((summary, line))
    }

    /// The summary line for stdout, and among JSON log lines its figures
    /// as fields (logged now).
    fn summarise<T: etl_core::Record>(
        &self,
        output: &dyn Output<T>,
        summary: &Summary,
        since: Option<&str>,
    ) -> Result<String, String> {
        let place = output.describe().map_err(|e| e.to_string())?;
        let in_all = place
            .held
            .map_or(String::new(), |n| format!(" ({n} rows in all)"));
        let rejected = if summary.rejected == 0 {
            String::new()
        } else {
            format!(
                "; {} entries rejected ({} new) into {}",
                summary.rejected, summary.new_rejects, place.rejects
            )
        };
        let incremental = match (self.incremental, since) {
            (false, _) => String::new(),
            (true, Some(cursor)) => format!("; incremental since {cursor}"),
            (true, None) => "; incremental from the start".to_string(),
        };
        let resource = self
            .resource
            .as_ref()
            .map_or(String::new(), |name| format!("{name}: "));
        let line = format!(
            "done: {resource}{} pages, {} {} read, {} new rows written to {}{in_all}{rejected}{incremental}",
            summary.pages, summary.rows, self.noun, summary.new_rows, place.rows
        );
        if self.log_format == LogFormat::Json {
            let exit_code = completed(summary);
            tracing::info!(
                resource = self.resource.as_deref(),
                pages = summary.pages,
                read = summary.rows,
                new = summary.new_rows,
                rejected = summary.rejected,
                new_rejects = summary.new_rejects,
                rows = place.held,
                output = %place.rows,
                since,
                exit_code,
                "done"
            );
        }
        Ok(line)
    }
}

/// The exit status of a run that completed: 3 when it rejected an entry.
fn completed(summary: &Summary) -> u8 {
    if summary.rejected > 0 {
        EXIT_REJECTED
    } else {
        EXIT_OK
    }
}
