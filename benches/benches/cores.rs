//! Issue 12's targets, measured in one run on this machine's cores:
//!
//! - a fresh `IdempotentSink::load` of ~1.3 KB real launch rows in batches
//!   of 500, against the one-core naive floor (`serde_json::to_string` +
//!   raw SHA-256, one row after another);
//! - the parallel split itself: `std::thread::scope` (ours) against rayon
//!   on the same per-row work, and the cost of one scoped thread against
//!   one row's key (where the small-batch threshold comes from);
//! - `IdempotentSink::resume` of a ~200 MB JSONL file in the page cache,
//!   against one core's raw SHA-256 of the same bytes in 1 KiB messages.

use async_trait::async_trait;
use criterion::{Criterion, Throughput};
use etl_core::content::canonical_batch;
use etl_core::{content_id, EtlError, IdempotentSink, JsonlSink, Row, Sink};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROWS: usize = 200_000;
const BATCH: usize = 500;

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

fn load(c: &mut Criterion, rows: &[Row]) {
    let rt = runtime();
    let bytes: usize = rows
        .iter()
        .map(|r| serde_json::to_string(r).unwrap().len())
        .sum();
    println!(
        "cores-report {} cores; {} real rows, {:.0} bytes a row on average",
        std::thread::available_parallelism().map_or(1, usize::from),
        rows.len(),
        bytes as f64 / rows.len() as f64
    );
    let mut group = c.benchmark_group("load");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(rows.len() as u64));
    group.bench_function("naive floor: to_string + sha256, one core", |b| {
        b.iter(|| {
            for row in rows {
                let text = serde_json::to_string(row).unwrap();
                let mut h = Sha256::new();
                h.update(b"row\0");
                h.update(text.as_bytes());
                black_box(h.finalize());
            }
        })
    });
    // Row::content_key is not generic: compiled in etl-core, as a user's
    // crate calls it. The generic load is compiled here, in the user's
    // crate: issue 17 asks that it keep etl-core's speed.
    group.bench_function("Row::content_key in a loop, one core", |b| {
        b.iter(|| {
            for row in rows {
                black_box(row.content_key().unwrap());
            }
        })
    });
    group.bench_function("fresh IdempotentSink::load, batches of 500", |b| {
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
    group.bench_function("all-seen IdempotentSink::load, batches of 500", |b| {
        b.iter(|| {
            for batch in rows.chunks(BATCH) {
                assert_eq!(rt.block_on(seen.load(batch)).unwrap(), 0);
            }
        })
    });
    group.bench_function("canonical_batch (etl-core, rayon), batches of 500", |b| {
        b.iter(|| {
            for batch in rows.chunks(BATCH) {
                black_box(canonical_batch(batch).unwrap());
            }
        })
    });
    group.bench_function("thread::scope halves, same work, batches of 500", |b| {
        let canonical = |rows: &[Row]| -> Vec<(String, String)> {
            rows.iter()
                .map(|row| {
                    let json = serde_json::to_string(row).unwrap();
                    (content_id("row", &json), json)
                })
                .collect()
        };
        b.iter(|| {
            for batch in rows.chunks(BATCH) {
                let (first, second) = batch.split_at(batch.len() / 2);
                let out = std::thread::scope(|s| {
                    let other = s.spawn(|| canonical(second));
                    let mut out = canonical(first);
                    out.extend(other.join().unwrap());
                    out
                });
                black_box(out);
            }
        })
    });
    group.bench_function("one core, same work, batches of 500", |b| {
        b.iter(|| {
            for row in rows {
                let json = serde_json::to_string(row).unwrap();
                black_box((content_id("row", &json), json));
            }
        })
    });
    group.bench_function("rayon par_iter, same work, batches of 500", |b| {
        b.iter(|| {
            for batch in rows.chunks(BATCH) {
                let out: Vec<(String, String)> = batch
                    .par_iter()
                    .map(|row| {
                        let json = serde_json::to_string(row).unwrap();
                        (content_id("row", &json), json)
                    })
                    .collect();
                black_box(out);
            }
        })
    });
    group.finish();
}

fn threshold(c: &mut Criterion, rows: &[Row]) {
    let mut group = c.benchmark_group("threshold");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("one scoped thread: spawn + join", |b| {
        b.iter(|| std::thread::scope(|s| s.spawn(|| black_box(1)).join().unwrap()))
    });
    group.bench_function("one row's content key", |b| {
        b.iter(|| black_box(rows[0].content_key().unwrap()))
    });
    for n in [16usize, 32, 64, 96, 128] {
        group.bench_function(format!("canonical_batch of {n}"), |b| {
            b.iter(|| black_box(canonical_batch(&rows[..n]).unwrap()))
        });
        // Split whatever the threshold, to find where splitting pays.
        group.bench_function(format!("rayon split, {n} rows"), |b| {
            b.iter(|| {
                let out: Vec<(String, String)> = rows[..n]
                    .par_iter()
                    .with_min_len(n / 4)
                    .map(|row| {
                        let json = serde_json::to_string(row).unwrap();
                        (content_id("row", &json), json)
                    })
                    .collect();
                black_box(out)
            })
        });
        group.bench_function(format!("one core, {n} rows"), |b| {
            b.iter(|| {
                for row in &rows[..n] {
                    let json = serde_json::to_string(row).unwrap();
                    black_box((content_id("row", &json), json));
                }
            })
        });
    }
    group.finish();
}

fn resume(c: &mut Criterion, rows: &[Row]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("launches.jsonl");
    {
        let sink = JsonlSink::open(&path).unwrap().sync(false);
        let rt = runtime();
        for batch in rows.chunks(1000) {
            rt.block_on(sink.load(batch)).unwrap();
        }
    }
    let data = std::fs::read(&path).unwrap();
    println!(
        "cores-report resume file: {:.1} MB",
        data.len() as f64 / 1e6
    );
    let mut group = c.benchmark_group("resume");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(data.len() as u64));
    group.bench_function(
        "raw SHA-256 of the same bytes, 1 KiB messages, one core",
        |b| {
            b.iter(|| {
                for chunk in data.chunks(1024) {
                    black_box(Sha256::digest(chunk));
                }
            })
        },
    );
    group.bench_function("IdempotentSink::resume (every core)", |b| {
        b.iter(|| black_box(IdempotentSink::resume(&path).unwrap().seen_count()))
    });
    group.finish();
}

fn main() {
    let rows = etl_benches::real_rows(ROWS);
    let mut c = Criterion::default().configure_from_args();
    load(&mut c, &rows);
    threshold(&mut c, &rows);
    resume(&mut c, &rows[..150_000]);
    c.final_summary();
}
