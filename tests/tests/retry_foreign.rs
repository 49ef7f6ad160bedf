//! `#[retry]` on the errors users already have, from a user's crate:
//! `reqwest::Error` and `etl_core::http::HttpError` against a local HTTP
//! server, `std::io::Error` and `anyhow::Error`, async and blocking; every
//! option combined; and a circuit breaker shared by many callers. Time runs
//! on tokio's paused clock.

use etl_core::http::{check, HttpError};
use etl_core::retry::{CircuitBreaker, Retry, Stop};
use etl_core::{retry, EtlError, RetryPolicy};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server answering `first` `times` times on `/r`, then 200 "ok".
async fn server(first: ResponseTemplate, times: u64) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/r"))
        .respond_with(first)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/r"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&server)
        .await;
    server
}

/// A client: the workspace's reqwest has no TLS provider of its own. No
/// idle pool: its 90 s idle timer would be the paused clock's next event
/// while a request waits on the socket, and the clock would jump to it.
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

#[retry(max_attempts = 4, base = "1s")]
async fn get_reqwest(client: &reqwest::Client, url: &str) -> Result<String, reqwest::Error> {
    client
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

#[retry(max_attempts = 4, base = "1s", max_retry_after = "1m")]
async fn get_http(client: &reqwest::Client, url: &str) -> Result<String, HttpError> {
    let response = check(client.get(url).send().await?).await?;
    Ok(response.text().await?)
}

#[tokio::test(start_paused = true)]
async fn reqwest_error_503_twice_then_200() {
    let server = server(ResponseTemplate::new(503), 2).await;
    let url = format!("{}/r", server.uri());
    let start = Instant::now();
    let body = get_reqwest(&client(), &url).await.unwrap();
    assert_eq!(body, "ok");
    assert_eq!(requests(&server).await, 3);
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1 + 2),
        "the backoff's waits"
    );
}

#[tokio::test(start_paused = true)]
async fn reqwest_error_404_fails_at_once() {
    let server = server(ResponseTemplate::new(404), 10).await;
    let url = format!("{}/r", server.uri());
    let err = get_reqwest(&client(), &url).await.unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(404));
    assert_eq!(requests(&server).await, 1);
}

#[tokio::test(start_paused = true)]
async fn http_error_503_twice_then_200() {
    let server = server(ResponseTemplate::new(503), 2).await;
    let url = format!("{}/r", server.uri());
    let start = Instant::now();
    assert_eq!(get_http(&client(), &url).await.unwrap(), "ok");
    assert_eq!(requests(&server).await, 3);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn http_error_429_waits_the_servers_retry_after() {
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "2");
    let server = server(throttled, 1).await;
    let url = format!("{}/r", server.uri());
    let start = Instant::now();
    assert_eq!(get_http(&client(), &url).await.unwrap(), "ok");
    assert_eq!(requests(&server).await, 2);
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "the server's 2 s, not the 1 s backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn http_error_404_fails_at_once_naming_the_status() {
    let server = server(
        ResponseTemplate::new(404).set_body_string("no such page"),
        10,
    )
    .await;
    let url = format!("{}/r", server.uri());
    let err = get_http(&client(), &url).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(err.to_string().contains("no such page"), "{err}");
    assert_eq!(requests(&server).await, 1);
}

#[tokio::test(start_paused = true)]
async fn http_error_retry_after_past_the_ceiling_ends_the_call() {
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "3600");
    let server = server(throttled, 10).await;
    let url = format!("{}/r", server.uri());
    let start = Instant::now();
    let err = get_http(&client(), &url).await.unwrap_err();
    assert_eq!(err.status(), Some(429));
    assert_eq!(requests(&server).await, 1);
    assert_eq!(start.elapsed(), Duration::ZERO, "no hour-long sleep");
}

/// Fails with `kind` until the `n`-th call.
fn flaky_io(calls: &AtomicU32, n: u32, kind: io::ErrorKind) -> io::Result<u32> {
    match calls.fetch_add(1, Ordering::SeqCst) + 1 {
        c if c < n => Err(io::Error::from(kind)),
        c => Ok(c),
    }
}

#[retry(max_attempts = 5, base = "100ms")]
async fn read_async(calls: &AtomicU32, kind: io::ErrorKind) -> io::Result<u32> {
    flaky_io(calls, 3, kind)
}

#[retry(max_attempts = 5, base = "1ms")]
fn read_blocking(calls: &AtomicU32, kind: io::ErrorKind) -> io::Result<u32> {
    flaky_io(calls, 3, kind)
}

