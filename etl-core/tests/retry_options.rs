//! `Retry`'s options on tokio's paused clock: jitter, deadline, Retry-After
//! ceiling, observer, shared budget, and an error type of the user's own.

use etl_core::retry::{Jitter, Retry, RetryBudget, RetryEvent, RetryableError};
use etl_core::{EtlError, RetryPolicy};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: secs(1),
        max_delay: secs(60),
    }
}

/// Runs `retry` on an op failing with `error()` `failures` times; returns
/// the offsets at which attempts started and the result.
async fn schedule(
    retry: Retry<'_>,
    failures: usize,
    error: fn() -> EtlError,
) -> (Vec<Duration>, Result<usize, EtlError>) {
    let start = Instant::now();
    let mut starts = Vec::new();
    let result = retry
        .run(|| {
            starts.push(start.elapsed());
            let n = starts.len();
            async move {
                if n <= failures {
                    Err(error())
                } else {
                    Ok(n)
                }
            }
        })
        .await;
    (starts, result)
}

fn network() -> EtlError {
    EtlError::Network("reset".into())
}

fn gaps(starts: &[Duration]) -> Vec<Duration> {
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn retry_full_jitter_is_seeded_bounded_and_spread() {
    let seeded = Retry::new(policy(6)).jitter(Jitter::Full).seed(42);
    let (first, _) = schedule(seeded, 10, network).await;
    let (again, _) = schedule(seeded, 10, network).await;
    assert_eq!(first, again, "the same seed, the same waits");

    let waits = gaps(&first);
    assert_eq!(waits.len(), 5);
    for (i, wait) in waits.iter().enumerate() {
        assert!(
            *wait <= secs(1 << i),
            "wait {i} of {wait:?} exceeds the backoff"
        );
    }
    let (other, _) = schedule(
        Retry::new(policy(6)).jitter(Jitter::Full).seed(43),
        10,
        network,
    )
    .await;
    assert_ne!(gaps(&other), waits, "another seed, other waits");
}

#[tokio::test(start_paused = true)]
async fn retry_equal_jitter_keeps_half_the_backoff() {
    let (starts, _) = schedule(
        Retry::new(policy(6)).jitter(Jitter::Equal).seed(9),
        10,
        network,
    )
    .await;
    for (i, wait) in gaps(&starts).iter().enumerate() {
        let backoff = secs(1 << i);
        assert!(
            *wait >= backoff / 2 && *wait <= backoff,
            "wait {i}: {wait:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retry_jitter_leaves_the_servers_delay_alone() {
    let throttled = || EtlError::RateLimited {
        retry_after_secs: 7,
    };
    let (starts, result) = schedule(
        Retry::new(policy(3)).jitter(Jitter::Full).seed(1),
        1,
        throttled,
    )
    .await;
    assert_eq!(result.unwrap(), 2);
    assert_eq!(gaps(&starts), [secs(7)]);
}

#[tokio::test(start_paused = true)]
async fn retry_deadline_stops_before_a_wait_that_would_pass_it() {
    // Waits of 1, 2, 4 s: the third would end at 7 s, past the 5 s deadline.
    let start = Instant::now();
    let (starts, result) = schedule(Retry::new(policy(10)).deadline(secs(5)), 100, network).await;
    assert_eq!(starts, [secs(0), secs(1), secs(3)]);
    assert!(
        matches!(result, Err(EtlError::Network(_))),
        "the last error: {result:?}"
    );
    assert_eq!(start.elapsed(), secs(3), "no sleep past the deadline");
}

#[tokio::test(start_paused = true)]
async fn retry_after_above_the_ceiling_gives_up_at_once() {
    let hour = || EtlError::RateLimited {
        retry_after_secs: 3600,
    };
    let start = Instant::now();
    let (starts, result) =
        schedule(Retry::new(policy(5)).max_retry_after(secs(60)), 100, hour).await;
    assert_eq!(starts.len(), 1);
    assert!(matches!(
        result,
        Err(EtlError::RateLimited {
            retry_after_secs: 3600
        })
    ));
    assert_eq!(start.elapsed(), Duration::ZERO);

    let minute = || EtlError::RateLimited {
        retry_after_secs: 60,
    };
    let (starts, result) =
        schedule(Retry::new(policy(5)).max_retry_after(secs(60)), 1, minute).await;
    assert_eq!(result.unwrap(), 2, "at the ceiling is still waited");
    assert_eq!(gaps(&starts), [secs(60)]);
}

#[tokio::test(start_paused = true)]
async fn retry_observer_sees_every_retry_before_its_wait() {
    let seen = Mutex::new(Vec::new());
    let observer = |event: &RetryEvent<'_>| {
        seen.lock().unwrap().push((
            event.attempt,
            event.delay,
            event.server_delay,
            event.error.to_string(),
        ));
    };
    let mut calls = 0;
    let result = Retry::new(policy(4))
        .on_retry(&observer)
        .run(|| {
            calls += 1;
            let outcome = match calls {
                1 => Err(network()),
                2 => Err(EtlError::RateLimited {
                    retry_after_secs: 9,
                }),
                _ => Ok(calls),
            };
            async move { outcome }
        })
        .await;
    assert_eq!(result.unwrap(), 3);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].0, seen[0].1, seen[0].2), (1, secs(1), false));
    assert!(seen[0].3.contains("reset"), "{:?}", seen[0]);
    assert_eq!((seen[1].0, seen[1].1, seen[1].2), (2, secs(9), true));
}

#[tokio::test(start_paused = true)]
async fn retry_budget_shared_between_calls_stops_a_storm() {
    // Two retries' worth of tokens (5 each) for every caller together.
    let budget = RetryBudget::new(10);
    let retry = Retry::new(policy(10)).budget(&budget);

    let (first, _) = schedule(retry, 100, network).await;
    assert_eq!(
        first.len(),
        3,
        "one attempt and the two retries the budget paid for"
    );
    let (second, result) = schedule(retry, 100, network).await;
    assert_eq!(
        second.len(),
        1,
        "the drained budget fails the next call fast"
    );
    assert!(result.is_err());

    // Successes refill it, one token each, up to the capacity.
    for _ in 0..5 {
        schedule(retry, 0, network).await.1.unwrap();
    }
    assert_eq!(budget.available(), 5);
    let (third, _) = schedule(retry, 100, network).await;
    assert_eq!(third.len(), 2, "five successes bought one retry");
}

/// An error type of the user's own.
#[derive(Debug, PartialEq)]
enum ApiError {
    Busy(u64),
    Gone,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl RetryableError for ApiError {
    fn is_transient(&self) -> bool {
        matches!(self, ApiError::Busy(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Busy(secs) => Some(Duration::from_secs(*secs)),
            ApiError::Gone => None,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn retry_works_for_any_error_type() {
    let start = Instant::now();
    let mut calls = 0;
    let ok = Retry::new(policy(3))
        .run(|| {
            calls += 1;
            let outcome = if calls == 1 {
                Err(ApiError::Busy(4))
            } else {
                Ok("done")
            };
            async move { outcome }
        })
        .await;
    assert_eq!(ok, Ok("done"));
    assert_eq!(
        start.elapsed(),
        secs(4),
        "the error's own retry_after was honoured"
    );

    let mut calls = 0;
    let gone: Result<(), _> = Retry::new(policy(3))
        .run(|| {
            calls += 1;
            async { Err(ApiError::Gone) }
        })
        .await;
    assert_eq!(gone, Err(ApiError::Gone));
    assert_eq!(calls, 1, "permanent by its own classification");
}
