//! [`Retry`]: `with_retry`'s loop with the options a production caller
//! needs: jitter, a total deadline, a ceiling on the server's Retry-After,
//! an observer and a shared retry budget, for any [`RetryableError`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

use super::op::{self, Op, OpRef, Reason};
use super::{Jitter, RetryBudget, RetryableError};
use crate::RetryPolicy;

/// The body every entry point (`with_retry`, `Retry::run`, the `#[retry]`
/// expansion) shares: the first attempt inline, the rest boxed. A macro, not
/// a fn: awaiting a shared `async fn` from each entry point would nest its
/// future, and a second copy of the arguments, inside theirs. `$retry` is
/// an expression evaluated where needed (a `Copy` value or a constructor).
macro_rules! attempt_then_retry {
    ($retry:expr, $started:expr, $op:ident) => {{
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
            if $retry.ends_at_first(&err).is_some() {
                return Err(err);
            }
            // The retry path is a future of its own, on the heap: the
            // future the entry point returns holds none of its state, and
            // the success path never builds it. A retry waits milliseconds
            // at least; one allocation is nothing beside that.
            $crate::retry::builder::retry_boxed($retry, $started, $op, err)
        };
        retrying.await.0
    }};
}
pub(crate) use attempt_then_retry;

/// What an observer ([`Retry::on_retry`]) is told before each wait.
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    /// The attempt that just failed (1-based).
    pub attempt: u32,
    /// How long the loop waits before the next attempt.
    pub delay: Duration,
    /// Whether the server chose `delay` (its Retry-After).
    pub server_delay: bool,
    /// The error that ended the attempt.
    pub error: &'a dyn fmt::Display,
}

impl fmt::Debug for RetryEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryEvent")
            .field("attempt", &self.attempt)
            .field("delay", &self.delay)
            .field("server_delay", &self.server_delay)
            .field("error", &format_args!("{}", self.error))
            .finish()
    }
}

/// An observer of retries: called before each wait.
pub type Observer<'a> = dyn Fn(&RetryEvent<'_>) + Send + Sync + 'a;

/// A retry loop built from a [`RetryPolicy`] and options; `run` it on an
/// operation. [`with_retry`](crate::with_retry)`(policy, op)` is
/// `Retry::new(policy).run(op)`.
///
/// Every option is off until set, and none costs anything on the success
/// path: the first attempt runs inline, and the loop's state (counters,
/// random generator, timer) is built only after a transient failure.
///
/// ```
/// use etl_core::retry::{Jitter, Retry, RetryBudget, RetryEvent};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
///
/// static BUDGET: RetryBudget = RetryBudget::new(500);
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
pub struct Retry<'a> {
    policy: RetryPolicy,
    jitter: Jitter,
    seed: Option<u64>,
    pub(super) deadline: Option<Duration>,
    max_retry_after: Option<Duration>,
    on_retry: Option<&'a Observer<'a>>,
    budget: Option<&'a RetryBudget>,
    op: OpRef,
}

impl fmt::Debug for Retry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("op", &self.op.name())
            .field("policy", &self.policy)
            .field("jitter", &self.jitter)
            .field("seed", &self.seed)
            .field("deadline", &self.deadline)
            .field("max_retry_after", &self.max_retry_after)
            .field("on_retry", &self.on_retry.is_some())
            .field("budget", &self.budget)
            .finish()
    }
}

/// Why a retry loop stopped ([`RetryReport::stop`]); the give-up `tracing`
/// event names the same reason, and so does the `stop` label of
/// `etl_retry_calls_total` ([`Stop::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// An attempt succeeded.
    Succeeded,
    /// An attempt failed with an error that is not transient.
    Permanent,
    /// `max_attempts` attempts ran, and the last failed.
    Exhausted,
    /// The next wait would have ended past the deadline.
    Deadline,
    /// The server asked for a longer wait than `max_retry_after` allows.
    RetryAfterCeiling,
    /// The shared [`RetryBudget`] could not pay for another retry.
    Budget,
}

