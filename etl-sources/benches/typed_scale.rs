//! Typed tables at scale (issue 36; BENCHMARKS.md sections 19 to 23):
//!
//! ```sh
//! ETL_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo bench -p etl-sources --features delta --bench typed_scale [-- SECTION,...]
//! ```
//!
//! Sections (all by default):
//! - `scale_postgres`, `scale_delta`: a no-change `etl run` (the release
//!   binary under GNU time: wall and peak RSS, median of 5, `--incremental`
//!   and plain) of 12 GitHub-issue-like records served from 127.0.0.1,
//!   against their typed table holding just them and holding them and
//!   1,000,000 older records (grown through `connect_typed` /
//!   `DeltaSink::open_typed` in loads of 100,000, two child tables each);
//! - `writers_postgres`, `writers_delta`: four processes at once, each
//!   loading a quarter of 100,000 issue records whose members include one
//!   object of that quarter's own (so each writer adds columns the others
//!   do not), in loads of 1,000, against one process loading the union;
//! - `run_postgres`, `run_delta`: the whole `etl run` of 100,000 issue
//!   records served from 127.0.0.1 in pages of 1,000 (by next URL), into a
//!   new typed table family against the same run with `shape = "json"`
//!   (alternated, median of 5; PostgreSQL 3), and dlt 1.31's `rest_api`
//!   over the same server into the same destination when
//!   `ETL_BENCH_DLT_PYTHON` names a Python with
//!   `dlt[deltalake,postgres]==1.31.0` (`benches/dlt_rest_api.py`, 3 runs).
//!   `ETL_BENCH_ETL_BIN` names another `etl` binary to run instead of this
//!   build's (an earlier release, for before and after in one sitting;
//!   `benches/support/ab_etl.sh` runs several builds in turn on each call).
//!   `ETL_BENCH_SERVER=python` serves the pages from Python's own
//!   `http.server` (a process of its own, the files written first) rather
//!   than from a wiremock server in this process: the same server for
//!   every contender either way. `ETL_BENCH_SERVER=python-encoding`: the
//!   same, but each page is decoded and encoded again with Python's `json`
//!   as it is asked for, as an API that makes its pages does (the server
//!   then takes CPU of its own on the same two cores).
//! - `dispositions_postgres`, `dispositions_delta`: the typed `etl run` of
//!   those records (served by wiremock) under each `write`: an append into
//!   a new table, a replace of a table holding them, a merge into a new
//!   table (median of 3, alternated), each against the append; then a
//!   merge of 100,000 records, half newer versions of held rows, against
//!   dlt's merge into the same destination.
//! - `readers_postgres`: the longest wait of a reader counting the table's
//!   rows every 20 ms while a replace runs (of 100,000 records into a table
//!   of 100,000 others; and one whose records add a column), with an
//!   analyst's repeatable-read transaction left open on the table and
//!   without.
//! - `merge_grown_postgres`, `merge_grown_delta`: a merge table of
//!   1,000,000 issues (`ETL_BENCH_GROWN` sets another count; grown through `connect_typed` /
//!   `DeltaSink::open_typed` in merges of 100,000); `etl run` of 1,000
//!   newer versions of records in its newest tenth against the same run
//!   again (nothing new), alternated, median of 3; then (PostgreSQL) a
//!   group-by over the table against the same over its rows copied into
//!   a plain table (alternated, median of 5).
//! - `merge_writers_postgres`, `merge_writers_delta`: the typed `etl run`
//!   of those records under
//!   `write = "merge"` into a new table, against four runs at once into
//!   one new table, each reading a quarter of the pages (alternated,
//!   median of 3).
//! - `overlap_postgres`: the typed `etl run` of those records against two
//!   runs at once into one table family, each reading half the pages (a
//!   second path serves them so, alternated, median of 3): how much of a
//!   run is one side waiting for the other, the client making a page's
//!   rows and the server inserting them.
//!
//! The PostgreSQL sections need `ETL_PG_URL`; without it they say so and
//! measure nothing. Not criterion: each figure is a whole process or load,
//! and the question is a ratio.

use etl_benches::{issues_in, Issue};
use etl_core::content::typed::SchemaOptions;
use etl_core::content::write::{MergeKeys, Write};
use etl_core::Sink;
use etl_delta::DeltaSink;
use etl_postgres::PostgresSink;
use std::path::Path;
use std::process::Command;
use std::time::Instant;
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[path = "support/gnu_time.rs"]
mod gnu_time;
#[path = "support/runs.rs"]
mod runs;
use runs::{etl_bin, median, next_url_pipeline, runtime, sections};

/// The records the API serves; newer than every record the table is grown
/// with, so the incremental cursor is theirs.
const SERVED: usize = 12;
const GROWN: usize = 1_000_000;
/// The env var that sets the `merge_grown_*` sections' table size in place
/// of [`GROWN`] (a multiple of 100,000): 10,000,000 to see the merge's
/// memory against the table's.
const GROWN_VAR: &str = "ETL_BENCH_GROWN";
const RUNS: usize = 5;
/// The records the writers share out.
const WRITTEN: usize = 100_000;
const LOAD: usize = 1_000;
/// The env var that makes this bench a writer child: `OUTPUT|TARGET|START|END`
/// with OUTPUT `postgres` (TARGET a table) or `delta` (TARGET a directory).
const WRITER: &str = "ETL_BENCH_TYPED_WRITER";
/// The records a `run_*` section serves, and its page size.
const RUN_RECORDS: usize = 100_000;
const RUN_PAGE: usize = 1_000;
/// Every section, in the order they run by default.
const SECTIONS: [&str; 14] = [
    "scale_postgres",
    "scale_delta",
    "writers_postgres",
    "writers_delta",
    "run_postgres",
    "run_delta",
    "overlap_postgres",
    "readers_postgres",
    "dispositions_postgres",
    "dispositions_delta",
    "merge_grown_postgres",
    "merge_grown_delta",
    "merge_writers_postgres",
    "merge_writers_delta",
];

