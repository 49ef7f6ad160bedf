//! The success path of a retried call: a bare async fn, `with_retry`,
//! `#[retry]`, and the peers (backon, tokio-retry2, tryhard) on the same
//! trivial op. Each future is polled once with a no-op waker: the success
//! path must finish on its first poll, with no runtime and no timer.
//!
//! Before criterion runs, it prints allocations per call and each future's
//! size (BENCHMARKS.md).

use backon::{ExponentialBuilder, Retryable};
use criterion::Criterion;
use etl_benches::{allocations, Counting};
use etl_core::retry::{CircuitBreaker, Jitter, Retry, RetryBudget, RetryEvent};
use etl_core::{retry, with_retry, EtlError, RetryPolicy};
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Builds the future in place (as `.await` in an async fn does) and polls it
/// once; a macro, so that no by-value move of the future is measured.
macro_rules! poll_once {
    ($fut:expr) => {{
        let mut fut = pin!($fut);
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("the success path must not wait"),
        }
    }};
}

async fn op() -> Result<u64, EtlError> {
    Ok(black_box(42))
}

#[retry]
async fn annotated() -> Result<u64, EtlError> {
    Ok(black_box(42))
}

async fn hand_written() -> Result<u64, EtlError> {
    with_retry(RetryPolicy::default(), || async { Ok(black_box(42)) }).await
}

static BUDGET: RetryBudget = RetryBudget::new(500);
static BREAKER: CircuitBreaker = CircuitBreaker::new(5, Duration::from_secs(30));

fn observe(event: &RetryEvent<'_>) {
    black_box(event.attempt);
}

/// `Retry` with every option the issue names: jitter, deadline, ceiling,
/// budget (a success refills it: one atomic load while full), observer and
/// breaker (two atomic loads while closed).
fn retry_all_options() -> impl Future<Output = Result<u64, EtlError>> {
    Retry::new(RetryPolicy::default())
        .jitter(Jitter::Full)
        .deadline(Duration::from_secs(30))
        .max_retry_after(Duration::from_secs(60))
        .budget(&BUDGET)
        .on_retry(&observe)
        .breaker(&BREAKER)
        .run(op)
}

/// `Retry::run` with no option: the baseline of the breaker's cost.
fn retry_plain() -> impl Future<Output = Result<u64, EtlError>> {
    Retry::new(RetryPolicy::default()).run(op)
}

/// The same call with a breaker set.
fn retry_breaker() -> impl Future<Output = Result<u64, EtlError>> {
    Retry::new(RetryPolicy::default()).breaker(&BREAKER).run(op)
}

// The peers, configured like RetryPolicy::default(): 4 attempts, 200 ms
// doubling to 10 s, retrying transient errors only where they can say so.
fn backon_call() -> impl Future<Output = Result<u64, EtlError>> {
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_max_times(3);
    op.retry(backoff).when(EtlError::is_transient)
}

fn tokio_retry2_call() -> impl Future<Output = Result<u64, EtlError>> {
    use tokio_retry2::strategy::{ExponentialBackoff, MaxInterval};
    use tokio_retry2::{Retry, RetryError};
    let strategy = ExponentialBackoff::from_millis(200)
        .max_delay(Duration::from_secs(10))
        .max_interval(60_000)
        .take(3);
    Retry::spawn(strategy, || async {
        op().await.map_err(RetryError::transient)
    })
}

fn tryhard_call() -> impl Future<Output = Result<u64, EtlError>> {
    tryhard::retry_fn(op)
        .retries(3)
        .exponential_backoff(Duration::from_millis(200))
        .max_delay(Duration::from_secs(10))
}

