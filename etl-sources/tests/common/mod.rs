//! What the tests that kill the `launches` binary share.

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
