//! [`TimedRetry`]: the retry loop with a clock on each attempt. An attempt
//! that runs past its `attempt_timeout`, or past the loop's deadline, is cut
//! and fails with [`TimedOut`], converted into the caller's error type.

use std::fmt;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

use super::{Retry, RetryReport, RetryableError};

/// An attempt cut short: the error `attempt_timeout` and an in-flight
/// deadline produce, converted into the caller's error type through
/// `From<TimedOut>` ([`crate::EtlError`] has it, as a transient error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut {
    /// How long the attempt was given.
    pub after: Duration,
    /// Which limit cut it.
    pub by: TimeLimit,
}

/// The limit that cut an attempt ([`TimedOut::by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeLimit {
    /// The attempt's own `attempt_timeout`.
    Attempt,
    /// The loop's `deadline`, reached during the attempt.
    Deadline,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by = match self.by {
            TimeLimit::Attempt => "its attempt_timeout",
            TimeLimit::Deadline => "the retry deadline",
        };
        write!(f, "attempt cut after {:?} by {by}", self.after)
    }
}

impl std::error::Error for TimedOut {}

/// [`Retry`] whose attempts are cut: by [`Retry::attempt_timeout`], and by
/// the deadline ([`Retry::deadline`]) when one is set, so the call returns by
/// its deadline whatever the operation does. Needs `E: From<TimedOut>`; a
/// cut attempt counts as a transient failure.
///
/// ```
/// use etl_core::retry::{Retry, Stop};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let start = Instant::now();
/// let (result, report) = Retry::new(RetryPolicy::default())
///     .deadline(Duration::from_secs(10))
///     .attempt_timeout(Duration::from_secs(4))
///     .run_with_report(|| async {
///         tokio::time::sleep(Duration::from_secs(3600)).await; // hangs
///         Ok::<_, EtlError>(())
///     })
///     .await;
/// assert!(matches!(result, Err(EtlError::TimedOut(_))));
/// assert_eq!(report.stop, Stop::Deadline);
/// assert!(start.elapsed() <= Duration::from_secs(10));
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TimedRetry<'a> {
    retry: Retry<'a>,
    attempt_timeout: Option<Duration>,
}

impl<'a> Retry<'a> {
    /// Cuts every attempt that runs longer than `limit`; the cut attempt
    /// fails with [`TimedOut`] (converted into the error type, which must
    /// implement `From<TimedOut>`) and counts as transient. A deadline, if
    /// set, then bounds the attempt in flight too.
    pub fn attempt_timeout(self, limit: Duration) -> TimedRetry<'a> {
        TimedRetry {
            retry: self,
            attempt_timeout: Some(limit),
        }
    }

    /// Lets the deadline cut the attempt in flight, so the call returns by
    /// its deadline whatever the operation does (needs `E: From<TimedOut>`).
    /// Without this (or [`Retry::attempt_timeout`]) the deadline only stops
    /// new waits.
    pub fn cut_in_flight(self) -> TimedRetry<'a> {
        TimedRetry {
            retry: self,
            attempt_timeout: None,
        }
    }
}

impl TimedRetry<'_> {
    /// [`Retry::run`] with each attempt on the clock.
    pub async fn run<F, Fut, T, E>(self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RetryableError + From<TimedOut>,
    {
        self.run_with_report(op).await.0
    }

    /// [`Retry::run_with_report`] with each attempt on the clock.
    pub async fn run_with_report<F, Fut, T, E>(self, mut op: F) -> (Result<T, E>, RetryReport)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RetryableError + From<TimedOut>,
    {
        let started = Instant::now();
        let deadline = self.retry.deadline;
        let per_attempt = self.attempt_timeout;
        let timed = move || {
            // The attempt's budget: its own limit, or what is left of the
            // deadline, whichever is shorter.
            let left = deadline.map(|d| d.saturating_sub(started.elapsed()));
            let limit = match (per_attempt, left) {
                (Some(own), Some(left)) if left < own => Some((left, TimeLimit::Deadline)),
                (Some(own), _) => Some((own, TimeLimit::Attempt)),
                (None, Some(left)) => Some((left, TimeLimit::Deadline)),
                (None, None) => None,
            };
            let attempt = op();
            async move {
                match limit {
                    None => attempt.await,
                    Some((after, by)) => match tokio::time::timeout(after, attempt).await {
                        Ok(result) => result,
                        Err(_) => Err(E::from(TimedOut { after, by })),
                    },
                }
            }
        };
        self.retry.run_with_report(timed).await
    }
}
