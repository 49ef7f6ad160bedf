//! The Delta output (issue 29; BENCHMARKS.md section 14):
//!
//! ```sh
//! cargo bench -p etl-sources --features delta --bench delta [-- SECTION,...]
//! ```
//!
//! Sections (all by default):
//! - `throughput`: 100,000 launch rows in pages of 500 through
//!   `IdempotentSink::bounded(DeltaSink)`, as `launches --out delta:` loads
//!   them, into a fresh table, then all of them again (all held) from a
//!   newly opened sink;
//! - `limit`: delta-rs itself writing the same rows, already Arrow batches
//!   (keys and canonical JSON made beforehand, and timed on their own):
//!   one batch in one commit, and a commit a page of 5,000 and of 500;
//! - `dlt`: dlt 1.31's filesystem destination with `table_format="delta"`
//!   over the same rows (`ETL_BENCH_DLT_PYTHON`: a Python with
//!   `dlt[deltalake]==1.31.0`; skipped without it);
//! - `writers`: four processes loading overlapping quarters of the rows
//!   into one table at once, against one process loading their union;
//! - `typed`: 100,000 GitHub-issue-like records (about 1 KB: objects three
//!   levels deep, two lists of objects) in loads of 1,000 and 10,000 into a
//!   new table,
//!   the JSON shape against the typed shape (`DeltaSink::open_typed`: the
//!   members as columns, two child tables beside the table), and dlt 1.31
//!   normalising the same records into Delta (`ETL_BENCH_DLT_PYTHON`);
//! - `scale`: a no-change `launches` run (the release binary under GNU time:
//!   wall and peak RSS, median of 5) against a table of 12 rows and one of
//!   1,000,012.
//!
//! Not criterion: each figure is seconds of a whole load or process, and
//! the question is a ratio between contenders measured in one run.

use etl_core::content::canonical_batch;
use etl_core::{IdempotentSink, Launch, Row, Sink};
use etl_delta::deltalake;
use etl_delta::DeltaSink;
use etl_sources::replay::{Replay, ReplayServer, BUNDLED_LAUNCHES_2_3_0};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/gnu_time.rs"]
mod gnu_time;
#[path = "support/runs.rs"]
mod runs;
use runs::{median, runtime, sections};

const ROWS: usize = 100_000;
/// The page size of the writers and the scale runs; `throughput` measures
/// this and a larger one.
const PAGE: usize = 500;
const RUNS: usize = 3;
/// The env var that makes this bench a writer child: `DIR:START:END`.
const WRITER: &str = "ETL_BENCH_DELTA_WRITER";
/// Every section, in the order they run by default.
const SECTIONS: [&str; 6] = ["throughput", "limit", "dlt", "writers", "typed", "scale"];

/// `n` launches made from the bundled 2.3.0 ones (about 1.3 KB each as
/// JSON), each with its own id and an update time before the bundled ones.
fn rows(range: std::ops::Range<usize>) -> Vec<Row> {
    let templates: Vec<Launch> = serde_json::from_str(BUNDLED_LAUNCHES_2_3_0).unwrap();
    range
        .map(|i| {
            let mut launch = templates[i % templates.len()].clone();
            launch.id = format!("bench-{i:08}");
            let t = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + i as u64);
            launch.last_updated = Some(humantime::format_rfc3339(t).to_string());
            Row::Launches(launch)
        })
        .collect()
}

/// Loads `rows` in pages of `page` through a bounded `IdempotentSink` over
/// a newly opened `DeltaSink`: what the pipeline does. Returns rows written.
async fn load_pages(table: &Path, rows: &[Row], page: usize) -> usize {
    let sink = IdempotentSink::bounded(
        DeltaSink::open(table.to_str().unwrap()).await.unwrap(),
        100_000,
    );
    let mut written = 0;
    for chunk in rows.chunks(page) {
        written += sink.load(chunk).await.unwrap();
    }
    written
}

