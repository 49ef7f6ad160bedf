//! `launches --metrics-file`: whole runs through `etl_sources::cli::run` on
//! tokio's paused clock (the offline run's 429 and 503 waits, and a dead
//! port's backoff, pass in no real time), with the Prometheus recorder
//! installed for the test's thread; the file is then read back as a
//! collector would.

use clap::Parser;
use etl_sources::cli::{self, Args};
use metrics_exporter_prometheus::PrometheusBuilder;
use std::collections::HashMap;
use std::path::Path;

/// Runs `launches` with these arguments (and `--timeout-secs 0`: a request
/// timeout would fire at once on a paused clock) and returns its exit code.
fn launches(args: &[&str]) -> u8 {
    let mut argv = vec!["launches", "--timeout-secs", "0"];
    argv.extend_from_slice(args);
    let args = Args::parse_from(argv);
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _guard = metrics::set_default_local_recorder(&recorder);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(cli::run(&args, Some(&handle)))
}

/// The samples of a Prometheus text file: `name{labels}` -> value.
fn samples(path: &Path) -> HashMap<String, f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            (series.to_string(), value.parse().unwrap())
        })
        .collect()
}

#[test]
fn the_offline_run_writes_its_metrics_and_a_second_run_sees_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let (out, prom) = (dir.path().join("launches.jsonl"), dir.path().join("m.prom"));
    let args = [
        "--out",
        out.to_str().unwrap(),
        "--metrics-file",
        prom.to_str().unwrap(),
    ];

    assert_eq!(launches(&args), 0);
    let m = samples(&prom);
    assert_eq!(m[r#"etl_sink_rows_total{outcome="new"}"#], 12.0);
    assert_eq!(m["etl_pages_total"], 3.0);
    assert_eq!(m[r#"etl_http_requests_total{status="200"}"#], 3.0);
    assert_eq!(m[r#"etl_http_requests_total{status="429"}"#], 1.0);
    assert_eq!(m[r#"etl_http_requests_total{status="503"}"#], 1.0);
    let retries = |reason: &str| {
        m.get(&format!(
            r#"etl_retries_total{{op="fetch_page",reason="{reason}"}}"#
        ))
        .copied()
        .unwrap_or(0.0)
    };
    assert_eq!(
        retries("rate_limited"),
        1.0,
        "the 429's Retry-After chose its wait"
    );
    assert_eq!(
        retries("transient"),
        1.0,
        "the 503's wait was the backoff's"
    );
    assert_eq!(m[r#"etl_retry_attempts_total{op="fetch_page"}"#], 5.0);
    // A histogram (a summary in this exporter's text): the time slept and
    // the waits.
    assert_eq!(m[r#"etl_retry_sleep_seconds_sum{op="fetch_page"}"#], 2.0);
    assert_eq!(m[r#"etl_retry_sleep_seconds_count{op="fetch_page"}"#], 2.0);
    assert_eq!(
        m[r#"etl_retry_calls_total{op="fetch_page",stop="succeeded"}"#],
        3.0
    );
    assert_eq!(m["etl_run_success"], 1.0);
    assert!(m["etl_run_timestamp_seconds"] > 1.7e9, "Unix time: {m:?}");
    assert!(m["etl_run_duration_seconds"] >= 0.0);

    // The next run replaces the file: every row seen, none new.
    assert_eq!(launches(&args), 0);
    let m = samples(&prom);
    assert_eq!(m[r#"etl_sink_rows_total{outcome="new"}"#], 0.0);
    assert_eq!(m[r#"etl_sink_rows_total{outcome="seen"}"#], 12.0);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "no temporary file left behind: {names:?}"
    );
}

#[test]
fn a_run_against_a_dead_port_exits_1_and_says_so_in_its_metrics() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/2.3.0/launches/upcoming/");
    let dir = tempfile::tempdir().unwrap();
    let (out, prom) = (dir.path().join("launches.jsonl"), dir.path().join("m.prom"));
    std::fs::write(&prom, "etl_run_success 1\n").unwrap();

    let code = launches(&[
        "--base-url",
        &url,
        "--out",
        out.to_str().unwrap(),
        "--metrics-file",
        prom.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let m = samples(&prom);
    assert_eq!(
        m["etl_run_success"], 0.0,
        "the last run's file replaced the old one"
    );
    assert_eq!(
        m[r#"etl_retry_calls_total{op="fetch_page",stop="exhausted"}"#],
        1.0
    );
    assert_eq!(
        m[r#"etl_http_requests_total{status="error"}"#], 5.0,
        "five attempts, no response"
    );
    assert_eq!(m[r#"etl_retry_attempts_total{op="fetch_page"}"#], 5.0);
    assert_eq!(
        m[r#"etl_retries_total{op="fetch_page",reason="transient"}"#],
        4.0
    );
    // 1 + 2 + 4 + 8 s of backoff, on the paused clock.
    assert_eq!(m[r#"etl_retry_sleep_seconds_sum{op="fetch_page"}"#], 15.0);
    assert!(!m.contains_key("etl_pages_total") || m["etl_pages_total"] == 0.0);
}

/// Prometheus's own linter accepts the offline run's metrics file, with a
/// circuit breaker's metrics in it too (`etl_circuit_open`,
/// `stop="circuit_open"`). Opt-in: `ETL_PROMTOOL` names the promtool binary
/// (Debian package `prometheus`); `.ci/run` installs it and sets it.
#[test]
fn promtool_accepts_the_metrics_file_breaker_included() {
    let Ok(promtool) = std::env::var("ETL_PROMTOOL") else {
        eprintln!("ETL_PROMTOOL unset: promtool check skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, prom) = (dir.path().join("launches.jsonl"), dir.path().join("m.prom"));
    let args = Args::parse_from([
        "launches",
        "--timeout-secs",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--metrics-file",
        prom.to_str().unwrap(),
    ]);
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _guard = metrics::set_default_local_recorder(&recorder);
    // As `launches` does at start: the help texts the linter asks for.
    etl_sources::metrics::describe();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    assert_eq!(runtime.block_on(cli::run(&args, Some(&handle))), 0);
    // A breaker that opens, under the same recorder.
    static TRIPS: etl_core::retry::CircuitBreaker =
        etl_core::retry::CircuitBreaker::new(1, std::time::Duration::from_secs(60))
            .named("upstream");
    let (_, report) = runtime.block_on(
        etl_core::retry::Retry::new(etl_core::RetryPolicy::default())
            .name("fetch_other")
            .breaker(&TRIPS)
            .run_with_report(|| async { Err::<(), _>(etl_core::EtlError::Network("down".into())) }),
    );
    assert_eq!(report.stop, etl_core::retry::Stop::CircuitOpen);
    let rendered = handle.render();
    assert!(
        rendered.contains(r#"etl_circuit_open{breaker="upstream"} 1"#),
        "{rendered}"
    );
    let check = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&prom).unwrap())
        .output()
        .expect("promtool runs");
    assert!(
        check.status.success(),
        "promtool rejects the run's file: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let render = dir.path().join("render.prom");
    std::fs::write(&render, rendered).unwrap();
    let check = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&render).unwrap())
        .output()
        .expect("promtool runs");
    assert!(
        check.status.success(),
        "promtool rejects the breaker's metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}
