//! What the retry loop needs to know of an error: [`RetryableError`], the
//! error's own word, and [`Classify`], the loop's classifier (the error's
//! word by default, or a predicate given with [`Retry::when`]).
//!
//! [`Retry::when`]: crate::retry::Retry::when

use std::fmt;
use std::io;
use std::time::Duration;

/// Classifies an error for retrying: is it worth another attempt, and did
/// the server say how long to wait first?
///
/// etl-core implements it for [`EtlError`](crate::EtlError), [`std::io::Error`] (by
/// [`io::ErrorKind`]: see [`io_kind_is_transient`]) and, behind features,
/// for `reqwest::Error`, `etl_core::http::HttpError` (feature `reqwest`)
/// and `anyhow::Error` (feature `anyhow`). Implement it for your own error
/// type to use [`Retry::run`](crate::retry::Retry::run) and `#[retry]` with
/// it; for a foreign type that has no impl, give a predicate instead
/// (`#[retry(when = pred)]`, [`Retry::when`](crate::retry::Retry::when)).
/// `Display` is required because every retry is logged (and shown to an
/// observer) with its error.
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
    note = "give a predicate instead: `#[retry(when = is_transient)]` with `fn is_transient(e: &{Self}) -> bool` \
            (on the builder, `Retry::when`); the orphan rule forbids implementing the trait for a foreign type",
    note = "etl-core classifies `EtlError` and `std::io::Error` always, `reqwest::Error` and `etl_core::http::HttpError` \
            with its feature `reqwest`, `anyhow::Error` with its feature `anyhow`"
)]
pub trait RetryableError: fmt::Display {
    /// Whether another attempt may succeed.
    fn is_transient(&self) -> bool;

    /// The wait the server asked for, if any; it beats the backoff.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// Whether the attempt was cut by a timeout (a
    /// [`TimedOut`](crate::retry::TimedOut) converted into this type).
    /// `false` by default. The loop sees a cut attempt only as the error
    /// its `TimedOut` became, so this is how it tells a timeout from other
    /// transient failures (the `timed_out` reason of its metrics): answer
    /// `true` for it, as `EtlError` and `HttpError` do. With
    /// [`Retry::when`](crate::retry::Retry::when) no error is told apart.
    fn timed_out(&self) -> bool {
        false
    }
}

/// Whether an I/O failure of this kind may pass by itself: a refused,
/// reset, aborted or missing connection, a broken pipe, a timeout, an
/// interruption, a would-block, or an early end of file (a peer that went
/// away mid-message). Everything else (not found, permission denied, a full
/// disk, invalid data) is permanent. The one list behind both
/// `RetryableError for io::Error` and [`EtlError::Io`](crate::EtlError::Io)'s classification.
///
/// ```
/// use etl_core::retry::io_kind_is_transient;
/// use std::io::ErrorKind;
///
/// assert!(io_kind_is_transient(ErrorKind::ConnectionReset));
/// assert!(!io_kind_is_transient(ErrorKind::PermissionDenied));
/// ```
pub fn io_kind_is_transient(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::UnexpectedEof
    )
}

/// Whether an HTTP answer with this status may succeed when asked again:
/// 408 (request timeout), 429 (too many requests) and every 5xx. Every
/// other status is permanent. The one list behind [`EtlError::Http`](crate::EtlError::Http)'s
/// classification and `etl_core::http` (feature `reqwest`).
///
/// ```
/// use etl_core::retry::status_is_transient;
///
/// assert!(status_is_transient(503));
/// assert!(!status_is_transient(404));
/// ```
pub fn status_is_transient(status: u16) -> bool {
    matches!(status, 408 | 429) || (500..=599).contains(&status)
}

/// By its kind ([`io_kind_is_transient`]); a timeout kind counts as timed
/// out.
impl RetryableError for io::Error {
    fn is_transient(&self) -> bool {
        io_kind_is_transient(self.kind())
    }

    fn timed_out(&self) -> bool {
        self.kind() == io::ErrorKind::TimedOut
    }
}

/// How a [`Retry`](crate::retry::Retry) decides what is retried: the
/// classifier type parameter. [`ByError`] asks the error
/// ([`RetryableError`]); [`When`] asks a predicate. (An error type
/// [`ByError`] cannot judge is reported as not being a `RetryableError`:
/// that diagnostic names the way out.)
pub trait Classify<E>: Copy {
    /// Whether another attempt may succeed after `err`.
    fn is_transient(&self, err: &E) -> bool;

    /// The wait the server asked for, if any.
    fn retry_after(&self, err: &E) -> Option<Duration>;

    /// Whether `err` reports a timeout (the `timed_out` reason of a retry).
    fn timed_out(&self, err: &E) -> bool;
}

/// The default classifier: the error's own [`RetryableError`] impl.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByError;

impl<E: RetryableError> Classify<E> for ByError {
    #[inline]
    fn is_transient(&self, err: &E) -> bool {
        err.is_transient()
    }

    #[inline]
    fn retry_after(&self, err: &E) -> Option<Duration> {
        err.retry_after()
    }

    #[inline]
    fn timed_out(&self, err: &E) -> bool {
        err.timed_out()
    }
}

/// A predicate as the classifier ([`Retry::when`](crate::retry::Retry::when)):
/// it decides what is retried, so `E` needs no [`RetryableError`] impl. No
/// server delay is known then; the backoff decides every wait.
pub struct When<E>(pub fn(&E) -> bool);

impl<E> Clone for When<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for When<E> {}

impl<E> fmt::Debug for When<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("When(..)")
    }
}

impl<E> Classify<E> for When<E> {
    #[inline]
    fn is_transient(&self, err: &E) -> bool {
        (self.0)(err)
    }

    #[inline]
    fn retry_after(&self, _: &E) -> Option<Duration> {
        None
    }

    #[inline]
    fn timed_out(&self, _: &E) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EtlError;

    #[test]
    fn io_errors_classify_by_kind() {
        use io::ErrorKind::*;
        for kind in [
            ConnectionRefused,
            ConnectionReset,
            ConnectionAborted,
            NotConnected,
            BrokenPipe,
            TimedOut,
            Interrupted,
            WouldBlock,
            UnexpectedEof,
        ] {
            assert!(io::Error::from(kind).is_transient(), "{kind:?}");
            assert!(EtlError::Io(kind.into()).is_transient(), "{kind:?}");
        }
        for kind in [
            NotFound,
            PermissionDenied,
            InvalidData,
            AlreadyExists,
            Other,
        ] {
            assert!(!io::Error::from(kind).is_transient(), "{kind:?}");
            assert!(!EtlError::Io(kind.into()).is_transient(), "{kind:?}");
        }
        assert!(io::Error::from(TimedOut).timed_out());
    }
}
