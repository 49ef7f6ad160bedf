//! A whole process timed as a user's shell would time it: wall seconds from
//! here, peak RSS and CPU seconds from GNU time (`/usr/bin/time`, Debian
//! package `time`). Shared by the benches that run our binaries.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Instant;

/// `program` under GNU time; add its arguments, then [`run`] it.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new("/usr/bin/time");
    command
        .args(["-f", "cpu: %U %S\nmax-rss-kb: %M"])
        .arg(program);
    command
}

/// What one process did and cost.
pub struct Timed {
    pub wall: f64,
    pub max_rss_kb: u64,
    pub stdout: String,
}

/// Runs a [`command`] to its end; panics (failing the bench) if it fails.
/// With `ETL_BENCH_CPU` set, prints its user and system CPU seconds.
pub fn run(mut command: Command) -> Timed {
    let start = Instant::now();
    let output = command
        .output()
        .expect("GNU time at /usr/bin/time (Debian package `time`)");
    let wall = start.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    if std::env::var_os("ETL_BENCH_CPU").is_some() {
        eprintln!(
            "{}",
            stderr.lines().rev().take(2).collect::<Vec<_>>().join(" | ")
        );
    }
    let max_rss_kb = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("max-rss-kb: "))
        .and_then(|kb| kb.parse().ok())
        .unwrap_or_else(|| panic!("no max RSS from /usr/bin/time: {stderr}"));
    Timed {
        wall,
        max_rss_kb,
        stdout,
    }
}
