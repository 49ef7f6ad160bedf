//! What the `#[retry]` expansion calls. Not public API: names and shapes
//! may change with any release.

pub use crate::retry::with_retry;

use crate::EtlError;

/// How `#[retry]` hands each attempt its own copy of an argument.
///
/// The body runs once per attempt and may consume its arguments, so each
/// attempt gets a clone; this trait exists to say so when a type is not
/// `Clone`, instead of a bare "trait bound not satisfied".
#[diagnostic::on_unimplemented(
    message = "#[retry] clones each argument for every attempt, but `{Self}` is not `Clone`",
    label = "cloned for every attempt",
    note = "the body runs once per attempt and may consume its arguments: take this argument by \
            reference, wrap it in an `Arc`, or derive `Clone` for it"
)]
pub trait RetryArg: Sized {
    /// A fresh copy for the next attempt.
    fn __retry_clone(&self) -> Self;
}

impl<T: Clone> RetryArg for T {
    #[inline(always)]
    fn __retry_clone(&self) -> Self {
        self.clone()
    }
}

/// The return types `#[retry]` serves: `Result<T, EtlError>` and its aliases.
///
/// The expansion passes each attempt's result through `into_result` and the
/// final one back through `from_result`, both named at the fn's return type,
/// so a wrong return type gets this one message there and nothing else.
#[diagnostic::on_unimplemented(
    message = "#[retry] needs a fn returning `Result<T, EtlError>`, found `{Self}`",
    label = "not `Result<T, EtlError>`",
    note = "only a `Result` can fail and be retried, and `with_retry` classifies `EtlError`s: \
            convert other errors into `EtlError` inside the body"
)]
pub trait RetryOutput: Sized {
    /// The success type.
    type Ok;
    /// Into what `with_retry` takes.
    fn into_result(self) -> Result<Self::Ok, EtlError>;
    /// Back into the declared type.
    fn from_result(result: Result<Self::Ok, EtlError>) -> Self;
}

impl<T> RetryOutput for Result<T, EtlError> {
    type Ok = T;

    #[inline(always)]
    fn into_result(self) -> Result<T, EtlError> {
        self
    }

    #[inline(always)]
    fn from_result(result: Result<T, EtlError>) -> Self {
        result
    }
}