#[tokio::test(start_paused = true)]
async fn io_errors_async_and_blocking() {
    let calls = AtomicU32::new(0);
    assert_eq!(
        read_async(&calls, io::ErrorKind::ConnectionReset)
            .await
            .unwrap(),
        3
    );
    let calls = AtomicU32::new(0);
    let err = read_async(&calls, io::ErrorKind::PermissionDenied)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "permanent: one attempt");

    let calls = AtomicU32::new(0);
    assert_eq!(read_blocking(&calls, io::ErrorKind::TimedOut).unwrap(), 3);
    let calls = AtomicU32::new(0);
    assert!(read_blocking(&calls, io::ErrorKind::NotFound).is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[retry(max_attempts = 5, base = "100ms")]
async fn anyhow_async(calls: &AtomicU32, kind: io::ErrorKind) -> anyhow::Result<u32> {
    use anyhow::Context;
    flaky_io(calls, 3, kind).context("reading the page")
}

#[retry(max_attempts = 5, base = "1ms")]
fn anyhow_blocking(calls: &AtomicU32, transient: bool) -> anyhow::Result<u32> {
    use anyhow::Context;
    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 {
        let cause = if transient {
            EtlError::Network("reset".into())
        } else {
            EtlError::Parse("bad".into())
        };
        return Err(cause).context("loading");
    }
    if n == 3 {
        anyhow::bail!("nothing here can classify this one");
    }
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn anyhow_errors_by_their_chain_async_and_blocking() {
    let calls = AtomicU32::new(0);
    assert_eq!(
        anyhow_async(&calls, io::ErrorKind::Interrupted)
            .await
            .unwrap(),
        3
    );
    let calls = AtomicU32::new(0);
    assert!(anyhow_async(&calls, io::ErrorKind::InvalidData)
        .await
        .is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let calls = AtomicU32::new(0);
    let err = anyhow_blocking(&calls, true).unwrap_err();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "two EtlError::Network retried"
    );
    assert!(
        err.to_string().contains("classify"),
        "unclassified: permanent"
    );
    let calls = AtomicU32::new(0);
    assert!(anyhow_blocking(&calls, false).is_err());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "EtlError::Parse is permanent"
    );
}

fn never_retry_parse(e: &EtlError) -> bool {
    !matches!(e, EtlError::Parse(_))
}

struct Pager {
    log: Vec<u32>,
}

impl Pager {
    /// Hangs on its first attempt: the cut hands `self` back.
    #[retry(when = never_retry_parse, attempt_timeout = "2s", max_attempts = 3, base = "1s")]
    async fn next(&mut self, out: &mut Vec<u32>) -> Result<usize, EtlError> {
        self.log.push(self.log.len() as u32);
        if self.log.len() == 1 {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        out.push(7);
        Ok(self.log.len())
    }
}

#[tokio::test(start_paused = true)]
async fn when_with_attempt_timeout_on_a_mut_self_method() {
    let mut pager = Pager { log: Vec::new() };
    let mut out = Vec::new();
    let start = Instant::now();
    assert_eq!(pager.next(&mut out).await.unwrap(), 2);
    assert_eq!(pager.log, [0, 1], "the cut attempt's push stays");
    assert_eq!(out, [7]);
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2 + 1),
        "cut at 2 s, then 1 s backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opens_fails_fast_half_opens_and_closes_for_20_callers() {
    static UPSTREAM: CircuitBreaker =
        CircuitBreaker::new(5, Duration::from_secs(30)).named("upstream");
    static DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

    #[retry(max_attempts = 3, base = "1s", breaker = UPSTREAM)]
    async fn call() -> Result<(), EtlError> {
        ATTEMPTS.fetch_add(1, Ordering::SeqCst);
        tokio::task::yield_now().await;
        if DOWN.load(Ordering::SeqCst) {
            Err(EtlError::Network("down".into()))
        } else {
            Ok(())
        }
    }

    // 20 concurrent callers against a down upstream: five failures open it,
    // and every call ends with CircuitOpen, not after its own 3 attempts.
    let tasks: Vec<_> = (0..20).map(|_| tokio::spawn(call())).collect();
    let mut open = 0;
    for task in tasks {
        if let Err(EtlError::CircuitOpen(e)) = task.await.unwrap() {
            assert_eq!(e.breaker, "upstream");
            open += 1;
        }
    }
    assert!(UPSTREAM.is_open());
    assert!(open >= 15, "{open} of 20 ended on the open breaker");
    let spent = ATTEMPTS.load(Ordering::SeqCst);
    assert!(spent < 20 * 3, "the breaker saved attempts: {spent}");

    // Open: fails fast without running the body.
    let before = ATTEMPTS.load(Ordering::SeqCst);
    let (result, report) = Retry::new(RetryPolicy::default())
        .breaker(&UPSTREAM)
        .run_with_report(|| async {
            ATTEMPTS.fetch_add(1, Ordering::SeqCst);
            Ok::<_, EtlError>(())
        })
        .await;
    assert!(matches!(result, Err(EtlError::CircuitOpen(_))));
    assert_eq!(report.stop, Stop::CircuitOpen);
    assert_eq!(ATTEMPTS.load(Ordering::SeqCst), before, "not attempted");

    // After the cool-down one trial goes through; the upstream is back, so
    // it closes, and everyone gets through again.
    tokio::time::sleep(Duration::from_secs(30)).await;
    DOWN.store(false, Ordering::SeqCst);
    let tasks: Vec<_> = (0..20).map(|_| tokio::spawn(call())).collect();
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    assert!(ok >= 1, "the trial closed it");
    assert!(!UPSTREAM.is_open());
    assert_eq!(call().await.map_err(|e| e.to_string()), Ok(()));
    assert_eq!(UPSTREAM.failures(), 0);
}

#[test]
fn a_breaker_shared_by_threads_stays_consistent() {
    static SHARED: CircuitBreaker = CircuitBreaker::new(1000, Duration::from_secs(3600));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    let _ = Retry::new(RetryPolicy {
                        max_attempts: 1,
                        ..RetryPolicy::default()
                    })
                    .breaker(&SHARED)
                    .run_blocking(|| Err::<(), _>(EtlError::Network("down".into())));
                }
            });
        }
    });
    assert_eq!(SHARED.failures(), 800, "every failure counted once");
    assert!(!SHARED.is_open(), "800 of 1000");
}

#[tokio::test]
async fn a_transport_error_keeps_the_query_secret_out_of_its_message() {
    // Nothing listens on port 1: the connection is refused.
    let err = HttpError::from(
        client()
            .get("http://user:pw@127.0.0.1:1/items?api_key=s3cret")
            .send()
            .await
            .unwrap_err(),
    );
    let shown = format!("{err} {err:?}");
    assert!(shown.contains("127.0.0.1:1/items"), "{shown}");
    for secret in ["s3cret", ":pw@", "user"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(
        etl_core::retry::RetryableError::is_transient(&err),
        "refused is transient"
    );
}
