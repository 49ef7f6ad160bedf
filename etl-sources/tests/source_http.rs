//! `SpaceDevsSource` against a real HTTP server on 127.0.0.1 (wiremock),
//! on tokio's paused clock where delays matter: the waits are virtual, the
//! requests real.

use etl_core::{EtlError, Row};
use etl_sources::{LaunchLibrary, PageRead, Source, SourceOptions, SpaceDevsSource};
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LIST: &str = "/2.2.0/launch/upcoming/";

/// A launch object in 2.2.0's shape.
fn launch_220(id: &str) -> Value {
    json!({
        "id": id, "url": format!("https://ll.example/2.2.0/launch/{id}/"), "name": format!("Electron | Mission {id}"),
        "status": {"id": 1, "name": "Go for Launch", "abbrev": "Go"}, "net": "2026-12-01T10:00:00Z",
        "launch_service_provider": {"id": 147, "name": "Rocket Lab", "type": "Commercial"},
        "pad": {"id": 166, "name": "LC-1A", "latitude": "-39.26085", "longitude": "177.864777",
                "location": {"id": 10, "name": "Mahia", "country_code": "NZL"}},
        "image": "https://img.example/electron.png", "webcast_live": false, "program": []
    })
}

/// The same launch in 2.3.0's shape: agency type and image objects, numeric
/// coordinates, a country object.
fn launch_230(id: &str) -> Value {
    json!({
        "id": id, "name": format!("Electron | Mission {id}"), "response_mode": "normal",
        "status": {"id": 1, "name": "Go for Launch", "abbrev": "Go"}, "net": "2026-12-01T10:00:00Z",
        "launch_service_provider": {"response_mode": "list", "id": 147, "name": "Rocket Lab", "abbrev": "RL",
                                    "type": {"id": 3, "name": "Commercial"}},
        "pad": {"id": 166, "name": "LC-1A", "latitude": -39.26085, "longitude": 177.864777,
                "country": {"id": 7, "alpha_3_code": "NZL"},
                "location": {"id": 10, "name": "Mahia", "country": {"id": 7, "name": "New Zealand", "alpha_3_code": "NZL"}}},
        "image": {"id": 3, "name": "Electron", "image_url": "https://img.example/electron.png", "thumbnail_url": "t"}
    })
}

fn page(ids: &[&str], next: Option<String>) -> Value {
    json!({"count": 99, "next": next, "previous": null, "results": ids.iter().map(|id| launch_220(id)).collect::<Vec<_>>()})
}

fn ids(page: &PageRead) -> Vec<String> {
    page.rows
        .iter()
        .map(|Row::Launches(l)| l.id.clone())
        .collect()
}

fn options() -> SourceOptions {
    // No request timeout on the paused clock: while a request waits on the
    // socket, the idle runtime would jump the clock to it and fire it.
    SourceOptions {
        timeout: None,
        ..Default::default()
    }
}

async fn source(server: &MockServer, options: SourceOptions) -> SpaceDevsSource {
    endpoint(server).source(options).unwrap()
}

