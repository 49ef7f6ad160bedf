//! The retry loop itself, written once for every [`Retry`] and every run
//! method: one attempt (the breaker's admission, the attempt on the clock,
//! the breaker told its verdict), the decisions after a failure, the boxed
//! loop behind a first attempt (`call::Call` makes that one in place), and
//! the blocking loop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::retry::breaker::Admitted;
use crate::retry::op::{self, OpRef, Reason};
use crate::retry::reshape::{LentNothing, Reshaped};
use crate::retry::timed::{Clock, NoCutoff, RunCut};
use crate::retry::{
    BreakerSlot, ByError, Classify, CutSlot, Jitter, NoBreaker, Observer, Retry, RetryEvent,
    RetryReport, Stop, Uncut,
};

/// How an attempt failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The operation returned an error (a cut attempt's `TimedOut` too).
    Failed,
    /// The circuit breaker refused it: the call stops.
    Refused,
}

/// A failed attempt: the caller's error, and how it came about.
pub(crate) struct Failure<E> {
    pub(crate) err: E,
    pub(crate) kind: Kind,
}

impl<E> Failure<E> {
    #[inline]
    pub(crate) fn failed(err: E) -> Self {
        Failure {
            err,
            kind: Kind::Failed,
        }
    }
}

/// The plain loop's body (`with_retry`, and `#[retry]` without options):
/// no breaker, no clock, nothing cut, so the first attempt is the bare
/// operation and the success path is the operation's own. Evaluates to the
/// `Result`; `$retry` is an expression evaluated where needed (a `Copy`
/// value or a constructor), so that no `Retry` sits in the future's state
/// across the first attempt.
macro_rules! plain_attempt_then_retry {
    ($retry:expr, $op:ident) => {{
        // Scoped so that nothing of the first attempt (its result, the
        // error) stays in the future's state across the retry path's
        // `.await`: a local still in scope there keeps its storage.
        let retrying = {
            let err = match $op().await {
                Ok(value) => {
                    $retry.succeeded();
                    return Ok(value);
                }
                Err(err) => err,
            };
            let failure = $crate::retry::builder::run::Failure::failed(err);
            if $retry.ends_at_first(&failure).is_some() {
                return Err(failure.err);
            }
            $crate::retry::builder::run::plain_retry_boxed($retry, $op, failure)
        };
        retrying.await.0
    }};
}
pub(crate) use plain_attempt_then_retry;

/// The breaker's admission of an attempt: `Err` when it is open (the
/// attempt is not made), else the claim to report the outcome to.
#[inline]
fn admit<'r, C, T, B: BreakerSlot<E>, E>(
    retry: &'r Retry<'_, C, T, B>,
) -> Result<Option<Admitted<'r>>, Failure<E>> {
    let Some(breaker) = retry.breaker.get() else {
        return Ok(None);
    };
    match breaker.admit() {
        Ok(probe) => Ok(Some(Admitted::new(breaker, probe))),
        // `refused` is `None` only for a loop with no breaker.
        Err(open) => match B::refused(open) {
            Some(err) => Err(Failure {
                err,
                kind: Kind::Refused,
            }),
            None => Ok(None),
        },
    }
}

/// Tells the breaker how an admitted attempt went: a success, a transient
/// failure, or neither (a permanent error says nothing of the dependency's
/// health).
#[inline]
pub(crate) fn report_to<C: Classify<E>, T, B, R, E>(
    retry: &Retry<'_, C, T, B>,
    admitted: Option<Admitted<'_>>,
    outcome: &Result<R, Failure<E>>,
) {
    if let Some(admitted) = admitted {
        let verdict = match outcome {
            Ok(_) => Some(true),
            Err(failure) if retry.is_transient(failure) => Some(false),
            Err(_) => None,
        };
        admitted.report(verdict);
    }
}