/// How a call ended: from [`Retry::run_with_report`] and
/// [`Retry::run_blocking_with_report`].
///
/// ```
/// use etl_core::retry::{Retry, Stop};
/// use etl_core::{EtlError, RetryPolicy};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let (result, report) = Retry::new(RetryPolicy::default())
///     .run_with_report(|| async { Err::<(), _>(EtlError::Network("reset".into())) })
///     .await;
/// assert!(result.is_err());
/// assert_eq!(report.attempts, 4);
/// assert_eq!(report.slept, Duration::from_millis(200 + 400 + 800));
/// assert_eq!(report.stop, Stop::Exhausted);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryReport {
    /// Attempts made, the first included.
    pub attempts: u32,
    /// Time spent waiting between attempts.
    pub slept: Duration,
    /// Why the loop stopped.
    pub stop: Stop,
}

impl Stop {
    /// The stop in snake_case, as the `stop` label of the metrics shows it.
    ///
    /// ```
    /// use etl_core::retry::Stop;
    ///
    /// assert_eq!(Stop::RetryAfterCeiling.as_str(), "retry_after_ceiling");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Stop::Succeeded => "succeeded",
            Stop::Permanent => "permanent",
            Stop::Exhausted => "exhausted",
            Stop::Deadline => "deadline",
            Stop::RetryAfterCeiling => "retry_after_ceiling",
            Stop::Budget => "budget",
        }
    }
}

