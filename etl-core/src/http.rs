//! HTTP with reqwest (feature `reqwest`): [`HttpError`], an error that
//! `#[retry]` classifies and that carries the server's Retry-After, and
//! [`check`], which turns a response that is not a success into one.
//!
//! ```no_run
//! use etl_core::http::{check, HttpError};
//! use etl_core::retry;
//!
//! // 5xx, 408 and 429 are retried; a 429's or 503's Retry-After is waited
//! // as the server asked; any other status fails at once.
//! #[retry(max_attempts = 5, base = "500ms", max_retry_after = "2m")]
//! async fn get(client: &reqwest::Client, url: &str) -> Result<String, HttpError> {
//!     let response = check(client.get(url).send().await?).await?;
//!     Ok(response.text().await?)
//! }
//! ```

use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::Url;

use crate::retry::{status_is_transient, CircuitOpen, RetryableError, TimedOut};

/// How much of an error body the message quotes.
const EXCERPT_CHARS: usize = 160;
/// How much of an error body is read for that (a character is at most 4
/// bytes).
const EXCERPT_BYTES: usize = EXCERPT_CHARS * 4;

/// An HTTP call that failed: a status that is not a success (with the
/// server's Retry-After, if it sent one), a transport error, or an attempt
/// cut by a timeout or refused by an open circuit breaker.
///
/// Classified for retrying ([`RetryableError`]): 408, 429 and 5xx are
/// transient, every other status permanent
/// ([`crate::retry::status_is_transient`]); transport
/// errors as `RetryableError for reqwest::Error` says; a timeout or an open
/// breaker transient.
///
/// Its messages name the URL without its query, fragment or credentials,
/// so an API key sent as a query parameter never reaches a log line
/// through it. (A bare `reqwest::Error` shows its URL whole: prefer
/// `HttpError`, or headers for secrets.)
#[derive(Debug)]
pub struct HttpError {
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    Status {
        status: u16,
        retry_after: Option<Duration>,
        url: String,
        excerpt: String,
    },
    Transport(reqwest::Error),
    TimedOut(TimedOut),
    CircuitOpen(CircuitOpen),
}

impl HttpError {
    /// The error for a response with `status`, from `url`, whose headers
    /// are `headers` and whose body starts with `body`.
    pub fn from_status(status: u16, url: &Url, headers: &HeaderMap, body: &[u8]) -> Self {
        HttpError {
            repr: Repr::Status {
                status,
                retry_after: asked_wait(status, headers, SystemTime::now()),
                url: without_secrets(url).to_string(),
                excerpt: excerpt(body),
            },
        }
    }

    /// The HTTP status, when the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match &self.repr {
            Repr::Status { status, .. } => Some(*status),
            Repr::Transport(e) => e.status().map(|s| s.as_u16()),
            Repr::TimedOut(_) | Repr::CircuitOpen(_) => None,
        }
    }

    /// The wait the server asked for (Retry-After), if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match &self.repr {
            Repr::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Status {
                status,
                retry_after,
                url,
                excerpt,
            } => {
                write!(f, "HTTP {status} from {url}")?;
                if let Some(wait) = retry_after {
                    write!(f, " (Retry-After: {} s)", wait.as_secs())?;
                }
                write!(f, ": {excerpt}")
            }
            Repr::Transport(e) => write!(f, "{e}"),
            Repr::TimedOut(e) => write!(f, "{e}"),
            Repr::CircuitOpen(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.repr {
            Repr::Transport(e) => Some(e),
            Repr::TimedOut(e) => Some(e),
            Repr::CircuitOpen(e) => Some(e),
            Repr::Status { .. } => None,
        }
    }
}

impl From<reqwest::Error> for HttpError {
    fn from(mut e: reqwest::Error) -> Self {
        if let Some(url) = e.url_mut() {
            *url = without_secrets(url);
        }
        HttpError {
            repr: Repr::Transport(e),
        }
    }
}

