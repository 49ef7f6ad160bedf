//! The two commands, `launches` ([`Args`], [`run`]) and `etl run`
//! ([`etl`]), here in the library so that tests can drive a run on tokio's
//! paused clock. Both run one job: the same output, cursor, progress
//! bar, summary, metrics file and exit codes for any [`crate::Source`]. The
//! binaries cap the C allocator's arenas ([`cap_malloc_arenas`]), parse the
//! arguments, set up logging ([`init_logging`]) and the metrics recorder
//! ([`install_recorder`]), and call a `run`.

use clap::ValueEnum;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::pipeline::{ResourceReport, RunOptions};
use crate::progress;

mod allocator;
pub mod etl;
mod launches;
pub mod schema;

pub use allocator::cap_malloc_arenas;
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

/// The run completed: exit 0 ([`crate::pipeline::EXIT_OK`]).
pub const EXIT_OK: u8 = crate::pipeline::EXIT_OK as u8;
/// The run failed; the rows of the pages loaded before stay written.
pub const EXIT_FAILED: u8 = crate::pipeline::EXIT_FAILED as u8;
/// A usage error, an invalid pipeline file or a metrics file that cannot
/// be written: nothing was requested.
pub const EXIT_USAGE: u8 = crate::pipeline::EXIT_USAGE as u8;
/// The run completed but rejected at least one entry: cron and CI notice.
pub const EXIT_REJECTED: u8 = crate::pipeline::EXIT_REJECTED as u8;

/// Sets up the log on stderr: text (printed above a progress bar, if one
/// is drawn) or one JSON object a line.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // Delta's kernel logs each snapshot it builds at INFO: a dozen lines a
    // table a run, of no use to the person running it.
    let quiet = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::INFO)
        .with_target("buoyant_kernel", tracing::Level::WARN);
    match format {
        LogFormat::Text => {
            tracing_subscriber::fmt()
                .with_writer(progress::Stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false)
                .finish()
                .with(quiet)
                .init();
        }
        LogFormat::Json => {
            tracing_subscriber::fmt()
                .json()
                .with_writer(std::io::stderr)
                // The resource a line is of, where a file's run many.
                .with_current_span(true)
                .with_span_list(false)
                .finish()
                .with(quiet)
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

/// Checks before any request that the metrics file can be written:
/// `Err` is the exit status of a run refused for it (reported).
pub(crate) fn check_metrics_file(flags: &RunFlags) -> Result<(), u8> {
    let Some(path) = &flags.metrics_file else {
        return Ok(());
    };
    crate::metrics::check_writable(path).map_err(|e| {
        report_error(
            flags.log_format,
            EXIT_USAGE,
            &format!(
                "--metrics-file {}: cannot be written ({e}); nothing was requested",
                path.display()
            ),
        );
        EXIT_USAGE
    })
}

/// Writes the run's metrics to the metrics file, if one is asked for: the
/// run's outcome (`code`) and its time since `started` with the rest.
pub(crate) fn write_metrics(
    flags: &RunFlags,
    metrics: Option<&PrometheusHandle>,
    code: u8,
    started: Instant,
) {
    if let (Some(path), Some(handle)) = (&flags.metrics_file, metrics) {
        crate::metrics::run_finished(code != EXIT_FAILED, started.elapsed());
        if let Err(e) = crate::metrics::write_atomically(path, &handle.render()) {
            // The run's own outcome stands; the missing file says the rest.
            tracing::error!(path = %path.display(), error = %e, "cannot write the metrics file");
        }
    }
}

/// A resource's summary line for stdout (`named`: with its name, as when
/// a file holds many), calling the rows read `noun`; among JSON log lines
/// its figures are logged as fields too ([`log_done`]).
pub(crate) fn summary_line(
    entry: &ResourceReport,
    noun: &str,
    named: bool,
    format: LogFormat,
) -> String {
    if format == LogFormat::Json {
        log_done(entry, named);
    }
    let name = entry.name();
    let Some(place) = entry.place() else {
        return format!(
            "done: {name}: {} pages, {} records read, none written (load = false){}",
            entry.pages(),
            entry.read(),
            if entry.rejects() > 0 {
                format!(
                    "; {} entries did not read (not kept: nothing of this resource is written)",
                    entry.rejects()
                )
            } else {
                String::new()
            }
        );
    };
    let in_all = place
        .held
        .map_or(String::new(), |n| format!(" ({n} rows in all)"));
    let rejected = if entry.rejects() == 0 {
        String::new()
    } else {
        format!(
            "; {} entries rejected ({} new) into {}",
            entry.rejects(),
            entry.new_rejects(),
            place.rejects
        )
    };
    let incremental = match entry.since() {
        None => String::new(),
        Some(Some(cursor)) => format!("; incremental since {cursor}"),
        Some(None) => "; incremental from the start".to_string(),
    };
    let resource = if named {
        format!("{name}: ")
    } else {
        String::new()
    };
    let deleted = match entry.deleted() {
        0 => String::new(),
        n => format!(", {n} deleted"),
    };
    format!(
        "done: {resource}{} pages, {} {noun} read, {} new rows written to {}{deleted}{in_all}{rejected}{incremental}",
        entry.pages(),
        entry.read(),
        entry.new(),
        place.rows
    )
}

/// A written resource's figures as one JSON log line, `done`.
fn log_done(entry: &ResourceReport, named: bool) {
    let Some(place) = entry.place() else {
        return;
    };
    tracing::info!(
        resource = named.then_some(entry.name()),
        pages = entry.pages(),
        read = entry.read(),
        new = entry.new(),
        deleted = entry.deleted(),
        rejected = entry.rejects(),
        new_rejects = entry.new_rejects(),
        rows = place.held,
        output = %place.rows,
        since = entry.since().flatten(),
        exit_code = entry.exit_code(),
        "done"
    );
}

/// The [`RunOptions`] of `flags`, and of `--incremental`.
pub(crate) fn run_options(flags: &RunFlags, incremental: bool) -> RunOptions {
    RunOptions::default()
        .incremental(incremental)
        .max_pages(flags.max_pages)
        .max_retry_after(flags.max_retry_after)
        .timeout(flags.timeout())
        // A bar only for a person at a terminal: never among JSON lines.
        .progress(flags.log_format == LogFormat::Text)
}
