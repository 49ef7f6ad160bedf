//! Every metric of the feature `metrics`, read back through `metrics-util`'s
//! debugging recorder, installed for the test's thread (each test runs on a
//! current-thread runtime, so every task records to it).

#![cfg(feature = "metrics")]

use etl_core::retry::{CircuitBreaker, Retry, RetryBudget, Stop};
use etl_core::{with_retry, EtlError, RetryPolicy};
use metrics::{SharedString, Unit};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::{CompositeKey, MetricKind};
use std::future::Future;
use std::time::Duration;

/// Runs `test` on a paused current-thread runtime with a debugging recorder
/// for this thread; returns what it recorded.
fn recorded<F: Future>(test: impl FnOnce() -> F) -> Metrics {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _guard = metrics::set_default_local_recorder(&recorder);
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(test());
    // One snapshot: taking one resets the recorder's counters.
    Metrics(snapshotter.snapshot().into_vec())
}

/// What the recorder held at the end of a test.
struct Metrics(Vec<(CompositeKey, Option<Unit>, Option<SharedString>, DebugValue)>);

impl Metrics {
    /// The value of the metric `name` with exactly these labels.
    fn value(&self, kind: MetricKind, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0.iter().find_map(|(key, _, _, value)| {
            let mut have: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            let mut want: Vec<(String, String)> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            have.sort();
            want.sort();
            (key.kind() == kind && key.key().name() == name && have == want).then_some(value)
        })
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(MetricKind::Counter, name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            other => panic!("{name} is not a counter: {other:?}"),
        }
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.value(MetricKind::Gauge, name, labels) {
            Some(DebugValue::Gauge(v)) => v.into_inner(),
            other => panic!("{name} is not a gauge: {other:?}"),
        }
    }

    /// A histogram's samples.
    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match self.value(MetricKind::Histogram, name, labels) {
            Some(DebugValue::Histogram(v)) => v.iter().map(|x| x.into_inner()).collect(),
            None => Vec::new(),
            other => panic!("{name} is not a histogram: {other:?}"),
        }
    }

    fn calls(&self, op: &str, stop: &str) -> u64 {
        self.counter("etl_retry_calls_total", &[("op", op), ("stop", stop)])
    }
}

fn network() -> EtlError {
    EtlError::Network("reset".into())
}

#[test]
fn attempts_retries_sleep_and_the_call_of_a_success_after_retries() {
    let m = recorded(|| async {
        let mut calls = 0;
        let r = with_retry(RetryPolicy::default(), || {
            calls += 1;
            let outcome = match calls {
                1 => Err(network()),
                2 => Err(EtlError::RateLimited {
                    retry_after_secs: 5,
                }),
                _ => Ok(()),
            };
            async move { outcome }
        })
        .await;
        assert!(r.is_ok());
    });
    let op = [("op", "with_retry")];
    assert_eq!(m.counter("etl_retry_attempts_total", &op), 3);
    assert_eq!(
        m.counter(
            "etl_retries_total",
            &[("op", "with_retry"), ("reason", "transient")]
        ),
        1
    );
    assert_eq!(
        m.counter(
            "etl_retries_total",
            &[("op", "with_retry"), ("reason", "rate_limited")]
        ),
        1,
        "the server's Retry-After chose the second wait"
    );
    assert_eq!(
        m.histogram("etl_retry_sleep_seconds", &op),
        [0.2, 5.0],
        "each wait a sample: _sum is the time slept, _count the waits"
    );
    assert_eq!(m.calls("with_retry", "succeeded"), 1);
    assert_eq!(m.calls("with_retry", "exhausted"), 0);
}

#[test]
fn a_first_attempt_success_is_one_attempt_and_one_call() {
    let m = recorded(|| async {
        for _ in 0..3 {
            with_retry(RetryPolicy::default(), || async { Ok::<_, EtlError>(()) })
                .await
                .unwrap();
        }
    });
    assert_eq!(
        m.counter("etl_retry_attempts_total", &[("op", "with_retry")]),
        3
    );
    assert_eq!(m.calls("with_retry", "succeeded"), 3);
    assert_eq!(
        m.value(
            MetricKind::Histogram,
            "etl_retry_sleep_seconds",
            &[("op", "with_retry")]
        ),
        None,
        "no wait, no sleep recorded"
    );
}

