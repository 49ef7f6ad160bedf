//! Rebuilding the seen-set from a large JSONL file (a re-run's start), in
//! bytes per second: `IdempotentSink::resume` (binary digests) and the
//! `JsonlSink::content_keys` + `with_seen` route (hex strings).

use criterion::{Criterion, Throughput};
use etl_core::{IdempotentSink, JsonlSink, Sink};
use std::time::Duration;

const ROWS: usize = 200_000;

fn resume(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("launches.jsonl");
    {
        let sink = JsonlSink::open(&path).unwrap().sync(false);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for batch in etl_benches::rows(ROWS).chunks(1000) {
            rt.block_on(sink.load(batch)).unwrap();
        }
    }
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "resume-report file of {ROWS} rows, {:.1} MB",
        bytes as f64 / 1e6
    );

    let mut group = c.benchmark_group("resume");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("IdempotentSink::resume", |b| {
        b.iter(|| assert_eq!(IdempotentSink::resume(&path).unwrap().seen_count(), ROWS))
    });
    group.bench_function("content_keys + with_seen", |b| {
        b.iter(|| {
            let file = JsonlSink::open(&path).unwrap();
            let keys = file.content_keys().unwrap();
            assert_eq!(IdempotentSink::with_seen(file, keys).seen_count(), ROWS)
        })
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    resume(&mut c);
    c.final_summary();
}
