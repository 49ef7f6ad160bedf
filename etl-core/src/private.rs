//! What the `#[retry]` expansion calls. Not public API: names and shapes
//! may change with any release.

pub use crate::retry::with_retry;

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