fn main() {
    if let Ok(spec) = std::env::var(WRITER) {
        return writer(&spec);
    }
    let sections = sections(&SECTIONS);
    let rt = runtime();
    let data = rows(0..ROWS);
    for section in &sections {
        match section.as_str() {
            "throughput" => throughput(&rt, &data),
            "limit" => limit(&rt, &data),
            "dlt" => dlt(&data),
            "writers" => writers(),
            "typed" => typed(&rt),
            "scale" => scale(&rt),
            other => panic!("unknown section {other}"),
        }
    }
}

fn throughput(rt: &tokio::runtime::Runtime, data: &[Row]) {
    for page in [PAGE, 10 * PAGE] {
        let (mut fresh, mut held) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("launches");
            let start = Instant::now();
            assert_eq!(rt.block_on(load_pages(&table, data, page)), ROWS);
            fresh.push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            assert_eq!(rt.block_on(load_pages(&table, data, page)), 0);
            held.push(start.elapsed().as_secs_f64());
        }
        let (fresh, held) = (median(fresh), median(held));
        println!(
            "| DeltaSink, {ROWS} rows in pages of {page} | fresh | {fresh:.3} s | {:.0} rows/s |",
            ROWS as f64 / fresh
        );
        println!(
            "| DeltaSink, {ROWS} rows in pages of {page} | all held | {held:.3} s | {:.0} rows/s |",
            ROWS as f64 / held
        );
    }
}

/// The typed shape against the JSON shape: the same issue records, in
/// loads of 1,000 and of 10,000, each into a new table (median of
/// [`RUNS`]).
fn typed(rt: &tokio::runtime::Runtime) {
    use etl_benches::Issue;
    use etl_core::content::typed::SchemaOptions;
    let records = etl_benches::issue_records(ROWS);
    for (load, typed) in [
        (1_000, false),
        (1_000, true),
        (10_000, false),
        (10_000, true),
    ] {
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("issues");
            let table = table.to_str().unwrap();
            let start = Instant::now();
            let written = rt.block_on(async {
                let sink = match typed {
                    true => {
                        DeltaSink::open_typed::<Issue>(table, "issues", SchemaOptions::default())
                            .await
                            .unwrap()
                    }
                    false => DeltaSink::open_as::<Issue>(table).await.unwrap(),
                };
                let mut written = 0;
                for chunk in records.chunks(load) {
                    written += sink.load(chunk).await.unwrap();
                }
                written
            });
            times.push(start.elapsed().as_secs_f64());
            assert_eq!(written, ROWS);
        }
        let t = median(times);
        let shape = if typed { "typed" } else { "json" };
        println!(
            "| DeltaSink, {ROWS} issues in loads of {load} | shape {shape} | {t:.3} s | {:.0} records/s |",
            ROWS as f64 / t
        );
    }
    typed_dlt(&records);
}