/// One attempt of the loop, through its breaker: refused while the breaker
/// is open, else `op` is lent `ctx` and hands it back with its result, is
/// given its cutoff ([`CutSlot::Cutoff`]), and the breaker is told the
/// verdict.
async fn attempt<C, T, B, X, F, Fut, R, E>(
    retry: &Retry<'_, C, T, B>,
    clock: &mut Clock,
    ctx: X,
    op: &mut F,
) -> (X, Result<R, Failure<E>>)
where
    F: FnMut(X, T::Cutoff) -> Fut,
    Fut: Future<Output = (X, Result<R, E>)>,
    C: Classify<E>,
    T: CutSlot<E>,
    B: BreakerSlot<E>,
{
    let admitted = match admit(retry) {
        Ok(admitted) => admitted,
        Err(refused) => return (ctx, Err(refused)),
    };
    let cutoff = T::cutoff(retry.attempt_timeout, retry.deadline, clock.started());
    let (ctx, result) = clock.track(retry.deadline.is_some(), op(ctx, cutoff)).await;
    let outcome = result.map_err(Failure::failed);
    report_to(retry, admitted, &outcome);
    (ctx, outcome)
}

/// A plain op as the loop takes it: lent nothing, its attempt run under
/// the cutoff `K` it is handed.
#[inline]
pub(crate) fn lend_nothing<K, F, Fut, R, E>(
    mut op: F,
) -> impl FnMut((), K) -> Reshaped<K::Run<Fut, R>, LentNothing>
where
    K: RunCut<E>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    move |(), cutoff: K| Reshaped::new(cutoff.run(op()))
}

impl<C, T, B> Retry<'_, C, T, B> {
    /// Whether a failure may pass by itself: a refused attempt never, an
    /// error (a cut attempt's `TimedOut` included) as the classifier says.
    #[inline]
    pub(crate) fn is_transient<E>(&self, failure: &Failure<E>) -> bool
    where
        C: Classify<E>,
    {
        match failure.kind {
            Kind::Failed => self.classify.is_transient(&failure.err),
            Kind::Refused => false,
        }
    }

    // Inline: on the success path of every entry point, and a no-op there
    // unless a budget is set. Across crates an un-inlined call would build
    // a whole `Retry` on the stack just to find that out.
    #[inline]
    pub(crate) fn succeeded(&self) {
        op::succeeded(self.op);
        if let Some(budget) = self.budget {
            budget.deposit();
        }
    }

    /// What the first attempt's outcome means: the call's end (`Ok`, with
    /// its report), or the failure to retry after.
    #[inline]
    pub(crate) fn after_first<R, E>(
        &self,
        outcome: Result<R, Failure<E>>,
    ) -> Result<(Result<R, E>, RetryReport), Failure<E>>
    where
        C: Classify<E>,
    {
        match outcome {
            Ok(value) => {
                self.succeeded();
                Ok((Ok(value), RetryReport::first(Stop::Succeeded)))
            }
            Err(failure) => match self.ends_at_first(&failure) {
                Some(stop) => Ok((Err(failure.err), RetryReport::first(stop))),
                None => Err(failure),
            },
        }
    }

    /// Whether a first attempt's failure ends the call without a retry, and
    /// why: a refused attempt, a permanent error, or one attempt allowed.
    /// Such an end is counted, not logged (the error goes back to the
    /// caller at once). The one rule for every async entry point.
    #[cold]
    pub(crate) fn ends_at_first<E>(&self, failure: &Failure<E>) -> Option<Stop>
    where
        C: Classify<E>,
    {
        let stop = self.ends_without_wait(1, failure)?;
        op::stopped(self.op, stop);
        Some(stop)
    }

    /// Why the failure of attempt `attempt` ends the call whatever the
    /// wait would be: a refused attempt, a permanent error, or the last
    /// attempt allowed.
    #[inline]
    fn ends_without_wait<E>(&self, attempt: u32, failure: &Failure<E>) -> Option<Stop>
    where
        C: Classify<E>,
    {
        if failure.kind == Kind::Refused {
            Some(Stop::CircuitOpen)
        } else if !self.is_transient(failure) {
            Some(Stop::Permanent)
        } else if attempt >= self.policy.max_attempts {
            Some(Stop::Exhausted)
        } else {
            None
        }
    }

    /// The wait before the attempt after `attempt`, and whether the server
    /// chose it; `Err` says why not to retry. `elapsed`: time since the
    /// call started (known when a deadline is set).
    fn next_delay<E>(
        &self,
        attempt: u32,
        elapsed: Option<Duration>,
        failure: &Failure<E>,
        rng: &mut Option<fastrand::Rng>,
    ) -> Result<(Duration, bool), Stop>
    where
        C: Classify<E>,
    {
        if let Some(stop) = self.ends_without_wait(attempt, failure) {
            return Err(stop);
        }
        let (delay, server_chose) = match self.classify.retry_after(&failure.err) {
            Some(asked) if self.max_retry_after.is_some_and(|ceiling| asked > ceiling) => {
                return Err(Stop::RetryAfterCeiling);
            }
            Some(asked) => (asked, true),
            None => {
                let backoff = self.policy.backoff(attempt);
                let delay = match self.jitter {
                    Jitter::None => backoff,
                    jitter => {
                        let seed = self.seed;
                        let rng = rng.get_or_insert_with(|| {
                            seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed)
                        });
                        jitter.apply(backoff, rng)
                    }
                };
                (delay, false)
            }
        };
        if let (Some(deadline), Some(elapsed)) = (self.deadline, elapsed) {
            if elapsed.saturating_add(delay) > deadline {
                return Err(Stop::Deadline);
            }
        }
        if self.budget.is_some_and(|budget| !budget.try_withdraw()) {
            return Err(Stop::Budget);
        }
        Ok((delay, server_chose))
    }

    /// Logs a retry, counts it and tells the observer, before its wait.
    fn announce<E: fmt::Display>(
        &self,
        attempt: u32,
        delay: Duration,
        server_chose: bool,
        failure: &Failure<E>,
    ) where
        C: Classify<E>,
    {
        let reason = if server_chose {
            Reason::RateLimited
        } else if self.classify.timed_out(&failure.err) {
            Reason::TimedOut
        } else {
            Reason::Transient
        };
        announce(
            self.op,
            self.policy.max_attempts,
            self.on_retry,
            reason,
            attempt,
            delay,
            &failure.err,
        );
    }

    /// After a failed attempt: the wait before the next one, announced
    /// (logged, counted, shown to the observer); or `None` when the call
    /// stops there, with `report.stop` set and the give-up logged. The one
    /// decision of the async and the blocking loop.
    fn next_wait<E: fmt::Display>(
        &self,
        report: &mut RetryReport,
        clock: &mut Clock,
        failure: &Failure<E>,
        rng: &mut Option<fastrand::Rng>,
    ) -> Option<Duration>
    where
        C: Classify<E>,
    {
        match self.next_delay(report.attempts, clock.elapsed(self.deadline), failure, rng) {
            Ok((delay, server_chose)) => {
                self.announce(report.attempts, delay, server_chose, failure);
                Some(delay)
            }
            Err(stop) => {
                report.stop = stop;
                give_up(self.op, report, &failure.err);
                None
            }
        }
    }
}

