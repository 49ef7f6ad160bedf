//! Content addressing: `content_id` against raw SHA-256 on the same bytes
//! (the machine's SHA-256 speed is the ceiling), the cost of the hex
//! formatting alone, and `Row::content_key` against the naive
//! `content_id("row", &serde_json::to_string(row)?)` on realistic rows.

use criterion::{Criterion, Throughput};
use etl_core::{content_id, Row};
use sha2::{Digest, Sha256};
use std::hint::black_box;

fn naive_key(row: &Row) -> String {
    content_id("row", &serde_json::to_string(row).unwrap())
}

fn ids(c: &mut Criterion) {
    let mut group = c.benchmark_group("content_id");
    for size in [64usize, 1024, 16 * 1024] {
        let text: String = (0..size)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(format!("content_id/{size}B"), |b| {
            b.iter(|| content_id("row", black_box(&text)))
        });
        group.bench_function(format!("raw sha2/{size}B"), |b| {
            b.iter(|| {
                let mut h = Sha256::new();
                h.update(b"row\0");
                h.update(black_box(text.as_bytes()));
                h.finalize()
            })
        });
    }
    let digest: [u8; 32] = Sha256::digest(b"row\0x").into();
    group.throughput(Throughput::Elements(1));
    group.bench_function("hex formatting alone", |b| {
        b.iter(|| hex::encode(black_box(digest)))
    });
    group.finish();
}

fn keys(c: &mut Criterion) {
    let rows = etl_benches::rows(12);
    for row in &rows {
        assert_eq!(
            row.content_key().unwrap(),
            naive_key(row),
            "byte-identical keys"
        );
    }
    let bytes: usize = rows
        .iter()
        .map(|r| serde_json::to_string(r).unwrap().len())
        .sum();
    println!(
        "content-report rows {} average canonical size {} B",
        rows.len(),
        bytes / rows.len()
    );
    let mut group = c.benchmark_group("content_key");
    group.throughput(Throughput::Elements(rows.len() as u64));
    group.bench_function("naive to_string + content_id", |b| {
        b.iter(|| rows.iter().map(naive_key).map(|k| k.len()).sum::<usize>())
    });
    group.bench_function("Row::content_key", |b| {
        b.iter(|| {
            rows.iter()
                .map(|r| r.content_key().unwrap().len())
                .sum::<usize>()
        })
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    ids(&mut c);
    keys(&mut c);
    c.final_summary();
}
