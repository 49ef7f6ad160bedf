//! [`Retry`]: `with_retry`'s loop with the options a production caller
//! needs (jitter, a total deadline, a ceiling on the server's Retry-After,
//! an observer, a shared retry budget, attempt timeouts and a circuit
//! breaker), for any error a classifier can judge. One type, one set of run
//! methods: every option combines with every other.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::op::{self, Op, OpRef};
use super::reshape::{Reshaped, ResultOnly};
use super::{
    BreakerSlot, ByError, CircuitBreaker, Classify, Cut, CutSlot, Jitter, NoBreaker, Observer,
    RetryBudget, RetryReport, Uncut, When,
};
use crate::RetryPolicy;
use call::Call;

// The run's future and the loop itself: parts of the one `Retry` type, so
// children of its module (they read its options) rather than siblings that
// it and they would both reach.
mod call;
pub(crate) mod run;

/// A retry loop built from a [`RetryPolicy`] and options; `run` it on an
/// operation. [`with_retry`](crate::with_retry)`(policy, op)` is
/// `Retry::new(policy).run(op)`.
///
/// Every option is off until set, options are set in any order, and every
/// option combines with every other and with every run method. On the
/// success path the budget costs an atomic load (while full) and the
/// breaker two (while closed); the others nothing: the first attempt runs
/// inline, the clock is read only once an attempt waits, and the loop's
/// state (counters, random generator, timer) is built only after a
/// transient failure.
///
/// The type parameters record what the run methods must ask of the error
/// type, and change as options are set: `C` decides what is retried
/// ([`ByError`], or [`When`] after [`Retry::when`]), `T` whether attempts
/// are cut (`Uncut`, or [`Cut`] after [`Retry::attempt_timeout`]:
/// `E: From<TimedOut>`), `B` the circuit breaker (`NoBreaker`, or
/// `&CircuitBreaker` after [`Retry::breaker`]: `E: From<CircuitOpen>`).
///
/// ```
/// use etl_core::retry::{CircuitBreaker, Jitter, Retry, RetryBudget, RetryEvent};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
///
/// static BUDGET: RetryBudget = RetryBudget::new(500);
/// static UPSTREAM: CircuitBreaker = CircuitBreaker::new(5, Duration::from_secs(30));
///
/// fn log(event: &RetryEvent<'_>) {
///     eprintln!("attempt {} failed ({}), next in {:?}", event.attempt, event.error, event.delay);
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut calls = 0;
/// let page = Retry::new(RetryPolicy::default())
///     .jitter(Jitter::Full)                       // spread the waits
///     .deadline(Duration::from_secs(30))          // give up after 30 s in all
///     .max_retry_after(Duration::from_secs(60))   // never sleep an hour unbidden
///     .on_retry(&log)
///     .budget(&BUDGET)                            // share the retries with every caller
///     .breaker(&UPSTREAM)                         // fail fast while the upstream is down
///     .attempt_timeout(Duration::from_secs(5))    // cut an attempt that hangs
///     .run(|| {
///         calls += 1;
///         let outcome = if calls < 3 { Err(EtlError::Network("reset".into())) } else { Ok("page") };
///         async move { outcome }
///     })
///     .await;
/// assert_eq!(page.unwrap(), "page");
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct Retry<'a, C = ByError, T = Uncut, B = NoBreaker> {
    pub(super) policy: RetryPolicy,
    pub(super) jitter: Jitter,
    pub(super) seed: Option<u64>,
    pub(super) deadline: Option<Duration>,
    pub(super) max_retry_after: Option<Duration>,
    pub(super) attempt_timeout: Option<Duration>,
    pub(super) on_retry: Option<&'a Observer<'a>>,
    pub(super) budget: Option<&'a RetryBudget>,
    pub(super) op: OpRef,
    pub(super) classify: C,
    pub(super) cut: T,
    pub(super) breaker: B,
}

