//! `etl run` against the same local JSON API as its peers (issue 21;
//! BENCHMARKS.md section 13): 100,000 records in pages of 500, by next URL,
//! into a JSONL file.
//!
//! ```sh
//! cargo bench -p etl-sources --bench rest_throughput
//! # with dlt's rest_api in the same run (pip install "dlt==1.31.*"):
//! ETL_DLT_PYTHON=/path/to/venv/bin/python cargo bench -p etl-sources --bench rest_throughput
//! ```
//!
//! - **the limit**: a bare loop in this process that GETs the same 200
//!   pages with reqwest and parses nothing;
//! - **`etl run`**: the release binary, a whole process as a user runs it,
//!   under `/usr/bin/time` (GNU time) for its peak RSS, into a fresh file
//!   each run; and once with `--max-pages 40` (20,000 records), so the RSS
//!   can be seen flat in the number of pages;
//! - **dlt 1.31**: `benches/dlt_rest_api.py` (its `rest_api` source, the
//!   `json_link` paginator, the filesystem destination in JSONL), when
//!   `ETL_DLT_PYTHON` names a Python that has dlt.
//!
//! The endpoint is an in-process hyper server on its own thread that
//! answers from pages rendered before the clock starts, so it costs every
//! contender the same and little. Not criterion: a figure is a whole process.

use bytes::Bytes;
use etl_sources::rest::{JsonRecord, Pointer};
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/gnu_time.rs"]
mod gnu_time;
#[path = "support/runs.rs"]
mod runs;
use runs::{etl_bin, median, next_url_pipeline};

const RECORDS: usize = 100_000;
const PAGE: usize = 500;
const RUNS: usize = 5;

fn main() {
    // `cargo bench ... -- latency`: only the section against a distant server.
    if std::env::args().any(|a| a == "latency") {
        latency(&tempfile::tempdir().unwrap());
        return;
    }
    let pages = Arc::new(render_pages(PAGE, "/items"));
    let addr = serve(pages.clone(), Arc::default(), Duration::ZERO);
    let first = format!("http://{addr}/items?page=1");
    let bytes: usize = pages.iter().map(Bytes::len).sum();
    println!(
        "{RECORDS} records in {} pages of {PAGE}, {:.1} MB of JSON, served from {addr}",
        pages.len(),
        bytes as f64 / 1e6
    );
    println!("| contender | wall (median of runs) | records/s | peak RSS |");
    println!("|---|---|---|---|");

    let bare = median(
        (0..RUNS)
            .map(|_| bare_loop(addr, "/items", pages.len()))
            .collect(),
    );
    row(
        "bare reqwest loop (GET only, no parse)",
        bare,
        RECORDS,
        None,
    );

    // What any loader that reads every record must do at least, on the
    // same bytes in memory, one core, no I/O: the floor under `etl run`.
    for (name, work) in [
        (
            "floor: every page checked as JSON, nothing built (serde `IgnoredAny`)",
            validate as fn(&[Bytes]),
        ),
        ("floor: every page parsed (serde_json `Value`)", parse),
        ("floor: every page's SHA-256 (`content_id`)", hash),
        (
            "every record read as `etl run` reads it (`JsonRecord::read`)",
            read_records,
        ),
    ] {
        let wall = median(
            (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    work(&pages);
                    start.elapsed().as_secs_f64()
                })
                .collect(),
        );
        row(name, wall, RECORDS, None);
    }

    let dir = tempfile::tempdir().unwrap();
    let file = next_url_pipeline(dir.path(), "bench.toml", "items", &first, "");
    let mut etl_runs: Vec<(f64, u64)> = (0..RUNS)
        .map(|_| etl(&file, &dir.path().join("items.jsonl"), None))
        .collect();
    let etl_wall = median(etl_runs.iter().map(|r| r.0).collect());
    let etl_rss = etl_runs.iter().map(|r| r.1).max().unwrap_or(0);
    row("`etl run` (process)", etl_wall, RECORDS, Some(etl_rss));
    etl_runs = (0..RUNS)
        .map(|_| etl(&file, &dir.path().join("items.jsonl"), Some(40)))
        .collect();
    let small_wall = median(etl_runs.iter().map(|r| r.0).collect());
    let small_rss = etl_runs.iter().map(|r| r.1).max().unwrap_or(0);
    row(
        "`etl run --max-pages 40` (20k records)",
        small_wall,
        40 * PAGE,
        Some(small_rss),
    );

    let (family_wall, family_rss) = family_runs(&dir, addr, "", RUNS);
    row(
        "`etl run`, parent and child: 200 parents, a child page of 500 each (process)",
        family_wall,
        RECORDS,
        Some(family_rss),
    );
    println!(
        "\nparent and child: {:.2} ms a page against {:.2} ms a page for one resource ({:.2}x)",
        family_wall * 1e3 / (pages.len() + 1) as f64,
        etl_wall * 1e3 / pages.len() as f64,
        (family_wall / (pages.len() + 1) as f64) / (etl_wall / pages.len() as f64)
    );

    match std::env::var("ETL_DLT_PYTHON") {
        Ok(python) => {
            let runs: Vec<(f64, u64)> = (0..3).map(|_| dlt(&python, &first, "list")).collect();
            let wall = median(runs.iter().map(|r| r.0).collect());
            let rss = runs.iter().map(|r| r.1).max().unwrap_or(0);
            row(
                "dlt 1.31 rest_api (process, 3 runs)",
                wall,
                RECORDS,
                Some(rss),
            );
            println!(
                "\n`etl run`: {:.1}x dlt's records/s, {:.2}x the bare loop's",
                wall / etl_wall,
                bare / etl_wall
            );
        }
        Err(_) => println!(
            "\n`etl run`: {:.2}x the bare loop's records/s (set ETL_DLT_PYTHON for dlt)",
            bare / etl_wall
        ),
    }
}

