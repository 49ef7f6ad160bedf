//! The retry loops' metrics, recorded through the `metrics` facade: the
//! keys of each op, built once, and what each hook of [`super`] records.
//! Their names and help texts are [`crate::metrics`]'s; nothing there
//! calls back here.

use metrics::{Key, Label, Level, Metadata};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Op, OpRef, Reason};
use crate::metrics::{CIRCUIT_OPEN, RETRIES, RETRY_ATTEMPTS, RETRY_CALLS, RETRY_SLEEP_SECONDS};
use crate::retry::Stop;

/// Where the library's metrics come from in the recorder's eyes.
static METADATA: Metadata<'static> = Metadata::new("etl_core", Level::INFO, Some("etl_core"));

/// Every stop, in the order of `OpKeys::calls`.
const STOPS: [Stop; 7] = [
    Stop::Succeeded,
    Stop::Permanent,
    Stop::Exhausted,
    Stop::Deadline,
    Stop::RetryAfterCeiling,
    Stop::Budget,
    Stop::CircuitOpen,
];

fn stop_index(stop: Stop) -> usize {
    match stop {
        Stop::Succeeded => 0,
        Stop::Permanent => 1,
        Stop::Exhausted => 2,
        Stop::Deadline => 3,
        Stop::RetryAfterCeiling => 4,
        Stop::Budget => 5,
        Stop::CircuitOpen => 6,
    }
}

fn reason_index(reason: Reason) -> usize {
    match reason {
        Reason::RateLimited => 0,
        Reason::TimedOut => 1,
        Reason::Transient => 2,
    }
}

/// The keys of one op's metrics, built once: a key with a label of its own
/// allocates, which the success path must not do on every call.
pub(crate) struct OpKeys {
    attempts: Key,
    retries: [Key; 3],
    sleep: Key,
    calls: [Key; STOPS.len()],
}

impl OpKeys {
    pub(crate) fn new(op: &'static str) -> Self {
        let with = |name: &'static str, extra: Option<(&'static str, &'static str)>| {
            let mut labels = vec![Label::from_static_parts("op", op)];
            labels.extend(extra.map(|(k, v)| Label::from_static_parts(k, v)));
            Key::from_parts(name, labels)
        };
        OpKeys {
            attempts: with(RETRY_ATTEMPTS, None),
            retries: ["rate_limited", "timed_out", "transient"]
                .map(|reason| with(RETRIES, Some(("reason", reason)))),
            sleep: with(RETRY_SLEEP_SECONDS, None),
            calls: STOPS.map(|stop| with(RETRY_CALLS, Some(("stop", stop.as_str())))),
        }
    }
}

/// The op for a name given at run time: one per distinct name, kept for the
/// life of the process (names are `&'static str`, so there are only as many
/// as the program has).
pub(crate) fn interned(name: &'static str) -> &'static Op {
    static NAMED: Mutex<Option<HashMap<&'static str, &'static Op>>> = Mutex::new(None);
    let mut named = NAMED.lock().unwrap_or_else(PoisonError::into_inner);
    named
        .get_or_insert_with(HashMap::new)
        .entry(name)
        .or_insert_with(|| Op::leaked(name))
}

/// A call ended with its last attempt: one attempt, one call. Out of line:
/// the success path carries one call to it.
#[inline(never)]
pub(crate) fn call_ended(op: OpRef, stop: Stop) {
    let keys = op.keys();
    // One look for the recorder, two counters: the facade's least for two
    // metrics (BENCHMARKS.md section 11).
    metrics::with_recorder(|recorder| {
        recorder
            .register_counter(&keys.attempts, &METADATA)
            .increment(1);
        recorder
            .register_counter(&keys.calls[stop_index(stop)], &METADATA)
            .increment(1);
    });
}

/// An attempt failed and the loop waits: one attempt, one retry, the wait.
pub(crate) fn retrying(op: OpRef, reason: Reason, delay: Duration) {
    let keys = op.keys();
    metrics::with_recorder(|recorder| {
        recorder
            .register_counter(&keys.attempts, &METADATA)
            .increment(1);
        recorder
            .register_counter(&keys.retries[reason_index(reason)], &METADATA)
            .increment(1);
        recorder
            .register_histogram(&keys.sleep, &METADATA)
            .record(delay.as_secs_f64());
    });
}

/// A circuit breaker opened (`true`) or closed: cold, a few times a run.
pub(crate) fn circuit_open(breaker: &'static str, open: bool) {
    metrics::gauge!(CIRCUIT_OPEN, "breaker" => breaker).set(if open { 1.0 } else { 0.0 });
}
