//! What a `launches` run counts beyond etl-core's own metrics
//! ([`etl_core::metrics`]), and the Prometheus file it leaves behind
//! (`launches --metrics-file`).
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `etl_http_requests_total` | counter | `status` | every response by its status code (`"200"`, `"429"`, `"503"`, ...), or `"error"` when none came (connection refused or reset, a timeout) |
//! | `etl_rate_limit_wait_seconds` | histogram | | each time a request was held back, in seconds: by `rate_limit`, a server's Retry-After or an API's spent quota |
//! | `etl_pages_total` | counter | | pages loaded |
//! | `etl_run_success` | gauge | | 1 when the run ended with exit 0 or 3, 0 with exit 1 |
//! | `etl_run_timestamp_seconds` | gauge | | Unix time at the end of the run |
//! | `etl_run_duration_seconds` | gauge | | how long the run took |

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Responses, by status code.
pub const HTTP_REQUESTS: &str = "etl_http_requests_total";
/// Each time a request was held back.
pub const RATE_LIMIT_WAIT: &str = "etl_rate_limit_wait_seconds";
/// Its buckets, in seconds: from a rate limit's spacing (tens of ms) to an
/// hour's quota reset.
pub const RATE_LIMIT_WAIT_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];
/// Pages loaded.
pub const PAGES: &str = "etl_pages_total";
/// 1 for a run that completed (exit 0 or 3), 0 for one that failed.
pub const RUN_SUCCESS: &str = "etl_run_success";
/// Unix time at the end of the run.
pub const RUN_TIMESTAMP: &str = "etl_run_timestamp_seconds";
/// How long the run took.
pub const RUN_DURATION: &str = "etl_run_duration_seconds";

/// Registers the help text of these metrics and etl-core's with the
/// installed recorder.
pub fn describe() {
    etl_core::metrics::describe();
    metrics::describe_counter!(
        HTTP_REQUESTS,
        "HTTP responses by status code; \"error\" when no response came."
    );
    metrics::describe_counter!(PAGES, "Pages loaded.");
    metrics::describe_histogram!(
        RATE_LIMIT_WAIT,
        metrics::Unit::Seconds,
        "Each time a request was held back: by rate_limit, a server's Retry-After or an API's spent quota."
    );
    metrics::describe_gauge!(
        RUN_SUCCESS,
        "1 when the last run completed (exit 0 or 3), else 0."
    );
    metrics::describe_gauge!(
        RUN_TIMESTAMP,
        metrics::Unit::Seconds,
        "Unix time at the end of the last run."
    );
    metrics::describe_gauge!(
        RUN_DURATION,
        metrics::Unit::Seconds,
        "How long the last run took."
    );
}

/// One HTTP exchange: the response's status, or `None` when no response
/// came.
pub fn http_response(status: Option<u16>) {
    match status {
        Some(code) => metrics::counter!(HTTP_REQUESTS, "status" => code.to_string()).increment(1),
        None => metrics::counter!(HTTP_REQUESTS, "status" => "error").increment(1),
    }
}

/// A request held back for `wait`.
pub fn rate_limit_wait(wait: Duration) {
    metrics::histogram!(RATE_LIMIT_WAIT).record(wait.as_secs_f64());
}

/// A page loaded.
pub fn page_loaded() {
    metrics::counter!(PAGES).increment(1);
}

/// The end of a run: whether it completed, when, and after how long.
pub fn run_finished(completed: bool, took: Duration) {
    metrics::gauge!(RUN_SUCCESS).set(if completed { 1.0 } else { 0.0 });
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    metrics::gauge!(RUN_TIMESTAMP).set(now.as_secs_f64());
    metrics::gauge!(RUN_DURATION).set(took.as_secs_f64());
}

/// Checks, before a run, that [`write_atomically`] can write `path`: its
/// temporary file is created in the same directory and removed again, and
/// `path` must not be a directory. A run whose monitoring would break at
/// the end fails before it starts instead.
pub fn check_writable(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "it is a directory",
        ));
    }
    let tmp = temporary(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    std::fs::remove_file(&tmp)
}

/// The temporary file [`write_atomically`] writes before the rename.
fn temporary(path: &Path) -> io::Result<std::path::PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    Ok(path.with_file_name(tmp_name))
}

/// Writes `contents` to `path` so that a reader sees the old file or the
/// new one, never half of one: into a temporary file in the same directory
/// (named `.<name>.<pid>.tmp`: the textfile collector reads only `*.prom`),
/// then renamed over `path`. The temporary file is removed if anything
/// fails.
pub fn write_atomically(path: &Path, contents: &str) -> io::Result<()> {
    let tmp = temporary(path)?;
    let written = std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("launches.prom");
        std::fs::write(&path, "old 1\n").unwrap();
        // A reader that opened the old file before the write.
        let mut reader = std::fs::File::open(&path).unwrap();

        write_atomically(&path, "new 2\n").unwrap();

        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new 2\n");
        // Renamed over, not rewritten in place: the open reader still sees
        // the old file whole.
        let mut old = String::new();
        reader.read_to_string(&mut old).unwrap();
        assert_eq!(old, "old 1\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["launches.prom"], "no temporary file left behind");
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A directory, not empty, where the file should go: the rename
        // over it fails.
        let path = dir.path().join("taken");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), "").unwrap();
        assert!(write_atomically(&path, "new\n").is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["taken"]);
    }
}
