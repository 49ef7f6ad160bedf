//! What holds a run's requests back ([`Throttle`]): its one rate limit
//! ([`RateLimit`], `rate_limit = "10/s"`), and the waits the servers asked
//! for, each held across its whole origin.

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use url::Origin;

use etl_core::EtlError;

/// At most `count` requests in any window of `per` (`"10/s"`, `"600/min"`,
/// `"5000/h"`).
///
/// ```
/// use etl_sources::throttle::RateLimit;
/// use std::time::Duration;
///
/// let limit: RateLimit = "600/min".parse()?;
/// assert_eq!((limit.count(), limit.per()), (600, Duration::from_secs(60)));
/// assert!("10/sec".parse::<RateLimit>().is_err());
/// assert!("0/s".parse::<RateLimit>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    count: NonZeroU32,
    per: Duration,
}

impl RateLimit {
    /// Requests allowed in each window.
    pub fn count(&self) -> u32 {
        self.count.get()
    }

    /// The window.
    pub fn per(&self) -> Duration {
        self.per
    }

    /// The quota as governor keeps it: one request every `per / count`,
    /// and a burst of one. A burst of `count` would let almost twice
    /// `count` through in the first window (a full bucket, then its
    /// refill); one at a time evenly spaced never puts more than `count`
    /// in any window of `per`.
    fn quota(&self) -> Quota {
        let every = self.per / self.count.get();
        Quota::with_period(every.max(Duration::from_nanos(1)))
            .expect("a period of at least 1 ns")
            .allow_burst(NonZeroU32::MIN)
    }
}

impl FromStr for RateLimit {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let wrong = || {
            format!("{text:?} is not a rate: write a positive whole number of requests, `/`, and `s`, `min` or `h` (\"10/s\", \"600/min\", \"5000/h\")")
        };
        let (count, unit) = text.split_once('/').ok_or_else(wrong)?;
        let count: NonZeroU32 = count.trim().parse().map_err(|_| wrong())?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(wrong()),
        };
        Ok(RateLimit { count, per })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// governor's clock, read from tokio's: a test on tokio's paused clock
/// sees the limit hold without waiting real seconds.
#[derive(Clone, Copy, Debug, Default)]
struct TokioClock;

impl Clock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<std::time::Instant>>;

/// What holds a run's requests back, shared by every source of the run
/// (through [`crate::SourceOptions::throttle`]) and every request they
/// send, retries included:
/// - its rate limit, if it has one: at most N requests in any window;
/// - the waits servers asked for: a 429's or 503's Retry-After, or an
///   API's spent quota (`X-RateLimit-Remaining: 0` with
///   `X-RateLimit-Reset`, `RateLimit-Remaining: 0` with `RateLimit-Reset`),
///   on any response. Each holds back every request to that origin, not
///   only the one that got it.
///
/// It also counts what a progress display shows: the time held back in
/// all, and the requests in flight.
#[derive(Default)]
pub struct Throttle {
    limiter: Option<(RateLimit, Limiter)>,
    /// Until when each origin is held, by its ASCII serialization.
    holds: Mutex<HashMap<String, Instant>>,
    waited_ms: AtomicU64,
    in_flight: AtomicU32,
}