#[test]
fn every_stop_is_counted_by_its_name() {
    static EMPTY: RetryBudget = RetryBudget::new(0);
    static TRIPS_AT_ONCE: CircuitBreaker =
        CircuitBreaker::new(1, Duration::from_secs(60)).named("trips_at_once");
    let m = recorded(|| async {
        let retry = |name| Retry::new(RetryPolicy::default()).name(name);
        // Permanent at once, and after a retry.
        let _ = retry("permanent")
            .run(|| async { Err::<(), _>(EtlError::Parse("x".into())) })
            .await;
        // Exhausted: four transient failures.
        let _ = retry("exhausted")
            .run(|| async { Err::<(), _>(network()) })
            .await;
        // Exhausted at once: one attempt allowed.
        let one = RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        };
        let _ = Retry::new(one)
            .name("single")
            .run(|| async { Err::<(), _>(network()) })
            .await;
        // The deadline: no wait that would end past 300 ms.
        let _ = retry("deadline")
            .deadline(Duration::from_millis(300))
            .run(|| async { Err::<(), _>(network()) })
            .await;
        // The server asks for longer than the ceiling.
        let _ = retry("ceiling")
            .max_retry_after(Duration::from_secs(1))
            .run(|| async {
                Err::<(), _>(EtlError::RateLimited {
                    retry_after_secs: 60,
                })
            })
            .await;
        // An empty budget pays for no retry.
        let _ = retry("budget")
            .budget(&EMPTY)
            .run(|| async { Err::<(), _>(network()) })
            .await;
        // A breaker that opens after one failure refuses the second attempt.
        let _ = retry("breaker")
            .breaker(&TRIPS_AT_ONCE)
            .run(|| async { Err::<(), _>(network()) })
            .await;
    });
    assert_eq!(m.calls("breaker", "circuit_open"), 1);
    assert_eq!(
        m.gauge("etl_circuit_open", &[("breaker", "trips_at_once")]),
        1.0
    );
    assert_eq!(m.calls("permanent", "permanent"), 1);
    assert_eq!(
        m.counter("etl_retry_attempts_total", &[("op", "permanent")]),
        1
    );
    assert_eq!(m.calls("exhausted", "exhausted"), 1);
    assert_eq!(
        m.counter("etl_retry_attempts_total", &[("op", "exhausted")]),
        4
    );
    assert_eq!(
        m.counter(
            "etl_retries_total",
            &[("op", "exhausted"), ("reason", "transient")]
        ),
        3
    );
    assert_eq!(
        m.histogram("etl_retry_sleep_seconds", &[("op", "exhausted")]),
        [0.2, 0.4, 0.8]
    );
    assert_eq!(m.calls("single", "exhausted"), 1);
    assert_eq!(m.calls("deadline", "deadline"), 1);
    assert_eq!(
        m.counter("etl_retry_attempts_total", &[("op", "deadline")]),
        2
    );
    assert_eq!(m.calls("ceiling", "retry_after_ceiling"), 1);
    assert_eq!(m.calls("budget", "budget"), 1);
    // The label values are Stop::as_str, for every stop there is.
    for stop in [
        Stop::Succeeded,
        Stop::Permanent,
        Stop::Exhausted,
        Stop::Deadline,
        Stop::RetryAfterCeiling,
        Stop::Budget,
        Stop::CircuitOpen,
    ] {
        assert!(stop
            .as_str()
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_'));
    }
}

#[test]
fn a_cut_attempt_retries_with_reason_timed_out() {
    let m = recorded(|| async {
        let mut calls = 0;
        let r = Retry::new(RetryPolicy::default())
            .name("hangs_once")
            .attempt_timeout(Duration::from_secs(1))
            .run(|| {
                calls += 1;
                let hang = calls == 1;
                async move {
                    if hang {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    Ok::<_, EtlError>(())
                }
            })
            .await;
        assert!(r.is_ok());
    });
    assert_eq!(
        m.counter(
            "etl_retries_total",
            &[("op", "hangs_once"), ("reason", "timed_out")]
        ),
        1
    );
    assert_eq!(m.calls("hangs_once", "succeeded"), 1);
}

#[cfg(feature = "macros")]
#[test]
fn a_retry_fn_is_counted_under_its_own_name() {
    #[etl_core::retry(max_attempts = 3, base = "10ms")]
    async fn fetch_page(page: u32) -> Result<u32, EtlError> {
        if page == 0 {
            Err(EtlError::Network("reset".into()))
        } else {
            Ok(page)
        }
    }

    #[etl_core::retry(max_attempts = 2)]
    fn blocking_read() -> Result<(), EtlError> {
        Ok(())
    }

    let m = recorded(|| async {
        assert_eq!(fetch_page(1).await.unwrap(), 1);
        assert!(fetch_page(0).await.is_err());
        blocking_read().unwrap();
    });
    assert_eq!(m.calls("fetch_page", "succeeded"), 1);
    assert_eq!(m.calls("fetch_page", "exhausted"), 1);
    assert_eq!(
        m.counter("etl_retry_attempts_total", &[("op", "fetch_page")]),
        4
    );
    assert_eq!(m.calls("blocking_read", "succeeded"), 1);
    assert_eq!(
        m.calls("with_retry", "succeeded"),
        0,
        "not under the default name"
    );
}

#[cfg(feature = "content")]
mod content {
    use super::*;
    use etl_core::{IdempotentSink, JsonlRejects, Launch, Reject, RejectSink, Row, Sink};

    struct Noop;

    #[async_trait::async_trait]
    impl Sink for Noop {
        async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
            Ok(rows.len())
        }
    }

    fn row(id: &str) -> Row {
        Row::Launches(Launch {
            id: id.into(),
            name: "x".into(),
            ..Default::default()
        })
    }

    #[test]
    fn sink_rows_are_new_or_seen() {
        let m = recorded(|| async {
            let sink = IdempotentSink::new(Noop);
            assert_eq!(sink.load(&[row("a"), row("b"), row("a")]).await.unwrap(), 2);
            assert_eq!(sink.load(&[row("a"), row("c")]).await.unwrap(), 1);
        });
        let outcome = |o| m.counter("etl_sink_rows_total", &[("outcome", o)]);
        assert_eq!(outcome("new"), 3);
        assert_eq!(
            outcome("seen"),
            2,
            "a copy within a batch, and a row written before"
        );
    }

    #[test]
    fn rejects_are_counted_once_as_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let m = recorded(|| async {
            let rejects = JsonlRejects::open(&path).unwrap();
            let a = Reject::new("42", "not a launch", "p1").unwrap();
            let b = Reject::new("43", "not a launch", "p1").unwrap();
            assert_eq!(rejects.reject(&[a.clone(), b]).await.unwrap(), 2);
            assert_eq!(rejects.reject(&[a]).await.unwrap(), 0);
        });
        assert_eq!(m.counter("etl_rejects_total", &[]), 2);
    }
}