/// Allocations per call and the future's size, for BENCHMARKS.md.
fn report() {
    fn row<F: Future<Output = Result<u64, EtlError>>>(name: &str, make: impl Fn() -> F) {
        let size = std::mem::size_of_val(&make());
        let calls = 10_000;
        let before = allocations();
        for _ in 0..calls {
            poll_once!(make()).unwrap();
        }
        let per_call = (allocations() - before) as f64 / calls as f64;
        println!("retry-report {name:<24} future {size:>4} B   allocations/call {per_call:.2}");
    }
    row("bare async fn", op);
    row("with_retry", || with_retry(RetryPolicy::default(), op));
    row("#[retry]", annotated);
    row("hand-written with_retry", hand_written);
    row("Retry, all options", retry_all_options);
    row("Retry::run", retry_plain);
    row("Retry::run + breaker", retry_breaker);
    row("backon", backon_call);
    row("tokio-retry2", tokio_retry2_call);
    row("tryhard", tryhard_call);
}

fn poll_moved<F: Future>(fut: F) -> F::Output {
    poll_once!(fut)
}

fn success_path_moved(c: &mut Criterion) {
    let mut group = c.benchmark_group("success_path_moved");
    group.bench_function("bare async fn", |b| b.iter(|| poll_moved(op())));
    group.bench_function("with_retry", |b| {
        b.iter(|| poll_moved(with_retry(RetryPolicy::default(), op)))
    });
    group.bench_function("#[retry]", |b| b.iter(|| poll_moved(annotated())));
    group.bench_function("hand-written with_retry", |b| {
        b.iter(|| poll_moved(hand_written()))
    });
    group.bench_function("Retry, all options", |b| {
        b.iter(|| poll_moved(retry_all_options()))
    });
    group.bench_function("Retry::run", |b| b.iter(|| poll_moved(retry_plain())));
    group.bench_function("Retry::run + breaker", |b| {
        b.iter(|| poll_moved(retry_breaker()))
    });
    group.bench_function("backon", |b| b.iter(|| poll_moved(backon_call())));
    group.bench_function("tokio-retry2", |b| {
        b.iter(|| poll_moved(tokio_retry2_call()))
    });
    group.bench_function("tryhard", |b| b.iter(|| poll_moved(tryhard_call())));
    group.finish();
}

fn success_path(c: &mut Criterion) {
    let mut group = c.benchmark_group("success_path");
    group.bench_function("bare async fn", |b| b.iter(|| poll_once!(op())));
    group.bench_function("with_retry", |b| {
        b.iter(|| poll_once!(with_retry(RetryPolicy::default(), op)))
    });
    group.bench_function("#[retry]", |b| b.iter(|| poll_once!(annotated())));
    group.bench_function("hand-written with_retry", |b| {
        b.iter(|| poll_once!(hand_written()))
    });
    group.bench_function("Retry, all options", |b| {
        b.iter(|| poll_once!(retry_all_options()))
    });
    group.bench_function("Retry::run", |b| b.iter(|| poll_once!(retry_plain())));
    group.bench_function("Retry::run + breaker", |b| {
        b.iter(|| poll_once!(retry_breaker()))
    });
    group.bench_function("backon", |b| b.iter(|| poll_once!(backon_call())));
    group.bench_function("tokio-retry2", |b| {
        b.iter(|| poll_once!(tokio_retry2_call()))
    });
    group.bench_function("tryhard", |b| b.iter(|| poll_once!(tryhard_call())));
    group.finish();
}

fn main() {
    // With etl-core's `metrics` feature, the success path can be measured
    // with a real recorder installed (as `launches --metrics-file` does):
    // `ETL_BENCH_RECORDER=prometheus cargo bench --bench retry --features
    // etl-core/metrics` (BENCHMARKS.md section 11).
    if std::env::var("ETL_BENCH_RECORDER").as_deref() == Ok("prometheus") {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("a recorder, installed once");
        println!("retry-report recorder: Prometheus (metrics-exporter-prometheus)");
    }
    report();
    let mut c = Criterion::default().configure_from_args();
    success_path(&mut c);
    success_path_moved(&mut c);
    c.final_summary();
}