impl<C, T, B: fmt::Debug> fmt::Debug for Retry<'_, C, T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("op", &self.op.name())
            .field("policy", &self.policy)
            .field("jitter", &self.jitter)
            .field("seed", &self.seed)
            .field("deadline", &self.deadline)
            .field("max_retry_after", &self.max_retry_after)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("on_retry", &self.on_retry.is_some())
            .field("budget", &self.budget)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

impl<'a> Retry<'a> {
    /// The loop `with_retry` runs: `policy`, no options.
    #[inline]
    pub const fn new(policy: RetryPolicy) -> Self {
        Retry {
            policy,
            jitter: Jitter::None,
            seed: None,
            deadline: None,
            max_retry_after: None,
            attempt_timeout: None,
            on_retry: None,
            budget: None,
            op: OpRef::Static(&op::WITH_RETRY),
            classify: ByError,
            cut: Uncut,
            breaker: NoBreaker,
        }
    }
}

impl<'a, C, T, B> Retry<'a, C, T, B> {
    /// The same options with other type parameters: the one place a setter
    /// that changes a type rebuilds the loop. `slots` maps the classifier,
    /// the cut and the breaker to their new values.
    #[inline(always)]
    fn recast<C2, T2, B2>(
        self,
        slots: impl FnOnce(C, T, B) -> (C2, T2, B2),
    ) -> Retry<'a, C2, T2, B2> {
        let (classify, cut, breaker) = slots(self.classify, self.cut, self.breaker);
        Retry {
            policy: self.policy,
            jitter: self.jitter,
            seed: self.seed,
            deadline: self.deadline,
            max_retry_after: self.max_retry_after,
            attempt_timeout: self.attempt_timeout,
            on_retry: self.on_retry,
            budget: self.budget,
            op: self.op,
            classify,
            cut,
            breaker,
        }
    }

    /// Names the call: the `op` field of its `tracing` events and the `op`
    /// label of its metrics (feature `metrics`). Unnamed, it is
    /// `"with_retry"`; `#[retry]` names it after its fn.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::{EtlError, RetryPolicy};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let rows = Retry::new(RetryPolicy::default())
    ///     .name("load_invoices")
    ///     .run(|| async { Ok::<_, EtlError>(3) })
    ///     .await;
    /// # assert_eq!(rows.unwrap(), 3);
    /// # }
    /// ```
    #[inline]
    pub fn name(mut self, op: &'static str) -> Self {
        self.op = OpRef::Named(op);
        self
    }

    /// Names the call from a static: what `#[retry]` expands to. Not
    /// public API.
    #[doc(hidden)]
    #[inline]
    pub fn __op(mut self, op: &'static Op) -> Self {
        self.op = OpRef::Static(op);
        self
    }

    /// Randomises the backoff (not a server's Retry-After).
    #[inline]
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Seeds the jitter's random generator, so the waits are reproducible
    /// (each `run` starts from this seed). Unseeded, each run draws a seed.
    #[inline]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// A total deadline, sleeps included: no wait is started that would end
    /// past it, and the last error is returned instead. It counts from the
    /// first attempt's first wait (an attempt that finishes without waiting
    /// reads no clock). An attempt already running is cut only when the
    /// error type can say so: add [`Retry::cut_in_flight`] or
    /// [`Retry::attempt_timeout`] (`E: From<TimedOut>`, as `EtlError` is);
    /// `#[retry(deadline = ...)]` does that by itself for such types.
    ///
    /// [`TimedOut`]: super::TimedOut
    #[inline]
    pub fn deadline(mut self, total: Duration) -> Self {
        self.deadline = Some(total);
        self
    }

    /// A ceiling on the server's Retry-After: an error asking for a longer
    /// wait is returned at once instead of slept on.
    #[inline]
    pub fn max_retry_after(mut self, ceiling: Duration) -> Self {
        self.max_retry_after = Some(ceiling);
        self
    }

    /// Calls `observer` before each wait with the attempt number, the delay
    /// and the error.
    #[inline]
    pub fn on_retry(mut self, observer: &'a Observer<'a>) -> Self {
        self.on_retry = Some(observer);
        self
    }

    /// Draws every retry from `budget`, shared with other calls: a retry the
    /// budget cannot pay is not made, and each success refills it.
    #[inline]
    pub fn budget(mut self, budget: &'a RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The policy this loop follows.
    #[inline]
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Decides what is retried with `pred` instead of
    /// [`RetryableError::is_transient`](super::RetryableError::is_transient),
    /// so the error type needs no `RetryableError` impl at all (only
    /// `Display`, for the log): a foreign type can be retried. No server
    /// delay is known then; the backoff decides every wait. An attempt cut
    /// by a timeout fails with [`TimedOut`](super::TimedOut) converted into
    /// `E`, and `pred` judges it as any other error: return `true` for it
    /// to retry a cut attempt.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::RetryPolicy;
    ///
    /// #[derive(Debug)]
    /// struct Busy; // a foreign error type, with no RetryableError impl
    /// impl std::fmt::Display for Busy {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("busy") }
    /// }
    ///
    /// fn always(_: &Busy) -> bool {
    ///     true
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut calls = 0;
    /// let read = Retry::new(RetryPolicy::default())
    ///     .when(always)
    ///     .run(|| {
    ///         calls += 1;
    ///         let r = if calls == 1 { Err(Busy) } else { Ok(7) };
    ///         async move { r }
    ///     })
    ///     .await;
    /// assert_eq!(read.unwrap(), 7);
    /// # }
    /// ```
    #[inline]
    pub fn when<E>(self, pred: fn(&E) -> bool) -> Retry<'a, When<E>, T, B> {
        self.recast(|_, cut, breaker| (When(pred), cut, breaker))
    }

    /// Cuts every attempt that runs longer than `limit`; the cut attempt
    /// fails with [`TimedOut`](super::TimedOut) (converted into the error
    /// type, which must implement `From<TimedOut>`) and is retried as a
    /// transient failure. A deadline, if set, then bounds the attempt in
    /// flight too. The limit counts from the attempt's first wait. A
    /// blocking attempt cannot be cut: `run_blocking` is not offered with it.
    #[inline]
    pub fn attempt_timeout(mut self, limit: Duration) -> Retry<'a, C, Cut, B> {
        self.attempt_timeout = Some(limit);
        self.cut_in_flight()
    }

    /// Lets the deadline cut the attempt in flight, so the call returns by
    /// its deadline whatever the operation does (needs `E: From<TimedOut>`).
    /// Without this (or [`Retry::attempt_timeout`]) the deadline only stops
    /// new waits.
    #[inline]
    pub fn cut_in_flight(self) -> Retry<'a, C, Cut, B> {
        self.recast(|classify, _, breaker| (classify, Cut, breaker))
    }

    /// Passes every attempt through `breaker`, shared with every call to
    /// the same dependency ([`CircuitBreaker`]): while it is open an attempt
    /// fails at once with [`CircuitOpen`](super::CircuitOpen) (converted
    /// into the error type, which must implement `From<CircuitOpen>`), and
    /// the call stops there ([`Stop::CircuitOpen`](super::Stop::CircuitOpen)).
    #[inline]
    pub fn breaker(self, breaker: &'a CircuitBreaker) -> Retry<'a, C, T, &'a CircuitBreaker> {
        self.recast(|classify, cut, _| (classify, cut, breaker))
    }

    /// Runs `op` until it succeeds, fails permanently, has run
    /// `max_attempts` times or an option stops it; returns its last result.
    pub fn run<F, Fut, R, E>(
        self,
        op: F,
    ) -> impl Future<Output = Result<R, E>> + use<'a, C, T, B, F, Fut, R, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, E>>,
        C: Classify<E>,
        T: CutSlot<E>,
        B: BreakerSlot<E>,
        E: fmt::Display,
    {
        Reshaped::<_, ResultOnly>::new(self.run_with_report(op))
    }

    /// [`Retry::run`], and how the call ended: attempts, time slept, and
    /// why it stopped ([`RetryReport`]). The success path builds nothing
    /// more than `run`'s.
    pub fn run_with_report<F, Fut, R, E>(
        self,
        op: F,
    ) -> impl Future<Output = (Result<R, E>, RetryReport)> + use<'a, C, T, B, F, Fut, R, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<R, E>>,
        C: Classify<E>,
        T: CutSlot<E>,
        B: BreakerSlot<E>,
        E: fmt::Display,
    {
        let lent = run::lend_nothing::<T::Cutoff, _, _, _, _>(op);
        Call::new(self, (), lent, run::retry_boxed)
    }

    /// [`Retry::run`] for an operation that needs exclusive borrows (`&mut
    /// self`, `&mut T`): `ctx` (one borrow, or a tuple of them) is lent to
    /// each attempt in turn. The attempt takes it by value and hands it back
    /// with its result, so the loop holds no borrow while an attempt runs
    /// and the future is `Send` when the attempt's is. An attempt is cut
    /// (`attempt_timeout`, a deadline in flight) only inside the `run` of
    /// the cutoff it is given (its `CutSlot::Cutoff`: a
    /// [`Cutoff`](super::Cutoff), or a `NoCutoff` that
    /// only awaits), so that a cut attempt still hands `ctx` back. This is what `#[retry]` expands to on a `&mut self`
    /// method.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::{EtlError, RetryPolicy};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut log: Vec<u32> = Vec::new();
    /// let result = Retry::new(RetryPolicy::default())
    ///     .attempt_timeout(Duration::from_secs(5))
    ///     .run_lending(&mut log, |log, cutoff| async move {
    ///         let result = cutoff
    ///             .run(async {
    ///                 log.push(log.len() as u32); // each attempt sees the last one's push
    ///                 if log.len() < 3 { Err(EtlError::Network("reset".into())) } else { Ok(log.len()) }
    ///             })
    ///             .await;
    ///         (log, result)
    ///     })
    ///     .await;
    /// assert_eq!(result.unwrap(), 3);
    /// assert_eq!(log, [0, 1, 2]);
    /// # }
    /// ```
    pub fn run_lending<X, F, Fut, R, E>(
        self,
        ctx: X,
        op: F,
    ) -> impl Future<Output = Result<R, E>> + use<'a, C, T, B, X, F, Fut, R, E>
    where
        F: FnMut(X, T::Cutoff) -> Fut,
        Fut: Future<Output = (X, Result<R, E>)>,
        C: Classify<E>,
        T: CutSlot<E>,
        B: BreakerSlot<E>,
        E: fmt::Display,
    {
        Reshaped::<_, ResultOnly>::new(Call::new(self, ctx, op, run::retry_boxed))
    }
}