/// Against a server 50 ms away (each answer after a 50 ms sleep): `etl
/// run` by next URL, where only overlapping the load with the next round
/// trip keeps up with a bare loop, at pages of 500 and of 5,000.
fn latency(dir: &tempfile::TempDir) {
    const LATENCY: Duration = Duration::from_millis(50);
    const LATENCY_RUNS: usize = 3;
    let small = Arc::new(render_pages(PAGE, "/items"));
    let big = Arc::new(render_pages(5_000, "/big"));
    let addr = serve(small.clone(), big.clone(), LATENCY);
    println!(
        "\nA server {} ms away: {RECORDS} records, medians of {LATENCY_RUNS} runs",
        LATENCY.as_millis()
    );
    println!("| contender | wall | records/s | peak RSS |");
    println!("|---|---|---|---|");
    for (path, pages, size) in [("/items", small.len(), PAGE), ("/big", big.len(), 5_000)] {
        let bare = median(
            (0..LATENCY_RUNS)
                .map(|_| bare_loop(addr, path, pages))
                .collect(),
        );
        row(
            &format!("bare reqwest loop, pages of {size}"),
            bare,
            RECORDS,
            None,
        );
        let first = format!("http://{addr}{path}?page=1");
        let file = next_url_pipeline(dir.path(), "latency.toml", "items", &first, "");
        let runs: Vec<(f64, u64)> = (0..LATENCY_RUNS)
            .map(|_| etl(&file, &dir.path().join("items.jsonl"), None))
            .collect();
        let wall = median(runs.iter().map(|r| r.0).collect());
        let rss = runs.iter().map(|r| r.1).max().unwrap_or(0);
        row(
            &format!("`etl run`, next_url, pages of {size} (process)"),
            wall,
            RECORDS,
            Some(rss),
        );
        println!(
            "| `etl run` against the bare loop, pages of {size} | {:.3}x | | |",
            bare / wall
        );
        if size == PAGE && std::env::var_os("ETL_BENCH_ETL_BIN").is_none() {
            concurrent(dir, addr, bare, small.len());
        }
    }
}

