//! The `launches` binary killed with SIGKILL at several moments of a run,
//! then run again: the file ends with every launch exactly once, no torn
//! line, nothing missing.

mod common;

use etl_core::Row;
use etl_sources::replay::{Replay, ReplayServer, BUNDLED_LAUNCHES};
use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

fn launches(url: &str, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_launches"))
        .args(["--base-url", url, "--limit", "2", "--out"])
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the launches binary starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_runs_resume_to_every_launch_exactly_once() {
    // 12 launches, 2 a page: 6 pages, each answered after 40 ms.
    let replay = Replay {
        delay: Duration::from_millis(40),
        ..Replay::new(serde_json::from_str(BUNDLED_LAUNCHES).unwrap())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let url = server.url().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");

    // Killed mid-fetch, and at moments in between.
    for (pages, extra_ms) in [(1, 0), (2, 17), (1, 39), (4, 5), (3, 41)] {
        common::kill_after(launches(&url, &out), pages, Duration::from_millis(extra_ms)).await;
    }
    let before = std::fs::read_to_string(&out).unwrap().lines().count();
    assert!(
        (2..12).contains(&before),
        "the kills landed mid-run: {before} rows so far"
    );

    // As if a kill had landed inside a write: half a line at the end.
    let mut file = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    file.write_all(br#"{"Launches":{"id":"torn-by-a-kill","na"#)
        .unwrap();
    drop(file);

    let finished = launches(&url, &out).wait_with_output().await.unwrap();
    assert!(
        finished.status.success(),
        "{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    let stdout = String::from_utf8_lossy(&finished.stdout);
    assert!(
        stdout.contains("done: 6 pages, 12 launches read"),
        "{stdout}"
    );

    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'), "no torn last line");
    let rows: Vec<Row> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line a whole row"))
        .collect();
    let ids: Vec<String> = rows.iter().map(|Row::Launches(l)| l.id.clone()).collect();
    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(rows.len(), 12, "every launch once: {ids:?}");
    assert_eq!(distinct.len(), 12, "no launch twice");

    // And once more: nothing new.
    let again = launches(&url, &out).wait_with_output().await.unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 new rows"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
}

#[tokio::test]
async fn bad_arguments_exit_non_zero_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let run = Command::new(env!("CARGO_BIN_EXE_launches"))
        .args(["--base-url", "ftp://ll.example/", "--out"])
        .arg(&out)
        .output()
        .await
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("ftp://ll.example/"), "{stderr}");
}