/// [`Retry::announce`] without the type parameters, so that it is compiled
/// once.
fn announce(
    op: OpRef,
    max_attempts: u32,
    observer: Option<&Observer<'_>>,
    reason: Reason,
    attempt: u32,
    delay: Duration,
    err: &dyn fmt::Display,
) {
    op::retrying(op, reason, delay);
    tracing::warn!(
        op = op.name(),
        attempt,
        max_attempts,
        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        retry_after = reason == Reason::RateLimited,
        error = %err,
        "transient failure, retrying"
    );
    if let Some(observer) = observer {
        observer(&RetryEvent {
            attempt,
            delay,
            server_delay: reason == Reason::RateLimited,
            error: err,
        });
    }
}

fn give_up(op: OpRef, report: &RetryReport, err: &dyn fmt::Display) {
    op::stopped(op, report.stop);
    tracing::warn!(op = op.name(), attempts = report.attempts, reason = ?report.stop, error = %err, "giving up");
}

/// Boxes the retry path outside any `async` body: built inside one, the
/// unboxed future would still take up room in that body's state. Cold and
/// out of line, so the success path's code stays small. `first` is the
/// first attempt's failure, or `None` when the loop makes the first attempt
/// itself (its breaker was not closed).
#[cold]
#[inline(never)]
pub(crate) fn retry_boxed<'a, C, T, B, X, F, Fut, R, E>(
    retry: Retry<'a, C, T, B>,
    clock: Clock,
    ctx: X,
    op: F,
    first: Option<Failure<E>>,
) -> Pin<Box<impl Future<Output = (Result<R, E>, RetryReport)> + use<'a, C, T, B, X, F, Fut, R, E>>>
where
    F: FnMut(X, T::Cutoff) -> Fut,
    Fut: Future<Output = (X, Result<R, E>)>,
    C: Classify<E>,
    T: CutSlot<E>,
    B: BreakerSlot<E>,
    E: fmt::Display,
{
    Box::pin(retry_loop(retry, clock, ctx, op, first))
}

