//! `IdempotentSink::load` over 1M realistic rows with a no-op inner sink:
//! all fresh, then all seen, against computing the content keys alone (the
//! floor: every load must hash every row). Before criterion runs it prints
//! the memory each remembered key costs at 1M and 10M keys.

use async_trait::async_trait;
use criterion::{Criterion, Throughput};
use etl_benches::{live_bytes, rows, Counting};
use etl_core::{content_id, EtlError, IdempotentSink, Row, Sink};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: Counting = Counting;

const ROWS: usize = 1_000_000;
const BATCH: usize = 1_000;

struct Noop;

#[async_trait]
impl Sink for Noop {
    async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
        Ok(rows.len())
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// Live heap bytes per remembered key, the keys given as content ids.
fn bytes_per_key(n: usize) -> f64 {
    let before = live_bytes();
    let keys = (0..n).map(|i| content_id("row", &i.to_string()));
    let sink = IdempotentSink::with_seen(Noop, keys);
    let after = live_bytes();
    assert_eq!(sink.seen_count(), n);
    (after - before) as f64 / n as f64
}

fn report() {
    for n in [1_000_000, 10_000_000] {
        println!(
            "sink-report {n:>10} keys: {:.1} bytes per key",
            bytes_per_key(n)
        );
    }
}

fn load(c: &mut Criterion) {
    let rows = rows(ROWS);
    let rt = runtime();
    let mut group = c.benchmark_group("idempotent_load");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("content keys alone (floor)", |b| {
        b.iter(|| {
            rows.iter()
                .map(|r| r.content_key().unwrap().len())
                .sum::<usize>()
        })
    });
    group.bench_function("all fresh", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let sink = IdempotentSink::new(Noop);
                let start = Instant::now();
                for batch in rows.chunks(BATCH) {
                    rt.block_on(sink.load(batch)).unwrap();
                }
                total += start.elapsed();
            }
            total
        })
    });
    let seen = IdempotentSink::new(Noop);
    for batch in rows.chunks(BATCH) {
        rt.block_on(seen.load(batch)).unwrap();
    }
    group.bench_function("all seen", |b| {
        b.iter(|| {
            let mut written = 0;
            for batch in rows.chunks(BATCH) {
                written += rt.block_on(seen.load(batch)).unwrap();
            }
            assert_eq!(written, 0);
        })
    });
    group.finish();
}

fn main() {
    report();
    let mut c = Criterion::default().configure_from_args();
    load(&mut c);
    c.final_summary();
}
