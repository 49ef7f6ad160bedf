//! [`CircuitBreaker`]: when a dependency is down, stop spending attempts on
//! it. Shared as a `static` by every call that talks to that dependency.

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// A circuit breaker shared by every call to one dependency (a `static`):
/// after `failures` attempts in a row, across all those calls, fail with a
/// transient error, it **opens**, and an attempt then fails at once with
/// [`CircuitOpen`] instead of running (the retry loop stops there with
/// [`Stop::CircuitOpen`](crate::retry::Stop::CircuitOpen) rather than wait).
/// After `cool_down` one attempt goes through (**half-open**; every other
/// still fails fast): its success closes the breaker, its transient failure
/// opens it for another `cool_down`. A success resets the count; a
/// permanent error neither counts nor resets (the dependency answered), and
/// a half-open attempt that ends so, or is cancelled, lets the next one
/// through.
///
/// Closed, it costs an attempt two atomic loads. The cool-down runs on
/// tokio's clock (`tokio::time::Instant`, the real clock outside a
/// runtime), so tests on a paused clock control it; sync and async callers,
/// and callers on many runtimes, may share one breaker.
///
/// `failures` of 0 behaves as 1: the first transient failure opens it.
///
/// ```
/// use etl_core::retry::{CircuitBreaker, Retry, Stop};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
///
/// static UPSTREAM: CircuitBreaker = CircuitBreaker::new(3, Duration::from_secs(30)).named("upstream");
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let down = || async { Err::<(), _>(EtlError::Network("connection refused".into())) };
/// let policy = RetryPolicy { max_attempts: 10, ..RetryPolicy::default() };
/// let (_, report) = Retry::new(policy).breaker(&UPSTREAM).run_with_report(down).await;
/// assert_eq!(report.attempts, 4, "three failures open it; the fourth attempt fails fast");
/// assert_eq!(report.stop, Stop::CircuitOpen);
/// assert!(UPSTREAM.is_open());
/// # }
/// ```
pub struct CircuitBreaker {
    threshold: u32,
    cool_down: Duration,
    name: &'static str,
    /// Consecutive transient failures.
    failures: AtomicU32,
    /// CLOSED, OPEN or HALF_OPEN: the one word an attempt reads while closed.
    state: AtomicU8,
    /// When it opened (or reopened): read only while it is not closed.
    opened_at: Mutex<Option<Instant>>,
}

const CLOSED: u8 = 0;
const OPEN: u8 = 1;
/// Open, with its one trial attempt under way.
const HALF_OPEN: u8 = 2;

impl CircuitBreaker {
    /// A closed breaker that opens after `failures` transient failures in a
    /// row (0 behaves as 1) and lets one attempt through `cool_down` later.
    pub const fn new(failures: u32, cool_down: Duration) -> Self {
        CircuitBreaker {
            threshold: if failures == 0 { 1 } else { failures },
            cool_down,
            name: "circuit_breaker",
            failures: AtomicU32::new(0),
            state: AtomicU8::new(CLOSED),
            opened_at: Mutex::new(None),
        }
    }

    /// Names the breaker: the `breaker` label of `etl_circuit_open` (feature
    /// `metrics`), and the name in its [`CircuitOpen`] errors and events.
    /// Unnamed, it is `circuit_breaker`.
    pub const fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The breaker's name ([`CircuitBreaker::named`]).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether attempts fail fast now (open, or half-open with its trial
    /// attempt under way). An open breaker whose cool-down has passed still
    /// reads open until an attempt goes through.
    pub fn is_open(&self) -> bool {
        self.state.load(Ordering::Acquire) != CLOSED
    }