/// dlt 1.31 over the same issue records, in pages of 1,000, into Delta
/// (its normaliser makes the same columns and child tables), when
/// `ETL_BENCH_DLT_PYTHON` names a Python with `dlt[deltalake]==1.31.0`.
fn typed_dlt(records: &[etl_benches::Issue]) {
    let Ok(python) = std::env::var("ETL_BENCH_DLT_PYTHON") else {
        println!("dlt skipped: set ETL_BENCH_DLT_PYTHON to a Python with dlt[deltalake]==1.31.0");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("issues.json");
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    std::fs::write(&input, format!("[{}]", texts.join(","))).unwrap();
    let t = median(dlt_runs(&python, &input, dir.path(), &["1000", "issues"]));
    println!(
        "| dlt 1.31 filesystem, table_format=\"delta\", {ROWS} issues in pages of 1000 | normalised | {t:.3} s | {:.0} records/s |",
        ROWS as f64 / t
    );
}

/// delta-rs alone: the rows already as Arrow batches (keys and JSON made
/// beforehand), written and committed by delta-rs's own writer: all in one
/// commit (the limit), and a commit a page of 5,000 and of 500 (the floor
/// of a sink that commits each load).
fn limit(rt: &tokio::runtime::Runtime, data: &[Row]) {
    use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
    use deltalake::writer::{DeltaWriter, RecordBatchWriter};
    use std::sync::Arc;

    // What the limit is handed made: every row's key and canonical JSON,
    // on every core. A sink must do this work too, so it is the floor
    // under any sink's load of these rows.
    let mut made = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        std::hint::black_box(canonical_batch(data).unwrap());
        made.push(start.elapsed().as_secs_f64());
    }
    let t = median(made);
    println!(
        "| etl-core: the rows' keys and canonical JSON alone (`canonical_batch`, no write) | - | {t:.3} s | {:.0} rows/s |",
        ROWS as f64 / t
    );
    let encoded = canonical_batch(data).unwrap();
    for page in [ROWS, 10 * PAGE, PAGE] {
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let dir = tempfile::tempdir().unwrap();
            let at = dir.path().join("launches");
            // The table made by a DeltaSink, so both write the same schema.
            rt.block_on(DeltaSink::open(at.to_str().unwrap())).unwrap();
            let mut table = rt
                .block_on(deltalake::open_table(
                    url::Url::from_directory_path(at.canonicalize().unwrap()).unwrap(),
                ))
                .unwrap();
            let now = 1_764_000_000_000_000i64;
            let schema = RecordBatchWriter::for_table(&table).unwrap().arrow_schema();
            let batches: Vec<RecordBatch> = (0..data.len())
                .step_by(page)
                .map(|from| {
                    let rows = from..(from + page).min(data.len());
                    let text = |f: &dyn Fn(usize) -> String| -> ArrayRef {
                        Arc::new(StringArray::from_iter_values(rows.clone().map(f)))
                    };
                    let ts = || -> ArrayRef {
                        Arc::new(
                            TimestampMicrosecondArray::from_iter_values(std::iter::repeat_n(
                                now,
                                rows.len(),
                            ))
                            .with_timezone("UTC"),
                        )
                    };
                    RecordBatch::try_new(
                        schema.clone(),
                        vec![
                            text(&|i| encoded[i].key.clone()),
                            text(&|i| format!("bench-{i:08}")),
                            ts(),
                            ts(),
                            text(&|i| encoded[i].json.clone()),
                        ],
                    )
                    .unwrap()
                })
                .collect();
            let start = Instant::now();
            rt.block_on(async {
                for batch in batches {
                    let mut writer = RecordBatchWriter::for_table(&table).unwrap();
                    writer.write(batch).await.unwrap();
                    writer.flush_and_commit(&mut table).await.unwrap();
                }
            });
            times.push(start.elapsed().as_secs_f64());
        }
        let t = median(times);
        let what = if page == ROWS {
            "one Arrow batch, one commit (the limit)".to_string()
        } else {
            format!("Arrow batches of {page}, a commit each")
        };
        println!(
            "| delta-rs: {what} | fresh | {t:.3} s | {:.0} rows/s |",
            ROWS as f64 / t
        );
    }
}

/// dlt's filesystem destination in Delta format, over the same launches.
fn dlt(data: &[Row]) {
    let Ok(python) = std::env::var("ETL_BENCH_DLT_PYTHON") else {
        println!("dlt skipped: set ETL_BENCH_DLT_PYTHON to a Python with dlt[deltalake]==1.31.0");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("launches.json");
    let launches: Vec<&Launch> = data.iter().map(|Row::Launches(l)| l).collect();
    std::fs::write(&input, serde_json::to_vec(&launches).unwrap()).unwrap();
    let t = median(dlt_runs(&python, &input, dir.path(), &[]));
    println!(
        "| dlt 1.31 filesystem, table_format=\"delta\" | fresh | {t:.3} s | {:.0} rows/s |",
        ROWS as f64 / t
    );
}

/// [`RUNS`] runs of `dlt_delta.py` over `input` (with `args` after the
/// work directory), each into a new directory under `dir`: the seconds of
/// each load.
fn dlt_runs(python: &str, input: &Path, dir: &Path, args: &[&str]) -> Vec<f64> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/dlt_delta.py");
    (0..RUNS)
        .map(|run| {
            let out = Command::new(python)
                .arg(script)
                .arg(input)
                .arg(dir.join(format!("dlt-{run}")))
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .and_then(|l| l.parse().ok())
                .expect("the script prints its load's seconds last")
        })
        .collect()
}