/// A typed sink of either output, and the wait for what its loads left
/// running (a Delta checkpoint), which a process makes before it ends.
#[async_trait::async_trait]
trait Loader: Sink<Issue> {
    async fn settle(&self) {}
}

impl Loader for PostgresSink {}

#[async_trait::async_trait]
impl Loader for DeltaSink {
    async fn settle(&self) {
        DeltaSink::settle(self).await;
    }
}

/// Where a section's typed table is.
#[derive(Clone)]
enum Output {
    Postgres { url: String, table: String },
    Delta { dir: String },
}

impl Output {
    fn postgres(table: &str) -> Option<Self> {
        match std::env::var("ETL_PG_URL") {
            Ok(url) => Some(Output::Postgres {
                url,
                table: table.to_owned(),
            }),
            Err(_) => {
                println!("{table}: ETL_PG_URL is not set; nothing measured");
                None
            }
        }
    }

    /// The `--out` (and `--pg-table`) arguments of `etl run`.
    fn args(&self) -> Vec<String> {
        match self {
            Output::Postgres { url, table } => {
                vec![
                    "--out".into(),
                    url.clone(),
                    "--pg-table".into(),
                    table.clone(),
                ]
            }
            Output::Delta { dir } => vec!["--out".into(), format!("delta:{dir}")],
        }
    }

    /// The typed sink `etl run` opens for a file of resource `issues`,
    /// written as `write` says.
    async fn open(&self, write: Write) -> Box<dyn Loader> {
        let options = SchemaOptions::postgres().write(write);
        match self {
            Output::Postgres { url, table } => Box::new(
                PostgresSink::connect_typed::<Issue>(url, table, options)
                    .await
                    .unwrap(),
            ),
            Output::Delta { dir } => Box::new(
                DeltaSink::open_typed::<Issue>(dir, "issues", options)
                    .await
                    .unwrap(),
            ),
        }
    }

    /// Removes the table family (PostgreSQL: its tables, views and schema
    /// row; Delta: the directories of its tables and rejects).
    async fn drop(&self) {
        let (url, table) = match self {
            Output::Postgres { url, table } => (url, table),
            Output::Delta { dir } => return drop_delta_family(Path::new(dir)),
        };
        client(url)
            .await
            .batch_execute(&format!(
                "DO $$ DECLARE t text; BEGIN \
                   FOR t IN SELECT tablename FROM pg_tables WHERE tablename = '{table}' \
                     OR tablename LIKE '{table}\\_\\_%' OR tablename = '{table}_rejects' LOOP \
                     EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t); END LOOP; \
                   IF to_regclass('_etl_schema') IS NOT NULL THEN \
                     DELETE FROM _etl_schema WHERE table_name = '{table}'; END IF; END $$"
            ))
            .await
            .unwrap();
    }

    /// Whether the family has the child table `__labels`.
    async fn has_labels(&self) -> bool {
        match self {
            Output::Delta { dir } => Path::new(&format!("{dir}__labels")).exists(),
            Output::Postgres { url, table } => client(url)
                .await
                .query_one(
                    "SELECT to_regclass($1) IS NOT NULL",
                    &[&format!("{table}__labels")],
                )
                .await
                .unwrap()
                .get(0),
        }
    }

    /// `VACUUM ANALYZE` of the family, as autovacuum would after a backfill.
    async fn settle(&self) {
        let Output::Postgres { url, table } = self else {
            return;
        };
        let client = client(url).await;
        for t in [
            table.clone(),
            format!("{table}__labels"),
            format!("{table}__assignees"),
        ] {
            client
                .batch_execute(&format!("VACUUM ANALYZE \"{t}\""))
                .await
                .unwrap();
        }
    }

    fn spec(&self) -> String {
        match self {
            Output::Postgres { table, .. } => format!("postgres|{table}"),
            Output::Delta { dir } => format!("delta|{dir}"),
        }
    }
}

/// Removes the Delta table at `table`, its child tables and its rejects
/// table (the directories beside it named after it).
fn drop_delta_family(table: &Path) {
    let (Some(parent), Some(name)) = (table.parent(), table.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let found = entry.file_name().to_string_lossy().into_owned();
        if found == name
            || found.starts_with(&format!("{name}__"))
            || found == format!("{name}_rejects")
            || found == format!("{name}_deleted")
        {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
}

/// A connection to the PostgreSQL at `url`.
async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

fn main() {
    if let Ok(spec) = std::env::var(WRITER) {
        return writer(&spec);
    }
    let sections = sections(&SECTIONS);
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let delta = |name: &str| Output::Delta {
        dir: dir.path().join(name).to_str().unwrap().to_owned(),
    };
    for section in &sections {
        match section.as_str() {
            "scale_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_scale") {
                    scale(&rt, &out, dir.path());
                }
            }
            "scale_delta" => scale(&rt, &delta("scale"), dir.path()),
            "writers_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_writers") {
                    writers(&rt, &[out.clone(), out]);
                }
            }
            "writers_delta" => writers(&rt, &[delta("union"), delta("raced")]),
            "run_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_run") {
                    runs(&rt, &out, dir.path(), 3);
                }
            }
            "run_delta" => runs(&rt, &delta("run"), dir.path(), 5),
            "overlap_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_overlap") {
                    overlap(&rt, &out, dir.path());
                }
            }
            "dispositions_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_disposed") {
                    dispositions(&rt, &out, dir.path());
                }
            }
            "readers_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_readers") {
                    readers(&rt, &out, dir.path());
                }
            }
            "dispositions_delta" => dispositions(&rt, &delta("disposed"), dir.path()),
            "merge_writers_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_merging") {
                    at_once(&rt, &out, dir.path(), 4, "write = \"merge\"\n");
                }
            }
            "merge_writers_delta" => {
                at_once(&rt, &delta("merging"), dir.path(), 4, "write = \"merge\"\n")
            }
            "merge_grown_postgres" => {
                if let Some(out) = Output::postgres("etl_bench_typed_merged") {
                    merge_grown(&rt, &out, dir.path());
                }
            }
            "merge_grown_delta" => merge_grown(&rt, &delta("merged"), dir.path()),
            other => panic!("unknown section {other}"),
        }
    }
}