    /// Whether attempts run unchecked now: the one load an attempt makes
    /// while the breaker is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) == CLOSED
    }

    /// Transient failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    /// May an attempt run? `Ok(false)` closed, `Ok(true)` as the half-open
    /// trial (its outcome must be reported with `probe = true`).
    #[inline]
    pub(crate) fn admit(&self) -> Result<bool, CircuitOpen> {
        if self.state.load(Ordering::Acquire) == CLOSED {
            return Ok(false);
        }
        self.admit_when_open()
    }

    #[cold]
    fn admit_when_open(&self) -> Result<bool, CircuitOpen> {
        let opened_at = self
            .opened_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match self.state.load(Ordering::Acquire) {
            // Closed meanwhile.
            CLOSED => Ok(false),
            OPEN => {
                let now = Instant::now();
                // A cool-down too long to be a point in time never ends.
                match opened_at.and_then(|at| at.checked_add(self.cool_down)) {
                    Some(reopens) if now >= reopens => {
                        self.state.store(HALF_OPEN, Ordering::Release);
                        Ok(true)
                    }
                    Some(reopens) => Err(self.open_error(reopens - now)),
                    None => Err(self.open_error(self.cool_down)),
                }
            }
            _ => Err(self.open_error(Duration::ZERO)),
        }
    }

    fn open_error(&self, retry_in: Duration) -> CircuitOpen {
        CircuitOpen {
            breaker: self.name,
            retry_in,
        }
    }

    /// An admitted attempt succeeded.
    #[inline]
    pub(crate) fn succeeded(&self, probe: bool) {
        if self.failures.load(Ordering::Relaxed) != 0 || probe {
            self.close();
        }
    }

    #[cold]
    fn close(&self) {
        self.failures.store(0, Ordering::Relaxed);
        let mut opened_at = self
            .opened_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.state.swap(CLOSED, Ordering::AcqRel) != CLOSED {
            *opened_at = None;
            tracing::info!(breaker = self.name, "circuit breaker closed");
            self.gauge(false);
        }
    }

    /// An admitted attempt failed with a transient error.
    #[cold]
    pub(crate) fn failed(&self, probe: bool) {
        let failures = self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if !probe && failures < self.threshold {
            return;
        }
        let mut opened_at = self
            .opened_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = self.state.load(Ordering::Acquire);
        // A trial that failed reopens; a closed breaker past its threshold
        // opens. An open one stays as it is (its cool-down is not pushed).
        if probe || state == CLOSED {
            *opened_at = Some(Instant::now());
            self.state.store(OPEN, Ordering::Release);
            if state == CLOSED {
                tracing::warn!(
                    breaker = self.name,
                    failures,
                    cool_down_ms = u64::try_from(self.cool_down.as_millis()).unwrap_or(u64::MAX),
                    "circuit breaker opened"
                );
                self.gauge(true);
            }
        }
    }

    /// An admitted attempt ended with no verdict on the dependency: a
    /// permanent error, or it was cancelled. A trial attempt gives its turn
    /// to the next caller.
    #[cold]
    pub(crate) fn released(&self, probe: bool) {
        if probe {
            let _lock = self
                .opened_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let _ =
                self.state
                    .compare_exchange(HALF_OPEN, OPEN, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn gauge(&self, open: bool) {
        super::op::circuit_changed(self.name, open);
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name)
            .field("threshold", &self.threshold)
            .field("cool_down", &self.cool_down)
            .field("failures", &self.failures())
            .field("open", &self.is_open())
            .finish()
    }
}

/// An attempt that was not made because its [`CircuitBreaker`] is open;
/// converted into the caller's error type through `From<CircuitOpen>`
/// ([`crate::EtlError`] has it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitOpen {
    /// The breaker's name ([`CircuitBreaker::named`]).
    pub breaker: &'static str,
    /// How long until it lets an attempt through; zero while its trial
    /// attempt is under way.
    pub retry_in: Duration,
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "circuit breaker `{}` is open: not attempted",
            self.breaker
        )?;
        if !self.retry_in.is_zero() {
            write!(f, " (next trial in {:?})", self.retry_in)?;
        }
        Ok(())
    }
}

impl std::error::Error for CircuitOpen {}

/// The breaker type parameter of a [`Retry`](crate::retry::Retry) with no
/// breaker.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBreaker;

/// Whether a loop has a breaker, and how a fail-fast attempt becomes the
/// error type `E`: the breaker type parameter of
/// [`Retry`](crate::retry::Retry) ([`NoBreaker`], or `&CircuitBreaker`
/// after [`Retry::breaker`](crate::retry::Retry::breaker)).
#[diagnostic::on_unimplemented(
    message = "a circuit breaker needs `{E}: From<CircuitOpen>`",
    label = "an attempt the open breaker refuses fails with `CircuitOpen`, and `{E}` cannot hold it",
    note = "implement `From<etl_core::retry::CircuitOpen>` for `{E}` (`EtlError` and `etl_core::http::HttpError` have it)"
)]
pub trait BreakerSlot<E>: Copy {
    /// The breaker, if any.
    fn get(&self) -> Option<&CircuitBreaker>;
    /// The caller's error for an attempt the open breaker refused (`None`
    /// when there is no breaker).
    fn refused(open: CircuitOpen) -> Option<E>;
}

impl<E> BreakerSlot<E> for NoBreaker {
    #[inline]
    fn get(&self) -> Option<&CircuitBreaker> {
        None
    }

    fn refused(_: CircuitOpen) -> Option<E> {
        None
    }
}

impl<E: From<CircuitOpen>> BreakerSlot<E> for &CircuitBreaker {
    #[inline]
    fn get(&self) -> Option<&CircuitBreaker> {
        Some(self)
    }

    fn refused(open: CircuitOpen) -> Option<E> {
        Some(E::from(open))
    }
}

/// An admitted attempt's claim on the breaker: reports the outcome, and a
/// half-open trial that is dropped unreported (cancelled) gives its turn
/// back. Inline throughout: it is on the success path of every call with a
/// breaker, in the caller's crate.
pub(crate) struct Admitted<'b> {
    breaker: &'b CircuitBreaker,
    probe: bool,
}

