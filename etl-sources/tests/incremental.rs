//! `launches --incremental` against the replay server, which filters and
//! orders by `last_updated` as the API does: a first run loads everything,
//! a second loads only what changed at the cost of the changed pages, a
//! third with nothing changed makes one request, a launch updated mid-run
//! is not skipped, and a killed backfill resumes from its cursor.

mod common;

use etl_core::Row;
use etl_sources::replay::{Replay, ReplayServer, Update, BUNDLED_LAUNCHES_2_3_0};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::process::{Child, Command};

fn bundled() -> Vec<Value> {
    serde_json::from_str(BUNDLED_LAUNCHES_2_3_0).unwrap()
}

fn at_230(launches: Vec<Value>) -> Replay {
    Replay {
        path: "/2.3.0/launches/upcoming/".into(),
        ..Replay::new(launches)
    }
}

fn command(url: &str, out: &Path, limit: u32) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_launches"));
    command
        .args([
            "--incremental",
            "--base-url",
            url,
            "--limit",
            &limit.to_string(),
            "--out",
        ])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn run(server: &ReplayServer, out: &Path, limit: u32) -> (Output, u32) {
    let before = server.requests();
    let output = command(server.url().as_str(), out, limit)
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (output, server.requests() - before)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn first_log_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn rows_in(path: &Path) -> Vec<Row> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn first_run_loads_all_then_only_changes_then_one_request() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let launches = bundled();

    // 1. An empty output: everything, in last_updated order.
    let server = ReplayServer::start(at_230(launches.clone())).await.unwrap();
    let (first, requests) = run(&server, &out, 5).await;
    assert!(stdout(&first).contains("12 new rows"), "{}", stdout(&first));
    assert!(stdout(&first).contains("incremental from the start"));
    assert!(
        first_log_line(&first).contains("cursor=none"),
        "{}",
        first_log_line(&first)
    );
    assert_eq!(requests, 3);
    drop(server);

    // 2. Upstream: three launches changed, two new ones.
    let mut changed = launches;
    for (i, launch) in changed.iter_mut().enumerate().take(3) {
        launch["net"] = json!("2027-02-01T00:00:00Z");
        launch["last_updated"] = json!(format!("2026-11-2{i}T09:00:00Z"));
    }
    for id in ["new-1", "new-2"] {
        let mut fresh = changed[5].clone();
        fresh["id"] = json!(id);
        fresh["last_updated"] = json!("2026-11-25T10:00:00Z");
        changed.push(fresh);
    }
    let server = ReplayServer::start(at_230(changed)).await.unwrap();
    let (second, requests) = run(&server, &out, 5).await;
    let cursor = "2026-11-12T12:00:00Z";
    assert!(
        first_log_line(&second).contains(&format!("cursor={cursor}")),
        "{}",
        first_log_line(&second)
    );
    assert!(stdout(&second).contains(&format!("incremental since {cursor}")));
    assert!(
        stdout(&second).contains(", 5 new rows"),
        "{}",
        stdout(&second)
    );
    // ceil((changed + 1) / limit): the launch at the cursor is read again.
    assert!(requests <= (5u32 + 1).div_ceil(5), "{requests} requests");
    assert_eq!(rows_in(&out).len(), 17);

    // 3. Nothing changed: one request, nothing written.
    let before = std::fs::read(&out).unwrap();
    let (third, requests) = run(&server, &out, 5).await;
    assert!(
        stdout(&third).contains(", 0 new rows"),
        "{}",
        stdout(&third)
    );
    assert!(stdout(&third).contains("incremental since 2026-11-25T10:00:00Z"));
    assert_eq!(requests, 1);
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[tokio::test]
async fn launches_sharing_the_cursor_timestamp_are_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    // Seven launches with one timestamp, more than a page of them.
    let mut launches = bundled();
    for launch in launches.iter_mut().take(7) {
        launch["last_updated"] = json!("2026-11-01T00:00:00Z");
    }
    let server = ReplayServer::start(at_230(launches.clone())).await.unwrap();
    let (first, _) = run(&server, &out, 3).await;
    assert!(stdout(&first).contains("12 new rows"), "{}", stdout(&first));
    drop(server);

    // Two more arrive at exactly the output's newest timestamp.
    let newest = launches[11]["last_updated"].clone();
    for id in ["tie-1", "tie-2"] {
        let mut tie = launches[0].clone();
        tie["id"] = json!(id);
        tie["last_updated"] = newest.clone();
        launches.push(tie);
    }
    let server = ReplayServer::start(at_230(launches)).await.unwrap();
    let (second, _) = run(&server, &out, 3).await;
    assert!(
        stdout(&second).contains(", 2 new rows"),
        "{}",
        stdout(&second)
    );
    assert_eq!(rows_in(&out).len(), 14);
}

#[tokio::test]
async fn a_launch_updated_mid_run_is_read_and_none_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    // After the first page, the first launch is updated: it moves to the end
    // of the listing, and with offset paging every later launch would shift
    // back by one, skipping one across the page boundary.
    let replay = Replay {
        updates: vec![Update {
            after_requests: 1,
            id: bundled()[0]["id"].as_str().unwrap().to_string(),
            last_updated: "2026-12-01T00:00:00Z".into(),
        }],
        ..at_230(bundled())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let (output, _) = run(&server, &out, 4).await;
    assert!(
        stdout(&output).contains("13 new rows"),
        "{}",
        stdout(&output)
    );
    let ids: std::collections::HashSet<String> = rows_in(&out)
        .into_iter()
        .map(|Row::Launches(l)| l.id)
        .collect();
    assert_eq!(ids.len(), 12, "every launch read");
}

fn spawn(url: &str, out: &Path) -> Child {
    command(url, out, 2).spawn().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_backfill_resumes_from_its_cursor() {
    // A backfill of 12 launches, 2 a page: 6 pages, each answered after 40 ms.
    let replay = Replay {
        delay: Duration::from_millis(40),
        ..at_230(bundled())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let url = server.url().to_string();
    let dir = tempfile::tempdir().unwrap();

    let clean = dir.path().join("clean.jsonl");
    let before = server.requests();
    assert!(spawn(&url, &clean).wait().await.unwrap().success());
    let full = server.requests() - before;
    assert_eq!(full, 6);

    let killed = dir.path().join("killed.jsonl");
    common::kill_after(spawn(&url, &killed), 3, Duration::from_millis(10)).await;
    let written = rows_in(&killed).len();
    assert!((6..12).contains(&written), "killed mid-run: {written} rows");

    let before = server.requests();
    let resumed = spawn(&url, &killed).wait_with_output().await.unwrap();
    assert!(resumed.status.success());
    let requests = server.requests() - before;
    // It starts at the page it was on (its cursor), not at page 1.
    assert!(
        requests < full,
        "{requests} requests, a full run takes {full}"
    );
    assert!(
        requests <= full - (written as u32 / 2) + 1,
        "{requests} requests"
    );
    assert_eq!(
        std::fs::read_to_string(&killed).unwrap(),
        std::fs::read_to_string(&clean).unwrap(),
        "the resumed output equals a clean run's"
    );
}
