//! `launches` and `etl` with `--out delta:PATH`, as processes: fresh, re-run
//! and incremental loads, four loaders racing for one table, a kill -9
//! mid-run then a re-run, and a table compacted and vacuumed by another
//! tool; each time every content key is in the table once, as the Python
//! `deltalake` package (a real reader) sees it.
//!
//! The tests that read the table need `ETL_DELTA_PYTHON`: a Python with
//! `deltalake` (`.ci/run` installs one); without it they are
//! ignored. The bad-location cases need nothing.
#![cfg(all(feature = "delta", feature = "cli"))]

#[path = "common/api.rs"]
#[allow(dead_code)] // the API's other uses are in other test binaries
mod api;
mod common;

use api::{issue, items, pipeline, Api, Style};
use etl_sources::replay::{Replay, ReplayServer, Update, BUNDLED_LAUNCHES_2_3_0};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::process::{Child, Command};

const NEEDS_PYTHON: &str = "needs ETL_DELTA_PYTHON: a Python with deltalake";

fn bundled() -> Vec<Value> {
    serde_json::from_str(BUNDLED_LAUNCHES_2_3_0).unwrap()
}

fn replay(delay_ms: u64) -> Replay {
    Replay {
        path: "/2.3.0/launches/upcoming/".into(),
        delay: Duration::from_millis(delay_ms),
        ..Replay::new(bundled())
    }
}

/// [`replay`] with the launch at `index` changed upstream from the start.
fn changed(index: usize) -> Replay {
    Replay {
        updates: vec![Update {
            after_requests: 0,
            id: bundled()[index]["id"].as_str().unwrap().to_string(),
            last_updated: "2026-12-01T00:00:00Z".into(),
        }],
        ..replay(0)
    }
}

