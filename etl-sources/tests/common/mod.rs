//! What the process tests share: killing a run mid-way, and reading what
//! a process said and wrote.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// Lets a running `launches` (spawned with its stderr piped) report
/// `pages` loaded pages, waits `extra`, then kills it with SIGKILL: no
/// destructor, no flush, as a crash or an OOM kill would.
pub async fn kill_after(mut child: Child, pages: usize, extra: Duration) {
    let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
    let mut seen = 0;
    while seen < pages {
        match lines.next_line().await.unwrap() {
            Some(line) if line.contains("page loaded") => seen += 1,
            Some(_) => {}
            None => panic!("the run ended before {pages} pages"),
        }
    }
    tokio::time::sleep(extra).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

/// A process's exit status, stdout and stderr, for an assertion's message.
#[allow(dead_code)] // not every test binary that shares this module asks
pub fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The records of a JSONL output (none when it is missing), checking each
/// line is whole, and how many times each id is there.
#[allow(dead_code)] // not every test binary that shares this module asks
pub fn records(path: &Path) -> (Vec<Value>, HashMap<String, usize>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    assert!(text.is_empty() || text.ends_with('\n'), "no torn last line");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids = HashMap::new();
    for r in &records {
        *ids.entry(r["id"].to_string()).or_insert(0) += 1;
    }
    (records, ids)
}
