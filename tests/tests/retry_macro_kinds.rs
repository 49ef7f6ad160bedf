//! `#[retry]` on blocking fns, and `when = pred` for errors with no
//! `RetryableError` impl (a `std::io::Error`).

use etl_core::{retry, EtlError};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A blocking fn: the waits are real sleeps (of a few milliseconds here).
#[retry(max_attempts = 4, base = "2ms", max = "4ms")]
fn blocking(calls: &AtomicU32, fail: u32) -> Result<u32, EtlError> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if n <= fail {
        return Err(EtlError::Network(format!("attempt {n} reset")));
    }
    Ok(n)
}

#[test]
fn a_blocking_fn_is_retried_with_thread_sleeps_and_no_runtime() {
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    assert_eq!(blocking(&calls, 2).unwrap(), 3);
    assert!(
        started.elapsed() >= Duration::from_millis(2 + 4),
        "slept between attempts"
    );

    let calls = AtomicU32::new(0);
    let e = blocking(&calls, 9).unwrap_err();
    assert_eq!(
        (
            calls.load(Ordering::SeqCst),
            e.to_string().contains("attempt 4")
        ),
        (4, true)
    );
}

#[retry(max_attempts = 3, base = "1ms")]
fn blocking_permanent(calls: &AtomicU32) -> Result<(), EtlError> {
    calls.fetch_add(1, Ordering::SeqCst);
    let _n: u32 = "x".parse().map_err(|e| EtlError::Parse(format!("{e}")))?;
    Ok(())
}

#[test]
fn a_blocking_fn_gives_up_on_a_permanent_error_at_once() {
    let calls = AtomicU32::new(0);
    assert!(matches!(
        blocking_permanent(&calls),
        Err(EtlError::Parse(_))
    ));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
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

fn fail_with(calls: &AtomicU32, kind: io::ErrorKind, fail: u32) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if n <= fail {
        Err(io::Error::from(kind))
    } else {
        Ok(n)
    }
}

#[retry(max_attempts = 3, when = never)]
async fn read_never(calls: &AtomicU32, kind: io::ErrorKind) -> io::Result<u32> {
    fail_with(calls, kind, 9)
}

#[retry(max_attempts = 3, when = always)]
async fn read_always(calls: &AtomicU32, kind: io::ErrorKind) -> io::Result<u32> {
    fail_with(calls, kind, 9)
}

#[retry(max_attempts = 3, when = interrupted)]
async fn read_interrupted(calls: &AtomicU32, kind: io::ErrorKind) -> Result<u32, io::Error> {
    fail_with(calls, kind, 2)
}

#[tokio::test(start_paused = true)]
async fn when_decides_for_an_io_error() {
    let calls = AtomicU32::new(0);
    assert!(read_never(&calls, io::ErrorKind::Interrupted)
        .await
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "when = never: one call");

    let calls = AtomicU32::new(0);
    let e = read_always(&calls, io::ErrorKind::PermissionDenied)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "when = always: every attempt"
    );

    let calls = AtomicU32::new(0);
    assert_eq!(
        read_interrupted(&calls, io::ErrorKind::Interrupted)
            .await
            .unwrap(),
        3
    );
    let calls = AtomicU32::new(0);
    let e = read_interrupted(&calls, io::ErrorKind::NotFound)
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind(), calls.load(Ordering::SeqCst)),
        (io::ErrorKind::NotFound, 1)
    );
}

#[retry(max_attempts = 3, base = "1ms", when = interrupted)]
fn read_blocking(calls: &AtomicU32) -> io::Result<u32> {
    fail_with(calls, io::ErrorKind::Interrupted, 1)
}

#[test]
fn when_on_a_blocking_fn() {
    let calls = AtomicU32::new(0);
    assert_eq!(read_blocking(&calls).unwrap(), 2);
}