/// The rows a `merge_grown_*` section grows its table to: [`GROWN_VAR`]'s,
/// else [`GROWN`].
fn grown() -> usize {
    match std::env::var(GROWN_VAR) {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|e| panic!("{GROWN_VAR}: `{n}` is not a row count: {e}")),
        Err(_) => GROWN,
    }
}

/// The [`SERVED`] records as the API sends them: `issues_in(0..12)` updated
/// after every grown record.
fn served() -> serde_json::Value {
    let records: Vec<serde_json::Value> = issues_in(0..SERVED)
        .iter()
        .map(|text| {
            let mut record: serde_json::Value = serde_json::from_str(text).unwrap();
            record["updated_at"] = "2025-01-01T00:00:00Z".into();
            record
        })
        .collect();
    serde_json::json!({ "data": records })
}

/// No-change `etl run`s against the table holding the served records
/// alone, then also [`GROWN`] older ones.
fn scale(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    let server = rt.block_on(async {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/issues"))
            .respond_with(ResponseTemplate::new(200).set_body_json(served()))
            .mount(&server)
            .await;
        server
    });
    let file = dir.join("issues.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"issues\"\nurl = \"{}/issues\"\nrecords = \"/data\"\nid = \"/id\"\n\
             updated_at = \"/updated_at\"\n[incremental]\nparam = \"since\"\n",
            server.uri()
        ),
    )
    .unwrap();
    let run = |incremental: bool| {
        let mut c = gnu_time::command(env!("CARGO_BIN_EXE_etl"));
        c.arg("run").arg(&file).args(out.args());
        if incremental {
            c.arg("--incremental");
        }
        gnu_time::run(c)
    };
    rt.block_on(out.drop());
    let first = run(false);
    assert!(first.stdout.contains("12 new rows"), "{}", first.stdout);
    println!("| table records | run | wall (median of {RUNS}) | peak RSS (max) |");
    println!("|---:|---|---:|---:|");
    for size in [0, GROWN] {
        rt.block_on(grow(out, size));
        for incremental in [true, false] {
            let (mut walls, mut rss) = (Vec::new(), 0);
            for _ in 0..RUNS {
                let timed = run(incremental);
                assert!(timed.stdout.contains(" 0 new rows"), "{}", timed.stdout);
                walls.push(timed.wall);
                rss = rss.max(timed.max_rss_kb);
            }
            println!(
                "| {} | {} | {:.3} s | {:.1} MB |",
                size + SERVED,
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
    rt.block_on(out.drop());
}

/// Adds `n` records older than the served ones (`issues_in(12..12 + n)`),
/// in loads of 100,000.
async fn grow(out: &Output, n: usize) {
    if n == 0 {
        return;
    }
    let start = Instant::now();
    let sink = out.open(Write::Append).await;
    for from in (SERVED..SERVED + n).step_by(100_000) {
        let records: Vec<Issue> = issues_in(from..(from + 100_000).min(SERVED + n))
            .into_iter()
            .map(Issue::from_text)
            .collect();
        assert_eq!(sink.load(&records).await.unwrap(), records.len());
    }
    sink.settle().await;
    drop(sink);
    out.settle().await;
    println!(
        "(grown by {n} records in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

/// The records `start..end` of the writers: [`issues_in`] with a member of
/// their quarter's own, `quarter_<q>`, an object of three members.
fn quartered(start: usize, end: usize) -> Vec<Issue> {
    let quarter = WRITTEN / 4;
    issues_in(start..end)
        .into_iter()
        .zip(start..)
        .map(|(text, i)| {
            let mut record: serde_json::Value = serde_json::from_str(&text).unwrap();
            record[format!("quarter_{}", i / quarter)] = serde_json::json!({
                "note": format!("seen by writer {}", i / quarter),
                "rank": i % 97,
                "checked_at": "2024-06-01T00:00:00Z",
            });
            Issue::from_text(record.to_string())
        })
        .collect()
}

/// A writer child: makes records START..END, says `ready`, and on a line
/// of its stdin loads them in loads of [`LOAD`] and prints how many it
/// wrote (so that making the records is not timed).
fn writer(spec: &str) {
    use std::io::BufRead;
    let parts: Vec<&str> = spec.split('|').collect();
    let [kind, target, start, end] = parts[..] else {
        panic!("{WRITER}: expected OUTPUT|TARGET|START|END, found {spec}")
    };
    let out = match kind {
        "postgres" => Output::Postgres {
            url: std::env::var("ETL_PG_URL").unwrap(),
            table: target.to_owned(),
        },
        _ => Output::Delta {
            dir: target.to_owned(),
        },
    };
    let records = quartered(start.parse().unwrap(), end.parse().unwrap());
    println!("ready");
    std::io::stdin().lock().lines().next();
    let written = runtime().block_on(async {
        let sink = out.open(Write::Append).await;
        let mut written = 0;
        for chunk in records.chunks(LOAD) {
            written += sink.load(chunk).await.unwrap();
        }
        sink.settle().await;
        written
    });
    println!("{written}");
}

/// Writer children, one a range, started together once each has made its
/// records; returns the seconds from the start to the last one's end, and
/// the rows they wrote in all.
fn race(out: &Output, ranges: &[(usize, usize)]) -> (f64, usize) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let mut children: Vec<_> = ranges
        .iter()
        .map(|(start, end)| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env(WRITER, format!("{}|{start}|{end}", out.spec()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            assert_eq!(lines.next().unwrap().unwrap(), "ready");
            (child, lines)
        })
        .collect();
    let start = Instant::now();
    for (child, _) in &mut children {
        writeln!(child.stdin.take().unwrap()).unwrap();
    }
    let mut total = 0;
    for (mut child, mut lines) in children {
        let written: usize = lines.next().unwrap().unwrap().trim().parse().unwrap();
        assert!(child.wait().unwrap().success(), "a writer failed");
        total += written;
    }
    (start.elapsed().as_secs_f64(), total)
}

/// One process loading every quarter into `outs[0]`, against four at once
/// into `outs[1]`, each its own quarter (median of 3).
fn writers(rt: &tokio::runtime::Runtime, outs: &[Output; 2]) {
    let quarter = WRITTEN / 4;
    let (mut one, mut four) = (Vec::new(), Vec::new());
    for run in 0..3 {
        let [union, raced] = outs.clone().map(|out| match out {
            Output::Delta { dir } => Output::Delta {
                dir: format!("{dir}-{run}"),
            },
            pg => pg,
        });
        rt.block_on(union.drop());
        let (wall, total) = race(&union, &[(0, WRITTEN)]);
        assert_eq!(total, WRITTEN);
        one.push(wall);

        rt.block_on(raced.drop());
        let quarters: Vec<_> = (0..4).map(|w| (w * quarter, (w + 1) * quarter)).collect();
        let (wall, total) = race(&raced, &quarters);
        assert_eq!(total, WRITTEN, "each record written once in all");
        four.push(wall);
        rt.block_on(raced.drop());
    }
    let (one, four) = (median(one), median(four));
    println!("| one process loading {WRITTEN} records (4 quarters, each with members of its own) | {one:.3} s |");
    println!(
        "| four processes at once, a quarter each | {four:.3} s ({:.2}x) |",
        four / one
    );
}

/// Serves the first [`RUN_RECORDS`] of [`issues_in`] at `/issues?page=N`
/// (from 1), [`RUN_PAGE`] a page: `{"next": URL | null, "results": [...]}`.
async fn serve_issues() -> MockServer {
    let server = MockServer::start().await;
    let records = issues_in(0..RUN_RECORDS);
    mount_pages(&server, &records, "/issues", &[RUN_RECORDS / RUN_PAGE]).await;
    server
}

/// [`serve_issues`], and as many other issues at `/others` (the same
/// pages, the next [`RUN_RECORDS`] issues): a table of them is one whose
/// every row a replace of the issues takes out.
async fn serve_issues_and_others() -> MockServer {
    let server = serve_issues().await;
    let others = issues_in(RUN_RECORDS..2 * RUN_RECORDS);
    mount_pages(&server, &others, "/others", &[RUN_RECORDS / RUN_PAGE]).await;
    server
}

/// A page server on Python's `http.server` that decodes and encodes each
/// page file again as it is asked for (`python3 -c ENCODING PORT DIR`).
const ENCODING: &str = r#"
import http.server, json, os, sys
port, root = int(sys.argv[1]), sys.argv[2]
class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(root, self.path.lstrip("/"))) as f:
            body = json.dumps(json.load(f)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Pages).serve_forever()
"#;

/// The pages of [`serve_issues`] as files `DIR/p/N.json`, served by
/// Python's standard `http.server` on a port of its own (`encoding`: each
/// page decoded and encoded again as it is asked for), killed when
/// dropped.
struct PythonServer {
    child: std::process::Child,
    first: String,
}

impl PythonServer {
    fn start(dir: &Path, encoding: bool) -> PythonServer {
        let pages = dir.join("p");
        std::fs::create_dir_all(&pages).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let base = format!("http://127.0.0.1:{port}/p");
        let records = issues_in(0..RUN_RECORDS);
        let last = RUN_RECORDS / RUN_PAGE;
        for page in 1..=last {
            let next = match page {
                p if p == last => "null".to_owned(),
                p => format!("\"{base}/{}.json\"", p + 1),
            };
            let results = records[(page - 1) * RUN_PAGE..page * RUN_PAGE].join(",");
            std::fs::write(
                pages.join(format!("{page}.json")),
                format!("{{\"next\":{next},\"results\":[{results}]}}"),
            )
            .unwrap();
        }
        let mut command = Command::new("python3");
        let port_arg = port.to_string();
        if encoding {
            command.args(["-c", ENCODING, &port_arg]).arg(dir);
        } else {
            let args = ["-m", "http.server", &port_arg, "--bind", "127.0.0.1"];
            command.args(args).arg("--directory").arg(dir);
        }
        let child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 starts");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        PythonServer {
            child,
            first: format!("{base}/1.json"),
        }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Mounts `records` on `server` at the path `at`, [`RUN_PAGE`] a page, as
/// [`serve_issues`] serves them: the pages `ends` names are last (no next
/// URL), so that a run from the page after one reads on to the next.
async fn mount_pages(server: &MockServer, records: &[String], at: &str, ends: &[usize]) {
    for page in 1..=records.len() / RUN_PAGE {
        let next = if ends.contains(&page) {
            "null".to_owned()
        } else {
            format!("\"{}{at}?page={}\"", server.uri(), page + 1)
        };
        let results = records[(page - 1) * RUN_PAGE..page * RUN_PAGE].join(",");
        Mock::given(method("GET"))
            .and(path(at))
            .and(query_param("page", page.to_string()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(
                format!("{{\"next\":{next},\"results\":[{results}]}}"),
                "application/json",
            ))
            .mount(server)
            .await;
    }
}

/// One typed `etl run` of the served issues into a new table family of
/// `out`, against two runs at once into one new family, each reading half
/// the pages (alternated, median of 3). A run takes turns: it makes a
/// page's rows, then waits while the server inserts them. Two runs at once
/// overlap one's making with the other's inserting: what one run would
/// gain by making the next page's rows while the server inserts a page's.
fn overlap(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    at_once(rt, out, dir, 2, "");
}

/// One typed `etl run` of the served issues, with `top` at the top of its
/// file, into a new table family of `out`, against `parts` runs at once
/// into one new family, each reading its share of the pages (alternated,
/// median of 3).
fn at_once(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path, parts: usize, top: &str) {
    // One server, the records made once: the whole run's pages and the
    // parts' the same but for where they end.
    let server = rt.block_on(MockServer::start());
    let records = issues_in(0..RUN_RECORDS);
    let share = RUN_RECORDS / RUN_PAGE / parts;
    let ends: Vec<usize> = (1..=parts).map(|p| p * share).collect();
    rt.block_on(async {
        mount_pages(&server, &records, "/issues", &[parts * share]).await;
        mount_pages(&server, &records, "/parts", &ends).await;
    });
    drop(records);
    let file = |name: &str, first: String| next_url_pipeline(dir, name, "issues", &first, top);
    let whole = file(
        "at-once-whole.toml",
        format!("{}/issues?page=1", server.uri()),
    );
    let shares: Vec<_> = (0..parts)
        .map(|p| {
            file(
                &format!("at-once-{p}.toml"),
                format!("{}/parts?page={}", server.uri(), p * share + 1),
            )
        })
        .collect();
    let etl = etl_bin();
    // The runs of `files` at once: seconds until the last ends.
    let run = |files: &[&Path]| {
        rt.block_on(out.drop());
        let start = Instant::now();
        let runs: Vec<_> = files
            .iter()
            .map(|file| {
                Command::new(&etl)
                    .arg("run")
                    .arg(file)
                    .args(out.args())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let done = run.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&done.stdout);
            let each = RUN_RECORDS / files.len();
            assert!(
                done.status.success() && stdout.contains(&format!("{each} new rows")),
                "{stdout}{}",
                String::from_utf8_lossy(&done.stderr)
            );
        }
        let wall = start.elapsed().as_secs_f64();
        rt.block_on(out.drop());
        wall
    };
    let (mut one, mut many) = (Vec::new(), Vec::new());
    let shares: Vec<&Path> = shares.iter().map(|f| f.as_path()).collect();
    for _ in 0..3 {
        one.push(run(&[whole.as_path()]));
        many.push(run(&shares));
    }
    let shown = |walls: &[f64]| {
        walls
            .iter()
            .map(|w| format!("{w:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (one_wall, many_wall) = (median(one.clone()), median(many.clone()));
    let write = match top.trim() {
        "" => "append",
        top => top,
    };
    println!("| {RUN_RECORDS} records, typed, {write} | wall (median of 3) | each run |");
    println!("|---|---:|---|");
    println!("| one `etl run` | {one_wall:.3} s | {} |", shown(&one));
    println!(
        "| {parts} at once, 1/{parts} of the pages each | {many_wall:.3} s ({:.2}x) | {} |",
        many_wall / one_wall,
        shown(&many)
    );
}

/// `etl run` of the served issues into a new table family of `out`, typed
/// against `shape = "json"`, alternated, `n` of each; then dlt's
/// `rest_api` over the same server into the same destination.
fn runs(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path, n: usize) {
    // Held to the end: the server every contender reads.
    let (first, _wiremock, _python) = match std::env::var("ETL_BENCH_SERVER").as_deref() {
        Ok(kind @ ("python" | "python-encoding")) => {
            let python = PythonServer::start(&dir.join("served"), kind == "python-encoding");
            (python.first.clone(), None, Some(python))
        }
        _ => {
            let server = rt.block_on(serve_issues());
            (
                format!("{}/issues?page=1", server.uri()),
                Some(server),
                None,
            )
        }
    };
    println!("served from {first}");
    // The two pipeline files, the same but for the shape.
    let typed_file = next_url_pipeline(dir, "run-typed.toml", "issues", &first, "");
    let json_file = next_url_pipeline(dir, "run-json.toml", "issues", &first, "shape = \"json\"\n");
    let etl = etl_bin();
    let run = |shape: &str, attempt: usize| {
        // Delta: a family of its own each run (the table and its child
        // tables beside it, in one directory removed after).
        let (out, family) = match out {
            Output::Delta { dir } => {
                let family = format!("{dir}/{shape}-{attempt}");
                let table = format!("{family}/issues");
                (Output::Delta { dir: table }, Some(family))
            }
            pg => (pg.clone(), None),
        };
        rt.block_on(out.drop());
        let file = if shape == "typed" {
            &typed_file
        } else {
            &json_file
        };
        let mut c = gnu_time::command(&etl);
        c.arg("run").arg(file).args(out.args());
        let timed = gnu_time::run(c);
        assert!(
            timed.stdout.contains(&format!("{RUN_RECORDS} new rows")),
            "{}",
            timed.stdout
        );
        assert_eq!(
            rt.block_on(out.has_labels()),
            shape == "typed",
            "a typed run makes child tables, a JSON-shape one none"
        );
        rt.block_on(out.drop());
        if let Some(family) = family {
            std::fs::remove_dir_all(family).unwrap();
        }
        (timed.wall, timed.max_rss_kb)
    };
    let (mut typed, mut json) = (Vec::new(), Vec::new());
    for attempt in 0..n {
        json.push(run("json", attempt));
        typed.push(run("typed", attempt));
    }
    println!("| contender | wall (median of runs) | records/s | peak RSS (max) |");
    println!("|---|---:|---:|---:|");
    let line = |name: &str, timed: &[(f64, u64)]| {
        let wall = median(timed.iter().map(|t| t.0).collect());
        let rss = timed.iter().map(|t| t.1).max().unwrap_or(0);
        println!(
            "| {name} | {wall:.3} s | {:.0} | {:.1} MB |",
            RUN_RECORDS as f64 / wall,
            rss as f64 / 1000.0
        );
        wall
    };
    let json_wall = line("`etl run`, `shape = \"json\"`", &json);
    let typed_wall = line("`etl run`, typed", &typed);
    println!(
        "\ntyped / JSON: {:.2}x (each run: {})",
        typed_wall / json_wall,
        json.iter()
            .zip(&typed)
            .map(|(j, t)| format!("{:.2}/{:.2}", j.0, t.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let Ok(python) = std::env::var("ETL_BENCH_DLT_PYTHON") else {
        println!("dlt skipped: set ETL_BENCH_DLT_PYTHON to a Python with dlt[deltalake,postgres]==1.31.0");
        return;
    };
    let dlt: Vec<(f64, u64)> = (0..3).map(|_| dlt_run(rt, &python, &first, out)).collect();
    let dlt_wall = line("dlt 1.31 `rest_api` (process)", &dlt);
    println!(
        "typed `etl run`: {:.1}x dlt's records/s",
        dlt_wall / typed_wall
    );
}

/// The whole `etl run` of the served issues under each write disposition,
/// alternated, median of 3: an append into a new table; a replace of a
/// table holding the same records (filled by a replace first, not timed:
/// a re-run that finds every record as it was); a replace of a table
/// holding as many other records (every row out, every row in); a merge
/// into a new table (every record a new key).
fn dispositions(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    let server = rt.block_on(serve_issues_and_others());
    let first = format!("{}/issues?page=1", server.uri());
    let file = |name: &str, top: &str| next_url_pipeline(dir, name, "issues", &first, top);
    let append = file("append.toml", "");
    let replace = file("replace.toml", "write = \"replace\"\n");
    let other_first = format!("{}/others?page=1", server.uri());
    let replace_others = next_url_pipeline(
        dir,
        "replace_others.toml",
        "issues",
        &other_first,
        "write = \"replace\"\n",
    );
    let merge = file("merge.toml", "write = \"merge\"\n");
    let etl = etl_bin();
    let run = |file: &Path| {
        let mut c = gnu_time::command(&etl);
        c.arg("run").arg(file).args(out.args());
        let timed = gnu_time::run(c);
        assert!(
            timed.stdout.contains(&format!("{RUN_RECORDS} new rows")),
            "{}",
            timed.stdout
        );
        (timed.wall, timed.max_rss_kb)
    };
    let (mut appended, mut replaced, mut merged) = (Vec::new(), Vec::new(), Vec::new());
    let mut replaced_others = Vec::new();
    for _ in 0..3 {
        rt.block_on(out.drop());
        appended.push(run(&append));
        rt.block_on(out.drop());
        run(&replace);
        replaced.push(run(&replace));
        run(&replace_others);
        replaced_others.push(run(&replace));
        rt.block_on(out.drop());
        merged.push(run(&merge));
        rt.block_on(out.drop());
    }
    println!("| {RUN_RECORDS} records, typed | wall (median of 3) | / append | peak RSS (max) |");
    println!("|---|---:|---:|---:|");
    let append_wall = median(appended.iter().map(|t| t.0).collect());
    for (name, timed) in [
        ("append, into a new table", &appended),
        ("replace, of a table holding them", &replaced),
        ("replace, of a table holding others", &replaced_others),
        ("merge, into a new table", &merged),
    ] {
        if timed.is_empty() {
            continue;
        }
        let wall = median(timed.iter().map(|t| t.0).collect());
        let rss = timed.iter().map(|t| t.1).max().unwrap_or(0);
        println!(
            "| {name} | {wall:.3} s | {:.2}x | {:.1} MB |",
            wall / append_wall,
            rss as f64 / 1000.0
        );
    }
    merge_against_dlt(rt, out, dir);
}

/// How long a reader of the table is held while a run changes it, with an
/// analyst's repeatable-read transaction open on the table (it read the
/// table, and stays `idle in transaction`), and without: a reader counts
/// the table's rows every 20 ms from its own session, and the longest of
/// its counts is the figure. The runs: a replace of 100,000 records into a
/// table holding 100,000 others, and a replace whose records add a column
/// (one more member on every record): its `ALTER TABLE` needs the lock
/// the analyst holds off, so with the analyst it fails once its tries are
/// spent (`--timeout-secs 10`).
fn readers(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    let Output::Postgres { url, table } = out else {
        return;
    };
    let server = rt.block_on(serve_issues_and_others());
    let grown: Vec<String> = issues_in(0..RUN_RECORDS)
        .iter()
        .map(|r| r.replacen('{', "{\"reader_bench\":1,", 1))
        .collect();
    rt.block_on(mount_pages(
        &server,
        &grown,
        "/grown",
        &[RUN_RECORDS / RUN_PAGE],
    ));
    let at = |name: &str, path: &str| {
        let first = format!("{}/{path}?page=1", server.uri());
        next_url_pipeline(dir, name, "issues", &first, "write = \"replace\"\n")
    };
    let (same, other, growing) = (
        at("readers_same.toml", "issues"),
        at("readers_others.toml", "others"),
        at("readers_grown.toml", "grown"),
    );
    let etl = etl_bin();
    let run = |file: &Path| {
        let mut c = Command::new(&etl);
        c.arg("run")
            .arg(file)
            .args(out.args())
            .args(["--timeout-secs", "10"]);
        let started = Instant::now();
        let done = c.output().unwrap();
        (done.status.code(), started.elapsed().as_secs_f64())
    };
    println!("| run | analyst's transaction | exit | wall | longest reader wait | reader counts |");
    println!("|---|---|---:|---:|---:|---:|");
    for analyst in [false, true] {
        for (name, file) in [
            ("replace of 100,000 others", &same),
            ("replace adding a column", &growing),
        ] {
            rt.block_on(out.drop());
            run(&other);
            let watch = rt.block_on(async {
                let analyst = if analyst {
                    let c = client(url).await;
                    c.batch_execute(&format!(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {table}"
                    ))
                    .await
                    .unwrap();
                    Some(c)
                } else {
                    None
                };
                (analyst, Watch::start(url, table).await)
            });
            let (code, wall) = run(file);
            let (longest, counts) = rt.block_on(watch.1.stop());
            drop(watch.0);
            println!(
                "| {name} | {} | {} | {wall:.2} s | {:.3} s | {counts} |",
                if analyst { "open" } else { "none" },
                code.map_or("killed".into(), |c| c.to_string()),
                longest.as_secs_f64(),
            );
        }
    }
    rt.block_on(out.drop());
}

/// A reader counting a table's rows every 20 ms, timing each count.
struct Watch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<(std::time::Duration, usize)>,
}

impl Watch {
    async fn start(url: &str, table: &str) -> Watch {
        let reader = client(url).await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let sql = format!("SELECT count(*) FROM {table}");
        let task = tokio::spawn(async move {
            let (mut longest, mut counts) = (std::time::Duration::ZERO, 0);
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                reader.query_one(&sql, &[]).await.unwrap();
                longest = longest.max(started.elapsed());
                counts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            (longest, counts)
        });
        Watch { stop, task }
    }

    /// The longest count, and how many were made.
    async fn stop(self) -> (std::time::Duration, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// A merge of 100,000 records, half of them newer versions of rows the
/// table holds and half new keys, into a table of the 100,000 before
/// (filled by a merge, not timed): `etl run` against dlt 1.31's merge (its
/// default strategy, `primary_key = "id"`) into the same database, each
/// median of 3, when `ETL_BENCH_DLT_PYTHON` names a Python with dlt.
fn merge_against_dlt(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    let server = rt.block_on(MockServer::start());
    let held = issues_in(0..RUN_RECORDS);
    // The first half again, each a newer version; then as many new keys.
    let newer = issues_in(0..RUN_RECORDS / 2).into_iter().map(|text| {
        let mut record: serde_json::Value = serde_json::from_str(&text).unwrap();
        record["updated_at"] = "2024-06-01T00:00:00Z".into();
        record["state"] = "closed".into();
        record.to_string()
    });
    let changed: Vec<String> = newer
        .chain(issues_in(RUN_RECORDS..RUN_RECORDS * 3 / 2))
        .collect();
    rt.block_on(async {
        mount_pages(&server, &held, "/held", &[RUN_RECORDS / RUN_PAGE]).await;
        mount_pages(&server, &changed, "/changed", &[RUN_RECORDS / RUN_PAGE]).await;
    });
    let first = |at: &str| format!("{}/{at}?page=1", server.uri());
    let file = |name: &str, at: &str| {
        next_url_pipeline(dir, name, "issues", &first(at), "write = \"merge\"\n")
    };
    let (fill, merge) = (file("fill.toml", "held"), file("merge.toml", "changed"));
    let etl = etl_bin();
    let run = |file: &Path| {
        let mut c = gnu_time::command(&etl);
        c.arg("run").arg(file).args(out.args());
        gnu_time::run(c)
    };
    let ours: Vec<f64> = (0..3)
        .map(|_| {
            rt.block_on(out.drop());
            run(&fill);
            let timed = run(&merge);
            assert!(
                timed.stdout.contains(&format!("{RUN_RECORDS} new rows")),
                "{}",
                timed.stdout
            );
            rt.block_on(out.drop());
            timed.wall
        })
        .collect();
    let ours = median(ours);
    println!("\n| merge of {RUN_RECORDS} records into {RUN_RECORDS} (half newer versions) | wall (median of 3) |");
    println!("|---|---:|");
    println!("| `etl run`, `write = \"merge\"` | {ours:.3} s |");
    let Ok(python) = std::env::var("ETL_BENCH_DLT_PYTHON") else {
        println!("dlt skipped: set ETL_BENCH_DLT_PYTHON to a Python with dlt[deltalake,postgres]==1.31.0");
        return;
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/dlt_rest_api.py");
    let dlt: Vec<f64> = (0..3)
        .map(|_| {
            let work = tempfile::tempdir().unwrap();
            let (destination, url) = match out {
                Output::Postgres { url, .. } => ("postgres", Some(url.as_str())),
                Output::Delta { .. } => ("delta", None),
            };
            if let Some(url) = url {
                rt.block_on(async {
                    client(url)
                        .await
                        .batch_execute("DROP SCHEMA IF EXISTS etl_bench_dlt CASCADE")
                        .await
                        .unwrap()
                });
            }
            let dlt_run = |at: &str| {
                let mut command = gnu_time::command(&python);
                command
                    .args([script, &first(at)])
                    .arg(work.path())
                    .args(["list", destination, "merge"])
                    .env("RUNTIME__LOG_LEVEL", "WARNING");
                if let Some(url) = url {
                    command.env("DESTINATION__POSTGRES__CREDENTIALS", url);
                    let has_password = url
                        .parse::<tokio_postgres::Config>()
                        .is_ok_and(|c| c.get_password().is_some());
                    if !has_password {
                        // As dlt_run: a password the trusting server ignores.
                        command.env("DESTINATION__POSTGRES__CREDENTIALS__PASSWORD", "unused");
                    }
                }
                gnu_time::run(command)
            };
            dlt_run("held");
            let timed = dlt_run("changed");
            assert_eq!(
                timed.stdout.trim(),
                RUN_RECORDS.to_string(),
                "{}",
                timed.stdout
            );
            timed.wall
        })
        .collect();
    let dlt = median(dlt);
    println!("| dlt 1.31 `rest_api`, `write_disposition = \"merge\"` | {dlt:.3} s |");
    println!("\n`etl run` merge: {:.1}x dlt's records/s", dlt / ours);
}

/// The whole `etl run` of 1,000 changed records into a merge table of
/// [`GROWN`] rows whose earlier versions are in its newest tenth, against
/// the same run again, which changes nothing: what a merge costs beyond
/// reading the pages and finding the records held.
fn merge_grown(rt: &tokio::runtime::Runtime, out: &Output, dir: &Path) {
    let grown = grown();
    rt.block_on(out.drop());
    let start = Instant::now();
    rt.block_on(async {
        let sink = out
            .open(Write::Merge(MergeKeys::new(["/id".parse().unwrap()])))
            .await;
        for from in (0..grown).step_by(100_000) {
            let records: Vec<Issue> = issues_in(from..from + 100_000)
                .into_iter()
                .map(Issue::from_text)
                .collect();
            assert_eq!(sink.load(&records).await.unwrap(), records.len());
        }
        sink.settle().await;
    });
    rt.block_on(out.settle());
    println!(
        "(a merge table grown to {grown} rows in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    let server = rt.block_on(MockServer::start());
    let changed = |attempt: usize| -> Vec<String> {
        issues_in(grown - grown / 10..grown - grown / 10 + LOAD)
            .into_iter()
            .map(|text| {
                let mut record: serde_json::Value = serde_json::from_str(&text).unwrap();
                record["updated_at"] = format!("2025-0{}-01T00:00:00Z", attempt + 1).into();
                record["comments"] = (100 + attempt).into();
                record.to_string()
            })
            .collect()
    };
    let etl = etl_bin();
    let (mut merged, mut unchanged) = (Vec::new(), Vec::new());
    for attempt in 0..3 {
        let at = format!("/changed{attempt}");
        rt.block_on(mount_pages(&server, &changed(attempt), &at, &[1]));
        let file = next_url_pipeline(
            dir,
            &format!("merge-grown-{attempt}.toml"),
            "issues",
            &format!("{}{at}?page=1", server.uri()),
            "write = \"merge\"\n",
        );
        let run = |new: usize| {
            let mut c = gnu_time::command(&etl);
            c.arg("run").arg(&file).args(out.args());
            let timed = gnu_time::run(c);
            assert!(
                timed.stdout.contains(&format!(" {new} new rows")),
                "{}",
                timed.stdout
            );
            (timed.wall, timed.max_rss_kb)
        };
        merged.push(run(LOAD));
        unchanged.push(run(0));
    }
    let wall = |t: &[(f64, u64)]| median(t.iter().map(|t| t.0).collect());
    let rss = |t: &[(f64, u64)]| t.iter().map(|t| t.1).max().unwrap_or(0) as f64 / 1000.0;
    println!(
        "| {LOAD} records into a merge table of {grown} | wall (median of 3) | peak RSS (max) |"
    );
    println!("|---|---:|---:|");
    println!(
        "| changed (newer versions of rows in the newest tenth) | {:.3} s | {:.1} MB |",
        wall(&merged),
        rss(&merged)
    );
    println!(
        "| the same again (nothing new) | {:.3} s | {:.1} MB |",
        wall(&unchanged),
        rss(&unchanged)
    );
    println!(
        "\nthe merge beyond a no-change run: {:+.3} s, {:+.1} MB",
        wall(&merged) - wall(&unchanged),
        rss(&merged) - rss(&unchanged)
    );
    let Output::Postgres { url, table } = out else {
        return rt.block_on(out.drop());
    };
    // The same rows written once into a plain table (no index, no row
    // ever replaced): the speed the merge table's reads are held to.
    let plain = format!("{table}_plain");
    let (merged, copied): (Vec<f64>, Vec<f64>) = rt.block_on(async {
        let client = client(url).await;
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {plain}; CREATE TABLE {plain} AS SELECT * FROM {table}"
            ))
            .await
            .unwrap();
        // Apart: a batch is one transaction, and VACUUM runs outside any.
        client
            .batch_execute(&format!("VACUUM ANALYZE {plain}"))
            .await
            .unwrap();
        let group_by = |relation: &str| {
            let (client, sql) = (
                &client,
                format!("SELECT state, count(*) FROM {relation} GROUP BY state"),
            );
            async move {
                let start = Instant::now();
                let rows = client.query(&sql, &[]).await.unwrap();
                assert_eq!(rows.len(), 2);
                start.elapsed().as_secs_f64()
            }
        };
        let (mut merged, mut copied) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            merged.push(group_by(table).await);
            copied.push(group_by(&plain).await);
        }
        client
            .batch_execute(&format!("DROP TABLE {plain}"))
            .await
            .unwrap();
        (merged, copied)
    });
    let (merged, copied) = (median(merged), median(copied));
    println!(
        "SELECT state, count(*) ... GROUP BY state (median of 5, alternated): the merge table {merged:.3} s, \
         the same rows as a plain table {copied:.3} s ({:.2}x)",
        merged / copied
    );
    rt.block_on(out.drop());
}

/// One run of `benches/dlt_rest_api.py` from `first` into `out`'s
/// destination (Delta: a new directory; PostgreSQL: schema
/// `etl_bench_dlt`, dropped before and after): wall seconds and peak RSS.
fn dlt_run(rt: &tokio::runtime::Runtime, python: &str, first: &str, out: &Output) -> (f64, u64) {
    let work = tempfile::tempdir().unwrap();
    let drop_schema = |url: &str| {
        rt.block_on(async {
            client(url)
                .await
                .batch_execute("DROP SCHEMA IF EXISTS etl_bench_dlt CASCADE")
                .await
                .unwrap()
        })
    };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/dlt_rest_api.py");
    let mut command = gnu_time::command(python);
    command
        .args([script, first])
        .arg(work.path())
        .env("RUNTIME__LOG_LEVEL", "WARNING");
    match out {
        Output::Postgres { url, .. } => {
            drop_schema(url);
            // The URL (and any password in it) through dlt's environment,
            // never on a command line another user's `ps` shows.
            command
                .args(["list", "postgres"])
                .env("DESTINATION__POSTGRES__CREDENTIALS", url);
            let has_password = url
                .parse::<tokio_postgres::Config>()
                .is_ok_and(|c| c.get_password().is_some());
            if !has_password {
                // dlt asks for a password even where the server trusts the
                // client (this machine's): one the server ignores.
                command.env("DESTINATION__POSTGRES__CREDENTIALS__PASSWORD", "unused");
            }
        }
        Output::Delta { .. } => {
            command.args(["list", "delta"]);
        }
    }
    let timed = gnu_time::run(command);
    assert_eq!(
        timed.stdout.trim(),
        RUN_RECORDS.to_string(),
        "dlt loaded: {}",
        timed.stdout
    );
    if let Output::Postgres { url, .. } = out {
        drop_schema(url);
    }
    (timed.wall, timed.max_rss_kb)
}
