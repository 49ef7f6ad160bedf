//! [`RetryableError`]: what the retry loop needs to know of an error.

use std::fmt;
use std::time::Duration;

use crate::EtlError;

/// Classifies an error for retrying: is it worth another attempt, and did
/// the server say how long to wait first?
///
/// [`EtlError`] implements it; implement it for your own error type to use
/// [`Retry::run`](crate::retry::Retry::run) and `#[retry]` with it. `Display`
/// is required because every retry is logged (and shown to an observer)
/// with its error.
///
/// ```
/// use etl_core::retry::{Retry, RetryableError};
/// use etl_core::RetryPolicy;
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// enum ApiError { Busy { wait_secs: u64 }, BadRequest }
///
/// impl std::fmt::Display for ApiError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "{self:?}")
///     }
/// }
///
/// impl RetryableError for ApiError {
///     fn is_transient(&self) -> bool {
///         matches!(self, ApiError::Busy { .. })
///     }
///     fn retry_after(&self) -> Option<Duration> {
///         match self {
///             ApiError::Busy { wait_secs } => Some(Duration::from_secs(*wait_secs)),
///             ApiError::BadRequest => None,
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut calls = 0;
/// let result = Retry::new(RetryPolicy::default())
///     .run(|| {
///         calls += 1;
///         let outcome = if calls == 1 { Err(ApiError::Busy { wait_secs: 2 }) } else { Ok(calls) };
///         async move { outcome }
///     })
///     .await;
/// assert_eq!(result.unwrap(), 2);
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `RetryableError`: the retry loop must know which of its errors are transient",
    label = "no `RetryableError` impl for `{Self}`",
    note = "implement `etl_core::retry::RetryableError` for it, or convert it into `etl_core::EtlError`"
)]
pub trait RetryableError: fmt::Display {
    /// Whether another attempt may succeed.
    fn is_transient(&self) -> bool;

    /// The wait the server asked for, if any; it beats the backoff.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// Whether the attempt was cut by a timeout (a
    /// [`TimedOut`](crate::retry::TimedOut) converted into this type): the
    /// retry after it counts as `reason="timed_out"` in the metrics. `false`
    /// by default.
    fn timed_out(&self) -> bool {
        false
    }
}

impl RetryableError for EtlError {
    fn is_transient(&self) -> bool {
        EtlError::is_transient(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        EtlError::retry_after(self)
    }

    fn timed_out(&self) -> bool {
        matches!(self, EtlError::TimedOut(_))
    }
}