/// `url` without what may hold a secret: the query, the fragment and any
/// user name or password. What an error or a log line may show of a URL.
///
/// ```
/// use etl_core::http::without_secrets;
///
/// let url = reqwest::Url::parse("https://me:pw@api.example/v1/items?api_key=s3cret&page=2#top")?;
/// assert_eq!(without_secrets(&url).as_str(), "https://api.example/v1/items");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn without_secrets(url: &Url) -> Url {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    // Only URLs that cannot have credentials refuse these: nothing to hide.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url
}

impl From<TimedOut> for HttpError {
    fn from(e: TimedOut) -> Self {
        HttpError {
            repr: Repr::TimedOut(e),
        }
    }
}

impl From<CircuitOpen> for HttpError {
    fn from(e: CircuitOpen) -> Self {
        HttpError {
            repr: Repr::CircuitOpen(e),
        }
    }
}

impl RetryableError for HttpError {
    fn is_transient(&self) -> bool {
        match &self.repr {
            // A 403 that carries a wait is a spent quota, not a refusal.
            Repr::Status {
                status,
                retry_after,
                ..
            } => status_is_transient(*status) || retry_after.is_some(),
            Repr::Transport(e) => e.is_transient(),
            Repr::TimedOut(_) | Repr::CircuitOpen(_) => true,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        HttpError::retry_after(self)
    }

    fn timed_out(&self) -> bool {
        match &self.repr {
            Repr::TimedOut(_) => true,
            Repr::Transport(e) => e.is_timeout(),
            _ => false,
        }
    }
}

/// reqwest's errors, as reqwest-retry's default strategy sorts them: a
/// status error (from `error_for_status`) by its status
/// ([`crate::retry::status_is_transient`]); a builder, decode or redirect error
/// permanent (the same request fails the same way); a connect, timeout,
/// request or body error transient (the network may recover).
impl RetryableError for reqwest::Error {
    fn is_transient(&self) -> bool {
        if let Some(status) = self.status() {
            return status_is_transient(status.as_u16());
        }
        if self.is_builder() || self.is_decode() || self.is_redirect() {
            return false;
        }
        self.is_connect() || self.is_timeout() || self.is_request() || self.is_body()
    }

    fn timed_out(&self) -> bool {
        self.is_timeout()
    }
}

/// A 2xx response passes; any other status becomes an [`HttpError`]
/// carrying the server's Retry-After (seconds, or an HTTP-date, rounded up)
/// and the start of its body, so that `#[retry]` waits what a 429 or 503
/// asked and retries only what may pass.
pub async fn check(response: reqwest::Response) -> Result<reqwest::Response, HttpError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let url = response.url().clone();
    let headers = response.headers().clone();
    let body = body_start(response).await;
    Err(HttpError::from_status(
        status.as_u16(),
        &url,
        &headers,
        &body,
    ))
}

