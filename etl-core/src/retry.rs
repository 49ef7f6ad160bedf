//! [`with_retry`] and [`RetryPolicy`]: retry transient failures with capped
//! exponential backoff, honouring the server's Retry-After; and [`Retry`],
//! the same loop with jitter, a deadline, a Retry-After ceiling, an
//! observer, a shared [`RetryBudget`], attempt timeouts and a
//! [`CircuitBreaker`], for any error a classifier can judge.

mod breaker;
mod budget;
pub(crate) mod builder;
mod classify;
mod jitter;
pub(crate) mod op;
#[doc(hidden)]
pub mod private;
mod report;
mod reshape;
mod timed;

pub use breaker::{CircuitBreaker, CircuitOpen};
// The type-state plumbing of `Retry`'s type parameters: named in its bounds,
// so nameable, but not API (users set options, they never name these) and
// out of the docs. Re-exported here rather than left unnamed, because
// rustc's diagnostics name a trait by its shortest visible path: unnamed,
// a misuse would read `retry::timed::CutSlot<E>` instead of `CutSlot<E>`.
#[doc(hidden)]
pub use breaker::{BreakerSlot, NoBreaker};
pub use budget::RetryBudget;
pub use builder::Retry;
pub use classify::{
    io_kind_is_transient, status_is_transient, ByError, Classify, RetryableError, When,
};
pub use jitter::Jitter;
pub use report::{Observer, RetryEvent, RetryReport, Stop};
#[doc(hidden)]
pub use timed::{Clocked, CutSlot, NoCutoff, RunCut, Uncut};
pub use timed::{Cut, Cutoff, TimeLimit, TimedOut};

use std::future::Future;
use std::time::Duration;

use crate::EtlError;

/// How often and how patiently [`with_retry`] retries.
///
/// After the `n`-th failed attempt (`n` from 1) the wait is
/// `base_delay * 2^(n-1)`, capped at `max_delay` ([`RetryPolicy::backoff`]),
/// unless the error carries a server's delay ([`EtlError::retry_after`]),
/// which is waited as given.
///
/// ```
/// use etl_core::RetryPolicy;
/// use std::time::Duration;
///
/// let policy = RetryPolicy::default();
/// assert_eq!(policy.max_attempts, 4);
/// let waits: Vec<_> = (1..4).map(|n| policy.backoff(n)).collect();
/// assert_eq!(waits, [Duration::from_millis(200), Duration::from_millis(400), Duration::from_millis(800)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (0 behaves as 1: no retry).
    pub max_attempts: u32,
    /// The wait after the first failure; it doubles after each further one.
    pub base_delay: Duration,
    /// The cap on the exponential wait (a server's Retry-After may exceed it).
    pub max_delay: Duration,
}