/// The list on `server`, to be configured further.
fn endpoint(server: &MockServer) -> LaunchLibrary {
    LaunchLibrary::new(&format!("{}{LIST}", server.uri())).unwrap()
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

#[tokio::test]
async fn pages_follow_next_until_null() {
    let server = MockServer::start().await;
    let next = |offset: u32| Some(format!("{}{LIST}?limit=2&offset={offset}", server.uri()));
    for (offset, ids, next) in [
        (None, &["a", "b"][..], next(2)),
        (Some("2"), &["c", "d"], next(4)),
        (Some("4"), &["e"], None),
    ] {
        let mut mock = Mock::given(method("GET"))
            .and(path(LIST))
            .and(query_param("limit", "2"));
        if let Some(offset) = offset {
            mock = mock.and(query_param("offset", offset));
        }
        let priority = if offset.is_none() { 2 } else { 1 }; // the first page's mock matches any offset
        mock.respond_with(ResponseTemplate::new(200).set_body_json(page(ids, next)))
            .with_priority(priority)
            .expect(1)
            .mount(&server)
            .await;
    }
    let mut source = endpoint(&server).limit(2).source(options()).unwrap();
    let mut all = Vec::new();
    while let Some(page) = source.next_page().await.unwrap() {
        all.extend(ids(&page));
    }
    assert_eq!(all, ["a", "b", "c", "d", "e"]);
    assert_eq!(source.pages_read(), 3);
    assert!(source.next_page().await.unwrap().is_none(), "stays done");
}

#[tokio::test]
async fn api_key_is_sent_as_a_token() {
    let server = MockServer::start().await;
    Mock::given(header("authorization", "Token s3cret"))
        .respond_with(ResponseTemplate::new(200).set_body_json(page(&["a"], None)))
        .expect(1)
        .mount(&server)
        .await;
    let mut source = endpoint(&server)
        .api_key("s3cret")
        .source(options())
        .unwrap();
    assert_eq!(ids(&source.next_page().await.unwrap().unwrap()), ["a"]);
}

/// Answers `first` once, then page `a`; returns the rows, the virtual time
/// it took and the requests made.
async fn after_one(
    first: ResponseTemplate,
) -> (Result<Option<PageRead>, EtlError>, Duration, usize) {
    after_one_with(first, options()).await
}

async fn after_one_with(
    first: ResponseTemplate,
    options: SourceOptions,
) -> (Result<Option<PageRead>, EtlError>, Duration, usize) {
    let server = MockServer::start().await;
    Mock::given(path(LIST))
        .respond_with(first)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(200).set_body_json(page(&["a"], None)))
        .mount(&server)
        .await;
    let mut source = source(&server, options).await;
    let start = Instant::now();
    let result = source.next_page().await;
    (result, start.elapsed(), requests(&server).await)
}

