//! `RetryableError` for `anyhow::Error` (feature `anyhow`): an error chain
//! judged by the first cause etl-core can classify. It sits above the
//! error types it looks for (`EtlError`, `HttpError`), so that the retry
//! loop's classifier reaches none of them.

use std::io;
use std::time::Duration;

use crate::retry::RetryableError;
use crate::EtlError;

/// By the first error in its chain that etl-core can classify
/// ([`EtlError`], `std::io::Error`, and with feature `reqwest`
/// `etl_core::http::HttpError` and `reqwest::Error`); an error it cannot
/// classify is permanent. Feature `anyhow`.
impl RetryableError for anyhow::Error {
    fn is_transient(&self) -> bool {
        classified(self).is_some_and(|e| e.is_transient())
    }

    fn retry_after(&self) -> Option<Duration> {
        classified(self).and_then(|e| e.retry_after())
    }

    fn timed_out(&self) -> bool {
        classified(self).is_some_and(|e| e.timed_out())
    }
}

/// The first error in `err`'s chain that has a [`RetryableError`] impl here.
fn classified(err: &anyhow::Error) -> Option<&dyn RetryableError> {
    err.chain()
        .find_map(|cause| -> Option<&dyn RetryableError> {
            if let Some(e) = cause.downcast_ref::<EtlError>() {
                return Some(e);
            }
            #[cfg(feature = "reqwest")]
            if let Some(e) = cause.downcast_ref::<crate::http::HttpError>() {
                return Some(e);
            }
            #[cfg(feature = "reqwest")]
            if let Some(e) = cause.downcast_ref::<reqwest::Error>() {
                return Some(e);
            }
            cause
                .downcast_ref::<io::Error>()
                .map(|e| e as &dyn RetryableError)
        })
}