/// The first bytes of a body, enough for its excerpt: an error page of any
/// size costs no more than that. A body that cannot be read is quoted as
/// far as it came.
async fn body_start(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// The wait a response with `status` asked for: its `Retry-After`
/// ([`retry_after`]) on a 429 (too many requests) or a 503 (unavailable),
/// the two statuses RFC 9110 gives it a meaning for; else, on a 429 or a
/// 403, the API's own exhausted quota ([`quota_wait`]: GitHub answers a
/// spent hour with a 403 and `X-RateLimit-Remaining: 0`). `None` otherwise:
/// a transient status's retry is timed by the backoff. The one reading of
/// a server's wait for every HTTP path of the workspace.
///
/// ```
/// use etl_core::http::asked_wait;
/// use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
/// use std::time::{Duration, SystemTime};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("30"));
/// let now = SystemTime::now();
/// assert_eq!(asked_wait(503, &headers, now), Some(Duration::from_secs(30)));
/// assert_eq!(asked_wait(429, &headers, now), Some(Duration::from_secs(30)));
/// assert_eq!(asked_wait(500, &headers, now), None);
/// assert_eq!(asked_wait(403, &headers, now), None, "a 403 is a refusal...");
///
/// headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
/// headers.insert("x-ratelimit-reset", HeaderValue::from_static("1700000060"));
/// let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// assert_eq!(asked_wait(403, &headers, at), Some(Duration::from_secs(60)), "...unless the quota is spent");
/// ```
pub fn asked_wait(status: u16, headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    match status {
        429 | 503 => retry_after(headers, now).or_else(|| quota_wait(headers, now)),
        403 => quota_wait(headers, now),
        _ => None,
    }
}

/// Until when an API's own quota holds requests back, as a wait from
/// `now`: the quota is spent (`X-RateLimit-Remaining: 0`, as GitHub sends,
/// or the IETF draft's `RateLimit-Remaining: 0`) and its reset is known
/// (`X-RateLimit-Reset` in Unix seconds, `RateLimit-Reset` in seconds to
/// wait). A reset already past is no wait (`Some(ZERO)`); a quota not
/// spent, or a reset missing or unreadable, is `None`. Read on every
/// response, a success too: a 200 that spent the last request holds back
/// the next.
///
/// ```
/// use etl_core::http::quota_wait;
/// use reqwest::header::{HeaderMap, HeaderValue};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let mut github = HeaderMap::new();
/// github.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
/// github.insert("x-ratelimit-reset", HeaderValue::from_static("1700000042"));
/// assert_eq!(quota_wait(&github, now), Some(Duration::from_secs(42)));
///
/// let mut draft = HeaderMap::new();
/// draft.insert("ratelimit-remaining", HeaderValue::from_static("0"));
/// draft.insert("ratelimit-reset", HeaderValue::from_static("7"));
/// assert_eq!(quota_wait(&draft, now), Some(Duration::from_secs(7)));
///
/// draft.insert("ratelimit-remaining", HeaderValue::from_static("12"));
/// assert_eq!(quota_wait(&draft, now), None);
/// ```
pub fn quota_wait(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let number =
        |name: &str| -> Option<u64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if number("x-ratelimit-remaining") == Some(0) {
        if let Some(reset) = number("x-ratelimit-reset") {
            // A reset past what the clock can hold is a very long wait, not
            // a panic (checked, as the server chose the number).
            let Some(at) = SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(reset)) else {
                return Some(Duration::from_secs(u64::MAX));
            };
            let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
            return Some(Duration::from_secs(
                wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
            ));
        }
    }
    if number("ratelimit-remaining") == Some(0) {
        return number("ratelimit-reset").map(Duration::from_secs);
    }
    None
}

/// `Retry-After` as a wait from `now`: delta-seconds, or an HTTP-date
/// rounded up to whole seconds. An empty value, one that is neither, or a
/// date not after `now` is no wait (`None`): the backoff decides. More
/// digits than a `u64` holds still mean "a very long time".
///
/// ```
/// use etl_core::http::retry_after;
/// use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("120"));
/// assert_eq!(retry_after(&headers, SystemTime::now()), Some(Duration::from_secs(120)));
///
/// let now = UNIX_EPOCH + Duration::from_secs(784_111_770); // 1994-11-06 08:49:30 UTC
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"));
/// assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(7)));
///
/// headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
/// assert_eq!(retry_after(&headers, now), None);
/// ```
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).ok().filter(|w| !w.is_zero())?;
    Some(Duration::from_secs(
        wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
    ))
}

