//! How a call ended (`run_with_report`), `when` for errors without a
//! `RetryableError` impl, and the blocking loop.

use etl_core::retry::{Retry, RetryBudget, RetryReport, Stop};
use etl_core::{EtlError, RetryPolicy};
use std::io;
use std::time::Duration;

fn network() -> EtlError {
    EtlError::Network("reset".into())
}

/// `outcomes` in turn (then the last one again), counting calls.
fn script(
    outcomes: Vec<Result<u32, EtlError>>,
    calls: &mut u32,
) -> impl FnMut() -> std::future::Ready<Result<u32, EtlError>> + '_ {
    move || {
        let i = (*calls as usize).min(outcomes.len() - 1);
        *calls += 1;
        let outcome = match &outcomes[i] {
            Ok(v) => Ok(*v),
            Err(EtlError::RateLimited { retry_after_secs }) => Err(EtlError::RateLimited {
                retry_after_secs: *retry_after_secs,
            }),
            Err(EtlError::Parse(m)) => Err(EtlError::Parse(m.clone())),
            Err(_) => Err(network()),
        };
        std::future::ready(outcome)
    }
}

fn report(attempts: u32, slept_ms: u64, stop: Stop) -> RetryReport {
    RetryReport {
        attempts,
        slept: Duration::from_millis(slept_ms),
        stop,
    }
}

#[tokio::test(start_paused = true)]
async fn each_stop_reason_is_reported() {
    let retry = Retry::new(RetryPolicy::default());
    let mut calls = 0;

    let (r, rep) = retry.run_with_report(script(vec![Ok(1)], &mut calls)).await;
    assert_eq!((r.unwrap(), rep), (1, report(1, 0, Stop::Succeeded)));

    calls = 0;
    let (r, rep) = retry
        .run_with_report(script(
            vec![Err(network()), Err(network()), Ok(2)],
            &mut calls,
        ))
        .await;
    assert_eq!((r.unwrap(), rep), (2, report(3, 600, Stop::Succeeded)));

    calls = 0;
    let (r, rep) = retry
        .run_with_report(script(vec![Err(EtlError::Parse("x".into()))], &mut calls))
        .await;
    assert!(r.is_err());
    assert_eq!(rep, report(1, 0, Stop::Permanent));

    calls = 0;
    let (_, rep) = retry
        .run_with_report(script(
            vec![Err(network()), Err(EtlError::Parse("x".into()))],
            &mut calls,
        ))
        .await;
    assert_eq!(rep, report(2, 200, Stop::Permanent));

    calls = 0;
    let (_, rep) = retry
        .run_with_report(script(vec![Err(network())], &mut calls))
        .await;
    assert_eq!((rep, calls), (report(4, 1400, Stop::Exhausted), 4));

    calls = 0;
    let (_, rep) = Retry::new(RetryPolicy::default())
        .deadline(Duration::from_millis(500))
        .run_with_report(script(vec![Err(network())], &mut calls))
        .await;
    assert_eq!(
        rep,
        report(2, 200, Stop::Deadline),
        "200 + 400 would pass 500 ms"
    );

    calls = 0;
    let throttled = EtlError::RateLimited {
        retry_after_secs: 3600,
    };
    let (_, rep) = Retry::new(RetryPolicy::default())
        .max_retry_after(Duration::from_secs(60))
        .run_with_report(script(vec![Err(throttled)], &mut calls))
        .await;
    assert_eq!(rep, report(1, 0, Stop::RetryAfterCeiling));

    static EMPTY: RetryBudget = RetryBudget::new(0);
    calls = 0;
    let (_, rep) = Retry::new(RetryPolicy::default())
        .budget(&EMPTY)
        .run_with_report(script(vec![Err(network())], &mut calls))
        .await;
    assert_eq!(rep, report(1, 0, Stop::Budget));

    calls = 0;
    let one = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let (_, rep) = Retry::new(one)
        .run_with_report(script(vec![Err(network())], &mut calls))
        .await;
    assert_eq!(rep, report(1, 0, Stop::Exhausted));
}