impl fmt::Debug for Throttle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Throttle")
            .field("rate_limit", &self.limiter.as_ref().map(|(limit, _)| limit))
            .field("held", &self.total())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl Throttle {
    /// A throttle for one run, with its rate limit (`None`: no limit of
    /// our own; the servers' waits still hold).
    pub fn new(rate_limit: Option<RateLimit>) -> Self {
        Throttle {
            limiter: rate_limit.map(|limit| {
                (
                    limit,
                    RateLimiter::direct_with_clock(limit.quota(), TokioClock),
                )
            }),
            ..Throttle::default()
        }
    }

    /// The rate limit it keeps.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        self.limiter.as_ref().map(|(limit, _)| *limit)
    }

    /// The time requests were held back so far, in all: by the rate
    /// limit, an origin's hold, or a wait a server asked of a retry.
    pub fn total(&self) -> Duration {
        Duration::from_millis(self.waited_ms.load(Ordering::Relaxed))
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Counts `wait` as time held back (and in the metrics).
    pub(crate) fn held(&self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.waited_ms.fetch_add(ms, Ordering::Relaxed);
        crate::metrics::rate_limit_wait(wait);
    }

    /// Waits until a request to `origin` may leave: its origin's hold has
    /// passed, then the rate limit lets it. A hold longer than `ceiling`
    /// (`--max-retry-after`) is not sat out: the request fails at once
    /// with [`EtlError::RetryAfterTooLong`], naming the wait. The request
    /// counts as in flight until the returned guard is dropped.
    pub(crate) async fn admit(
        &self,
        origin: &Origin,
        ceiling: Option<Duration>,
    ) -> Result<InFlightGuard<'_>, EtlError> {
        let start = Instant::now();
        let mut held = false;
        let until = self.hold_of(origin);
        if let Some(until) = until.filter(|until| *until > start) {
            let wait = until - start;
            if let Some(ceiling) = ceiling.filter(|ceiling| wait > *ceiling) {
                return Err(EtlError::RetryAfterTooLong {
                    retry_after_secs: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
                    ceiling_secs: ceiling.as_secs(),
                });
            }
            tokio::time::sleep_until(until).await;
            held = true;
        }
        if let Some((_, limiter)) = &self.limiter {
            while let Err(not_until) = limiter.check() {
                tokio::time::sleep(not_until.wait_time_from(TokioClock.now())).await;
                held = true;
            }
        }
        if held {
            self.held(start.elapsed());
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(InFlightGuard(self))
    }

    /// Holds every request to `origin` for `wait` from now (longer holds
    /// already there stand): what a server asked of one request, or its
    /// spent quota, holds back all of them.
    pub(crate) fn hold(&self, origin: &Origin, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        let until = Instant::now() + wait.min(Duration::from_secs(u32::MAX.into()));
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        let held = holds.entry(origin.ascii_serialization()).or_insert(until);
        *held = (*held).max(until);
    }

    fn hold_of(&self, origin: &Origin) -> Option<Instant> {
        let holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        holds.get(&origin.ascii_serialization()).copied()
    }
}

/// A request in flight: counted until dropped.
pub(crate) struct InFlightGuard<'t>(&'t Throttle);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        url::Url::parse("http://api.example/").unwrap().origin()
    }

    #[test]
    fn rates_parse_and_show_as_written() {
        for (text, count, secs) in [
            ("10/s", 10, 1),
            ("600/min", 600, 60),
            (" 5000 / h ", 5000, 3600),
        ] {
            let limit: RateLimit = text.parse().unwrap();
            assert_eq!(
                (limit.count(), limit.per().as_secs()),
                (count, secs),
                "{text}"
            );
        }
        assert_eq!(
            "600/min".parse::<RateLimit>().unwrap().to_string(),
            "600/min"
        );
        for bad in ["10/sec", "0/s", "-1/s", "1.5/s", "10", "/s", "ten/s", ""] {
            let e = bad.parse::<RateLimit>().unwrap_err();
            assert!(e.contains("\"10/s\""), "{bad}: {e}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_limit_spaces_requests_so_no_second_holds_more_than_n() {
        let throttle = Throttle::new(Some("20/s".parse().unwrap()));
        let start = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..60 {
            drop(throttle.admit(&origin(), None).await.unwrap());
            sent.push(start.elapsed());
        }
        for (i, at) in sent.iter().enumerate() {
            let in_window = sent
                .iter()
                .filter(|t| **t >= *at && **t < *at + Duration::from_secs(1))
                .count();
            assert!(
                in_window <= 20,
                "{in_window} requests in the second from request {i}"
            );
        }
        let took = *sent.last().unwrap();
        assert_eq!(took, Duration::from_millis(50 * 59), "20 a second, evenly");
        assert!(throttle.total() >= Duration::from_millis(2900));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_asked_by_one_response_holds_every_request_to_its_origin() {
        let throttle = Throttle::new(None);
        throttle.hold(&origin(), Duration::from_secs(3));
        let start = Instant::now();
        let other = url::Url::parse("http://elsewhere.example/")
            .unwrap()
            .origin();
        drop(throttle.admit(&other, None).await.unwrap());
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "another origin is not held"
        );
        drop(throttle.admit(&origin(), None).await.unwrap());
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_longer_than_the_ceiling_fails_the_request_at_once_and_counts_it_in_flight_while_sent(
    ) {
        let throttle = Throttle::new(None);
        throttle.hold(&origin(), Duration::from_secs(90));
        let e = throttle
            .admit(&origin(), Some(Duration::from_secs(60)))
            .await
            .err()
            .unwrap();
        assert!(
            matches!(
                e,
                EtlError::RetryAfterTooLong {
                    retry_after_secs: 90,
                    ceiling_secs: 60
                }
            ),
            "{e}"
        );
        let start = Instant::now();
        let guard = throttle.admit(&origin(), None).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(90));
        assert_eq!(throttle.in_flight(), 1);
        drop(guard);
        assert_eq!(throttle.in_flight(), 0);
    }
}