/// The start of a body, for an error message: its first
/// characters on one line (whitespace runs folded to one space), or
/// `(empty body)`. Reads at most a few hundred bytes of it.
///
/// ```
/// assert_eq!(etl_core::http::excerpt(b"<html>\n  <h1>502 Bad Gateway</h1>"), "<html> <h1>502 Bad Gateway</h1>");
/// assert_eq!(etl_core::http::excerpt(b"  "), "(empty body)");
/// ```
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(EXCERPT_BYTES)]);
    let mut line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(EXCERPT_CHARS) {
        line.truncate(cut);
        line.push('…');
    }
    if line.is_empty() {
        "(empty body)".to_string()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_ignores_the_rest() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(retry_after(&headers("0"), now), Some(Duration::ZERO));
        assert_eq!(
            retry_after(&headers(" 7 "), now),
            Some(Duration::from_secs(7))
        );
        let later = now + Duration::from_millis(300);
        assert_eq!(
            retry_after(&headers("Sun, 06 Nov 1994 08:49:37 GMT"), later),
            Some(Duration::from_secs(7)),
            "6.7 s rounds up"
        );
        assert_eq!(
            retry_after(&headers("99999999999999999999999"), now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            retry_after(&headers("Sun, 06 Nov 1994 08:49:37 GMT"), now),
            Some(Duration::from_secs(7))
        );
        // In the past, empty, not a number or a date: the backoff decides.
        for bad in [
            "Sun, 06 Nov 1994 08:49:00 GMT",
            "",
            "  ",
            "-5",
            "1.5",
            "later",
        ] {
            assert_eq!(retry_after(&headers(bad), now), None, "{bad:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn a_status_error_names_its_url_without_secrets() {
        let url = Url::parse("https://me:pw@api.example/v1/items?api_key=s3cret&page=2#x").unwrap();
        let e = HttpError::from_status(401, &url, &HeaderMap::new(), b"denied");
        let shown = e.to_string();
        assert!(shown.contains("https://api.example/v1/items"), "{shown}");
        for secret in ["s3cret", "pw", "me@", "page=2"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }

    #[test]
    fn status_errors_are_classified_and_carry_the_wait() {
        let url = Url::parse("http://x/").unwrap();
        let e = HttpError::from_status(429, &url, &headers("3"), b"slow down");
        assert!(e.is_transient());
        assert_eq!(e.status(), Some(429));
        assert_eq!(
            RetryableError::retry_after(&e),
            Some(Duration::from_secs(3))
        );
        assert!(e.to_string().contains("slow down"), "{e}");
        for (status, transient) in [
            (503, true),
            (500, true),
            (408, true),
            (404, false),
            (400, false),
        ] {
            let e = HttpError::from_status(status, &url, &HeaderMap::new(), b"");
            assert_eq!(e.is_transient(), transient, "{status}");
        }
        assert!(HttpError::from(TimedOut {
            after: Duration::from_secs(1),
            by: crate::retry::TimeLimit::Attempt
        })
        .timed_out());
    }

    #[test]
    fn a_spent_quota_is_waited_out_not_refused() {
        let url = Url::parse("https://api.github.com/repos/o/r/issues").unwrap();
        let reset = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 30;
        let mut spent = HeaderMap::new();
        spent.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        spent.insert(
            "x-ratelimit-reset",
            HeaderValue::from_str(&reset.to_string()).unwrap(),
        );
        let e = HttpError::from_status(403, &url, &spent, b"API rate limit exceeded");
        assert!(e.is_transient(), "a spent quota is worth waiting for");
        let wait = e.retry_after().unwrap();
        assert!(
            wait <= Duration::from_secs(30) && wait >= Duration::from_secs(29),
            "{wait:?}"
        );
        // Quota left, or no quota headers: a 403 is a refusal.
        spent.insert("x-ratelimit-remaining", HeaderValue::from_static("1"));
        assert!(!HttpError::from_status(403, &url, &spent, b"").is_transient());
        assert!(!HttpError::from_status(403, &url, &HeaderMap::new(), b"").is_transient());
        // A reset already past: retry at once.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(reset + 5);
        spent.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        assert_eq!(quota_wait(&spent, now), Some(Duration::ZERO));
        // A reset beyond the clock's range: a very long wait, no panic.
        spent.insert(
            "x-ratelimit-reset",
            HeaderValue::from_static("18446744073709551615"),
        );
        assert_eq!(quota_wait(&spent, now), Some(Duration::from_secs(u64::MAX)));
    }
}
