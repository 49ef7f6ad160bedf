//! The clock of a retried call: when it started (for its deadline), and the
//! cut of an attempt that runs past its `attempt_timeout` or the deadline,
//! failing with [`TimedOut`] converted into the caller's error type.
//!
//! The clock is read only once an attempt has to wait (its first poll
//! returned `Pending`) or has failed: an attempt that succeeds without
//! waiting reads no clock and arms no timer, whatever the options. The
//! deadline therefore counts from the end of the first attempt's first
//! poll, which differs from its start by that poll's CPU time alone.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// An attempt cut short: the error `attempt_timeout` and an in-flight
/// deadline produce, converted into the caller's error type through
/// `From<TimedOut>` ([`crate::EtlError`] has it, as a transient error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedOut {
    /// How long the attempt was given.
    pub after: Duration,
    /// Which limit cut it.
    pub by: TimeLimit,
}

/// The limit that cut an attempt ([`TimedOut::by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeLimit {
    /// The attempt's own `attempt_timeout`.
    Attempt,
    /// The loop's `deadline`, reached during the attempt.
    Deadline,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by = match self.by {
            TimeLimit::Attempt => "its attempt_timeout",
            TimeLimit::Deadline => "the retry deadline",
        };
        write!(f, "attempt cut after {:?} by {by}", self.after)
    }
}

impl std::error::Error for TimedOut {}

/// The cut type parameter of a [`Retry`](crate::retry::Retry) that cuts no
/// attempt: its deadline stops new waits only.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uncut;

/// The cut type parameter of a [`Retry`](crate::retry::Retry) whose attempts
/// are cut ([`Retry::attempt_timeout`](crate::retry::Retry::attempt_timeout),
/// [`Retry::cut_in_flight`](crate::retry::Retry::cut_in_flight)): the error
/// type needs `From<TimedOut>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cut;

/// Whether a loop can cut an attempt for error type `E`, and what it hands
/// each attempt to cut itself with: the cut type parameter of
/// [`Retry`](crate::retry::Retry). [`Uncut`] hands a [`NoCutoff`] (its
/// `run` only awaits, and costs nothing); [`Cut`] a [`Cutoff`].
#[diagnostic::on_unimplemented(
    message = "`attempt_timeout` (or a deadline that cuts the attempt in flight) needs `{E}: From<TimedOut>`",
    label = "a cut attempt fails with `TimedOut`, and `{E}` cannot hold it",
    note = "implement `From<etl_core::retry::TimedOut>` for `{E}` (`EtlError` and `etl_core::http::HttpError` have it)"
)]
pub trait CutSlot<E>: Copy {
    /// What each attempt is handed: [`NoCutoff`] or [`Cutoff`].
    type Cutoff: RunCut<E>;

    /// The cutoff of an attempt, from the loop's limits and the call's
    /// start (`None` until an attempt has waited). Not public API.
    #[doc(hidden)]
    fn cutoff(
        attempt_timeout: Option<Duration>,
        deadline: Option<Duration>,
        started: Option<Instant>,
    ) -> Self::Cutoff;
}

impl<E> CutSlot<E> for Uncut {
    type Cutoff = NoCutoff;

    #[inline]
    fn cutoff(_: Option<Duration>, _: Option<Duration>, _: Option<Instant>) -> NoCutoff {
        NoCutoff
    }
}

impl<E: From<TimedOut>> CutSlot<E> for Cut {
    type Cutoff = Cutoff<E>;

    #[inline]
    fn cutoff(
        attempt_timeout: Option<Duration>,
        deadline: Option<Duration>,
        started: Option<Instant>,
    ) -> Cutoff<E> {
        Cutoff {
            attempt_timeout,
            deadline,
            started,
            err: PhantomData,
        }
    }
}

/// An attempt's time limit, whichever kind the loop hands it: `run` the
/// attempt's work under it ([`NoCutoff::run`], [`Cutoff::run`]).
pub trait RunCut<E>: Copy {
    /// The attempt under the limit.
    type Run<Fut: Future<Output = Result<R, E>>, R>: Future<Output = Result<R, E>>;

    /// Runs `attempt` under the limit.
    fn run<Fut: Future<Output = Result<R, E>>, R>(self, attempt: Fut) -> Self::Run<Fut, R>;
}

/// What a loop that cuts nothing ([`Uncut`]) hands each attempt: `run`
/// returns the attempt itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCutoff;

impl NoCutoff {
    /// `attempt`, as it is.
    #[inline]
    pub fn run<Fut>(self, attempt: Fut) -> Fut {
        attempt
    }
}

impl<E> RunCut<E> for NoCutoff {
    type Run<Fut: Future<Output = Result<R, E>>, R> = Fut;

    #[inline]
    fn run<Fut: Future<Output = Result<R, E>>, R>(self, attempt: Fut) -> Fut {
        attempt
    }
}

/// When a call started, for its deadline: read lazily (see the module
/// docs). The limits themselves are the loop's options.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Clock {
    started: Option<Instant>,
}