impl<C, B> Retry<'_, C, Uncut, B> {
    /// [`Retry::run`] for blocking code: `op` is a plain `FnMut` returning a
    /// `Result`, and the waits are `std::thread::sleep`. Needs no tokio
    /// runtime; every option but the cut of an attempt applies (a running
    /// blocking call cannot be cut, so a loop with
    /// [`Retry::attempt_timeout`] has no blocking run method). The deadline
    /// counts from the call's start.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::{EtlError, RetryPolicy};
    /// use std::time::Duration;
    ///
    /// let policy = RetryPolicy { max_attempts: 3, base_delay: Duration::from_millis(1), max_delay: Duration::from_millis(2) };
    /// let mut calls = 0;
    /// let answer = Retry::new(policy).run_blocking(|| {
    ///     calls += 1;
    ///     if calls < 3 { Err(EtlError::Network("reset".into())) } else { Ok(calls) }
    /// });
    /// assert_eq!(answer.unwrap(), 3);
    /// ```
    pub fn run_blocking<F, R, E>(self, op: F) -> Result<R, E>
    where
        F: FnMut() -> Result<R, E>,
        C: Classify<E>,
        B: BreakerSlot<E>,
        E: fmt::Display,
    {
        self.run_blocking_with_report(op).0
    }

    /// [`Retry::run_blocking`], and how the call ended.
    pub fn run_blocking_with_report<F, R, E>(self, op: F) -> (Result<R, E>, RetryReport)
    where
        F: FnMut() -> Result<R, E>,
        C: Classify<E>,
        B: BreakerSlot<E>,
        E: fmt::Display,
    {
        run::blocking(self, op)
    }
}
