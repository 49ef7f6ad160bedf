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

/// Whether a loop can cut an attempt for error type `E`: the cut type
/// parameter of [`Retry`](crate::retry::Retry) ([`Uncut`], [`Cut`]).
#[diagnostic::on_unimplemented(
    message = "`attempt_timeout` (or a deadline that cuts the attempt in flight) needs `{E}: From<TimedOut>`",
    label = "a cut attempt fails with `TimedOut`, and `{E}` cannot hold it",
    note = "implement `From<etl_core::retry::TimedOut>` for `{E}` (`EtlError` and `etl_core::http::HttpError` have it)"
)]
pub trait CutSlot<E> {
    /// Whether attempts are cut at all.
    const CUTS: bool;
    /// The caller's error for a cut attempt (`None` when nothing is cut).
    fn timed_out(cut: TimedOut) -> Option<E>;
}

impl<E> CutSlot<E> for Uncut {
    const CUTS: bool = false;

    fn timed_out(_: TimedOut) -> Option<E> {
        None
    }
}

impl<E: From<TimedOut>> CutSlot<E> for Cut {
    const CUTS: bool = true;

    fn timed_out(cut: TimedOut) -> Option<E> {
        Some(E::from(cut))
    }
}

/// A call's clock: its deadline, the attempt limit, and when it started
/// (read lazily, see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    deadline: Option<Duration>,
    attempt_timeout: Option<Duration>,
    /// Whether attempts are cut at all (`CutSlot::CUTS`): by their
    /// `attempt_timeout`, and by the deadline in flight.
    cuts: bool,
    started: Option<Instant>,
}

impl Clock {
    #[inline]
    pub(crate) fn new(
        deadline: Option<Duration>,
        attempt_timeout: Option<Duration>,
        cuts: bool,
    ) -> Self {
        Clock {
            deadline,
            attempt_timeout,
            cuts,
            started: None,
        }
    }

    /// Time since the call started, for the deadline (`None` without one);
    /// starts the clock now if no attempt has read it yet.
    pub(crate) fn elapsed(&mut self) -> Option<Duration> {
        self.deadline?;
        let now = Instant::now();
        Some(now - *self.started.get_or_insert(now))
    }

    /// Starts the clock now for a blocking call (nothing is polled there).
    pub(crate) fn start_blocking(&mut self) {
        if self.deadline.is_some() {
            self.started = Some(Instant::now());
        }
    }

    /// The limit on an attempt that starts waiting at `now`, if any: its own
    /// `attempt_timeout`, or what is left of the deadline, whichever is
    /// shorter.
    fn limit(&self, now: Instant) -> Option<TimedOut> {
        if !self.cuts {
            return None;
        }
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

    /// `attempt`, starting this clock when it first waits (for the
    /// deadline).
    #[inline]
    pub(crate) fn track<Fut>(&mut self, attempt: Fut) -> Tracked<'_, Fut> {
        let watch = self.deadline.is_some() && self.started.is_none();
        Tracked {
            attempt,
            started: &mut self.started,
            watch,
        }
    }

    /// What an attempt is given to cut itself with.
    #[inline]
    pub(crate) fn cutoff<E>(&self, cut: fn(TimedOut) -> Option<E>) -> Cutoff<E> {
        Cutoff { clock: *self, cut }
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

/// The time limit of one attempt, handed to it by the retry loop: an
/// attempt cuts itself by running its work inside [`Cutoff::run`], so that
/// whatever it was lent ([`Retry::run_lending`](crate::retry::Retry::run_lending))
/// survives the cut and goes back to the loop. Without `attempt_timeout` or
/// a deadline that cuts in flight, `run` only awaits.
pub struct Cutoff<E> {
    clock: Clock,
    cut: fn(TimedOut) -> Option<E>,
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
            .field("cuts", &self.clock.cuts)
            .field("attempt_timeout", &self.clock.attempt_timeout)
            .field("deadline", &self.clock.deadline)
            .finish()
    }
}

impl<E> Cutoff<E> {
    /// Runs `attempt` within the limit: its output, or `Err(TimedOut)`
    /// converted into `E` when the limit passes first. The limit counts
    /// from the attempt's first wait.
    pub fn run<Fut, R>(self, attempt: Fut) -> Clocked<Fut, E>
    where
        Fut: Future<Output = Result<R, E>>,
    {
        Clocked {
            attempt,
            cutoff: self,
            waited: false,
            timer: None,
        }
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
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.attempt.poll(cx) {
            return Poll::Ready(out);
        }
        if !*this.waited {
            *this.waited = true;
            let clock = &this.cutoff.clock;
            if clock.cuts && (clock.attempt_timeout.is_some() || clock.deadline.is_some()) {
                let now = Instant::now();
                // A limit too far off to be a point in time never fires.
                *this.timer = clock.limit(now).and_then(|cut| {
                    let at = now.checked_add(cut.after)?;
                    Some((Box::pin(tokio::time::sleep_until(at)), cut))
                });
            }
        }
        if let Some((sleep, cut)) = this.timer {
            if sleep.as_mut().poll(cx).is_ready() {
                // A clock cuts only where the error can say so
                // (`Clock::new`); were it otherwise, the attempt runs on.
                if let Some(err) = (this.cutoff.cut)(*cut) {
                    return Poll::Ready(Err(err));
                }
                *this.timer = None;
            }
        }
        Poll::Pending
    }
}
