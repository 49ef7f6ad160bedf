//! `#[retry]` at run time, on tokio's paused clock: an annotated fn makes
//! exactly the calls, and waits exactly the delays, that `with_retry` with
//! the same policy makes.

use async_trait::async_trait;
use etl_core::{retry, with_retry, EtlError, RetryPolicy, Row, Sink};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Records when each attempt started and fails the first `failures` of them
/// with `error`.
struct Script {
    start: Instant,
    calls: Mutex<Vec<Duration>>,
    failures: usize,
    error: fn() -> EtlError,
}

impl Script {
    fn new(failures: usize, error: fn() -> EtlError) -> Self {
        Script {
            start: Instant::now(),
            calls: Mutex::new(Vec::new()),
            failures,
            error,
        }
    }

    fn attempt(&self) -> Result<usize, EtlError> {
        let mut calls = self.calls.lock().unwrap();
        calls.push(self.start.elapsed());
        if calls.len() <= self.failures {
            Err((self.error)())
        } else {
            Ok(calls.len())
        }
    }

    fn schedule(&self) -> Vec<Duration> {
        self.calls.lock().unwrap().clone()
    }
}

fn network() -> EtlError {
    EtlError::Network("connection reset".into())
}

#[retry(max_attempts = 5, base = "100ms", max = "300ms")]
async fn annotated(script: &Script) -> Result<usize, EtlError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn retry_macro_matches_with_retry_call_for_call() {
    let by_macro = Script::new(10, network);
    let result = annotated(&by_macro).await;
    assert!(matches!(result, Err(EtlError::Network(_))));

    let by_hand = Script::new(10, network);
    let policy = RetryPolicy {
        max_attempts: 5,
        base_delay: ms(100),
        max_delay: ms(300),
    };
    let _ = with_retry(policy, || async { by_hand.attempt() }).await;

    assert_eq!(
        by_macro.schedule(),
        [ms(0), ms(100), ms(300), ms(600), ms(900)]
    );
    assert_eq!(by_macro.schedule(), by_hand.schedule());
}

#[retry]
async fn bare(script: &Script) -> Result<usize, EtlError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn retry_bare_attribute_is_the_default_policy() {
    // The macro knows RetryPolicy::default() at compile time; this keeps the
    // two equal.
    let by_macro = Script::new(10, network);
    let _ = bare(&by_macro).await;
    let by_hand = Script::new(10, network);
    let _ = with_retry(RetryPolicy::default(), || async { by_hand.attempt() }).await;
    assert_eq!(by_macro.schedule(), [ms(0), ms(200), ms(600), ms(1400)]);
    assert_eq!(by_macro.schedule(), by_hand.schedule());
}

#[tokio::test(start_paused = true)]
async fn retry_macro_succeeds_after_transient_failures() {
    let script = Script::new(2, network);
    assert_eq!(annotated(&script).await.unwrap(), 3);
    assert_eq!(script.schedule().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_macro_gives_up_on_permanent_at_once() {
    let script = Script::new(10, || EtlError::Parse("not a page".into()));
    assert!(matches!(annotated(&script).await, Err(EtlError::Parse(_))));
    assert_eq!(script.schedule(), [ms(0)]);
}

#[tokio::test(start_paused = true)]
async fn retry_macro_honours_retry_after_over_max() {
    let script = Script::new(1, || EtlError::RateLimited {
        retry_after_secs: 7,
    });
    assert_eq!(annotated(&script).await.unwrap(), 2);
    assert_eq!(script.schedule(), [ms(0), ms(7000)]);
}

#[retry(max_attempts = 3, base = "1s")]
async fn question_mark(script: &Script) -> Result<&'static str, EtlError> {
    script.attempt()?; // `?` ends this attempt; the next one runs the body again
    Ok("done")
}

#[tokio::test(start_paused = true)]
async fn retry_macro_question_mark_ends_one_attempt() {
    let script = Script::new(2, network);
    assert_eq!(question_mark(&script).await.unwrap(), "done");
    assert_eq!(script.schedule(), [ms(0), ms(1000), ms(3000)]);
}

#[retry(max_attempts = 3, base = "10ms")]
async fn consumes(mut items: Vec<u32>, calls: &AtomicU32) -> Result<Vec<u32>, EtlError> {
    items.push(calls.fetch_add(1, Ordering::SeqCst));
    if items.len() < 2 {
        // Each attempt gets a fresh copy: a retry never sees this push.
        return Err(network());
    }
    Ok(items)
}

#[tokio::test(start_paused = true)]
async fn retry_macro_gives_each_attempt_fresh_arguments() {
    let calls = AtomicU32::new(0);
    let result = consumes(vec![], &calls).await;
    assert!(
        result.is_err(),
        "every attempt starts from the empty vec again"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(consumes(vec![9], &calls).await.unwrap(), [9, 3]);
}

struct Client {
    calls: AtomicU32,
}

impl Client {
    #[retry(max_attempts = 4, base = "50ms")]
    async fn fetch<T>(&self, page: T) -> Result<String, EtlError>
    where
        T: ToString + Clone + Send,
    {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(network());
        }
        Ok(format!("page {}", page.to_string()))
    }
}

#[tokio::test(start_paused = true)]
async fn retry_macro_on_a_generic_method() {
    let client = Client {
        calls: AtomicU32::new(0),
    };
    let start = Instant::now();
    assert_eq!(client.fetch(3).await.unwrap(), "page 3");
    assert_eq!(client.calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(150));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_macro_future_spawns() {
    let client = std::sync::Arc::new(Client {
        calls: AtomicU32::new(2),
    });
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.fetch("x".to_string()).await }
    });
    assert_eq!(task.await.unwrap().unwrap(), "page x");
}

