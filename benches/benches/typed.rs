//! Typed tables: what one pass over a record into typed cells costs
//! (`Schema::shred`), beside the passes every load makes already (the
//! canonical read) and beside parsing into a `serde_json::Value` tree (what
//! a two-pass normaliser starts with). 100,000 GitHub-issue-like records of
//! about 1 KB (BENCHMARKS.md).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use etl_benches::Issue;
use etl_core::content::typed::{Cell, Misfit, RowKeys, RowWriter, Schema, SchemaOptions};
use etl_core::content::CanonicalJson;
use std::hint::black_box;

/// What a writer at least does: looks at every cell.
#[derive(Default)]
struct Count {
    rows: usize,
    cells: usize,
    text_bytes: usize,
}

impl RowWriter for Count {
    fn begin_row(&mut self, _: usize, keys: RowKeys<'_>) {
        self.rows += 1;
        black_box(keys);
    }
    fn cell(&mut self, _: usize, _: usize, cell: Cell<'_>) {
        self.cells += 1;
        if let Cell::Text(t) | Cell::Json(t) = &cell {
            self.text_bytes += t.len();
        }
        black_box(cell);
    }
    fn end_row(&mut self, _: usize, misfits: &[Misfit]) {
        black_box(misfits);
    }
}

fn typed(c: &mut Criterion) {
    const N: usize = 100_000;
    let records = etl_benches::issues(N);
    let keys: Vec<String> = records
        .iter()
        .map(|r| etl_core::content_id("row", r))
        .collect();
    let bytes: usize = records.iter().map(String::len).sum();
    let mut group = c.benchmark_group("typed");
    group.sample_size(10);
    group.throughput(Throughput::Elements(N as u64));
    eprintln!("typed: {N} records, {} bytes each on average", bytes / N);

    group.bench_function("shred_into_new_schema", |b| {
        b.iter_batched(
            || Schema::new("issues", SchemaOptions::postgres()).unwrap(),
            |mut schema| {
                let mut out = Count::default();
                for (record, key) in records.iter().zip(&keys) {
                    schema.shred(record, key, &mut out).unwrap();
                }
                (schema, out.cells)
            },
            BatchSize::PerIteration,
        )
    });

    let mut settled = Schema::new("issues", SchemaOptions::postgres()).unwrap();
    for (record, key) in records.iter().zip(&keys) {
        settled.shred(record, key, &mut Count::default()).unwrap();
    }
    group.bench_function("shred_known_schema", |b| {
        b.iter(|| {
            let mut out = Count::default();
            for (record, key) in records.iter().zip(&keys) {
                settled.shred(record, key, &mut out).unwrap();
            }
            out.cells
        })
    });

    group.bench_function("canonical_read", |b| {
        b.iter(|| {
            let mut n = 0;
            for record in &records {
                n += CanonicalJson::of(record).unwrap().as_str().len();
            }
            n
        })
    });

    group.bench_function("serde_json_value_parse", |b| {
        b.iter(|| {
            let mut n = 0;
            for record in &records {
                let v: serde_json::Value = serde_json::from_str(record).unwrap();
                n += v.as_object().map_or(0, |o| o.len());
            }
            n
        })
    });
    group.finish();
}

/// 100,000 issue records into PostgreSQL in batches of 1,000: the typed
/// shape (`connect_typed`: columns, two child tables, `_etl_row`) against
/// the JSON shape (`connect_as`: one jsonb column), each into a new table.
/// Needs `ETL_PG_URL`; without it, it says so and measures nothing.
fn typed_postgres(c: &mut Criterion) {
    use etl_core::Sink;
    use etl_postgres::PostgresSink;
    use std::time::{Duration, Instant};

    let Ok(url) = std::env::var("ETL_PG_URL") else {
        eprintln!("typed_postgres: ETL_PG_URL is not set; nothing measured");
        return;
    };
    const N: usize = 100_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let records = etl_benches::issue_records(N);
    let (admin, connection) = rt
        .block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls))
        .unwrap();
    rt.spawn(connection);
    let table = format!("etl_bench_typed_{}", std::process::id());
    let drop = format!(
        "DROP TABLE IF EXISTS \"{table}\", \"{table}__labels\", \"{table}__assignees\" CASCADE; \
         DO $$ BEGIN IF to_regclass('_etl_schema') IS NOT NULL THEN \
         DELETE FROM _etl_schema WHERE table_name = '{table}'; END IF; END $$"
    );

    let mut group = c.benchmark_group("typed_postgres");
    group.sample_size(10).warm_up_time(Duration::from_secs(1));
    group.throughput(Throughput::Elements(N as u64));
    for typed in [false, true] {
        let name = if typed { "typed_shape" } else { "json_shape" };
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    rt.block_on(admin.batch_execute(&drop)).unwrap();
                    let start = Instant::now();
                    rt.block_on(async {
                        let sink = match typed {
                            true => {
                                PostgresSink::connect_typed::<Issue>(
                                    &url,
                                    &table,
                                    SchemaOptions::postgres(),
                                )
                                .await
                            }
                            false => PostgresSink::connect_as::<Issue>(&url, &table).await,
                        }
                        .unwrap();
                        for batch in records.chunks(1_000) {
                            sink.load(batch).await.unwrap();
                        }
                    });
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
    rt.block_on(admin.batch_execute(&drop)).unwrap();
    dlt_postgres(&url, &records);
}

/// dlt 1.31 loading the same records into the same server, in pages of
/// 1,000 (its normaliser makes columns and child tables as a typed table
/// does), when `ETL_BENCH_DLT_PYTHON` names a Python with
/// `dlt[postgres]==1.31.0`: three runs, each into a new schema, their
/// median. Not criterion: a whole process's load, beside the group above.
fn dlt_postgres(url: &str, records: &[Issue]) {
    let Ok(python) = std::env::var("ETL_BENCH_DLT_PYTHON") else {
        eprintln!("typed_postgres: dlt skipped (set ETL_BENCH_DLT_PYTHON to a Python with dlt[postgres]==1.31.0)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("issues.json");
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    std::fs::write(&input, format!("[{}]", texts.join(","))).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/dlt_postgres.py");
    let mut times: Vec<f64> = (0..3)
        .map(|run| {
            let drop = std::process::Command::new("psql")
                .args([url, "-qc", "DROP SCHEMA IF EXISTS dlt_bench CASCADE; DROP SCHEMA IF EXISTS dlt_bench_staging CASCADE"])
                .status();
            assert!(drop.is_ok_and(|s| s.success()), "psql drops the last run's schema");
            let out = std::process::Command::new(&python)
                .arg(script)
                .arg(&input)
                .arg(url)
                .arg(dir.path().join(format!("run-{run}")))
                .args(["1000", "issues"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .and_then(|l| l.parse().ok())
                .expect("the script prints its load's seconds last")
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "typed_postgres/dlt_1.31: {} records in {:.3} s (median of 3; {:.0} records/s)",
        records.len(),
        times[1],
        records.len() as f64 / times[1]
    );
}

criterion_group!(benches, typed, typed_postgres);
criterion_main!(benches);
