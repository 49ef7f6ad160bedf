//! What a retry loop tells its caller besides the result: the events an
//! observer sees before each wait, and the report of how the call ended.

use std::fmt;
use std::time::Duration;

/// What an observer ([`Retry::on_retry`](super::Retry::on_retry)) is told before each wait.
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    /// The attempt that just failed (1-based).
    pub attempt: u32,
    /// How long the loop waits before the next attempt.
    pub delay: Duration,
    /// Whether the server chose `delay` (its Retry-After).
    pub server_delay: bool,
    /// The error that ended the attempt.
    pub error: &'a dyn fmt::Display,
}

impl fmt::Debug for RetryEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryEvent")
            .field("attempt", &self.attempt)
            .field("delay", &self.delay)
            .field("server_delay", &self.server_delay)
            .field("error", &format_args!("{}", self.error))
            .finish()
    }
}

/// An observer of retries: called before each wait.
pub type Observer<'a> = dyn Fn(&RetryEvent<'_>) + Send + Sync + 'a;

/// Why a retry loop stopped ([`RetryReport::stop`]); the give-up `tracing`
/// event names the same reason, and so does the `stop` label of
/// `etl_retry_calls_total` ([`Stop::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// An attempt succeeded.
    Succeeded,
    /// An attempt failed with an error that is not transient.
    Permanent,
    /// `max_attempts` attempts ran, and the last failed.
    Exhausted,
    /// The next wait would have ended past the deadline.
    Deadline,
    /// The server asked for a longer wait than `max_retry_after` allows.
    RetryAfterCeiling,
    /// The shared [`RetryBudget`](super::RetryBudget) could not pay for
    /// another retry.
    Budget,
    /// The [`CircuitBreaker`](super::CircuitBreaker) is open: the last
    /// attempt was refused without running.
    CircuitOpen,
}

/// How a call ended: from [`Retry::run_with_report`](super::Retry::run_with_report) and
/// [`Retry::run_blocking_with_report`](super::Retry::run_blocking_with_report).
///
/// ```
/// use etl_core::retry::{Retry, Stop};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let (result, report) = Retry::new(RetryPolicy::default())
///     .run_with_report(|| async { Err::<(), _>(EtlError::Network("reset".into())) })
///     .await;
/// assert!(result.is_err());
/// assert_eq!(report.attempts, 4);
/// assert_eq!(report.slept, Duration::from_millis(200 + 400 + 800));
/// assert_eq!(report.stop, Stop::Exhausted);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryReport {
    /// Attempts made, the first included.
    pub attempts: u32,
    /// Time spent waiting between attempts.
    pub slept: Duration,
    /// Why the loop stopped.
    pub stop: Stop,
}

impl Stop {
    /// The stop in snake_case, as the `stop` label of the metrics shows it.
    ///
    /// ```
    /// use etl_core::retry::Stop;
    ///
    /// assert_eq!(Stop::RetryAfterCeiling.as_str(), "retry_after_ceiling");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Stop::Succeeded => "succeeded",
            Stop::Permanent => "permanent",
            Stop::Exhausted => "exhausted",
            Stop::Deadline => "deadline",
            Stop::RetryAfterCeiling => "retry_after_ceiling",
            Stop::Budget => "budget",
            Stop::CircuitOpen => "circuit_open",
        }
    }
}

impl RetryReport {
    /// One more wait of `delay`, and the attempt after it.
    pub(crate) fn waited(&mut self, delay: Duration) {
        self.slept = self.slept.saturating_add(delay);
        self.attempts = self.attempts.saturating_add(1);
    }

    /// A call that ended with its first attempt, for `stop`.
    pub(crate) fn first(stop: Stop) -> Self {
        RetryReport {
            attempts: 1,
            slept: Duration::ZERO,
            stop,
        }
    }
}