/// A sink whose `load` fails twice, then writes.
struct FlakySink {
    calls: AtomicU32,
}

#[async_trait]
impl Sink for FlakySink {
    #[retry(max_attempts = 3, base = "1s")]
    async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(EtlError::Http {
                status: 503,
                message: "busy".into(),
            });
        }
        Ok(rows.len())
    }
}

#[tokio::test(start_paused = true)]
async fn retry_macro_inside_async_trait_impl() {
    let sink = FlakySink {
        calls: AtomicU32::new(0),
    };
    let start = Instant::now();
    assert_eq!(sink.load(&[]).await.unwrap(), 0);
    assert_eq!(sink.calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(3000), "1s then 2s, as the policy says");
}

mod options {
    //! The keys beyond the policy: jitter, deadline, max_retry_after,
    //! on_retry, budget, and an error type of the user's own.

    use super::{ms, network, Script};
    use etl_core::retry::{RetryBudget, RetryEvent, RetryableError};
    use etl_core::{retry, EtlError};
    use std::fmt;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;
    use tokio::time::Instant;

    #[retry(max_attempts = 6, base = "1s", max = "60s", jitter = "full")]
    async fn jittered(script: &Script) -> Result<usize, EtlError> {
        script.attempt()
    }

    #[tokio::test(start_paused = true)]
    async fn retry_macro_jitter_keeps_each_wait_under_the_backoff() {
        let script = Script::new(10, network);
        let _ = jittered(&script).await;
        let starts = script.schedule();
        assert_eq!(starts.len(), 6);
        for (i, w) in starts.windows(2).enumerate() {
            assert!(w[1] - w[0] <= ms(1000 << i), "wait {i}: {:?}", w[1] - w[0]);
        }
    }

    #[retry(max_attempts = 10, base = "1s", deadline = "5s")]
    async fn with_deadline(script: &Script) -> Result<usize, EtlError> {
        script.attempt()
    }

    #[tokio::test(start_paused = true)]
    async fn retry_macro_deadline() {
        let script = Script::new(100, network);
        assert!(with_deadline(&script).await.is_err());
        assert_eq!(
            script.schedule(),
            [ms(0), ms(1000), ms(3000)],
            "a 4 s wait would end past 5 s"
        );
    }

    #[retry(max_attempts = 5, max_retry_after = "60s")]
    async fn with_ceiling(script: &Script) -> Result<usize, EtlError> {
        script.attempt()
    }

    #[tokio::test(start_paused = true)]
    async fn retry_macro_max_retry_after() {
        let script = Script::new(1, || EtlError::RateLimited {
            retry_after_secs: 3600,
        });
        let start = Instant::now();
        assert!(matches!(
            with_ceiling(&script).await,
            Err(EtlError::RateLimited { .. })
        ));
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "an hour is above the ceiling: no wait"
        );
    }

    static OBSERVED: AtomicU32 = AtomicU32::new(0);

    fn count(event: &RetryEvent<'_>) {
        OBSERVED.fetch_add(event.attempt, Ordering::SeqCst);
    }

    static BUDGET: RetryBudget = RetryBudget::new(10);

    #[retry(max_attempts = 10, base = "10ms", on_retry = count, budget = &BUDGET)]
    async fn observed_and_budgeted(script: &Script) -> Result<usize, EtlError> {
        script.attempt()
    }

    #[tokio::test(start_paused = true)]
    async fn retry_macro_on_retry_and_budget() {
        let script = Script::new(100, network);
        assert!(observed_and_budgeted(&script).await.is_err());
        assert_eq!(
            script.schedule().len(),
            3,
            "the budget paid for two retries"
        );
        assert_eq!(
            OBSERVED.load(Ordering::SeqCst),
            1 + 2,
            "the observer saw attempts 1 and 2"
        );
        assert_eq!(BUDGET.available(), 0);
    }

    #[derive(Debug)]
    struct Busy;

    impl fmt::Display for Busy {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("busy")
        }
    }

    impl RetryableError for Busy {
        fn is_transient(&self) -> bool {
            true
        }
    }

    #[retry(max_attempts = 3, base = "2s")]
    async fn own_error(calls: &AtomicU32) -> Result<u32, Busy> {
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Err(Busy),
            n => Ok(n),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_macro_with_an_error_type_of_the_users_own() {
        let calls = AtomicU32::new(0);
        let start = Instant::now();
        assert_eq!(own_error(&calls).await.unwrap(), 2);
        assert_eq!(start.elapsed(), ms(2000 + 4000));
    }
}
