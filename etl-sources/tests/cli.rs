//! The `launches` binary end to end against the replay server: a 2.3.0
//! listing, entries that do not read, exit codes, `--max-retry-after`.

use etl_core::Row;
use etl_sources::replay::{Replay, ReplayServer, BUNDLED_LAUNCHES_2_3_0};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Output;
use tokio::process::Command;

const LIST_230: &str = "/2.3.0/launches/upcoming/";

fn bundled_230() -> Vec<Value> {
    serde_json::from_str(BUNDLED_LAUNCHES_2_3_0).unwrap()
}

fn at_230(launches: Vec<Value>) -> Replay {
    Replay {
        path: LIST_230.into(),
        ..Replay::new(launches)
    }
}

async fn launches(url: &str, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_launches"))
        .args(["--base-url", url, "--limit", "5", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .await
        .expect("the launches binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn rows_in(path: &Path) -> Vec<Row> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_multi_page_2_3_0_listing_loads_with_exit_0() {
    let server = ReplayServer::start(at_230(bundled_230())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let run = launches(server.url().as_str(), &out, &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).contains("done: 3 pages, 12 launches read, 12 new rows"),
        "{}",
        text(&run.stdout)
    );
    assert_eq!(rows_in(&out).len(), 12);
    assert!(
        !dir.path().join("launches.rejects.jsonl").exists(),
        "a clean run leaves no rejects file"
    );
}

#[tokio::test]
async fn unreadable_entries_go_to_the_rejects_file_and_exit_3() {
    let mut entries = bundled_230();
    let mut bad_type = entries[0].clone();
    bad_type["id"] = json!("bad-type");
    bad_type["launch_service_provider"]["type"] = json!(3);
    entries.insert(1, json!(42));
    entries.insert(6, json!({"name": "no id"}));
    entries.insert(11, bad_type);
    let server = ReplayServer::start(at_230(entries)).await.unwrap();
    let url = server.url().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let rejects = dir.path().join("launches.rejects.jsonl");

    let run = launches(&url, &out, &[]).await;
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    let stdout = text(&run.stdout);
    assert!(
        stdout.contains("done: 3 pages, 12 launches read, 12 new rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 entries rejected (3 new) into ")
            && stdout.contains("launches.rejects.jsonl"),
        "{stdout}"
    );
    assert_eq!(server.requests(), 3, "each page requested once");
    assert_eq!(rows_in(&out).len(), 12, "the readable entries all load");

    let lines: Vec<Value> = std::fs::read_to_string(&rejects)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["raw"], json!(42));
    assert_eq!(lines[1]["raw"], json!({"name": "no id"}));
    assert_eq!(lines[2]["raw"]["id"], json!("bad-type"));
    assert!(lines[1]["error"]
        .as_str()
        .unwrap()
        .contains("missing field `id`"));
    assert!(lines[2]["error"]
        .as_str()
        .unwrap()
        .starts_with("launch_service_provider.type: "));
    for line in &lines {
        assert!(line["source"].as_str().unwrap().starts_with(&url), "{line}");
    }

    // A re-run meets the same entries: nothing is added to either file, and
    // the exit status still says the source holds unreadable entries.
    let output_before = std::fs::read(&out).unwrap();
    let rejects_before = std::fs::read(&rejects).unwrap();
    let again = launches(&url, &out, &[]).await;
    assert_eq!(again.status.code(), Some(3), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("0 new rows") && text(&again.stdout).contains("(0 new)"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(std::fs::read(&out).unwrap(), output_before);
    assert_eq!(std::fs::read(&rejects).unwrap(), rejects_before);

    // --rejects puts them elsewhere.
    let elsewhere = dir.path().join("elsewhere.jsonl");
    let moved = launches(&url, &out, &["--rejects", elsewhere.to_str().unwrap()]).await;
    assert_eq!(moved.status.code(), Some(3));
    assert_eq!(std::fs::read(&elsewhere).unwrap(), rejects_before);
}

#[tokio::test]
async fn a_retry_after_above_max_retry_after_ends_the_run_naming_the_wait() {
    let replay = Replay {
        throttle_pages: vec![2],
        retry_after_secs: 2429,
        ..at_230(bundled_230())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let run = launches(server.url().as_str(), &out, &["--max-retry-after", "10m"]).await;
    assert_eq!(run.status.code(), Some(1));
    let stderr = text(&run.stderr);
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        error.contains("2429 s") && error.contains("600 s"),
        "{error}"
    );
    assert_eq!(rows_in(&out).len(), 5, "the page loaded before stays");
}

#[tokio::test]
async fn a_malformed_max_retry_after_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let run = launches(
        "http://127.0.0.1:9/",
        &dir.path().join("o.jsonl"),
        &["--max-retry-after", "soon"],
    )
    .await;
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("--max-retry-after"));
}

/// Every line of `stderr` as a JSON object (panics on one that is not).
fn json_lines(stderr: &[u8]) -> Vec<serde_json::Map<String, Value>> {
    text(stderr)
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(object)) => object,
            _ => panic!("not a JSON object: {line}"),
        })
        .collect()
}

#[tokio::test]
async fn json_logs_are_one_object_a_line_the_summary_and_a_failure_included() {
    let mut entries = bundled_230();
    entries.insert(3, json!({"name": "no id"}));
    let server = ReplayServer::start(at_230(entries)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");

    let run = launches(server.url().as_str(), &out, &["--log-format", "json"]).await;
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    let lines = json_lines(&run.stderr);
    for line in &lines {
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(line.contains_key(key), "{key} missing: {line:?}");
        }
    }
    let pages: Vec<_> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "page loaded")
        .collect();
    assert_eq!(pages.len(), 3);
    // An event's fields are fields: the first page held 4 launches and the
    // entry without an id.
    assert_eq!(
        (&pages[0]["fields"]["rows"], &pages[0]["fields"]["rejected"]),
        (&json!(4), &json!(1))
    );
    let done: Vec<_> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "done")
        .collect();
    assert_eq!(done.len(), 1, "one summary event");
    let summary = &done[0]["fields"];
    assert_eq!(
        (
            &summary["pages"],
            &summary["read"],
            &summary["new"],
            &summary["rejected"],
            &summary["rows"],
            &summary["exit_code"]
        ),
        (
            &json!(3),
            &json!(12),
            &json!(12),
            &json!(1),
            &json!(12),
            &json!(3)
        )
    );
    // stdout keeps its one summary line for scripts.
    assert!(text(&run.stdout).starts_with("done: 3 pages"));

    // A failed run's error is a JSON line too.
    let missing = server.url().join("/nowhere/").unwrap();
    let failed = launches(missing.as_str(), &out, &["--log-format", "json"]).await;
    assert_eq!(failed.status.code(), Some(1));
    let lines = json_lines(&failed.stderr);
    let error = lines.last().unwrap();
    assert_eq!(error["level"], "ERROR");
    assert!(
        error["fields"]["message"].as_str().unwrap().contains("404"),
        "{error:?}"
    );
    assert_eq!(error["fields"]["exit_code"], 1);
}
