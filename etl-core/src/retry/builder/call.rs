//! [`Call`]: the future of a call with options (what `Retry::run*`
//! return). Its first attempt is polled in place, by a `poll` that inlines
//! into the caller's; the loop behind a failure, and a call whose breaker
//! is not closed, runs boxed.
//!
//! Written by hand rather than as an `async` block: the compiler does not
//! inline an `async` block's `poll` once the block holds a breaker, and the
//! call through memory that remains costs more than all the options' own
//! work on the success path. A hand-written `poll` can say
//! `#[inline(always)]`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::run::{self, Failure};
use crate::retry::breaker::Admitted;
use crate::retry::timed::Clock;
use crate::retry::{BreakerSlot, CircuitBreaker, Classify, CutSlot, Retry, RetryReport};

pin_project_lite::pin_project! {
    /// A call of `op` under `retry`, lending `ctx` to each attempt.
    /// `boxed_loop` boxes the retry loop (`run::retry_boxed`, a zero-sized
    /// fn item), and `Rest` is the future it returns.
    pub(crate) struct Call<'a, C, T, B, X, F, Fut, Loop, Rest> {
        // Never moved while the first attempt runs (a copy goes to the
        // loop): moving it in and out of the stage costs more than the
        // options' own work.
        retry: Retry<'a, C, T, B>,
        clock: Clock,
        boxed_loop: Loop,
        #[pin]
        stage: Stage<X, F, Fut, Rest>,
    }
}

pin_project_lite::pin_project! {
    #[project = StageProj]
    #[project_replace = StageOwned]
    enum Stage<X, F, Fut, Rest> {
        // Not polled yet: the breaker is asked at the first poll.
        Start { ctx: X, op: F },
        // The first attempt, in place.
        First { #[pin] attempt: Fut, op: F },
        // The loop, boxed.
        Rest { #[pin] rest: Rest },
        Done,
    }
}

impl<'a, C, T, B, X, F, Fut, Loop, Rest> Call<'a, C, T, B, X, F, Fut, Loop, Rest> {
    /// The call, not started: nothing runs until it is polled. (The bounds
    /// are the `Future` impl's, so that `boxed_loop`'s type parameters are
    /// inferred here.)
    #[inline]
    pub(crate) fn new<R, E>(retry: Retry<'a, C, T, B>, ctx: X, op: F, boxed_loop: Loop) -> Self
    where
        F: FnMut(X, T::Cutoff) -> Fut,
        Fut: Future<Output = (X, Result<R, E>)>,
        Loop: Fn(Retry<'a, C, T, B>, Clock, X, F, Option<Failure<E>>) -> Rest,
        T: CutSlot<E>,
    {
        Call {
            retry,
            clock: Clock::default(),
            boxed_loop,
            stage: Stage::Start { ctx, op },
        }
    }
}

impl<'a, C, T, B, X, F, Fut, Loop, Rest, R, E> Future for Call<'a, C, T, B, X, F, Fut, Loop, Rest>
where
    F: FnMut(X, T::Cutoff) -> Fut,
    Fut: Future<Output = (X, Result<R, E>)>,
    Loop: Fn(Retry<'a, C, T, B>, Clock, X, F, Option<Failure<E>>) -> Rest,
    Rest: Future<Output = (Result<R, E>, RetryReport)>,
    C: Classify<E>,
    T: CutSlot<E>,
    B: BreakerSlot<E>,
    E: fmt::Display,
{
    type Output = (Result<R, E>, RetryReport);

    // Always: the caller's `poll` is where the success path must end up,
    // and the compiler's own estimate keeps this one out of line.
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let retry = this.retry;
        loop {
            match this.stage.as_mut().project() {
                StageProj::Start { .. } => {
                    let StageOwned::Start { ctx, mut op } =
                        this.stage.as_mut().project_replace(Stage::Done)
                    else {
                        unreachable!("matched as Start")
                    };
                    // Closed (or no breaker): the attempt needs no claim on
                    // the breaker, which has nothing to give back while
                    // closed. Otherwise the loop asks it, this attempt too.
                    let next = if retry.breaker.get().is_none_or(CircuitBreaker::is_closed) {
                        let cutoff = T::cutoff(retry.attempt_timeout, retry.deadline, None);
                        let attempt = op(ctx, cutoff);
                        Stage::First { attempt, op }
                    } else {
                        let rest = (this.boxed_loop)(*retry, *this.clock, ctx, op, None);
                        Stage::Rest { rest }
                    };
                    this.stage.as_mut().project_replace(next);
                }
                StageProj::First { attempt, .. } => {
                    let Poll::Ready((ctx, result)) = attempt.poll(cx) else {
                        // The deadline counts from the first wait.
                        if retry.deadline.is_some() {
                            this.clock.start();
                        }
                        return Poll::Pending;
                    };
                    let outcome = result.map_err(Failure::failed);
                    let claim = retry.breaker.get().map(|b| Admitted::new(b, false));
                    run::report_to(retry, claim, &outcome);
                    let failure = match retry.after_first(outcome) {
                        Ok(ended) => {
                            this.stage.as_mut().project_replace(Stage::Done);
                            return Poll::Ready(ended);
                        }
                        Err(failure) => failure,
                    };
                    let StageOwned::First { op, .. } =
                        this.stage.as_mut().project_replace(Stage::Done)
                    else {
                        unreachable!("matched as First")
                    };
                    let rest = (this.boxed_loop)(*retry, *this.clock, ctx, op, Some(failure));
                    this.stage.as_mut().project_replace(Stage::Rest { rest });
                }
                StageProj::Rest { rest } => {
                    let ended = std::task::ready!(rest.poll(cx));
                    this.stage.as_mut().project_replace(Stage::Done);
                    return Poll::Ready(ended);
                }
                StageProj::Done => panic!("a retried call polled after it completed"),
            }
        }
    }
}