fn never(_: &io::Error) -> bool {
    false
}

fn always(_: &io::Error) -> bool {
    true
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

/// An `io::Error` of `kind` for the first `fail` calls, then `Ok`.
fn io_op(
    kind: io::ErrorKind,
    fail: u32,
    calls: &mut u32,
) -> impl FnMut() -> std::future::Ready<io::Result<u32>> + '_ {
    move || {
        *calls += 1;
        std::future::ready(if *calls <= fail {
            Err(io::Error::from(kind))
        } else {
            Ok(*calls)
        })
    }
}

#[tokio::test(start_paused = true)]
async fn when_decides_what_is_retried_for_a_foreign_error_type() {
    let retry = Retry::new(RetryPolicy::default());

    let mut calls = 0;
    let r = retry
        .when(never)
        .run(io_op(io::ErrorKind::Interrupted, 9, &mut calls))
        .await;
    assert_eq!(
        (r.unwrap_err().kind(), calls),
        (io::ErrorKind::Interrupted, 1)
    );

    // A permanent-looking error, retried because the predicate says so.
    let mut calls = 0;
    let (r, rep) = retry
        .when(always)
        .run_with_report(io_op(io::ErrorKind::PermissionDenied, 9, &mut calls))
        .await;
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    assert_eq!((calls, rep.stop), (4, Stop::Exhausted));

    let mut calls = 0;
    let r = retry
        .when(interrupted)
        .run(io_op(io::ErrorKind::Interrupted, 2, &mut calls))
        .await;
    assert_eq!((r.unwrap(), calls), (3, 3));
    let mut calls = 0;
    let r = retry
        .when(interrupted)
        .run(io_op(io::ErrorKind::NotFound, 2, &mut calls))
        .await;
    assert_eq!((r.unwrap_err().kind(), calls), (io::ErrorKind::NotFound, 1));
}

#[test]
fn the_blocking_loop_retries_without_a_runtime() {
    let policy = RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(2),
        max_delay: Duration::from_millis(3),
    };
    let mut calls = 0;
    let started = std::time::Instant::now();
    let (r, rep) = Retry::new(policy).run_blocking_with_report(|| {
        calls += 1;
        if calls < 3 {
            Err(network())
        } else {
            Ok(calls)
        }
    });
    assert_eq!(r.unwrap(), 3);
    assert_eq!(rep, report(3, 5, Stop::Succeeded));
    assert!(
        started.elapsed() >= Duration::from_millis(5),
        "slept for real"
    );

    // when, blocking, on io::Error.
    let mut calls = 0;
    let r = Retry::new(policy).when(interrupted).run_blocking(|| {
        calls += 1;
        if calls < 2 {
            Err(io::Error::from(io::ErrorKind::Interrupted))
        } else {
            Ok("read")
        }
    });
    assert_eq!((r.unwrap(), calls), ("read", 2));

    // A deadline: 2 ms waits under a 3 ms deadline allow one retry, at most.
    let mut calls = 0;
    let (r, rep) = Retry::new(policy)
        .deadline(Duration::from_millis(3))
        .run_blocking_with_report(|| -> Result<(), EtlError> {
            calls += 1;
            Err(network())
        });
    assert!(r.is_err());
    assert_eq!(rep.stop, Stop::Deadline);
    assert!(
        calls <= 2 && rep.attempts == calls,
        "{calls} calls, {rep:?}"
    );

    // Permanent at once.
    let mut calls = 0;
    let (r, rep) = Retry::new(policy).run_blocking_with_report(|| -> Result<(), EtlError> {
        calls += 1;
        Err(EtlError::Parse("bad".into()))
    });
    assert!(r.is_err());
    assert_eq!((calls, rep), (1, report(1, 0, Stop::Permanent)));
}