impl Clock {
    /// When the call started, if an attempt has read the clock yet.
    #[inline]
    pub(crate) fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Time since the call started, for `deadline` (`None` without one);
    /// starts the clock now if no attempt has read it yet.
    pub(crate) fn elapsed(&mut self, deadline: Option<Duration>) -> Option<Duration> {
        deadline?;
        let now = Instant::now();
        Some(now - *self.started.get_or_insert(now))
    }

    /// Starts the clock now unless an attempt has already started it.
    #[inline]
    pub(crate) fn start(&mut self) {
        self.started.get_or_insert_with(Instant::now);
    }

    /// Starts the clock now (a blocking call: nothing is polled there).
    pub(crate) fn start_now(&mut self) {
        self.started = Some(Instant::now());
    }

    /// `attempt`, starting this clock when it first waits if `watch` (the
    /// call has a deadline).
    #[inline]
    pub(crate) fn track<Fut>(&mut self, watch: bool, attempt: Fut) -> Tracked<'_, Fut> {
        let watch = watch && self.started.is_none();
        Tracked {
            attempt,
            started: &mut self.started,
            watch,
        }
    }
}

pin_project_lite::pin_project! {
    /// An attempt that starts the call's clock when it first waits.
    pub(crate) struct Tracked<'c, Fut> {
        #[pin]
        attempt: Fut,
        started: &'c mut Option<Instant>,
        watch: bool,
    }
}

impl<Fut: Future> Future for Tracked<'_, Fut> {
    type Output = Fut::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = this.attempt.poll(cx);
        if out.is_pending() && *this.watch {
            *this.watch = false;
            this.started.get_or_insert_with(Instant::now);
        }
        out
    }
}

/// What a loop that cuts ([`Cut`]) hands each attempt: an attempt cuts
/// itself by running its work inside [`Cutoff::run`], so that whatever it
/// was lent ([`Retry::run_lending`](crate::retry::Retry::run_lending))
/// survives the cut and goes back to the loop.
pub struct Cutoff<E> {
    attempt_timeout: Option<Duration>,
    deadline: Option<Duration>,
    started: Option<Instant>,
    err: PhantomData<fn() -> E>,
}

impl<E> Clone for Cutoff<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Cutoff<E> {}

impl<E> fmt::Debug for Cutoff<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cutoff")
            .field("attempt_timeout", &self.attempt_timeout)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<E> Cutoff<E> {
    /// The limit on an attempt that starts waiting at `now`, if any: its own
    /// `attempt_timeout`, or what is left of the deadline, whichever is
    /// shorter.
    fn limit(&self, now: Instant) -> Option<TimedOut> {
        let started = self.started.unwrap_or(now);
        let left = self.deadline.map(|d| d.saturating_sub(now - started));
        match (self.attempt_timeout, left) {
            (Some(own), Some(left)) if left < own => Some((left, TimeLimit::Deadline)),
            (Some(own), _) => Some((own, TimeLimit::Attempt)),
            (None, Some(left)) => Some((left, TimeLimit::Deadline)),
            (None, None) => None,
        }
        .map(|(after, by)| TimedOut { after, by })
    }

    /// Runs `attempt` within the limit: its output, or `Err(TimedOut)`
    /// converted into `E` when the limit passes first. The limit counts
    /// from the attempt's first wait.
    pub fn run<Fut, R>(self, attempt: Fut) -> Clocked<Fut, E>
    where
        Fut: Future<Output = Result<R, E>>,
        E: From<TimedOut>,
    {
        Clocked {
            attempt,
            cutoff: self,
            waited: false,
            timer: None,
        }
    }
}

impl<E: From<TimedOut>> RunCut<E> for Cutoff<E> {
    type Run<Fut: Future<Output = Result<R, E>>, R> = Clocked<Fut, E>;

    #[inline]
    fn run<Fut: Future<Output = Result<R, E>>, R>(self, attempt: Fut) -> Clocked<Fut, E> {
        Cutoff::run(self, attempt)
    }
}

pin_project_lite::pin_project! {
    /// An attempt under its [`Cutoff`] ([`Cutoff::run`]): the timer is
    /// boxed and armed only once the attempt waits.
    pub struct Clocked<Fut, E> {
        #[pin]
        attempt: Fut,
        cutoff: Cutoff<E>,
        waited: bool,
        timer: Option<(Pin<Box<Sleep>>, TimedOut)>,
    }
}

impl<Fut, R, E> Future for Clocked<Fut, E>
where
    Fut: Future<Output = Result<R, E>>,
    E: From<TimedOut>,
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.attempt.poll(cx) {
            return Poll::Ready(out);
        }
        let limited = this.cutoff.attempt_timeout.is_some() || this.cutoff.deadline.is_some();
        if !*this.waited && limited {
            *this.waited = true;
            let now = Instant::now();
            // A limit too far off to be a point in time never fires.
            *this.timer = this.cutoff.limit(now).and_then(|cut| {
                let at = now.checked_add(cut.after)?;
                Some((Box::pin(tokio::time::sleep_until(at)), cut))
            });
        }
        if let Some((sleep, cut)) = this.timer {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(E::from(*cut)));
            }
        }
        Poll::Pending
    }
}
