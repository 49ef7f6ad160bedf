//! [`Reshaped`]: a future whose output is rearranged on the way out, with
//! no state of its own: how the loop's shapes meet (a plain op's result
//! handed back with the `()` it was lent; a call's result without its
//! report).

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::RetryReport;

/// How an output is rearranged: a zero-sized marker per shape.
pub(crate) trait Reshape<In> {
    /// The rearranged output.
    type Out;
    /// Rearranges `input`.
    fn reshape(input: In) -> Self::Out;
}

pin_project_lite::pin_project! {
    /// `inner`, its output rearranged by `M`.
    pub(crate) struct Reshaped<Inner, M> {
        #[pin]
        inner: Inner,
        shape: PhantomData<fn() -> M>,
    }
}

impl<Inner, M> Reshaped<Inner, M> {
    #[inline]
    pub(crate) fn new(inner: Inner) -> Self {
        Reshaped {
            inner,
            shape: PhantomData,
        }
    }
}

impl<Inner: Future, M: Reshape<Inner::Output>> Future for Reshaped<Inner, M> {
    type Output = M::Out;

    // Always: it sits on the success path of every `Retry::run*` call.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map(M::reshape)
    }
}

/// A plain op's attempt hands back the `()` it was lent.
pub(crate) enum LentNothing {}

impl<R, E> Reshape<Result<R, E>> for LentNothing {
    type Out = ((), Result<R, E>);

    #[inline(always)]
    fn reshape(result: Result<R, E>) -> Self::Out {
        ((), result)
    }
}

/// A call's result without its report (`Retry::run`, `run_lending`).
pub(crate) enum ResultOnly {}

impl<R, E> Reshape<(Result<R, E>, RetryReport)> for ResultOnly {
    type Out = Result<R, E>;

    #[inline(always)]
    fn reshape((result, _): (Result<R, E>, RetryReport)) -> Self::Out {
        result
    }
}