/// [`retry_boxed`] for the plain loop's op.
#[cold]
#[inline(never)]
pub(crate) fn plain_retry_boxed<'a, F, Fut, R, E>(
    retry: Retry<'a, ByError, Uncut, NoBreaker>,
    op: F,
    failure: Failure<E>,
) -> Pin<Box<impl Future<Output = (Result<R, E>, RetryReport)> + use<'a, F, Fut, R, E>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<R, E>>,
    E: crate::retry::RetryableError,
{
    let op = lend_nothing::<NoCutoff, _, _, _, _>(op);
    retry_boxed(retry, Clock::default(), (), op, Some(failure))
}

/// The loop behind the inline first attempt: from that attempt's
/// transient failure, or (`first` is `None`) from the first attempt.
async fn retry_loop<C, T, B, X, F, Fut, R, E>(
    retry: Retry<'_, C, T, B>,
    mut clock: Clock,
    mut ctx: X,
    mut op: F,
    first: Option<Failure<E>>,
) -> (Result<R, E>, RetryReport)
where
    F: FnMut(X, T::Cutoff) -> Fut,
    Fut: Future<Output = (X, Result<R, E>)>,
    C: Classify<E>,
    T: CutSlot<E>,
    B: BreakerSlot<E>,
    E: fmt::Display,
{
    let mut failure = match first {
        Some(failure) => failure,
        None => {
            let (back, outcome) = attempt(&retry, &mut clock, ctx, &mut op).await;
            ctx = back;
            match retry.after_first(outcome) {
                Ok(ended) => return ended,
                Err(failure) => failure,
            }
        }
    };
    let mut rng = None;
    let mut report = RetryReport::first(Stop::Succeeded);
    loop {
        let Some(delay) = retry.next_wait(&mut report, &mut clock, &failure, &mut rng) else {
            return (Err(failure.err), report);
        };
        tokio::time::sleep(delay).await;
        report.waited(delay);
        let (back, outcome) = attempt(&retry, &mut clock, ctx, &mut op).await;
        ctx = back;
        failure = match outcome {
            Ok(value) => {
                retry.succeeded();
                return (Ok(value), report);
            }
            Err(failure) => failure,
        };
    }
}

/// The blocking loop (`Retry::run_blocking*`): the same attempt, verdict
/// and delay as the async one, with `std::thread::sleep` between.
pub(crate) fn blocking<C, B, F, R, E>(
    retry: Retry<'_, C, Uncut, B>,
    mut op: F,
) -> (Result<R, E>, RetryReport)
where
    F: FnMut() -> Result<R, E>,
    C: Classify<E>,
    B: BreakerSlot<E>,
    E: fmt::Display,
{
    let mut clock = Clock::default();
    if retry.deadline.is_some() {
        clock.start_now();
    }
    let mut rng = None;
    let mut report = RetryReport::first(Stop::Succeeded);
    loop {
        let outcome = match admit(&retry) {
            Ok(admitted) => {
                let outcome = op().map_err(Failure::failed);
                report_to(&retry, admitted, &outcome);
                outcome
            }
            Err(refused) => Err(refused),
        };
        let failure = match outcome {
            Ok(value) => {
                retry.succeeded();
                return (Ok(value), report);
            }
            Err(failure) => failure,
        };
        let Some(delay) = retry.next_wait(&mut report, &mut clock, &failure, &mut rng) else {
            return (Err(failure.err), report);
        };
        std::thread::sleep(delay);
        report.waited(delay);
    }
}