#[tokio::test(start_paused = true)]
async fn rate_limited_with_retry_after_seconds() {
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "30");
    let (rows, waited, requests) = after_one(throttled).await;
    assert_eq!(ids(&rows.unwrap().unwrap()), ["a"]);
    assert_eq!(requests, 2);
    assert!(waited >= Duration::from_secs(30), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn rate_limited_with_retry_after_http_date() {
    let at = SystemTime::now() + Duration::from_secs(120);
    let throttled = ResponseTemplate::new(429)
        .insert_header("retry-after", httpdate::fmt_http_date(at).as_str());
    let (rows, waited, requests) = after_one(throttled).await;
    assert_eq!(ids(&rows.unwrap().unwrap()), ["a"]);
    assert_eq!(requests, 2);
    assert!(waited >= Duration::from_secs(119), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn rate_limited_with_only_the_throttle_body() {
    let body = json!({"detail": "Request was throttled. Expected available in 45 seconds."});
    let (rows, waited, requests) = after_one(ResponseTemplate::new(429).set_body_json(body)).await;
    assert_eq!(ids(&rows.unwrap().unwrap()), ["a"]);
    assert_eq!(requests, 2);
    assert!(waited >= Duration::from_secs(45), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn unavailable_then_success() {
    let html = ResponseTemplate::new(503)
        .set_body_raw("<html><h1>503 Service Unavailable</h1></html>", "text/html");
    let (rows, waited, requests) = after_one(html).await;
    assert_eq!(ids(&rows.unwrap().unwrap()), ["a"]);
    assert_eq!(requests, 2);
    assert!(
        waited >= Duration::from_secs(1),
        "the 1 s base backoff: {waited:?}"
    );
}

/// A 503's Retry-After is the server's wait, as etl_core::http reads it
/// (and as the REST source waits it: etl_run.rs).
#[tokio::test(start_paused = true)]
async fn unavailable_with_retry_after_waits_as_asked() {
    let down = ResponseTemplate::new(503).insert_header("retry-after", "40");
    let (rows, waited, requests) = after_one(down).await;
    assert_eq!(ids(&rows.unwrap().unwrap()), ["a"]);
    assert_eq!(requests, 2);
    assert!(waited >= Duration::from_secs(40), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn persistent_5xx_gives_up_after_five_attempts() {
    let server = MockServer::start().await;
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(502))
        .expect(5)
        .mount(&server)
        .await;
    let mut source = source(&server, options()).await;
    let start = Instant::now();
    let e = source.next_page().await.unwrap_err();
    assert!(matches!(e, EtlError::Http { status: 502, .. }), "{e}");
    assert!(start.elapsed() >= Duration::from_secs(1 + 2 + 4 + 8));
}

#[tokio::test(start_paused = true)]
async fn not_found_fails_at_once() {
    let (result, _, requests) =
        after_one(ResponseTemplate::new(404).set_body_json(json!({"detail": "Not found."}))).await;
    let e = result.unwrap_err();
    assert!(matches!(e, EtlError::Http { status: 404, .. }), "{e}");
    assert!(e.to_string().contains("Not found."), "{e}");
    assert_eq!(requests, 1, "a 404 is not retried");
}

#[tokio::test(start_paused = true)]
async fn malformed_and_junk_bodies_fail_at_once() {
    let bodies = [
        ("{}", "application/json"),
        ("<html><body>Oops</body></html>", "text/html"),
        (
            r#"{"count": 1, "next": null, "results": [{"id": "a", "name""#,
            "application/json",
        ),
        (r#"{"count": 1, "next": null}"#, "application/json"),
    ];
    for (body, mime) in bodies {
        let (result, _, requests) =
            after_one(ResponseTemplate::new(200).set_body_raw(body, mime)).await;
        let e = result.unwrap_err();
        assert!(matches!(e, EtlError::Parse(_)), "{body}: {e}");
        assert_eq!(requests, 1, "{body}: a parse error is not retried");
    }
}

/// A server on another origin that fails the test if anything reaches it.
async fn must_not_be_asked() -> MockServer {
    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&elsewhere)
        .await;
    elsewhere
}

#[tokio::test]
async fn cross_origin_next_is_refused_before_any_request() {
    let server = MockServer::start().await;
    let elsewhere = must_not_be_asked().await;
    let next = format!("{}{LIST}?offset=1", elsewhere.uri());
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(200).set_body_json(page(&["a"], Some(next.clone()))))
        .mount(&server)
        .await;

    let mut source = endpoint(&server).api_key("k").source(options()).unwrap();
    assert_eq!(
        ids(&source.next_page().await.unwrap().unwrap()),
        ["a"],
        "the page before is read"
    );
    let e = source.next_page().await.unwrap_err();
    assert!(
        matches!(e, EtlError::Refused(ref m) if m.contains(&next)),
        "{e}"
    );
    assert_eq!(requests(&elsewhere).await, 0);
}

#[tokio::test]
async fn cross_origin_redirect_is_refused() {
    let server = MockServer::start().await;
    let elsewhere = must_not_be_asked().await;
    let target = format!("{}{LIST}", elsewhere.uri());
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(302).insert_header("location", target.as_str()))
        .mount(&server)
        .await;

    let mut source = endpoint(&server).api_key("k").source(options()).unwrap();
    let e = source.next_page().await.unwrap_err();
    assert!(
        matches!(e, EtlError::Refused(ref m) if m.contains(&target)),
        "{e}"
    );
    assert_eq!(requests(&server).await, 1, "refused, so not retried");
}

#[tokio::test]
async fn same_origin_redirect_is_followed() {
    let server = MockServer::start().await;
    Mock::given(path("/old/"))
        .respond_with(ResponseTemplate::new(301).insert_header("location", LIST))
        .mount(&server)
        .await;
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(200).set_body_json(page(&["a"], None)))
        .mount(&server)
        .await;
    let mut source = LaunchLibrary::new(&format!("{}/old/", server.uri()))
        .unwrap()
        .source(options())
        .unwrap();
    assert_eq!(ids(&source.next_page().await.unwrap().unwrap()), ["a"]);
}

#[tokio::test]
async fn reads_2_2_0_and_2_3_0_pages_alike() {
    let server = MockServer::start().await;
    let v220 = json!({"count": 1, "next": null, "results": [launch_220("x")]});
    let v230 = json!({"count": 1, "next": null, "previous": null, "results": [launch_230("x")]});
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(200).set_body_json(v220))
        .mount(&server)
        .await;
    Mock::given(path("/2.3.0/launches/upcoming/"))
        .respond_with(ResponseTemplate::new(200).set_body_json(v230))
        .mount(&server)
        .await;

    let old = source(&server, options())
        .await
        .next_page()
        .await
        .unwrap()
        .unwrap();
    let mut new_source = LaunchLibrary::new(&format!("{}/2.3.0/launches/upcoming/", server.uri()))
        .unwrap()
        .source(options())
        .unwrap();
    let new = new_source.next_page().await.unwrap().unwrap();
    assert_eq!(
        old.rows, new.rows,
        "the same launch in either shape is the same row"
    );
    assert!(old.rejects.is_empty() && new.rejects.is_empty());
    assert_eq!(
        old.rows[0].content_key().unwrap(),
        new.rows[0].content_key().unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn unreadable_entries_are_rejected_and_the_page_is_read_once() {
    // Each entry exactly as the server sends it (odd spacing kept).
    let body = format!(
        r#"{{"count": 6, "next": null, "results": [{a}, 42, {{"name": "no id"}},
            {{"id": "p", "name": "bad pad", "pad": {{"latitude": {{"deg": 1}}}}}},
            {{"id": "t", "name": "bad type",  "launch_service_provider": {{"type": 3}}}}, {b}]}}"#,
        a = launch_230("a"),
        b = launch_220("b")
    );
    let (result, _, requests) =
        after_one(ResponseTemplate::new(200).set_body_raw(body, "application/json")).await;
    let page = result.unwrap().unwrap();
    assert_eq!(ids(&page), ["a", "b"], "the readable entries load");
    assert_eq!(requests, 1, "a rejected entry does not retry the page");
    let got: Vec<(&str, &str)> = page
        .rejects
        .iter()
        .map(|r| (r.raw.get(), r.error.as_str()))
        .collect();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[0].0, "42");
    assert!(got[0].1.contains("expected struct Launch"), "{}", got[0].1);
    assert_eq!(got[1].0, r#"{"name":"no id"}"#, "kept in canonical form");
    assert!(got[1].1.contains("missing field `id`"), "{}", got[1].1);
    assert_eq!(
        got[2].0,
        r#"{"id":"p","name":"bad pad","pad":{"latitude":{"deg":1}}}"#
    );
    assert!(got[2].1.starts_with("pad.latitude: "), "{}", got[2].1);
    assert!(
        got[3].1.starts_with("launch_service_provider.type: "),
        "{}",
        got[3].1
    );
    for r in &page.rejects {
        assert_eq!(r.source, page.url.as_str());
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_above_the_ceiling_ends_the_page_at_once_naming_the_wait() {
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "2429");
    let ceiling = SourceOptions {
        max_retry_after: Some(Duration::from_secs(600)),
        ..options()
    };
    let (result, waited, requests) = after_one_with(throttled, ceiling).await;
    let e = result.unwrap_err();
    assert!(
        matches!(
            e,
            EtlError::RetryAfterTooLong {
                retry_after_secs: 2429,
                ceiling_secs: 600
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("2429 s"), "{e}");
    assert!(!e.is_transient());
    assert_eq!(requests, 1);
    assert!(waited < Duration::from_secs(1), "no wait: {waited:?}");

    // At or under the ceiling, the wait is honoured.
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "600");
    let ceiling = SourceOptions {
        max_retry_after: Some(Duration::from_secs(600)),
        ..options()
    };
    let (result, waited, _) = after_one_with(throttled, ceiling).await;
    assert_eq!(ids(&result.unwrap().unwrap()), ["a"]);
    assert!(waited >= Duration::from_secs(600));
}

/// The log lines written while `f` runs.
async fn logged<T>(f: impl std::future::Future<Output = T>) -> (T, String) {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let out = f.await;
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (out, text)
}

#[tokio::test(start_paused = true)]
async fn the_server_asked_waits_add_up_and_pages_total_follows_count() {
    let server = MockServer::start().await;
    for wait in ["30", "12"] {
        Mock::given(path(LIST))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", wait))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
    }
    Mock::given(path(LIST))
        .respond_with(ResponseTemplate::new(200).set_body_json(page(
            &["a", "b"],
            Some(format!("{}{LIST}?offset=2", server.uri())),
        )))
        .mount(&server)
        .await;
    let mut source = source(&server, options()).await;
    assert_eq!(
        (source.throttled(), source.pages_total()),
        (Duration::ZERO, None)
    );
    source.next_page().await.unwrap().unwrap();
    assert_eq!(source.throttled(), Duration::from_secs(42));
    // count 99, 2 a page (the first page's length, with no --limit).
    assert_eq!(source.pages_total(), Some(50));
}

#[tokio::test(start_paused = true)]
async fn a_long_wait_is_announced_with_its_end() {
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "2429");
    let ((result, _, _), log) = logged(after_one(throttled)).await;
    assert_eq!(ids(&result.unwrap().unwrap()), ["a"]);
    let line = log
        .lines()
        .find(|l| l.contains("rate limited: waiting 2429 s, until "))
        .unwrap_or_else(|| panic!("no announcement in:\n{log}"));
    assert!(line.contains(" UTC (server's Retry-After)"), "{line}");

    // A short wait is not announced on its own line.
    let throttled = ResponseTemplate::new(429).insert_header("retry-after", "2");
    let (_, log) = logged(after_one(throttled)).await;
    assert!(!log.contains("rate limited: waiting"), "{log}");
}

#[tokio::test(start_paused = true)]
async fn request_timeout_is_transient_and_retried() {
    let server = MockServer::start().await;
    let slow = ResponseTemplate::new(200)
        .set_body_json(page(&["a"], None))
        .set_delay(Duration::from_secs(3600));
    Mock::given(path(LIST))
        .respond_with(slow)
        .mount(&server)
        .await;
    // On the paused clock the 2 s timeout fires as soon as the runtime idles.
    let mut source = source(
        &server,
        SourceOptions {
            timeout: Some(Duration::from_secs(2)),
            ..Default::default()
        },
    )
    .await;
    let e = source.next_page().await.unwrap_err();
    assert!(matches!(e, EtlError::Network(_)) && e.is_transient(), "{e}");
    assert!(
        e.to_string().contains("timed out") || e.to_string().contains("timeout"),
        "{e}"
    );
}

#[tokio::test]
async fn an_incremental_read_that_cannot_move_its_cursor_stops_with_an_error() {
    let server = MockServer::start().await;
    let next = format!("{}{LIST}?offset=5", server.uri());
    Mock::given(path(LIST))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"count": 5, "next": next, "previous": null, "results": []})),
        )
        .mount(&server)
        .await;
    let mut source = source(&server, options()).await;
    source.read_since(Some("2026-11-01T00:00:00Z")).unwrap();
    let page = source.next_page().await.unwrap().unwrap();
    assert!(page.rows.is_empty());
    let e = source.next_page().await.unwrap_err();
    assert!(
        matches!(e, EtlError::Parse(ref m) if m.contains("cannot move its cursor") && m.contains(LIST)),
        "{e}"
    );
    assert_eq!(
        requests(&server).await,
        1,
        "the same page is not asked for again"
    );
    assert!(source.next_page().await.unwrap().is_none());
}