impl<'b> Admitted<'b> {
    #[inline]
    pub(crate) fn new(breaker: &'b CircuitBreaker, probe: bool) -> Self {
        Admitted { breaker, probe }
    }

    /// The attempt's verdict: `Some(true)` success, `Some(false)` a
    /// transient failure, `None` neither.
    #[inline]
    pub(crate) fn report(self, verdict: Option<bool>) {
        let (breaker, probe) = (self.breaker, self.probe);
        // Reported: nothing left for the drop to give back.
        std::mem::forget(self);
        match verdict {
            Some(true) => breaker.succeeded(probe),
            Some(false) => breaker.failed(probe),
            None => breaker.released(probe),
        }
    }
}

impl Drop for Admitted<'_> {
    #[inline]
    fn drop(&mut self) {
        self.breaker.released(self.probe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn opens_half_opens_and_closes() {
        let b = CircuitBreaker::new(2, Duration::from_secs(10));
        assert_eq!(b.admit(), Ok(false));
        b.failed(false);
        assert!(!b.is_open(), "one failure of two");
        b.failed(false);
        assert!(b.is_open());
        let e = b.admit().unwrap_err();
        assert_eq!(e.retry_in, Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(b.admit(), Ok(true), "the trial");
        assert_eq!(
            b.admit().unwrap_err().retry_in,
            Duration::ZERO,
            "one trial at a time"
        );
        b.failed(true);
        assert_eq!(
            b.admit().unwrap_err().retry_in,
            Duration::from_secs(10),
            "reopened"
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(b.admit(), Ok(true));
        b.succeeded(true);
        assert!(!b.is_open());
        assert_eq!(b.failures(), 0);
        assert_eq!(b.admit(), Ok(false));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_trial_gives_its_turn_back() {
        let b = CircuitBreaker::new(1, Duration::from_secs(1));
        b.failed(false);
        tokio::time::advance(Duration::from_secs(1)).await;
        let trial = Admitted::new(&b, b.admit().unwrap());
        assert!(b.admit().is_err());
        drop(trial);
        assert_eq!(b.admit(), Ok(true), "the next caller is the trial");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_during_its_trial_gives_the_turn_back() {
        use crate::{EtlError, RetryPolicy};
        static B: CircuitBreaker = CircuitBreaker::new(1, Duration::from_secs(1));
        B.failed(false);
        tokio::time::advance(Duration::from_secs(1)).await;
        let hangs = crate::retry::Retry::new(RetryPolicy::default())
            .breaker(&B)
            .run(std::future::pending::<Result<(), EtlError>>);
        // The first attempt of a call whose breaker is open is the trial:
        // it runs (and hangs) until the call is dropped.
        let cut = tokio::time::timeout(Duration::from_secs(5), hangs).await;
        assert!(cut.is_err(), "the trial hung");
        assert_eq!(B.admit(), Ok(true), "the next caller is the trial");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_during_a_closed_attempt_leaves_the_breaker_as_it_was() {
        use crate::{EtlError, RetryPolicy};
        static B: CircuitBreaker = CircuitBreaker::new(2, Duration::from_secs(1));
        B.failed(false);
        let hangs = crate::retry::Retry::new(RetryPolicy::default())
            .breaker(&B)
            .run(std::future::pending::<Result<(), EtlError>>);
        assert!(tokio::time::timeout(Duration::from_secs(5), hangs)
            .await
            .is_err());
        assert_eq!(B.failures(), 1, "no verdict from a dropped attempt");
        assert!(!B.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn an_endless_cool_down_never_panics_and_never_reopens() {
        let b = CircuitBreaker::new(1, Duration::MAX);
        b.failed(false);
        tokio::time::advance(Duration::from_secs(365 * 86_400)).await;
        let open = b.admit().unwrap_err();
        assert_eq!(open.retry_in, Duration::MAX);
        assert!(b.is_open());
    }

    #[test]
    fn a_loop_with_every_option_prints_its_breaker() {
        static NAMED: CircuitBreaker =
            CircuitBreaker::new(2, Duration::from_secs(1)).named("upstream");
        fn never(_: &std::io::Error) -> bool {
            false
        }
        let retry = crate::retry::Retry::new(crate::RetryPolicy::default())
            .breaker(&NAMED)
            .when(never)
            .attempt_timeout(Duration::from_secs(1));
        let shown = format!("{retry:?}");
        assert!(shown.contains("upstream"), "{shown}");
        assert!(shown.contains("attempt_timeout: Some(1s)"), "{shown}");
    }

    #[test]
    fn zero_failures_behaves_as_one_and_success_resets() {
        let b = CircuitBreaker::new(0, Duration::from_secs(1));
        b.failed(false);
        assert!(b.is_open());
        let b = CircuitBreaker::new(3, Duration::from_secs(1));
        b.failed(false);
        b.failed(false);
        b.succeeded(false);
        b.failed(false);
        b.failed(false);
        assert!(!b.is_open(), "the success reset the count");
        assert!(format!("{b:?}").contains("circuit_breaker"));
    }
}
