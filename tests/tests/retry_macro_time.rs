//! `attempt_timeout`, and a deadline that cuts the attempt in flight, on
//! tokio's paused clock: the exact schedule, not real time.

use etl_core::retry::{RetryableError, TimeLimit};
use etl_core::{retry, EtlError};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Records each attempt's start; the first `hangs` attempts sleep an hour.
struct Hangs {
    start: Instant,
    starts: Mutex<Vec<Duration>>,
    hangs: usize,
}

impl Hangs {
    fn new(hangs: usize) -> Self {
        Hangs {
            start: Instant::now(),
            starts: Mutex::new(Vec::new()),
            hangs,
        }
    }

    async fn attempt(&self) -> usize {
        let n = {
            let mut starts = self.starts.lock().unwrap();
            starts.push(self.start.elapsed());
            starts.len()
        };
        if n <= self.hangs {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        n
    }

    fn starts(&self) -> Vec<Duration> {
        self.starts.lock().unwrap().clone()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[retry(max_attempts = 4, base = "200ms", attempt_timeout = "5s")]
async fn cut(h: &Hangs) -> Result<usize, EtlError> {
    Ok(h.attempt().await)
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_is_cut_by_attempt_timeout_on_schedule() {
    let h = Hangs::new(2);
    assert_eq!(cut(&h).await.unwrap(), 3);
    // Cut at 5 s, wait 200 ms; cut at 10.2 s, wait 400 ms; third succeeds.
    assert_eq!(h.starts(), [ms(0), ms(5_200), ms(10_600)]);
    assert_eq!(h.start.elapsed(), ms(10_600));

    let h = Hangs::new(9);
    let e = cut(&h).await.unwrap_err();
    assert!(
        matches!(e, EtlError::TimedOut(t) if t.by == TimeLimit::Attempt && t.after == ms(5_000)),
        "{e}"
    );
    assert_eq!(
        h.starts().len(),
        4,
        "a cut attempt is transient: all attempts ran"
    );
}

#[retry(max_attempts = 4, base = "200ms", deadline = "10s")]
async fn bounded(h: &Hangs) -> Result<usize, EtlError> {
    Ok(h.attempt().await)
}

#[tokio::test(start_paused = true)]
async fn a_deadline_of_10s_over_an_hour_long_attempt_returns_at_10s() {
    let h = Hangs::new(9);
    let e = bounded(&h).await.unwrap_err();
    assert_eq!(h.start.elapsed(), ms(10_000), "returned at the deadline");
    assert!(
        matches!(e, EtlError::TimedOut(t) if t.by == TimeLimit::Deadline),
        "{e}"
    );
    assert_eq!(h.starts(), [ms(0)]);
}

/// An error type without `From<TimedOut>`.
#[derive(Debug)]
struct Mine;

impl std::fmt::Display for Mine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mine")
    }
}

impl RetryableError for Mine {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(max_attempts = 2, deadline = "10s")]
async fn uncut(h: &Hangs) -> Result<usize, Mine> {
    Ok(h.attempt().await)
}

#[tokio::test(start_paused = true)]
async fn without_from_timed_out_the_deadline_does_not_cut_the_attempt() {
    // Today's behaviour, documented: the attempt runs its hour.
    let h = Hangs::new(1);
    assert_eq!(uncut(&h).await.unwrap(), 1);
    assert_eq!(h.start.elapsed(), Duration::from_secs(3600));
}