impl RetryPolicy {
    /// `RetryPolicy::default()` as a constant: 4 attempts, 200 ms base, 10 s cap.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(200),
        max_delay: Duration::from_secs(10),
    };

    /// The exponential wait after the `attempt`-th failure (1-based):
    /// `base_delay * 2^(attempt-1)`, at most `max_delay`. Saturates instead
    /// of overflowing, for every policy and attempt number.
    pub fn backoff(&self, attempt: u32) -> Duration {
        if self.base_delay.is_zero() {
            return Duration::ZERO;
        }
        let doublings = attempt.saturating_sub(1);
        1u32.checked_shl(doublings)
            .and_then(|factor| self.base_delay.checked_mul(factor))
            .map_or(self.max_delay, |wait| wait.min(self.max_delay))
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

/// Runs `op` until it succeeds, fails permanently, or has run
/// `policy.max_attempts` times; returns its last result.
///
/// Between attempts it sleeps ([`tokio::time::sleep`]) the server's
/// Retry-After if the error carries one, else [`RetryPolicy::backoff`], and
/// emits a `tracing` warning naming the attempt, the delay, the error and
/// whether the server chose the delay. `op` is called afresh for each
/// attempt because retrying means running it again.
///
/// The success path costs one call of `op` and nothing else: no allocation,
/// no timer, no retry state (all of that is built only when a retry is due).
///
/// ```
/// use etl_core::{with_retry, EtlError, RetryPolicy};
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let calls = AtomicU32::new(0);
/// let answer = with_retry(RetryPolicy::default(), || async {
///     match calls.fetch_add(1, Ordering::SeqCst) {
///         0 => Err(EtlError::Network("connection reset".into())),
///         _ => Ok(42),
///     }
/// })
/// .await;
/// assert_eq!(answer.unwrap(), 42);
/// assert_eq!(calls.load(Ordering::SeqCst), 2);
/// # }
/// ```
pub async fn with_retry<F, Fut, T>(policy: RetryPolicy, mut op: F) -> Result<T, EtlError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, EtlError>>,
{
    // `Retry::new(policy).run(op)`, without nesting `run`'s future in this one.
    // The expression, not a local: a `Retry` built before the first attempt
    // would sit in this future's state across it.
    builder::run::plain_attempt_then_retry!(Retry::new(policy), op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tokio::time::Instant;

    fn network() -> EtlError {
        EtlError::Network("connection reset".into())
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_then_succeeds() {
        let calls = AtomicU32::new(0);
        let result = with_retry(RetryPolicy::default(), || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(network())
            } else {
                Ok(42)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 42);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_on_permanent_immediately() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retry(RetryPolicy::default(), || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(EtlError::Parse("not a list page".into()))
        })
        .await;
        assert!(matches!(result, Err(EtlError::Parse(_))), "{result:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn honors_retry_after() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        let result = with_retry(RetryPolicy::default(), || async {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(EtlError::RateLimited {
                    retry_after_secs: 5,
                })
            } else {
                Ok("page")
            }
        })
        .await;
        assert_eq!(result.unwrap(), "page");
        assert!(
            start.elapsed() >= Duration::from_secs(5),
            "waited only {:?}",
            start.elapsed()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_above_max_delay_is_honoured_as_given() {
        let policy = RetryPolicy {
            max_delay: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        with_retry(policy, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(EtlError::RateLimited {
                    retry_after_secs: 90,
                }),
                _ => Ok(()),
            }
        })
        .await
        .unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(90));
    }

    #[tokio::test(start_paused = true)]
    async fn sleeps_the_capped_exponential_schedule() {
        let policy = RetryPolicy {
            max_attempts: 6,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
        };
        let start = Instant::now();
        let mut seen = Vec::new();
        let result: Result<(), _> = with_retry(policy, || {
            seen.push(start.elapsed());
            async { Err(network()) }
        })
        .await;
        assert!(matches!(result, Err(EtlError::Network(_))));
        let ms = |n| Duration::from_millis(n);
        // Waits of 100, 200, 400, 500 (capped), 500 (capped) ms between six attempts.
        assert_eq!(seen, [ms(0), ms(100), ms(300), ms(700), ms(1200), ms(1700)]);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts_with_the_last_error() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = with_retry(RetryPolicy::default(), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            Err(EtlError::Network(format!("failure {n}")))
        })
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
        assert!(
            matches!(result, Err(EtlError::Network(ref m)) if m == "failure 3"),
            "{result:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn zero_max_attempts_behaves_as_one() {
        let calls = AtomicU32::new(0);
        let policy = RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        };
        let result: Result<(), _> = with_retry(policy, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(network())
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn huge_policy_does_not_overflow_or_panic() {
        let policy = RetryPolicy {
            max_attempts: u32::MAX,
            base_delay: Duration::MAX,
            max_delay: Duration::from_secs(3),
        };
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        with_retry(policy, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0..=2 => Err(network()),
                _ => Ok(()),
            }
        })
        .await
        .unwrap();
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(9),
            "three waits, each saturated at max_delay"
        );
    }

    /// The expansion names `::etl_core::...`; `extern crate self as
    /// etl_core` makes that resolve inside etl-core itself.
    #[cfg(feature = "macros")]
    #[crate::retry(max_attempts = 2, base = "1s")]
    async fn retried_inside_etl_core(calls: &AtomicU32) -> Result<u32, EtlError> {
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 => Err(network()),
            n => Ok(n),
        }
    }

    #[cfg(feature = "macros")]
    #[tokio::test(start_paused = true)]
    async fn retry_macro_works_inside_etl_core() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        assert_eq!(retried_inside_etl_core(&calls).await.unwrap(), 1);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn backoff_overflow_and_cap() {
        let cap = Duration::from_secs(10);
        let p = RetryPolicy {
            max_attempts: u32::MAX,
            base_delay: Duration::MAX,
            max_delay: cap,
        };
        assert_eq!(p.backoff(1), cap);
        assert_eq!(p.backoff(u32::MAX), cap);
        let p = RetryPolicy {
            base_delay: Duration::from_millis(200),
            ..p
        };
        assert_eq!(
            p.backoff(0),
            Duration::from_millis(200),
            "attempt 0 reads as the first"
        );
        assert_eq!(
            p.backoff(33),
            cap,
            "2^32 does not fit a u32 factor: saturate"
        );
        assert_eq!(p.backoff(u32::MAX), cap);
        let p = RetryPolicy {
            max_delay: Duration::MAX,
            ..p
        };
        assert_eq!(p.backoff(u32::MAX), Duration::MAX);
        let p = RetryPolicy {
            base_delay: Duration::ZERO,
            ..p
        };
        assert_eq!(p.backoff(u32::MAX), Duration::ZERO, "no base, no wait");
    }

    #[test]
    fn default_policy_is_the_seeds() {
        let p = RetryPolicy::default();
        assert_eq!(
            (p.max_attempts, p.base_delay, p.max_delay),
            (4, Duration::from_millis(200), Duration::from_secs(10))
        );
    }

    fn any_duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (0u64..10_000_000_000).prop_map(Duration::from_nanos),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        ]
    }

    proptest! {
        #[test]
        fn retry_backoff_is_capped_monotone_and_exact_below_the_cap(
            base in any_duration(),
            max in any_duration(),
            attempt in 1u32..200,
        ) {
            let p = RetryPolicy { max_attempts: 4, base_delay: base, max_delay: max };
            let wait = p.backoff(attempt);
            prop_assert!(wait <= max);
            prop_assert!(p.backoff(attempt + 1) >= wait);
            if let Some(exact) = 2u32.checked_pow(attempt - 1).and_then(|f| base.checked_mul(f)) {
                prop_assert_eq!(wait, exact.min(max));
            }
        }
    }
}
