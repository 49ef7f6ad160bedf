//! What etl-core counts (feature `metrics`, off by default), through the
//! [`metrics`](https://docs.rs/metrics) facade: the library records, the
//! application chooses where it goes by installing a recorder (a Prometheus
//! exporter, StatsD, a test's debugging recorder). With no recorder
//! installed, recording is a few nanoseconds and nothing is kept; without
//! the feature, nothing of this is compiled in.
//!
//! | metric | type | labels | counts |
//! |---|---|---|---|
//! | `etl_retry_attempts_total` | counter | `op` | every attempt of a retried call, the first included |
//! | `etl_retries_total` | counter | `op`, `reason` | every wait before another attempt; `reason` is `rate_limited` (the server's Retry-After chose the wait), `timed_out` (the attempt was cut by `attempt_timeout` or the deadline) or `transient` (any other transient failure) |
//! | `etl_retry_sleep_seconds` | histogram | `op` | each wait between attempts, in seconds: its `_sum` is the time slept, its `_count` the waits |
//! | `etl_retry_calls_total` | counter | `op`, `stop` | every retried call, by how it ended: [`Stop::as_str`](crate::retry::Stop::as_str), `succeeded`, `permanent`, `exhausted`, `deadline`, `retry_after_ceiling`, `budget` or `circuit_open` |
//! | `etl_circuit_open` | gauge | `breaker` | 1 while a [`CircuitBreaker`](crate::retry::CircuitBreaker) is open, 0 once it closes again ([`CircuitBreaker::named`](crate::retry::CircuitBreaker::named) gives the label) |
//! | `etl_sink_rows_total` | counter | `outcome` | rows handed to an `IdempotentSink`: `new` (written by that load), `seen` (already written, or a copy of a row earlier in the same batch) or `refused` (the sink refused it, a frozen table say, and kept it as a reject) |
//! | `etl_rejects_total` | counter | | entries kept as rejects (`JsonlRejects`, and `PostgresSink` with etl-postgres's `metrics` feature): each entry once, as it is first kept |
//!
//! `op` names the call: the fn's name for `#[retry]` (`fetch_page`; the
//! method's name for a method, since an attribute on a method cannot see
//! its type), [`Retry::name`](crate::retry::Retry::name) for a loop named
//! by hand, and `with_retry` otherwise. The retry and give-up `tracing`
//! events carry the same `op` field, with or without this feature.
//!
//! Installing a recorder (here `metrics-util`'s debugging recorder, as a
//! test would; an application installs an exporter's once, at start):
//!
//! ```
//! use etl_core::{with_retry, EtlError, RetryPolicy};
//! use metrics_util::debugging::{DebugValue, DebuggingRecorder};
//! use metrics_util::MetricKind;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let recorder = DebuggingRecorder::new();
//! let snapshotter = recorder.snapshotter();
//! // A local recorder, for this thread; `metrics::set_global_recorder` (or
//! // an exporter's `install`) for a whole application.
//! let _guard = metrics::set_default_local_recorder(&recorder);
//!
//! let mut calls = 0;
//! let answer = with_retry(RetryPolicy::default(), || {
//!     calls += 1;
//!     let outcome = if calls == 1 { Err(EtlError::Network("reset".into())) } else { Ok(42) };
//!     async move { outcome }
//! })
//! .await;
//! assert_eq!(answer.unwrap(), 42);
//!
//! let attempts = snapshotter.snapshot().into_vec().into_iter().find(|(key, ..)| {
//!     key.kind() == MetricKind::Counter && key.key().name() == "etl_retry_attempts_total"
//! });
//! let (key, _, _, value) = attempts.unwrap();
//! assert_eq!(key.key().labels().next().map(|l| (l.key(), l.value())), Some(("op", "with_retry")));
//! assert_eq!(value, DebugValue::Counter(2));
//! # }
//! ```
//!
//! [`describe`] registers each metric's help text and unit with the
//! installed recorder, for exporters that show them (Prometheus' `# HELP`).

use metrics::Unit;

/// Every attempt of a retried call.
pub const RETRY_ATTEMPTS: &str = "etl_retry_attempts_total";
/// Every wait before another attempt, by reason.
pub const RETRIES: &str = "etl_retries_total";
/// Seconds slept between attempts.
pub const RETRY_SLEEP_SECONDS: &str = "etl_retry_sleep_seconds";
/// Every retried call, by how it ended.
pub const RETRY_CALLS: &str = "etl_retry_calls_total";
/// Whether a circuit breaker is open.
pub const CIRCUIT_OPEN: &str = "etl_circuit_open";
/// Rows handed to an `IdempotentSink`, new or seen.
pub const SINK_ROWS: &str = "etl_sink_rows_total";
/// Entries kept as rejects.
pub const REJECTS: &str = "etl_rejects_total";

/// Registers the help text and unit of every metric above with the
/// installed recorder (call it once, after installing one).
pub fn describe() {
    metrics::describe_counter!(
        RETRY_ATTEMPTS,
        "Attempts of retried calls, the first included."
    );
    metrics::describe_counter!(
        RETRIES,
        "Waits before another attempt, by reason: rate_limited, timed_out, transient."
    );
    metrics::describe_histogram!(
        RETRY_SLEEP_SECONDS,
        Unit::Seconds,
        "Each wait between attempts, in seconds (_sum: the time slept)."
    );
    metrics::describe_gauge!(
        CIRCUIT_OPEN,
        "1 while the circuit breaker is open, 0 when closed."
    );
    metrics::describe_counter!(RETRY_CALLS, "Retried calls, by how they ended (stop).");
    metrics::describe_counter!(
        SINK_ROWS,
        "Rows handed to an IdempotentSink: new (written) or seen (already written)."
    );
    metrics::describe_counter!(REJECTS, "Entries kept as rejects.");
}

/// Rows an `IdempotentSink` load was handed: `new` written by it, `seen`
/// already written (or copies within the batch), `refused` by the sink
/// (kept as rejects).
///
/// `new` and `seen` are recorded, zero too: "0 new" is an answer an alert
/// can read, where a series that never appeared is not.
pub fn sink_rows(new: u64, seen: u64, refused: u64) {
    metrics::counter!(SINK_ROWS, "outcome" => "new").increment(new);
    metrics::counter!(SINK_ROWS, "outcome" => "seen").increment(seen);
    if refused > 0 {
        metrics::counter!(SINK_ROWS, "outcome" => "refused").increment(refused);
    }
}

/// Entries a rejects sink kept for the first time (for sinks outside
/// etl-core, such as `etl_postgres::PostgresSink`).
pub fn rejects_kept(entries: u64) {
    if entries > 0 {
        metrics::counter!(REJECTS).increment(entries);
    }
}
