//! The wire, mapped to [`EtlError`] on purpose: the HTTP client, which
//! answers are worth another attempt, and which carry the server's delay.
//! What a page holds is its source's to read ([`crate::rest`]).

use etl_core::http::without_secrets;
use etl_core::retry::{RetryEvent, RetryableError};
use etl_core::EtlError;
use reqwest::header::HeaderMap;
use reqwest::redirect;
use std::time::{Duration, SystemTime};
use url::{Origin, Url};

use crate::throttle::Throttle;

/// The HTTP client of a source: `headers` on every request, `timeout` on
/// each (`None`: none), and redirects followed only on `origin` (scheme,
/// host and port; at most 5), so a credential never travels elsewhere.
pub(crate) fn client(
    origin: &Origin,
    headers: HeaderMap,
    timeout: Option<Duration>,
) -> Result<reqwest::Client, EtlError> {
    // reqwest is built without a default TLS provider (see Cargo.toml):
    // install ring, unless the host application installed one already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redirect_origin = origin.clone();
    let mut client = reqwest::Client::builder()
        .user_agent(concat!("etl-sources/", env!("CARGO_PKG_VERSION")))
        .default_headers(headers)
        .redirect(redirect::Policy::custom(move |attempt| {
            if attempt.url().origin() != redirect_origin {
                // Origin and path only: a query may carry a secret.
                let to = format!(
                    "{}{}",
                    attempt.url().origin().ascii_serialization(),
                    attempt.url().path()
                );
                attempt.error(format!("redirect to {to} leaves the base URL's origin"))
            } else if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        }));
    if let Some(timeout) = timeout {
        client = client.timeout(timeout);
    }
    client
        .build()
        .map_err(|e| EtlError::InvalidInput(format!("HTTP client: {e}")))
}

/// The error for a non-2xx answer, classified as [`etl_core::http`]
/// classifies it. The status decides first (5xx, 408 and 429 are transient
/// whatever the body says); a 429 or a 503 carries the server's delay when
/// one is known ([`etl_core::http::asked_wait`]: `Retry-After`, seconds or
/// an HTTP-date rounded up), a 429 else the throttle body's "Expected
/// available in N seconds". The URL is named without its query.
pub(crate) fn status_error(
    url: &Url,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> EtlError {
    let asked = etl_core::http::asked_wait(status, headers, now).map(|wait| wait.as_secs());
    let hinted = || (status == 429).then(|| throttle_hint(body)).flatten();
    if let Some(retry_after_secs) = asked.or_else(hinted) {
        return EtlError::RateLimited { retry_after_secs };
    }
    EtlError::Http {
        status,
        message: format!("{}: {}", without_secrets(url), excerpt(body)),
    }
}

/// A `RateLimited` error whose wait is longer than `ceiling` becomes the
/// permanent [`EtlError::RetryAfterTooLong`], naming both; every other error
/// is returned as it is.
pub(crate) fn cap_retry_after(error: EtlError, ceiling: Option<std::time::Duration>) -> EtlError {
    match (&error, ceiling) {
        (EtlError::RateLimited { retry_after_secs }, Some(ceiling))
            if std::time::Duration::from_secs(*retry_after_secs) > ceiling =>
        {
            EtlError::RetryAfterTooLong {
                retry_after_secs: *retry_after_secs,
                ceiling_secs: ceiling.as_secs(),
            }
        }
        _ => error,
    }
}

/// One page request, sent once `throttle` lets it ([`Throttle`]: the
/// run's rate limit, its origin's hold) and its status checked: the
/// headers and body of a 2xx; else the status's error ([`status_error`]; a
/// 429's wait capped by `max_retry_after`, [`cap_retry_after`], and counted
/// as held back), or a transport error. A wait any response asks for holds
/// every request to its origin. Every exchange is counted in the metrics.
/// `url` names the request in errors and must hold no secret; the
/// transport error's own URL (which may) is left out.
pub(crate) async fn get(
    request: reqwest::RequestBuilder,
    url: &Url,
    max_retry_after: Option<Duration>,
    throttle: &Throttle,
) -> Result<(HeaderMap, bytes::Bytes), EtlError> {
    let origin = url.origin();
    // In flight until its body is read (or this fails).
    let _in_flight = throttle.admit(&origin, max_retry_after).await?;
    let mut response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            crate::metrics::http_response(None);
            return Err(transport_error(url, &e.without_url()));
        }
    };
    let status = response.status();
    crate::metrics::http_response(Some(status.as_u16()));
    // An API's spent quota, on any answer (a 200 that spent the last
    // request included), holds back the next request to its origin: held
    // here for a success, with the error's own wait below for the rest.
    let now = SystemTime::now();
    let quota = etl_core::http::quota_wait(response.headers(), now);
    if let (true, Some(wait)) = (status.is_success(), quota) {
        throttle.hold(&origin, wait);
    }
    // Taken, not cloned: reading the body needs none of them.
    let headers = std::mem::take(response.headers_mut());
    let body = response
        .bytes()
        .await
        .map_err(|e| transport_error(url, &e.without_url()))?;
    if !status.is_success() {
        let error = status_error(url, status.as_u16(), &headers, &body, now);
        // What the server asked of this request (a 403's or 429's spent
        // quota among it), else a spent quota, holds back all of them
        // (beyond the ceiling too, until the run stops): one hold.
        if let Some(wait) = error.retry_after().or(quota) {
            throttle.hold(&origin, wait);
        }
        let error = cap_retry_after(error, max_retry_after);
        // What the server asked for (the wait that follows, unless this
        // was the last attempt), for progress displays.
        if let Some(wait) = error.retry_after() {
            throttle.held(wait);
        }
        return Err(error);
    }
    Ok((headers, body))
}

