//! What a retry loop tells the world besides its result: `op`, the name of
//! the call, in its `tracing` events; and, with the feature `metrics`, its
//! counters through the `metrics` facade ([`crate::metrics`] lists them).
//!
//! The hooks below are the only places the loops record anything. Without
//! the feature they are empty and inlined away, so the success path is the
//! same code as before the feature existed.

#[cfg(feature = "metrics")]
mod recorded;

#[cfg(feature = "metrics")]
use std::sync::OnceLock;
use std::time::Duration;

use super::Stop;

/// The name of a retried call, held in a `static`: `#[retry]` makes one per
/// fn, so that (with the feature `metrics`) its metric keys are built once
/// per process, not once per call. Not public API.
#[doc(hidden)]
pub struct Op {
    name: &'static str,
    #[cfg(feature = "metrics")]
    keys: OnceLock<recorded::OpKeys>,
}

impl Op {
    /// The op called `name`.
    pub const fn new(name: &'static str) -> Self {
        Op {
            name,
            #[cfg(feature = "metrics")]
            keys: OnceLock::new(),
        }
    }
}

/// `with_retry`'s op, and that of every [`super::Retry`] not named.
pub(crate) static WITH_RETRY: Op = Op::new("with_retry");

/// Which op a loop runs: a static one (`with_retry`, `#[retry]`), or a name
/// given at run time ([`super::Retry::name`]).
#[derive(Clone, Copy)]
pub(crate) enum OpRef {
    Static(&'static Op),
    Named(&'static str),
}

impl OpRef {
    /// The name, as the `op` field and label show it.
    #[inline]
    pub(crate) fn name(self) -> &'static str {
        match self {
            OpRef::Static(op) => op.name,
            OpRef::Named(name) => name,
        }
    }

    /// The op's metric keys: built at its first use. A name given at run
    /// time is looked up among the names seen so far (one short lock).
    #[cfg(feature = "metrics")]
    fn keys(self) -> &'static recorded::OpKeys {
        let op = match self {
            OpRef::Static(op) => op,
            OpRef::Named(name) => recorded::interned(name),
        };
        op.keys.get_or_init(|| recorded::OpKeys::new(op.name))
    }
}

#[cfg(feature = "metrics")]
impl Op {
    /// A leaked op for a name given at run time (see `recorded::interned`).
    pub(crate) fn leaked(name: &'static str) -> &'static Op {
        Box::leak(Box::new(Op::new(name)))
    }
}

/// Why the loop waits before the next attempt (`reason` of
/// `etl_retries_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The server's Retry-After chose the wait.
    RateLimited,
    /// The attempt was cut by a timeout.
    TimedOut,
    /// Any other transient failure: the backoff chose the wait.
    Transient,
}

/// An attempt succeeded: the attempt, and the call (`succeeded`). Inlined
/// into the success path as one call (none without the feature).
#[inline]
pub(crate) fn succeeded(op: OpRef) {
    #[cfg(feature = "metrics")]
    recorded::call_ended(op, Stop::Succeeded);
    #[cfg(not(feature = "metrics"))]
    let _ = op;
}

/// The last attempt failed and the loop stops: the attempt, and the call.
#[cold]
pub(crate) fn stopped(op: OpRef, stop: Stop) {
    #[cfg(feature = "metrics")]
    recorded::call_ended(op, stop);
    #[cfg(not(feature = "metrics"))]
    let _ = (op, stop);
}

/// An attempt failed and the loop waits `delay` before the next: the
/// attempt, the retry, and the wait.
#[cold]
pub(crate) fn retrying(op: OpRef, reason: Reason, delay: Duration) {
    #[cfg(feature = "metrics")]
    recorded::retrying(op, reason, delay);
    #[cfg(not(feature = "metrics"))]
    let _ = (op, reason, delay);
}

/// A circuit breaker named `breaker` opened (`true`) or closed: cold, a
/// few times a run.
#[cold]
pub(crate) fn circuit_changed(breaker: &'static str, open: bool) {
    #[cfg(feature = "metrics")]
    recorded::circuit_open(breaker, open);
    #[cfg(not(feature = "metrics"))]
    let _ = (breaker, open);
}