/// At `concurrency = 8` against the same distant server: `offset` with
/// `total` and parent and child, each against 8x the bare sequential
/// loop (`bare`, over `pages` pages) and, for parent and child, dlt; then
/// `rate_limit = "20/s"`, counted at the server a second at a time.
fn concurrent(dir: &tempfile::TempDir, addr: SocketAddr, bare: f64, pages: usize) {
    const RUNS: usize = 3;
    let limit = bare / 8.0;
    println!(
        "| the limit at concurrency 8: the bare loop's time / 8 | {limit:.3} s | {:.0} | |",
        RECORDS as f64 / limit
    );
    let offset = |extra: &str| {
        format!(
            "{extra}concurrency = 8\nname = \"items\"\nurl = \"http://{addr}/items\"\nrecords = \"/results\"\n\
             id = \"/id\"\nupdated_at = \"/updated_at\"\n[paginate]\nstyle = \"offset\"\nlimit = {PAGE}\ntotal = \"/count\"\n"
        )
    };
    let file = dir.path().join("offset.toml");
    std::fs::write(&file, offset("")).unwrap();
    let runs: Vec<(f64, u64)> = (0..RUNS)
        .map(|_| etl(&file, &dir.path().join("items.jsonl"), None))
        .collect();
    let wall = median(runs.iter().map(|r| r.0).collect());
    let rss = runs.iter().map(|r| r.1).max().unwrap_or(0);
    row(
        "`etl run`, offset with total, concurrency = 8 (process)",
        wall,
        RECORDS,
        Some(rss),
    );
    println!(
        "| `etl run` offset against the limit | {:.3}x | | |",
        limit / wall
    );

    let (family_wall, rss) = family_runs(dir, addr, "concurrency = 8\n", RUNS);
    row(
        &format!("`etl run`, parent and child, {pages} parents, concurrency = 8 (process)"),
        family_wall,
        RECORDS,
        Some(rss),
    );
    println!(
        "| `etl run` parent and child against the limit | {:.3}x | | |",
        limit / family_wall
    );
    if let Ok(python) = std::env::var("ETL_DLT_PYTHON") {
        for (mode, name) in [
            ("family-parallel", "dlt 1.31, parallelized=True, 8 workers"),
            ("family", "dlt 1.31, default"),
        ] {
            let wall = median(
                (0..RUNS)
                    .map(|_| dlt(&python, &format!("http://{addr}/"), mode).0)
                    .collect(),
            );
            row(&format!("{name} (process)"), wall, RECORDS, None);
            println!(
                "| `etl run` parent and child against {name} | {:.2}x | | |",
                wall / family_wall
            );
        }
    }

    // The rate limit: the server counts each wall-clock second.
    std::fs::write(&file, offset("rate_limit = \"20/s\"\n")).unwrap();
    ARRIVALS.lock().unwrap().clear();
    let (wall, rss) = etl(&file, &dir.path().join("items.jsonl"), None);
    let at = ARRIVALS.lock().unwrap().clone();
    let most = (0..at.len())
        .map(|i| {
            at[i..]
                .iter()
                .take_while(|t| t.duration_since(at[i]) < Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0);
    let span = at.last().unwrap().duration_since(at[0]).as_secs_f64();
    row(
        "`etl run`, offset, rate_limit = \"20/s\", concurrency = 8 (process)",
        wall,
        RECORDS,
        Some(rss),
    );
    println!(
        "| rate_limit = \"20/s\": {} requests, at most {most} in any second, {:.2} requests/s | | | |",
        at.len(),
        (at.len() - 1) as f64 / span
    );
}

fn row(name: &str, wall: f64, records: usize, rss_kb: Option<u64>) {
    let rss = rss_kb.map_or("-".to_string(), |kb| {
        format!("{:.1} MB", kb as f64 / 1024.0)
    });
    println!(
        "| {name} | {:.3} s | {:.0} | {rss} |",
        wall,
        records as f64 / wall
    );
}

/// Records of a realistic size (about 330 bytes of JSON): ids, names,
/// nested objects, numbers, a timestamp.
fn render_pages(page_size: usize, path: &str) -> Vec<Bytes> {
    let records: Vec<serde_json::Value> = (0..RECORDS)
        .map(|i| {
            let status = ["Go", "TBD", "Hold", "Success"][i % 4];
            json!({
                "id": i,
                "name": format!("item {i}"),
                "status": {"id": i % 4, "name": status},
                "price": (i as f64) * 0.37,
                "tags": ["alpha", "beta", format!("t{}", i % 17)],
                "owner": {"id": i % 101, "login": format!("user{}", i % 101), "site_admin": false},
                "description": "A record of the benchmark: long enough to look like an API's text field.",
                "updated_at": format!("2026-11-{:02}T{:02}:{:02}:{:02}Z", 1 + i % 28, i % 24, i % 60, (i / 60) % 60),
            })
        })
        .collect();
    let count = RECORDS.div_ceil(page_size);
    (0..count)
        .map(|p| {
            let next = (p + 1 < count).then(|| format!("{path}?page={}", p + 2));
            let body = json!({
                "count": RECORDS,
                "next": next,
                "results": &records[p * page_size..((p + 1) * page_size).min(RECORDS)],
            });
            Bytes::from(serde_json::to_vec(&body).unwrap())
        })
        .collect()
}

fn validate(pages: &[Bytes]) {
    for page in pages {
        let _: serde::de::IgnoredAny = serde_json::from_slice(page).unwrap();
    }
}

fn parse(pages: &[Bytes]) {
    for page in pages {
        let value: serde_json::Value = serde_json::from_slice(page).unwrap();
        std::hint::black_box(value);
    }
}

/// What `etl run` does to each record before its key: the canonical form,
/// the id and the update time (one core here; `etl run` uses both).
fn read_records(pages: &[Bytes]) {
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        results: Vec<&'a serde_json::value::RawValue>,
    }
    let id = Pointer::parse("/id").unwrap();
    let updated_at = etl_sources::rest::UpdatedAt {
        pointer: Pointer::parse("/updated_at").unwrap(),
        unit: None,
    };
    for page in pages {
        let page: Page<'_> = serde_json::from_slice(page).unwrap();
        for entry in page.results {
            let record = JsonRecord::read(entry.get(), &id, Some(&updated_at)).unwrap();
            std::hint::black_box(record);
        }
    }
}

fn hash(pages: &[Bytes]) {
    for page in pages {
        std::hint::black_box(etl_core::content_id(
            "json",
            std::str::from_utf8(page).unwrap(),
        ));
    }
}

/// When each request arrived, at every server of this process (the rate
/// limit's check counts them a second at a time).
static ARRIVALS: std::sync::Mutex<Vec<Instant>> = std::sync::Mutex::new(Vec::new());

/// Serves `/items?page=N` (1-based) or `/items?offset=N` from `pages`
/// and `/big?page=N` from `big` on a thread of its own, each answer after
/// `latency` (a sleep, as a distant server's round trip costs the client
/// nothing but time).
fn serve(pages: Arc<Vec<Bytes>>, big: Arc<Vec<Bytes>>, latency: Duration) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let pages = pages.clone();
                let big = big.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            ARRIVALS.lock().unwrap().push(Instant::now());
                            let query = req.uri().query().unwrap_or("");
                            let number = |name: &str| {
                                query.split('&').find_map(|pair| {
                                    pair.strip_prefix(name)?
                                        .strip_prefix('=')?
                                        .parse::<usize>()
                                        .ok()
                                })
                            };
                            let page = number("page")
                                .or_else(|| number("offset").map(|at| at / PAGE + 1))
                                .unwrap_or(1);
                            // The parents of the parent-and-child run: one
                            // page of one record a page of items.
                            let body = match req.uri().path() {
                                "/parents" => parents(pages.len()),
                                "/big" => big.get(page - 1).cloned().unwrap_or_default(),
                                _ => pages.get(page - 1).cloned().unwrap_or_default(),
                            };
                            async move {
                                if !latency.is_zero() {
                                    tokio::time::sleep(latency).await;
                                }
                                let mut response = Response::new(Full::new(body));
                                response.headers_mut().insert(
                                    "content-type",
                                    hyper::header::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

/// The parents' page: one record for each page of items, `{"id": n, "page": n}`.
fn parents(pages: usize) -> Bytes {
    let records: Vec<serde_json::Value> =
        (1..=pages).map(|n| json!({"id": n, "page": n})).collect();
    Bytes::from(serde_json::to_vec(&json!({ "results": records })).unwrap())
}

/// The limit: GET every page with reqwest, read the body, parse nothing.
fn bare_loop(addr: SocketAddr, path: &str, pages: usize) -> f64 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let mut bytes = 0;
        for page in 1..=pages {
            let body = client
                .get(format!("http://{addr}{path}?page={page}"))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            bytes += body.len();
        }
        assert!(bytes > 0);
        start.elapsed().as_secs_f64()
    })
}