/// A writer child: loads rows START..END into DIR, prints how many it wrote.
fn writer(spec: &str) {
    let mut parts = spec.rsplitn(3, ':');
    let end: usize = parts.next().unwrap().parse().unwrap();
    let start: usize = parts.next().unwrap().parse().unwrap();
    let dir = parts.next().unwrap();
    let written = runtime().block_on(load_pages(Path::new(dir), &rows(start..end), PAGE));
    println!("{written}");
}

fn spawn_writer(table: &Path, start: usize, end: usize) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .env(WRITER, format!("{}:{start}:{end}", table.display()))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn writers() {
    let quarter = ROWS / 4;
    let (mut one, mut four) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("union");
        let start = Instant::now();
        let out = spawn_writer(&table, 0, ROWS).wait_with_output().unwrap();
        one.push(start.elapsed().as_secs_f64());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            ROWS.to_string()
        );

        // Overlapping: writer w loads [w*q - q/2, w*q + q + q/2) clipped,
        // so each row but the ends is offered by two writers.
        let table = dir.path().join("raced");
        let start = Instant::now();
        let children: Vec<_> = (0..4)
            .map(|w| {
                let from = (w * quarter).saturating_sub(quarter / 2);
                let to = (w * quarter + quarter + quarter / 2).min(ROWS);
                spawn_writer(&table, from, to)
            })
            .collect();
        let written: usize = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        four.push(start.elapsed().as_secs_f64());
        assert_eq!(written, ROWS, "each row written once in all");
    }
    let (one, four) = (median(one), median(four));
    println!("| one process loading {ROWS} rows | {one:.3} s |");
    println!("| four processes, overlapping halves of quarters (150,000 rows offered) | {four:.3} s ({:.2}x) |", four / one);
}

fn scale(rt: &tokio::runtime::Runtime) {
    let replay = Replay {
        path: "/2.3.0/launches/upcoming/".into(),
        ..Replay::new(serde_json::from_str(BUNDLED_LAUNCHES_2_3_0).unwrap())
    };
    let server = rt.block_on(ReplayServer::start(replay)).unwrap();
    let base = server.url().to_string();
    let launches = env!("CARGO_BIN_EXE_launches");
    println!("| table rows | run | wall (median of 5) | peak RSS (max) |");
    println!("|---:|---|---:|---:|");
    for size in [0usize, 1_000_000] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("launches");
        let out = format!("delta:{}", table.display());
        let first = gnu_time::run({
            let mut c = gnu_time::command(launches);
            c.args(["--base-url", &base, "--out", &out]);
            c
        });
        assert!(first.stdout.contains("12 new rows"), "{}", first.stdout);
        // Grown in commits of 100,000 rows, older than the bundled ones.
        for start in (0..size).step_by(100_000) {
            let batch = rows(start..start + 100_000);
            let sink = rt
                .block_on(DeltaSink::open(table.to_str().unwrap()))
                .unwrap();
            assert_eq!(rt.block_on(sink.load(&batch)).unwrap(), 100_000);
        }
        for incremental in [true, false] {
            let (mut walls, mut rss) = (Vec::new(), 0);
            for _ in 0..5 {
                let mut c = gnu_time::command(launches);
                c.args(["--base-url", &base, "--out", &out]);
                if incremental {
                    c.arg("--incremental");
                }
                let timed = gnu_time::run(c);
                assert!(timed.stdout.contains(" 0 new rows"), "{}", timed.stdout);
                walls.push(timed.wall);
                rss = rss.max(timed.max_rss_kb);
            }
            println!(
                "| {} | {} | {:.3} s | {:.1} MB |",
                size + 12,
                if incremental {
                    "`--incremental`"
                } else {
                    "plain"
                },
                median(walls),
                rss as f64 / 1000.0
            );
        }
    }
}