/// Sets `set` in `url`'s query: every parameter of those names (and of
/// the names in `drop`) goes, the rest keep their order, and `set` follows.
/// An empty query is removed (`?` and all). With nothing to set and none
/// of `drop` there, `url` is left exactly as it is (a server's own
/// encoding kept).
pub(crate) fn set_query(url: &mut Url, drop: &[&str], set: &[(&str, &str)]) {
    if set.is_empty() && !url.query_pairs().any(|(k, _)| drop.contains(&&*k)) {
        return;
    }
    let gone = |k: &str| drop.contains(&k) || set.iter().any(|(name, _)| *name == k);
    let kept: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(k, _)| !gone(k))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if kept.is_empty() && set.is_empty() {
        url.set_query(None);
        return;
    }
    url.query_pairs_mut()
        .clear()
        .extend_pairs(kept)
        .extend_pairs(set.iter().copied());
}

/// Waits longer than this are announced on their own line.
const ANNOUNCE_WAITS_OVER: Duration = Duration::from_secs(5);

/// Announces a wait longer than a few seconds with its length and the
/// wall-clock time it ends: "rate limited: waiting 2429 s, until 14:05:12
/// UTC (server's Retry-After)". A run that seems to hang says why. The
/// `on_retry` hook of the sources' page fetches.
pub(crate) fn announce_wait(event: &RetryEvent<'_>) {
    if event.delay <= ANNOUNCE_WAITS_OVER {
        return;
    }
    let until = utc_clock(SystemTime::now() + event.delay);
    let secs = event.delay.as_secs() + u64::from(event.delay.subsec_nanos() > 0);
    if event.server_delay {
        tracing::warn!("rate limited: waiting {secs} s, until {until} UTC (server's Retry-After)");
    } else {
        tracing::warn!(
            "waiting {secs} s, until {until} UTC (backoff after: {})",
            event.error
        );
    }
}

/// `at` as `HH:MM:SS` in UTC, for a log line that says when a wait ends.
pub(crate) fn utc_clock(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

/// Django REST framework's throttle body: `{"detail": "Request was
/// throttled. Expected available in 2429 seconds."}`.
pub(crate) fn throttle_hint(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find("Expected available in ")? + "Expected available in ".len()..];
    let digits: &str = &rest[..rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())];
    if digits.is_empty() {
        return None;
    }
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// A transport failure, classified as `RetryableError for reqwest::Error`
/// classifies it (etl-core's one reading): a connect, timeout, request or
/// body failure is transient ([`EtlError::Network`]); a refused redirect is
/// [`EtlError::Refused`], a body that does not decode [`EtlError::Parse`],
/// a request that cannot be built [`EtlError::InvalidInput`]. The URL is
/// named without its query.
pub(crate) fn transport_error(url: &Url, e: &reqwest::Error) -> EtlError {
    let mut message = format!("{}: {e}", without_secrets(url));
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if e.is_redirect() {
        EtlError::Refused(message)
    } else if RetryableError::is_transient(e) {
        EtlError::Network(message)
    } else if e.is_decode() {
        EtlError::Parse(message)
    } else {
        EtlError::InvalidInput(message)
    }
}

