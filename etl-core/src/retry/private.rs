//! What the `#[retry]` expansion calls. Not public API: names and shapes
//! may change with any release.

use std::future::Future;
use std::marker::PhantomData;

use crate::retry::builder::run;
pub use crate::retry::op::Op;
use crate::retry::{Cut, Retry, RetryableError, TimedOut, Uncut};
use crate::RetryPolicy;

/// `with_retry` for any [`RetryableError`]: what `#[retry]` expands to when
/// no option beyond the policy is given.
pub async fn with_policy<F, Fut, T, E>(
    name: &'static Op,
    policy: RetryPolicy,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: RetryableError,
{
    // The expression, not a local: a `Retry` built before the first attempt
    // would sit in this future's state across it.
    run::plain_attempt_then_retry!(Retry::new(policy).__op(name), op)
}

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

/// The return types `#[retry]` serves: `Result<T, E>` (or an alias of it).
/// What `E` must be able to do is asked by the loop's run method, once.
///
/// The expansion passes each attempt's result through `into_result` and the
/// final one back through `from_result`, both named at the fn's return type,
/// so a wrong return type gets this one message there and nothing else.
#[diagnostic::on_unimplemented(
    message = "#[retry] needs a fn returning `Result<T, E>`, found `{Self}`",
    label = "not a `Result`",
    note = "only a `Result` can fail and be retried"
)]
pub trait RetryOutput: Sized {
    /// The success type.
    type Ok;
    /// The error type.
    type Err;
    /// Into what the retry loop takes.
    fn into_result(self) -> Result<Self::Ok, Self::Err>;
    /// Back into the declared type.
    fn from_result(result: Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> RetryOutput for Result<T, E> {
    type Ok = T;
    type Err = E;

    #[inline(always)]
    fn into_result(self) -> Self {
        self
    }

    #[inline(always)]
    fn from_result(result: Self) -> Self {
        result
    }
}

/// How `#[retry(deadline = ...)]` picks its loop: one that cuts the attempt
/// in flight when the error type can say "timed out" (`E: From<TimedOut>`),
/// else the loop whose deadline stops new waits only. Autoref dispatch:
/// `(&DeadlineDispatch::<E, _, _>::new(r)).__retry_pick()` finds
/// [`CutsInFlight`] when its bound holds, and [`KeepsInFlight`] otherwise.
pub struct DeadlineDispatch<'a, E, C, B>(Retry<'a, C, Uncut, B>, PhantomData<fn() -> E>);

impl<'a, E, C, B> DeadlineDispatch<'a, E, C, B> {
    /// Wraps the loop the attribute built.
    pub fn new(retry: Retry<'a, C, Uncut, B>) -> Self {
        DeadlineDispatch(retry, PhantomData)
    }
}

/// The pick for error types with `From<TimedOut>`.
pub trait CutsInFlight<'a, C, B> {
    /// The loop that cuts the attempt in flight at the deadline.
    fn __retry_pick(&self) -> Retry<'a, C, Cut, B>;
}

impl<'a, E: From<TimedOut>, C: Copy, B: Copy> CutsInFlight<'a, C, B>
    for DeadlineDispatch<'a, E, C, B>
{
    fn __retry_pick(&self) -> Retry<'a, C, Cut, B> {
        self.0.cut_in_flight()
    }
}

/// The pick for every other error type.
pub trait KeepsInFlight<'a, C, B> {
    /// The plain loop.
    fn __retry_pick(&self) -> Retry<'a, C, Uncut, B>;
}

impl<'a, E, C: Copy, B: Copy> KeepsInFlight<'a, C, B> for &DeadlineDispatch<'a, E, C, B> {
    fn __retry_pick(&self) -> Retry<'a, C, Uncut, B> {
        self.0
    }
}