impl RetryReport {
    fn first(stop: Stop) -> Self {
        RetryReport {
            attempts: 1,
            slept: Duration::ZERO,
            stop,
        }
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
            on_retry: None,
            budget: None,
            op: OpRef::Static(&op::WITH_RETRY),
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
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Seeds the jitter's random generator, so the waits are reproducible
    /// (each `run` starts from this seed). Unseeded, each run draws a seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// A total deadline, from the first attempt's start, sleeps included: no
    /// wait is started that would end past it, and the last error is
    /// returned instead. An attempt already running is cut only when the
    /// error type can say so: add [`Retry::cut_in_flight`] or
    /// [`Retry::attempt_timeout`] (`E: From<TimedOut>`, as `EtlError` is);
    /// `#[retry(deadline = ...)]` does that by itself for such types.
    ///
    /// [`TimedOut`]: super::TimedOut
    pub fn deadline(mut self, total: Duration) -> Self {
        self.deadline = Some(total);
        self
    }

    /// A ceiling on the server's Retry-After: an error asking for a longer
    /// wait is returned at once instead of slept on.
    pub fn max_retry_after(mut self, ceiling: Duration) -> Self {
        self.max_retry_after = Some(ceiling);
        self
    }

    /// Calls `observer` before each wait with the attempt number, the delay
    /// and the error.
    pub fn on_retry(mut self, observer: &'a Observer<'a>) -> Self {
        self.on_retry = Some(observer);
        self
    }

    /// Draws every retry from `budget`, shared with other calls: a retry the
    /// budget cannot pay is not made, and each success refills it.
    pub fn budget(mut self, budget: &'a RetryBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The policy this loop follows.
    #[inline]
    pub fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// Runs `op` until it succeeds, fails permanently, has run
    /// `max_attempts` times or an option stops it; returns its last result.
    pub async fn run<F, Fut, T, E>(self, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RetryableError,
    {
        let started = self.deadline.map(|_| Instant::now());
        attempt_then_retry!(self, started, op)
    }

    /// [`Retry::run`], and how the call ended: attempts, time slept, and
    /// why it stopped ([`RetryReport`]). The success path builds nothing
    /// more than `run`'s.
    pub async fn run_with_report<F, Fut, T, E>(self, mut op: F) -> (Result<T, E>, RetryReport)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RetryableError,
    {
        let started = self.deadline.map(|_| Instant::now());
        let err = match op().await {
            Ok(value) => {
                self.succeeded();
                return (Ok(value), RetryReport::first(Stop::Succeeded));
            }
            Err(err) => err,
        };
        if let Some(stop) = self.ends_at_first(&err) {
            return (Err(err), RetryReport::first(stop));
        }
        retry_boxed(self, started, op, err).await
    }

    /// [`Retry::run`] for an operation that needs exclusive borrows (`&mut
    /// self`, `&mut T`): `ctx` (one borrow, or a tuple of them) is lent to
    /// each attempt in turn. The attempt takes it by value and hands it back
    /// with its result, so the borrow is never held by the loop while an
    /// attempt runs, and the future is `Send` when the attempt's is. This is
    /// what `#[retry]` expands to on a `&mut self` method.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::{EtlError, RetryPolicy};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut log: Vec<u32> = Vec::new();
    /// let result = Retry::new(RetryPolicy::default())
    ///     .run_lending(&mut log, |log| async move {
    ///         log.push(log.len() as u32); // each attempt sees the last one's push
    ///         let r = if log.len() < 3 { Err(EtlError::Network("reset".into())) } else { Ok(log.len()) };
    ///         (log, r)
    ///     })
    ///     .await;
    /// assert_eq!(result.unwrap(), 3);
    /// assert_eq!(log, [0, 1, 2]);
    /// # }
    /// ```
    pub async fn run_lending<C, F, Fut, T, E>(self, ctx: C, mut op: F) -> Result<T, E>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = (C, Result<T, E>)>,
        E: RetryableError,
    {
        let started = self.deadline.map(|_| Instant::now());
        let (ctx, first) = op(ctx).await;
        let err = match first {
            Ok(value) => {
                self.succeeded();
                return Ok(value);
            }
            Err(err) => err,
        };
        if self.ends_at_first(&err).is_some() {
            return Err(err);
        }
        // The same boxed retry path as `run`'s, with the context in it.
        retry_lending_boxed(self, started, ctx, op, err).await.0
    }

    /// [`Retry::run`] for blocking code: `op` is a plain `FnMut` returning a
    /// `Result`, and the waits are `std::thread::sleep`. Needs no tokio
    /// runtime; every option applies (the deadline is measured on
    /// `std::time::Instant`).
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
    pub fn run_blocking<F, T, E>(self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
        E: RetryableError,
    {
        self.run_blocking_with_report(op).0
    }

    /// [`Retry::run_blocking`], and how the call ended.
    pub fn run_blocking_with_report<F, T, E>(self, mut op: F) -> (Result<T, E>, RetryReport)
    where
        F: FnMut() -> Result<T, E>,
        E: RetryableError,
    {
        // The clock is read only for a deadline: off the success path
        // otherwise (a read costs ~27 ns on this project's machine).
        let started = self.deadline.map(|_| std::time::Instant::now());
        let mut rng = None;
        let mut report = RetryReport::first(Stop::Succeeded);
        loop {
            let err = match op() {
                Ok(value) => {
                    self.succeeded();
                    return (Ok(value), report);
                }
                Err(err) => err,
            };
            let elapsed = started.map(|s| s.elapsed());
            match self.next_delay(report.attempts, elapsed, &err, &mut rng) {
                Ok((delay, server_chose)) => {
                    self.announce(report.attempts, delay, server_chose, &err);
                    std::thread::sleep(delay);
                    report.slept = report.slept.saturating_add(delay);
                    report.attempts = report.attempts.saturating_add(1);
                }
                Err(stop) => {
                    report.stop = stop;
                    self.give_up(&report, &err);
                    return (Err(err), report);
                }
            }
        }
    }

    /// Decides what is retried with `pred` instead of
    /// [`RetryableError::is_transient`], so the error type needs no
    /// `RetryableError` impl at all (only `Display`, for the log): a foreign
    /// type such as `std::io::Error` can be retried. No server delay is
    /// known then; the backoff decides every wait.
    ///
    /// ```
    /// use etl_core::retry::Retry;
    /// use etl_core::RetryPolicy;
    /// use std::io;
    ///
    /// fn interrupted(e: &io::Error) -> bool {
    ///     e.kind() == io::ErrorKind::Interrupted
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut calls = 0;
    /// let read = Retry::new(RetryPolicy::default())
    ///     .when(interrupted)
    ///     .run(|| {
    ///         calls += 1;
    ///         let r = if calls == 1 { Err(io::Error::from(io::ErrorKind::Interrupted)) } else { Ok(7) };
    ///         async move { r }
    ///     })
    ///     .await;
    /// assert_eq!(read.unwrap(), 7);
    /// # }
    /// ```
    pub fn when<E>(self, pred: fn(&E) -> bool) -> RetryWhen<'a, E> {
        RetryWhen { retry: self, pred }
    }

    /// Logs a retry, counts it and tells the observer, before its wait.
    fn announce<E: RetryableError>(
        &self,
        attempt: u32,
        delay: Duration,
        server_chose: bool,
        err: &E,
    ) {
        let reason = if server_chose {
            Reason::RateLimited
        } else if err.timed_out() {
            Reason::TimedOut
        } else {
            Reason::Transient
        };
        op::retrying(self.op, reason, delay);
        tracing::warn!(
            op = self.op.name(),
            attempt,
            max_attempts = self.policy.max_attempts,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            retry_after = server_chose,
            error = %err,
            "transient failure, retrying"
        );
        if let Some(observer) = self.on_retry {
            observer(&RetryEvent {
                attempt,
                delay,
                server_delay: server_chose,
                error: err,
            });
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

    /// Whether a first attempt's failure ends the call without a retry, and
    /// why: a permanent error, or one attempt allowed. Such an end is
    /// counted, not logged (the error goes back to the caller at once). The
    /// one rule for every async entry point.
    #[cold]
    pub(crate) fn ends_at_first<E: RetryableError>(&self, err: &E) -> Option<Stop> {
        let stop = if !err.is_transient() {
            Stop::Permanent
        } else if self.policy.max_attempts <= 1 {
            Stop::Exhausted
        } else {
            return None;
        };
        op::stopped(self.op, stop);
        Some(stop)
    }

    /// The give-up event: one `warn` naming the reason, as the report does;
    /// and the call counted by how it ended.
    fn give_up(&self, report: &RetryReport, err: &dyn fmt::Display) {
        op::stopped(self.op, report.stop);
        tracing::warn!(op = self.op.name(), attempts = report.attempts, reason = ?report.stop, error = %err, "giving up");
    }

    /// The wait before the attempt after `attempt`, and whether the server
    /// chose it; `Err` says why not to retry. `elapsed`: time since the
    /// first attempt began (known when a deadline is set).
    fn next_delay<E: RetryableError>(
        &self,
        attempt: u32,
        elapsed: Option<Duration>,
        err: &E,
        rng: &mut Option<fastrand::Rng>,
    ) -> Result<(Duration, bool), Stop> {
        if !err.is_transient() {
            return Err(Stop::Permanent);
        }
        if attempt >= self.policy.max_attempts {
            return Err(Stop::Exhausted);
        }
        let (delay, server_chose) = match err.retry_after() {
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
}

/// Boxes the retry path outside any `async` body: built inside one, the
/// unboxed future would still take up room in that body's state. Cold and
/// out of line, so the success path's code stays small.
#[cold]
#[inline(never)]
pub(crate) fn retry_boxed<'a, F, Fut, T, E>(
    retry: Retry<'a>,
    started: Option<Instant>,
    mut op: F,
    err: E,
) -> Pin<Box<impl Future<Output = (Result<T, E>, RetryReport)> + use<'a, F, Fut, T, E>>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: RetryableError,
{
    // The one retry loop lends a context; a plain op lends it nothing.
    let lend_nothing = move |()| {
        let attempt = op();
        async move { ((), attempt.await) }
    };
    Box::pin(retry_after_failure(retry, started, (), lend_nothing, err))
}

/// [`retry_boxed`] for an op that is lent `ctx` ([`Retry::run_lending`]).
#[cold]
#[inline(never)]
fn retry_lending_boxed<'a, C, F, Fut, T, E>(
    retry: Retry<'a>,
    started: Option<Instant>,
    ctx: C,
    op: F,
    err: E,
) -> Pin<Box<impl Future<Output = (Result<T, E>, RetryReport)> + use<'a, C, F, Fut, T, E>>>
where
    F: FnMut(C) -> Fut,
    Fut: Future<Output = (C, Result<T, E>)>,
    E: RetryableError,
{
    Box::pin(retry_after_failure(retry, started, ctx, op, err))
}

/// Attempts 2 and later, after the first failed with a transient `err`.
/// Each attempt is lent `ctx` and hands it back with its result, so the
/// loop never holds a borrow while an attempt runs.
async fn retry_after_failure<C, F, Fut, T, E>(
    retry: Retry<'_>,
    started: Option<Instant>,
    mut ctx: C,
    mut op: F,
    mut err: E,
) -> (Result<T, E>, RetryReport)
where
    F: FnMut(C) -> Fut,
    Fut: Future<Output = (C, Result<T, E>)>,
    E: RetryableError,
{
    let mut rng = None;
    let mut report = RetryReport::first(Stop::Succeeded);
    loop {
        let elapsed = started.map(|s| s.elapsed());
        let (delay, server_chose) = match retry.next_delay(report.attempts, elapsed, &err, &mut rng)
        {
            Ok(next) => next,
            Err(stop) => {
                report.stop = stop;
                retry.give_up(&report, &err);
                return (Err(err), report);
            }
        };
        retry.announce(report.attempts, delay, server_chose, &err);
        tokio::time::sleep(delay).await;
        report.slept = report.slept.saturating_add(delay);
        report.attempts = report.attempts.saturating_add(1);
        let (back, result) = op(ctx).await;
        ctx = back;
        err = match result {
            Ok(value) => {
                retry.succeeded();
                return (Ok(value), report);
            }
            Err(err) => err,
        };
    }
}

/// [`Retry`] with a predicate deciding what is retried ([`Retry::when`]).
#[derive(Clone, Copy)]
pub struct RetryWhen<'a, E> {
    retry: Retry<'a>,
    pred: fn(&E) -> bool,
}

impl<E> fmt::Debug for RetryWhen<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryWhen")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// An error with the predicate's verdict on it: what lets the one loop
/// serve errors that have no `RetryableError` impl.
struct Judged<E> {
    err: E,
    transient: bool,
}

impl<E: fmt::Display> fmt::Display for Judged<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.err.fmt(f)
    }
}

impl<E: fmt::Display> RetryableError for Judged<E> {
    fn is_transient(&self) -> bool {
        self.transient
    }
}

impl<'a, E: fmt::Display> RetryWhen<'a, E> {
    /// [`Retry::run`], retrying the errors `pred` says to.
    pub async fn run<F, Fut, T>(self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_with_report(op).await.0
    }

    /// [`Retry::run_with_report`], retrying the errors `pred` says to.
    pub async fn run_with_report<F, Fut, T>(self, mut op: F) -> (Result<T, E>, RetryReport)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let pred = self.pred;
        let judged = move || {
            let attempt = op();
            async move {
                attempt.await.map_err(|err| Judged {
                    transient: pred(&err),
                    err,
                })
            }
        };
        let (result, report) = self.retry.run_with_report(judged).await;
        (result.map_err(|j| j.err), report)
    }

    /// [`Retry::run_lending`], retrying the errors `pred` says to.
    pub async fn run_lending<C, F, Fut, T>(self, ctx: C, mut op: F) -> Result<T, E>
    where
        F: FnMut(C) -> Fut,
        Fut: Future<Output = (C, Result<T, E>)>,
    {
        let pred = self.pred;
        let judged = move |ctx| {
            let attempt = op(ctx);
            async move {
                let (ctx, result) = attempt.await;
                let result = result.map_err(|err| Judged {
                    transient: pred(&err),
                    err,
                });
                (ctx, result)
            }
        };
        self.retry.run_lending(ctx, judged).await.map_err(|j| j.err)
    }

    /// [`Retry::run_blocking`], retrying the errors `pred` says to.
    pub fn run_blocking<F, T>(self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
    {
        self.run_blocking_with_report(op).0
    }

    /// [`Retry::run_blocking_with_report`], retrying the errors `pred` says to.
    pub fn run_blocking_with_report<F, T>(self, mut op: F) -> (Result<T, E>, RetryReport)
    where
        F: FnMut() -> Result<T, E>,
    {
        let pred = self.pred;
        let (result, report) = self.retry.run_blocking_with_report(|| {
            op().map_err(|err| Judged {
                transient: pred(&err),
                err,
            })
        });
        (result.map_err(|j| j.err), report)
    }
}