fn launches(url: &str, table: &Path, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_launches"));
    command
        .args(["--base-url", url, "--limit", "2", "--out"])
        .arg(format!("delta:{}", table.display()))
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

fn spawn(command: &mut Command) -> Child {
    command.spawn().expect("the binary starts")
}

async fn finish(command: &mut Command) -> Output {
    let output = command.output().await.unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What the Python `deltalake` package reads of a table.
#[derive(Debug, serde::Deserialize)]
struct Read {
    rows: usize,
    distinct: usize,
    version: i64,
    columns: Vec<String>,
    /// The distinct ids of the rows.
    ids: usize,
}

/// Read with the package's own query engine (`QueryBuilder`), every row,
/// of a table in either shape (typed: `_etl_key` and `_etl_row`).
const READ: &str = r#"
import json, sys
from deltalake import DeltaTable, QueryBuilder
dt = DeltaTable(sys.argv[1])
columns = [f.name for f in dt.schema().fields]
typed = "_etl_key" in columns
t = QueryBuilder().register("t", dt).execute("select * from t").read_all()
keys = t.column("_etl_key" if typed else "content_key").to_pylist()
ids = t.column(columns[1]).to_pylist()
for doc in t.column("_etl_row" if typed else "row").to_pylist():
    assert isinstance(json.loads(doc), dict), doc
print(json.dumps({"rows": len(keys), "distinct": len(set(keys)), "version": dt.version(),
                  "columns": columns, "ids": len(set(ids))}))
"#;

/// Compaction and a vacuum that keeps nothing old, as another tool (or a
/// scheduled job) does to a table.
const COMPACT: &str = r#"
import sys
from deltalake import DeltaTable
dt = DeltaTable(sys.argv[1])
print(dt.optimize.compact())
dt = DeltaTable(sys.argv[1])
print(dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False))
"#;

fn python(script: &str, table: &Path) -> String {
    let python = std::env::var("ETL_DELTA_PYTHON").expect(NEEDS_PYTHON);
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(table)
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn read(table: &Path) -> Read {
    serde_json::from_str(&python(READ, table)).unwrap()
}

/// Every row once: as many content keys as rows, and one row an id.
fn assert_each_once(table: &Path, rows: usize) -> Read {
    let read = read(table);
    assert_eq!(read.rows, rows, "{read:?}");
    assert_eq!(read.distinct, rows, "a content key twice: {read:?}");
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn fresh_rerun_and_incremental_loads_keep_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("launches");
    let server = ReplayServer::start(replay(0)).await.unwrap();
    let url = server.url().to_string();

    let first = finish(&mut launches(&url, &table, &[])).await;
    assert!(stdout(&first).contains("12 new rows"), "{}", stdout(&first));
    let read = assert_each_once(&table, 12);
    assert_eq!(read.ids, 12);
    assert_eq!(
        read.columns,
        ["content_key", "launch_id", "updated_at", "loaded_at", "row"]
    );

    // Nothing new: no commit at all.
    let again = finish(&mut launches(&url, &table, &[])).await;
    assert!(stdout(&again).contains("0 new rows"), "{}", stdout(&again));
    assert_eq!(read.version, assert_each_once(&table, 12).version);

    // One launch changes upstream: an incremental run asks from the
    // table's newest update time and writes only the change.
    let server = ReplayServer::start(changed(3)).await.unwrap();
    let url = server.url().to_string();
    let incremental = finish(&mut launches(&url, &table, &["--incremental"])).await;
    let text = stdout(&incremental);
    assert!(text.contains("1 new rows"), "{text}");
    assert!(text.contains("incremental since 2026-"), "{text}");
    let read = assert_each_once(&table, 13);
    assert_eq!(read.ids, 12, "the change is a new row of the same launch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn four_loaders_at_once_leave_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("launches");
    let server = ReplayServer::start(replay(5)).await.unwrap();
    let url = server.url().to_string();
    // Four processes, the same rows, one table not yet made: they race to
    // create it and for every commit.
    let loaders: Vec<Child> = (0..4)
        .map(|_| spawn(&mut launches(&url, &table, &[])))
        .collect();
    let mut written = 0;
    for loader in loaders {
        let output = loader.wait_with_output().await.unwrap();
        let text = stdout(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let new: usize = text
            .split(" new rows")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {text}"));
        written += new;
    }
    assert_each_once(&table, 12);
    assert_eq!(written, 12, "the loaders' counts add up to the rows held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn killed_runs_then_a_rerun_leave_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("launches");
    let server = ReplayServer::start(replay(40)).await.unwrap();
    let url = server.url().to_string();
    for (pages, extra_ms) in [(1, 0), (2, 17), (1, 39), (3, 5)] {
        common::kill_after(
            spawn(&mut launches(&url, &table, &[])),
            pages,
            Duration::from_millis(extra_ms),
        )
        .await;
    }
    let before = read(&table);
    assert!(
        (2..12).contains(&before.rows),
        "the kills landed mid-run: {before:?}"
    );
    assert_eq!(before.rows, before.distinct);

    let finished = finish(&mut launches(&url, &table, &[])).await;
    assert!(stdout(&finished).contains("12 launches read"));
    assert_each_once(&table, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_compacted_and_vacuumed_table_takes_reruns_that_write_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("launches");
    let server = ReplayServer::start(replay(0)).await.unwrap();
    let url = server.url().to_string();
    finish(&mut launches(&url, &table, &[])).await;
    let files = |t: &Path| {
        std::fs::read_dir(t)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "parquet")
            })
            .count()
    };
    assert_eq!(files(&table), 6, "a file a page");

    // The compacted file was written by another writer, with no bloom
    // filter of ours: its keys are read from its column instead.
    python(COMPACT, &table);
    assert_eq!(files(&table), 1, "compacted and vacuumed");
    let again = finish(&mut launches(&url, &table, &[])).await;
    assert!(stdout(&again).contains("0 new rows"), "{}", stdout(&again));
    assert_each_once(&table, 12);

    let server = ReplayServer::start(changed(0)).await.unwrap();
    let url = server.url().to_string();
    let after = finish(&mut launches(&url, &table, &[])).await;
    assert!(stdout(&after).contains("1 new rows"), "{}", stdout(&after));
    assert_each_once(&table, 13);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn etl_demo_loads_records_into_a_delta_table() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("demo");
    let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
    command
        .args(["demo", "--out"])
        .arg(format!("delta:{}", table.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = finish(&mut command).await;
    assert!(
        stdout(&output).contains("new rows written to Delta table"),
        "{}",
        stdout(&output)
    );
    // A pipeline file's new table is typed: the launches' members are
    // columns beside the record.
    let read = assert_each_once(&table, 12);
    assert_eq!(read.columns[1], "_etl_id");
    for column in [
        "name",
        "rocket__configuration__full_name",
        "pad__location__name",
    ] {
        assert!(
            read.columns.iter().any(|c| c == column),
            "{column}: {:?}",
            read.columns
        );
    }
    let again = finish(&mut command).await;
    assert!(stdout(&again).contains("0 new rows"), "{}", stdout(&again));
}

/// The newest version in the log of the table at `table`.
/// `etl run FILE --out delta:TABLE`, its output captured.
fn etl_run(file: &Path, table: &Path) -> Command {
    let mut run = Command::new(env!("CARGO_BIN_EXE_etl"));
    run.arg("run")
        .arg(file)
        .arg("--out")
        .arg(format!("delta:{}", table.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run
}

fn last_version(table: &Path) -> u64 {
    std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse().ok()
        })
        .max()
        .unwrap()
}

/// A frozen Delta table refuses a record whose value does not fit its
/// column and one with a new member: both go to the rejects table, and are
/// counted as rejects are (the run exits 3), and the table is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_tables_refusals_are_counted_and_the_run_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("items");
    let api = Api::new(Style::NextUrl, items(3));
    let server = api.clone().serve().await;
    let file = dir.path().join("items.toml");
    let freeze = "[schema]\ncontract = \"freeze\"\n";
    std::fs::write(&file, pipeline(&server.uri(), Style::NextUrl, freeze)).unwrap();
    let run = || etl_run(&file, &table).output();
    let first = run().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", common::text(&first));
    let version = last_version(&table);
    api.items.lock().unwrap().extend(api::refused_by_freeze(3));
    let second = run().await.unwrap();
    assert_eq!(second.status.code(), Some(3), "{}", common::text(&second));
    assert!(
        stdout(&second).contains("3 records read, 0 new rows written")
            && stdout(&second).contains("; 2 entries rejected (2 new) into "),
        "{}",
        common::text(&second)
    );
    assert_eq!(last_version(&table), version, "nothing committed");
    assert!(dir.path().join("items_rejects/_delta_log").is_dir());
}

/// A held cursor goes back in the records' own form (Unix seconds with no
/// `updated_at_unit`, milliseconds with it), learnt from the record the
/// table holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_cursor_of_unix_seconds_or_milliseconds_goes_back_as_that_number() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| format!("delta:{}", dir.path().join(name).display());
    let sent = api::cursors_sent(dir.path(), &["--out", &at("s")], api::Stamps::Seconds).await;
    assert_eq!(sent, [None, Some("1767227249".to_owned())]);
    let sent = api::cursors_sent(dir.path(), &["--out", &at("ms")], api::Stamps::Millis).await;
    assert_eq!(
        sent,
        [
            Some("1767225600000".to_owned()),
            Some("1767227249123".to_owned())
        ]
    );
}

/// The actions of each commit in `table`'s log, by version: `"metaData"`,
/// `"add"`, `"txn"`, ...
fn log_actions(table: &Path) -> Vec<Vec<String>> {
    (0..=last_version(table))
        .map(|v| {
            let text =
                std::fs::read_to_string(table.join(format!("_delta_log/{v:020}.json"))).unwrap();
            text.lines()
                .map(|l| {
                    let action: Value = serde_json::from_str(l).unwrap();
                    action.as_object().unwrap().keys().next().unwrap().clone()
                })
                .collect()
        })
        .collect()
}

/// A load that adds columns to a resource's table commits them with its
/// rows: one version holding the `metaData` and the `add`s, never a
/// version with the new columns and none of their rows. (A load that adds
/// a column or table to a list's child table still commits the schema's
/// text to the resource's table first: every writer must agree on a
/// child's columns before its rows go in.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_that_adds_columns_commits_them_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("r");
    let api = Api::new(Style::NextUrl, vec![serde_json::json!({"id": 1, "a": 1})]);
    let server = api.clone().serve().await;
    let file = dir.path().join("r.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"r\"\nurl = \"{}/items\"\nrecords = \"/data\"\nid = \"/id\"\n{}",
            server.uri(),
            Style::NextUrl.paginate()
        ),
    )
    .unwrap();
    let run = || etl_run(&file, &table).output();
    let first = run().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", common::text(&first));
    api.items
        .lock()
        .unwrap()
        .push(serde_json::json!({"id": 2, "a": 2, "b": "new"}));
    let second = run().await.unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", common::text(&second));
    let log = log_actions(&table);
    assert_eq!(log.len(), 3, "created, then one commit a load: {log:?}");
    for (version, actions) in log.iter().enumerate().skip(1) {
        let has = |a: &str| actions.iter().any(|x| x == a);
        assert!(
            has("metaData") && has("add"),
            "version {version}: {actions:?}"
        );
    }
}

/// A run whose last commit makes a checkpoint due (each 100th version)
/// ends once that checkpoint is written: the process's end cuts nothing
/// off, and no thread of it reports a panic (delta-kernel's did, when the
/// runtime ended under a checkpoint being written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_last_commit_makes_a_checkpoint_due_writes_it_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("items");
    let api = Api {
        page_size: 1,
        ..Api::new(Style::NextUrl, items(90))
    };
    let server = api.clone().serve().await;
    let file = dir.path().join("items.toml");
    std::fs::write(&file, pipeline(&server.uri(), Style::NextUrl, "")).unwrap();
    let mut run = etl_run(&file, &table);
    finish(&mut run).await;
    // From here on, one commit a page of new items: as many as take the
    // table to version 99, whose commit makes the checkpoint due.
    let before = usize::try_from(last_version(&table)).unwrap();
    assert!(before < 99, "the first run ended at version {before}");
    let more = items(90 + 99 - before).split_off(90);
    api.items.lock().unwrap().extend(more);
    let second = finish(&mut run).await;
    assert_eq!(last_version(&table), 99, "one commit a page of new items");
    assert!(
        table
            .join("_delta_log/00000000000000000099.checkpoint.parquet")
            .is_file(),
        "{}",
        common::text(&second)
    );
    assert!(
        !common::text(&second).contains("panicked"),
        "{}",
        common::text(&second)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_delta_locations_exit_2_naming_them_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = ReplayServer::start(replay(0)).await.unwrap();
    let url = server.url().to_string();

    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    // The rejects table of another table: a Delta table of other columns.
    let rows = dir.path().join("t");
    let sink = etl_delta::DeltaSink::open(rows.to_str().unwrap())
        .await
        .unwrap();
    etl_core::RejectSink::reject(&sink, &[etl_core::Reject::new("1", "x", "y").unwrap()])
        .await
        .unwrap();
    let other = dir.path().join("t_rejects");

    for (table, says) in [(&file, "not a directory"), (&other, "reject_key")] {
        let output = launches(&url, table, &[]).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&*table.to_string_lossy()), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_launches"))
        .args(["--base-url", &url, "--out", "delta:s3://bucket/t"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_WEB_IDENTITY_TOKEN_FILE")
        .env_remove("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        .env_remove("AWS_CONTAINER_CREDENTIALS_FULL_URI")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("s3://bucket/t"), "{stderr}");
    assert_eq!(server.requests(), 0, "nothing was requested");
}

/// What the Python `deltalake` package reads of a replaced family `items`
/// and `items__labels`: its rows, its child rows, the version of the
/// resource's table, and the labels of the records with ids 1 to 3 (with
/// their `extra` member, where the table has the column).
const READ_FAMILY: &str = r#"
import json, os, sys
from deltalake import DeltaTable, QueryBuilder
root = sys.argv[1]
dt = DeltaTable(root)
q = QueryBuilder().register("t", dt)
count = lambda t: q.execute(f"select count(*) as n from {t}").read_all().column("n").to_pylist()[0]
out = {"version": dt.version(), "rows": count("t"), "labels": 0, "names": []}
if os.path.isdir(os.path.join(root + "__labels", "_delta_log")):
    q.register("l", DeltaTable(root + "__labels"))
    out["labels"] = count("l")
    extra = "t.extra" if "extra" in [f.name for f in dt.schema().fields] else "null"
    names = q.execute(f"select t.id, l.name, {extra} as extra from t join l on l._etl_parent_key = t._etl_key "
                      "where t.id <= 3 order by t.id, l.name").read_all()
    out["names"] = list(zip(*(names.column(c).to_pylist() for c in ["id", "name", "extra"])))
print(json.dumps(out))
"#;

/// What [`READ_FAMILY`] reads.
#[derive(Debug, serde::Deserialize)]
struct Family {
    version: u64,
    rows: usize,
    labels: usize,
    names: Vec<(i64, String, Option<bool>)>,
}

fn read_family(table: &Path) -> Family {
    serde_json::from_str(&python(READ_FAMILY, table)).unwrap()
}

/// The replace stages (`etl-replacing-*` directories) in `table`.
fn stage_dirs(table: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(table) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("etl-replacing-")
        })
        .map(|e| e.path())
        .collect()
}

/// Whether a replace under way has staged a page in `table`: a commit
/// past the staging table's creation.
fn staged_a_page(table: &Path) -> bool {
    stage_dirs(table)
        .iter()
        .any(|stage| stage.join("_delta_log/00000000000000000001.json").exists())
}

/// The data files under `table`'s replace staging directories.
fn staged_files(table: &Path) -> usize {
    stage_dirs(table)
        .iter()
        .flat_map(|stage| std::fs::read_dir(stage).into_iter().flatten().flatten())
        .filter(|f| f.file_name().to_string_lossy().ends_with(".parquet"))
        .count()
}

/// The stages under `table` whose staging log is still there: a failed or
/// killed replace's (a switch removes the log of each stage it commits).
fn unswitched_stages(table: &Path) -> usize {
    stage_dirs(table)
        .iter()
        .filter(|stage| stage.join("_delta_log").is_dir())
        .count()
}

/// `write = "replace"` into Delta: while the run stages, a reader reads
/// the old content at the old version; at the end the table and its child
/// table hold exactly the run's records; a run that fails, or is killed
/// once it staged rows, leaves the old content; the failed run removes
/// what it staged, the next replace what the killed run staged (its
/// process ended, on this machine); an empty run empties both tables; a full VACUUM then removes every staged file; the
/// table says how it is written, and a run that would append to it is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_replace_into_delta_switches_at_the_end_and_a_failed_or_killed_run_leaves_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("items");
    let mut api = Api::new(Style::LinkHeader, api::labelled(10, &["a", "b"]));
    api.page_size = 2;
    let server = api.clone().serve().await;
    let file = dir.path().join("items.toml");
    let text = format!(
        "write = \"replace\"\n{}",
        pipeline(&server.uri(), Style::LinkHeader, "")
    );
    let run_with = |text: String| {
        std::fs::write(&file, text).unwrap();
        etl_run(&file, &table)
    };
    let output = run_with(text.clone()).output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    let first = read_family(&table);
    assert_eq!((first.rows, first.labels), (10, 20), "{first:?}");

    // Upstream: nine records left, one relabelled, one with a member of
    // its own; pages slow enough to read the table mid-run.
    {
        let mut held = api.items.lock().unwrap();
        *held = api::labelled(9, &["c"]);
        held[1]["labels"] = serde_json::json!([{"name": "d"}, {"name": "e"}]);
        held[2]["extra"] = serde_json::json!(true);
    }
    api.delay = Duration::from_millis(500);
    let slow = api.clone().serve().await;
    let running = spawn(&mut run_with(text.replace(&server.uri(), &slow.uri())));
    let mut seen_mid_run = false;
    for _ in 0..400 {
        if staged_a_page(&table) {
            let read = read_family(&table);
            // Read while the run was still staging: the old content whole.
            if last_version(&table) == first.version {
                assert_eq!(read.version, first.version, "{read:?}");
                assert_eq!((read.rows, read.labels), (10, 20), "{read:?}");
                seen_mid_run = true;
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let output = running.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    assert!(
        seen_mid_run,
        "the table was never read while the run staged"
    );
    let second = read_family(&table);
    assert_eq!((second.rows, second.labels), (9, 10), "{second:?}");
    assert_eq!(second.version, first.version + 1, "one commit: {second:?}");
    assert_eq!(
        second.names,
        [
            (1, "c".to_owned(), None),
            (2, "d".to_owned(), None),
            (2, "e".to_owned(), None),
            (3, "c".to_owned(), Some(true)),
        ]
    );
    assert!(!staged_a_page(&table), "the staging log is gone");
    let staged_files_after_second = staged_files(&table);

    // A run that fails after its first page: the tables are as they were.
    api.delay = Duration::ZERO;
    api.script_from = 1;
    api.script
        .lock()
        .unwrap()
        .push_back(wiremock::ResponseTemplate::new(200).set_body_string("<html>oops</html>"));
    let failing = api.clone().serve().await;
    let output = run_with(text.replace(&server.uri(), &failing.uri()))
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", common::text(&output));
    let read = read_family(&table);
    assert_eq!(
        (read.version, read.rows, read.labels),
        (second.version, 9, 10)
    );
    // And it removed what it staged.
    let labels = dir.path().join("items__labels");
    assert_eq!(unswitched_stages(&table), 0);
    assert_eq!(unswitched_stages(&labels), 0);
    assert_eq!(staged_files(&table), staged_files_after_second);

    // A run killed (SIGKILL) once it staged rows: the same.
    api.delay = Duration::from_millis(500);
    api.script.lock().unwrap().clear();
    let slow = api.clone().serve().await;
    let mut killed = spawn(&mut run_with(text.replace(&server.uri(), &slow.uri())));
    for _ in 0..400 {
        if staged_a_page(&table) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    let read = read_family(&table);
    assert_eq!(
        (read.version, read.rows, read.labels),
        (second.version, 9, 10)
    );
    assert!(staged_files(&table) > 0, "the killed run's files are left");
    assert_eq!(unswitched_stages(&table), 1);
    assert!(unswitched_stages(&labels) > 0);

    // A run that reads nothing empties both tables. The killed run's
    // process has ended, which a run on this machine sees: its stage goes
    // from both tables at once (one on another machine's waits out the
    // lease, as etl-delta's own tests show).
    api.delay = Duration::ZERO;
    api.items.lock().unwrap().clear();
    let output = run_with(text.clone()).output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    let empty = read_family(&table);
    assert_eq!((empty.rows, empty.labels), (0, 0), "{empty:?}");
    assert_eq!(unswitched_stages(&table), 0, "the killed run's stage went");
    assert_eq!(unswitched_stages(&labels), 0);

    // A full VACUUM removes the files the later replaces removed from the
    // tables (the switched stages').
    for at in [&table, &dir.path().join("items__labels")] {
        python(VACUUM_FULL, at);
    }
    assert_eq!(staged_files(&table), 0);
    assert_eq!(read_family(&table).rows, 0);

    // The table knows how it is written: `etl schema` says so, and a file
    // that would append to it is refused before any request.
    let schema = Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("schema")
        .arg(&file)
        .arg("--out")
        .arg(format!("delta:{}", table.display()))
        .args(["--format", "text"])
        .output()
        .await
        .unwrap();
    assert_eq!(schema.status.code(), Some(0), "{}", common::text(&schema));
    assert!(
        stdout(&schema).contains("\n  write: replace\n"),
        "{}",
        common::text(&schema)
    );
    let json_form = Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("schema")
        .arg(&file)
        .arg("--out")
        .arg(format!("delta:{}", table.display()))
        .args(["--format", "json"])
        .output()
        .await
        .unwrap();
    let doc: Value = serde_json::from_slice(&json_form.stdout).unwrap();
    assert_eq!(
        doc["tables"][0]["write"],
        json!({"disposition": "replace", "primary_key": [], "hard_delete": null}),
        "{doc}"
    );
    let before = api.requests();
    let output = run_with(text.replace("write = \"replace\"\n", ""))
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", common::text(&output));
    assert!(
        common::text(&output).contains(
            "it is written by `write = \"replace\"`, and the run asks for `write = \"append\"`"
        ),
        "{}",
        common::text(&output)
    );
    assert_eq!(api.requests(), before, "refused before any request");
}

/// A VACUUM that keeps nothing old and looks at every file (`full`), not
/// only at those the log removed.
const VACUUM_FULL: &str = r#"
import sys
from deltalake import DeltaTable
print(DeltaTable(sys.argv[1]).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True))
"#;

/// What the Python `deltalake` package reads of a merged family `TABLE`
/// and `TABLE__labels`: each current row as "number second state labels"
/// (its labels joined on `_etl_parent_key = _etl_key`, sorted), the rows
/// a key, and the labels joined to no current row.
const READ_MERGED: &str = r#"
import json, os, sys
from deltalake import DeltaTable, QueryBuilder
root = sys.argv[1]
q = QueryBuilder().register("t", DeltaTable(root))
def rows(sql, names):
    t = q.execute(sql).read_all()
    return [dict(zip(names, r)) for r in zip(*(t.column(n).to_pylist() for n in names))]
t = rows("select number, cast(date_part('second', _etl_updated_at) as bigint) as s, state, _etl_key from t",
         ["number", "s", "state", "_etl_key"])
labels = {}
if os.path.isdir(os.path.join(root + "__labels", "_delta_log")):
    q.register("l", DeltaTable(root + "__labels"))
    for row in rows("select _etl_parent_key, name from l", ["_etl_parent_key", "name"]):
        labels.setdefault(row["_etl_parent_key"], []).append(row["name"])
rows = sorted(t, key=lambda r: r["number"])
print(json.dumps({
    "rows": [f'{r["number"]} {r["s"]} {r["state"]} {",".join(sorted(labels.get(r["_etl_key"], [])))}' for r in rows],
    "keys": len({r["number"] for r in rows}),
    "orphans": sum(len(v) for k, v in labels.items() if k not in {r["_etl_key"] for r in rows}),
}))
"#;

/// What [`READ_MERGED`] reads.
#[derive(Debug, serde::Deserialize)]
struct Merged {
    rows: Vec<String>,
    keys: usize,
    orphans: usize,
}

fn read_merged(table: &Path) -> Merged {
    let read: Merged = serde_json::from_str(&python(READ_MERGED, table)).unwrap();
    assert_eq!(read.keys, read.rows.len(), "a key twice: {read:?}");
    read
}

/// `write = "merge"` into Delta, as into PostgreSQL: one row per key, the
/// newest version read, joined to its own child rows; an older version
/// (read later, or in the same page) never replaces a newer one; a
/// deletion takes the row out and is remembered, so an older version does
/// not bring it back and a newer one does; a record without its key is a
/// reject (exit 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_merge_into_delta_keeps_the_newest_version_of_each_key_and_its_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("issues");
    let first: Vec<Value> = (1..=6).map(|n| issue(n, 10, "open", &["bug"])).collect();
    let api = Api::new(Style::LinkHeader, first);
    let server = api.clone().serve().await;
    let file = dir.path().join("issues.toml");
    std::fs::write(
        &file,
        format!(
            "write = \"merge\"\nprimary_key = \"/number\"\nhard_delete = \"/deleted\"\n{}",
            pipeline(&server.uri(), Style::LinkHeader, "")
        ),
    )
    .unwrap();
    let run = || async { etl_run(&file, &table).output().await.unwrap() };
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    assert_eq!(read_merged(&table).rows.len(), 6);

    // Updates, a deletion, an older version read late, two versions of
    // one key in one page (the newer last, then first), a new key.
    *api.items.lock().unwrap() = api::merge_changes();
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    assert!(
        common::text(&output).contains(", 1 deleted"),
        "{}",
        common::text(&output)
    );
    let want = [
        "1 30 closed done,fixed",
        "3 10 open bug",
        "4 40 b y",
        "5 40 newer ",
        "6 10 open bug",
        "7 10 open new",
    ];
    let read = read_merged(&table);
    assert_eq!(read.rows, want);
    assert_eq!(
        read.orphans, 0,
        "the replaced and deleted versions' labels are gone"
    );

    // The deleted key's older version does not bring it back; a run read
    // again changes nothing; a record without its key is a reject.
    *api.items.lock().unwrap() = vec![
        issue(2, 20, "resurrected", &["no"]),
        issue(1, 30, "closed", &["done", "fixed"]),
        json!({"id": 99, "state": "keyless", "updated_at": "2026-11-01T00:00:50Z"}),
    ];
    let output = run().await;
    assert_eq!(output.status.code(), Some(3), "{}", common::text(&output));
    assert_eq!(read_merged(&table).rows, want);

    // A newer version brings it back.
    *api.items.lock().unwrap() = vec![issue(2, 50, "reopened", &["again"])];
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    let read = read_merged(&table);
    assert_eq!(read.rows[1], "2 50 reopened again");
    assert_eq!(read.rows.len(), 7);
    assert_eq!(read.orphans, 0);

    // The table says how it is written: an append into it is refused
    // before any request.
    let requests = server.received_requests().await.unwrap().len();
    std::fs::write(&file, pipeline(&server.uri(), Style::LinkHeader, "")).unwrap();
    let output = run().await;
    assert_eq!(output.status.code(), Some(2), "{}", common::text(&output));
    assert!(
        common::text(&output).contains("merge"),
        "{}",
        common::text(&output)
    );
    assert_eq!(server.received_requests().await.unwrap().len(), requests);
}

/// A merge into Delta killed (SIGKILL) mid-run, then run again: the table
/// equals a clean run's, each key once with its newest version, joined to
/// that version's child rows alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_merge_into_delta_killed_mid_run_then_run_again_leaves_what_a_clean_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("issues");
    // Every key's old version first, its new one three pages later.
    let versions: Vec<Value> = (1..=12)
        .map(|k| issue(k, 10, "old", &["o"]))
        .chain((1..=12).map(|k| issue(k, 20, "new", &["n1", "n2"])))
        .collect();
    let mut api = Api::new(Style::LinkHeader, versions);
    api.delay = Duration::from_millis(150);
    let slow = api.clone().serve().await;
    let file = dir.path().join("issues.toml");
    let write_file = |uri: &str| {
        let text = format!(
            "write = \"merge\"\nprimary_key = \"/number\"\n{}",
            pipeline(uri, Style::LinkHeader, "")
        );
        std::fs::write(&file, text).unwrap();
    };
    write_file(&slow.uri());
    let mut killed = spawn(&mut etl_run(&file, &table));
    for _ in 0..400 {
        if table.join("_delta_log/00000000000000000001.json").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    let partial = read_merged(&table).rows;
    assert!(
        partial.iter().filter(|r| r.contains(" new ")).count() < 12,
        "killed before the end: {partial:?}"
    );

    api.delay = Duration::ZERO;
    let fast = api.clone().serve().await;
    write_file(&fast.uri());
    let output = etl_run(&file, &table).output().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    let want: Vec<String> = (1..=12).map(|k| format!("{k} 20 new n1,n2")).collect();
    let read = read_merged(&table);
    assert_eq!(read.rows, want);
    assert_eq!(read.orphans, 0, "the old versions' labels are gone");
}

/// Four `etl run`s merging overlapping versions of the same keys into one
/// Delta table at once: each key once, with its newest version, joined
/// to that version's child rows alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn four_runs_merging_into_one_delta_table_at_once_leave_each_key_once_with_its_newest() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("issues");
    let time = |w: i64, k: i64| u32::try_from((k * (w + 2) * 7 + w * 13) % 59).unwrap();
    let mut servers = Vec::new();
    let mut loaders = Vec::new();
    for w in 0..4 {
        let versions = (1..=24)
            .map(|k| issue(k, time(w, k), &format!("w{w}"), &[&format!("w{w}k{k}")]))
            .collect();
        let mut api = Api::new(Style::LinkHeader, versions);
        api.delay = Duration::from_millis(2);
        let server = api.serve().await;
        let file = dir.path().join(format!("w{w}.toml"));
        let text = format!(
            "write = \"merge\"\nprimary_key = \"/number\"\n{}",
            pipeline(&server.uri(), Style::LinkHeader, "")
        );
        std::fs::write(&file, text).unwrap();
        loaders.push(etl_run(&file, &table));
        servers.push(server);
    }
    let outputs = futures_util::future::join_all(loaders.iter_mut().map(|l| l.output())).await;
    for output in outputs {
        let output = output.unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", common::text(&output));
    }
    let rows = read_merged(&table).rows;
    assert_eq!(rows.len(), 24, "{rows:?}");
    for (row, k) in rows.iter().zip(1..) {
        let newest = (0..4).map(|w| time(w, k)).max().unwrap();
        // Of versions with one time, any one writer's, whole.
        let whole = (0..4)
            .filter(|&w| time(w, k) == newest)
            .any(|w| *row == format!("{k} {newest} w{w} w{w}k{k}"));
        assert!(
            whole,
            "key {k}: {row}, not a newest version with its own label"
        );
    }
}