/// One `etl run` of `file` into a fresh `out` (a JSONL file, or the
/// directory of a file of many resources): wall seconds and peak RSS (KB).
/// It must write every record (with `max_pages`, that many pages of them).
fn etl(file: &Path, out: &Path, max_pages: Option<u32>) -> (f64, u64) {
    let _ = std::fs::remove_file(out);
    let _ = std::fs::remove_dir_all(out);
    let _ = std::fs::remove_file(etl_sources::pipeline::rejects_path(out));
    let mut command = gnu_time::command(etl_bin());
    command
        .arg("run")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(["--log-format", "json"]);
    if let Some(n) = max_pages {
        command.args(["--max-pages", &n.to_string()]);
    }
    let run = gnu_time::run(command);
    let expected = max_pages.map_or(RECORDS, |n| n as usize * PAGE);
    assert!(
        run.stdout.contains(&format!("{expected} new rows")),
        "etl run: {}",
        run.stdout
    );
    (run.wall, run.max_rss_kb)
}

/// Parent and child, `runs` times (the median wall, the most peak RSS):
/// one parent page of 200 records, then one request chain of one page
/// each, the child's URL made from its parent's value: the same 200 pages
/// of items, with `_parent` on each record. `top` goes first in the file.
fn family_runs(dir: &tempfile::TempDir, addr: SocketAddr, top: &str, runs: usize) -> (f64, u64) {
    let family = dir.path().join("family.toml");
    std::fs::write(
        &family,
        format!(
            "{top}name = \"shop\"\nurl = \"http://{addr}/\"\nrecords = \"/results\"\nid = \"/id\"\n\
             updated_at = \"/updated_at\"\n\
             [[resource]]\nname = \"parents\"\npath = \"parents\"\nload = false\n\
             [[resource]]\nname = \"items\"\nparent = \"parents\"\npath = \"items?page={{page}}\"\n\
             [resource.from_parent]\npage = \"/page\"\n"
        ),
    )
    .unwrap();
    let timed: Vec<(f64, u64)> = (0..runs)
        .map(|_| etl(&family, &dir.path().join("family"), None))
        .collect();
    (
        median(timed.iter().map(|r| r.0).collect()),
        timed.iter().map(|r| r.1).max().unwrap_or(0),
    )
}

/// One dlt run of `benches/dlt_rest_api.py` into a fresh directory, in
/// `mode` (`list`: the items by next URL; `family`: the parents and a
/// child request each; `family-parallel`: the child `parallelized=True`,
/// 8 extract workers): wall seconds and peak RSS (KB).
fn dlt(python: &str, url: &str, mode: &str) -> (f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/dlt_rest_api.py");
    let mut command = gnu_time::command(python);
    command
        .args([script, url])
        .arg(dir.path())
        .arg(mode)
        .env("RUNTIME__LOG_LEVEL", "WARNING")
        .env("EXTRACT__WORKERS", "8");
    let run = gnu_time::run(command);
    assert_eq!(
        run.stdout.trim(),
        RECORDS.to_string(),
        "dlt loaded: {}",
        run.stdout
    );
    (run.wall, run.max_rss_kb)
}