/// The start of a body, on one line, for an error message.
fn excerpt(body: &[u8]) -> String {
    etl_core::http::excerpt(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_query_drops_and_sets_and_removes_an_empty_query() {
        let mut url = url::Url::parse("http://x/p?limit=5&mode=list&key=s").unwrap();
        set_query(&mut url, &["key"], &[("limit", "20")]);
        assert_eq!(url.as_str(), "http://x/p?mode=list&limit=20");
        set_query(&mut url, &["mode", "limit"], &[]);
        assert_eq!(url.as_str(), "http://x/p");
    }
    use reqwest::header::HeaderValue;

    fn url() -> Url {
        Url::parse("https://ll.example/2.2.0/launch/upcoming/").unwrap()
    }

    use reqwest::header::RETRY_AFTER;

    /// How much of a body an error message quotes (etl_core::http::excerpt).
    const EXCERPT_CHARS: usize = 160;

    fn headers(retry_after: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(retry_after).unwrap());
        h
    }

    #[test]
    fn throttle_body_hint() {
        let body = br#"{"detail":"Request was throttled. Expected available in 2429 seconds."}"#;
        assert_eq!(throttle_hint(body), Some(2429));
        assert_eq!(
            throttle_hint(br#"{"detail":"Request was throttled."}"#),
            None
        );
        assert_eq!(throttle_hint(b"Expected available in  seconds"), None);
    }

    #[test]
    fn status_decides_first() {
        let now = SystemTime::now();
        let html = b"<html><body><h1>502 Bad Gateway</h1></body></html>";
        let e = status_error(&url(), 502, &HeaderMap::new(), html, now);
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("502 Bad Gateway"), "{e}");
        assert!(status_error(&url(), 408, &HeaderMap::new(), b"", now).is_transient());
        let e = status_error(
            &url(),
            404,
            &HeaderMap::new(),
            br#"{"detail":"Not found."}"#,
            now,
        );
        assert!(!e.is_transient());
        assert!(
            e.to_string().contains("404") && e.to_string().contains("Not found."),
            "{e}"
        );
    }

    #[test]
    fn rate_limits_carry_the_known_delay() {
        let now = SystemTime::now();
        let body = br#"{"detail":"Request was throttled. Expected available in 60 seconds."}"#;
        let e = status_error(&url(), 429, &headers("5"), body, now);
        assert!(
            matches!(
                e,
                EtlError::RateLimited {
                    retry_after_secs: 5
                }
            ),
            "header first: {e}"
        );
        let e = status_error(&url(), 429, &HeaderMap::new(), body, now);
        assert!(
            matches!(
                e,
                EtlError::RateLimited {
                    retry_after_secs: 60
                }
            ),
            "body next: {e}"
        );
        let e = status_error(&url(), 429, &HeaderMap::new(), b"", now);
        assert!(matches!(e, EtlError::Http { status: 429, .. }), "{e}");
        assert!(
            e.is_transient() && e.retry_after().is_none(),
            "no hint: the backoff decides"
        );
    }

    #[test]
    fn a_503_waits_its_retry_after_and_no_error_shows_the_query() {
        let now = SystemTime::now();
        let e = status_error(&url(), 503, &headers("7"), b"down", now);
        assert!(
            matches!(
                e,
                EtlError::RateLimited {
                    retry_after_secs: 7
                }
            ),
            "as etl_core::http reads a 503: {e}"
        );
        let e = status_error(&url(), 500, &headers("7"), b"oops", now);
        assert!(e.is_transient() && e.retry_after().is_none(), "{e}");
        let secret = Url::parse("https://ll.example/2.2.0/launch/?key=s3cret&offset=10").unwrap();
        let e = status_error(&secret, 404, &HeaderMap::new(), b"gone", now);
        assert!(
            !e.to_string().contains("s3cret") && !e.to_string().contains('?'),
            "{e}"
        );
    }

    #[test]
    fn excerpts_are_short_single_lines() {
        let long = "x ".repeat(1000);
        let e = excerpt(long.as_bytes());
        assert!(e.chars().count() <= EXCERPT_CHARS + 1 && !e.contains('\n'));
        assert_eq!(excerpt(b"  "), "(empty body)");
    }
}
