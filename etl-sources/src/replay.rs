//! [`ReplayServer`]: a Launch Library 2 list endpoint served from memory on
//! 127.0.0.1, for the offline pipeline and for tests.
//!
//! It pages a list of launch objects the way the API does (`limit`,
//! `offset`, `next`), filters and sorts them as the API's list endpoints do
//! (`last_updated__gte=<ISO 8601>`, `ordering=last_updated`, a provider's
//! launches by `lsp__id`), can change a
//! launch in the middle of a run (as the live data does), and can answer the
//! first request for chosen pages with a 429 (with `Retry-After` and DRF's
//! throttle body) or an HTML 503, so retries can be seen happening.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use url::Url;

/// The offline dataset: 12 launch objects in Launch Library 2.2.0's shape,
/// written for this repository (invented missions, real-world-like
/// vehicles and pads; every field the API sends, most of them kept).
pub const BUNDLED_LAUNCHES: &str = include_str!("../data/upcoming-2.2.0.json");

/// The same 12 launches in Launch Library 2.3.0's shape (agency type and
/// image objects, numeric coordinates, `families`, country objects): what
/// `launches` serves offline. They read to the same rows as the 2.2.0 ones.
pub const BUNDLED_LAUNCHES_2_3_0: &str = include_str!("../data/upcoming-2.3.0.json");

/// What a [`ReplayServer`] serves.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The launch objects, in page order.
    pub launches: Vec<Value>,
    /// The list endpoint's path; any other path is a 404.
    pub path: String,
    /// Page size when a request names no `limit`.
    pub default_limit: usize,
    /// Pages (1-based) whose first request is answered 429.
    pub throttle_pages: Vec<u32>,
    /// The `Retry-After` seconds of those 429s.
    pub retry_after_secs: u64,
    /// Pages (1-based) whose first request is answered with an HTML 503.
    pub unavailable_pages: Vec<u32>,
    /// Wait before each answer (to give a test time to kill a client).
    pub delay: Duration,
    /// Changes made to the data while the server runs.
    pub updates: Vec<Update>,
}

/// A launch updated upstream in the middle of a run: once `after_requests`
/// requests were answered, the launch `id` gets `last_updated` (so it moves
/// to the end of a listing ordered by `last_updated`).
#[derive(Clone, Debug)]
pub struct Update {
    /// Requests answered before the change.
    pub after_requests: u32,
    /// The launch's `id`.
    pub id: String,
    /// Its new `last_updated`.
    pub last_updated: String,
}

impl Replay {
    /// `launches` served at `/2.2.0/launch/upcoming/`, 5 a page, no faults.
    pub fn new(launches: Vec<Value>) -> Self {
        Replay {
            launches,
            path: "/2.2.0/launch/upcoming/".into(),
            default_limit: 5,
            throttle_pages: Vec::new(),
            retry_after_secs: 1,
            unavailable_pages: Vec::new(),
            delay: Duration::ZERO,
            updates: Vec::new(),
        }
    }

    /// The bundled dataset in 2.3.0's shape at `/2.3.0/launches/upcoming/`,
    /// with a 429 (Retry-After: 1) on page 2 and a 503 on page 3: what
    /// `launches` serves itself offline.
    pub fn bundled() -> Self {
        let launches = serde_json::from_str(BUNDLED_LAUNCHES_2_3_0)
            .expect("the bundled dataset is a JSON array");
        Replay {
            path: "/2.3.0/launches/upcoming/".into(),
            ..Replay::bundled_2_2_0()
        }
        .with_launches(launches)
    }

    /// [`Replay::bundled`] in 2.2.0's shape, at `/2.2.0/launch/upcoming/`.
    pub fn bundled_2_2_0() -> Self {
        let launches =
            serde_json::from_str(BUNDLED_LAUNCHES).expect("the bundled dataset is a JSON array");
        Replay {
            throttle_pages: vec![2],
            unavailable_pages: vec![3],
            ..Replay::new(launches)
        }
    }

    fn with_launches(mut self, launches: Vec<Value>) -> Self {
        self.launches = launches;
        self
    }
}

/// A running replay server; it stops when dropped.
#[derive(Debug)]
pub struct ReplayServer {
    url: Url,
    requests: Arc<AtomicU32>,
    _stop: oneshot::Sender<()>,
}

struct State {
    replay: Replay,
    /// The launches as they are now (`replay.launches` plus the updates
    /// applied so far).
    launches: Mutex<Vec<Value>>,
    addr: SocketAddr,
    faulted: Mutex<HashSet<u32>>,
    requests: Arc<AtomicU32>,
}

impl ReplayServer {
    /// Binds an ephemeral port on 127.0.0.1 and serves `replay` on the
    /// current tokio runtime.
    pub async fn start(replay: Replay) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let url =
            Url::parse(&format!("http://{addr}{}", replay.path)).map_err(std::io::Error::other)?;
        let requests = Arc::new(AtomicU32::new(0));
        let state = Arc::new(State {
            launches: Mutex::new(replay.launches.clone()),
            replay,
            addr,
            faulted: Mutex::new(HashSet::new()),
            requests: requests.clone(),
        });
        let (stop, mut stopped) = oneshot::channel();
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    _ = &mut stopped => break,
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(_) => continue,
                    },
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(state.clone(), req));
                    // A client that hangs up mid-answer is its own business.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(ReplayServer {
            url,
            requests,
            _stop: stop,
        })
    }

    /// The first page's URL (the list endpoint, no query).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u32 {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn answer(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let answered = state.requests.fetch_add(1, Ordering::SeqCst);
    apply_updates(&state, answered);
    if !state.replay.delay.is_zero() {
        tokio::time::sleep(state.replay.delay).await;
    }
    let replay = &state.replay;
    if req.uri().path() != replay.path {
        return Ok(respond(
            StatusCode::NOT_FOUND,
            "application/json",
            json!({"detail": "Not found."}).to_string(),
        ));
    }
    let text = |key: &str| -> Option<String> {
        url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    };
    let query = |key: &str| -> Option<usize> { text(key)?.parse().ok() };
    let limit = query("limit").unwrap_or(replay.default_limit).clamp(1, 100);
    let offset = query("offset").unwrap_or(0);
    let since = text("last_updated__gte");
    let ordering = text("ordering");
    let provider = text("lsp__id");
    // The page is where its first entry stands in the whole listing, so a
    // request by cursor (`last_updated__gte`, small offset) and one by
    // offset count pages alike.
    let (listing, filtered_out) = listing(
        &state,
        since.as_deref(),
        ordering.as_deref(),
        provider.as_deref(),
    );
    let page = u32::try_from((filtered_out + offset) / limit + 1).unwrap_or(u32::MAX);

    if let Some(fault) = fault(&state, page) {
        return Ok(fault);
    }
    let filters = [
        ("last_updated__gte", &since),
        ("ordering", &ordering),
        ("lsp__id", &provider),
    ];
    let body = list_page(&state, &listing, offset, limit, &filters);
    Ok(respond(StatusCode::OK, "application/json", body))
}

/// The fault the replay injects at the first request for `page`, if any:
/// a 429 with Retry-After, or a proxy's HTML 503.
fn fault(state: &State, page: u32) -> Option<Response<Full<Bytes>>> {
    let replay = &state.replay;
    let first_request = state
        .faulted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(page);
    if first_request && replay.throttle_pages.contains(&page) {
        let wait = replay.retry_after_secs;
        let body = json!({"detail": format!("Request was throttled. Expected available in {wait} seconds.")});
        let mut response = respond(
            StatusCode::TOO_MANY_REQUESTS,
            "application/json",
            body.to_string(),
        );
        response.headers_mut().insert("retry-after", wait.into());
        return Some(response);
    }
    if first_request && replay.unavailable_pages.contains(&page) {
        let html = "<html><head><title>503 Service Temporarily Unavailable</title></head><body>\
                    <center><h1>503 Service Temporarily Unavailable</h1></center></body></html>";
        return Some(respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/html",
            html.to_string(),
        ));
    }
    None
}

/// A list page of `listing` from `offset`, as the API writes it: `count`,
/// `next` and `previous` (which keep the request's `filters`, as the API's
/// links do) and `results`.
fn list_page(
    state: &State,
    listing: &[Value],
    offset: usize,
    limit: usize,
    filters: &[(&str, &Option<String>)],
) -> String {
    let total = listing.len();
    let results: Vec<&Value> = listing.iter().skip(offset).take(limit).collect();
    let mut kept = String::new();
    for (key, value) in filters {
        if let Some(value) = value {
            kept.push('&');
            kept.push_str(
                &url::form_urlencoded::Serializer::new(String::new())
                    .append_pair(key, value)
                    .finish(),
            );
        }
    }
    let link = |offset: usize| {
        format!(
            "http://{}{}?limit={limit}&offset={offset}{kept}",
            state.addr, state.replay.path
        )
    };
    let next = (offset + limit < total).then(|| link(offset + limit));
    let previous = (offset > 0).then(|| link(offset.saturating_sub(limit)));
    json!({"count": total, "next": next, "previous": previous, "results": results}).to_string()
}

/// Applies the updates due once `answered` requests were answered.
fn apply_updates(state: &State, answered: u32) {
    let due = state
        .replay
        .updates
        .iter()
        .filter(|u| u.after_requests == answered);
    let mut launches = state.launches.lock().unwrap_or_else(|e| e.into_inner());
    for update in due {
        for launch in launches
            .iter_mut()
            .filter(|l| l["id"] == update.id.as_str())
        {
            launch["last_updated"] = Value::from(update.last_updated.clone());
        }
    }
}

/// The launches a list request sees: those updated at or after `since`,
/// sorted by `last_updated` (stable, so ties keep their order) when asked;
/// and how many the filter left out, from the same look at the data.
fn listing(
    state: &State,
    since: Option<&str>,
    ordering: Option<&str>,
    provider: Option<&str>,
) -> (Vec<Value>, usize) {
    let launches = state.launches.lock().unwrap_or_else(|e| e.into_inner());
    let updated = |l: &Value| l["last_updated"].as_str().map(str::to_owned);
    // The API's `lsp__id`: the launches of one launch service provider.
    let by = |l: &Value| {
        provider.is_none_or(|p| {
            l["launch_service_provider"]["id"]
                .as_u64()
                .map(|id| id.to_string())
                .as_deref()
                == Some(p)
        })
    };
    let mut listing: Vec<Value> = launches
        .iter()
        .filter(|l| since.is_none_or(|since| updated(l).is_some_and(|u| u.as_str() >= since)))
        .filter(|l| by(l))
        .cloned()
        .collect();
    match ordering {
        Some("last_updated") => listing.sort_by_key(updated),
        Some("-last_updated") => listing.sort_by_key(|l| std::cmp::Reverse(updated(l))),
        _ => {}
    }
    let filtered_out = launches.len() - listing.len();
    (listing, filtered_out)
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use etl_core::Launch;

    #[test]
    fn bundled_versions_read_to_the_same_launches() {
        let read = |replay: Replay| -> Vec<Launch> {
            replay
                .launches
                .into_iter()
                .map(|o| serde_json::from_value(o).unwrap())
                .collect()
        };
        let v230 = read(Replay::bundled());
        assert_eq!(v230, read(Replay::bundled_2_2_0()));
        // And the 2.3.0 one is in 2.3.0's shape.
        let raw = &Replay::bundled().launches[0];
        assert!(raw["launch_service_provider"]["type"].is_object());
        assert!(raw["pad"]["latitude"].is_number());
        assert!(raw["rocket"]["configuration"]["families"].is_array());
    }

    #[test]
    fn bundled_dataset_is_schema_true() {
        let replay = Replay::bundled();
        assert_eq!(replay.launches.len(), 12);
        let mut ids = HashSet::new();
        for object in &replay.launches {
            let launch: Launch = serde_json::from_value(object.clone()).unwrap();
            assert!(
                launch.pad.as_ref().and_then(|p| p.latitude).is_some(),
                "{}",
                launch.name
            );
            assert!(
                launch.status.is_some() && launch.net.is_some(),
                "{}",
                launch.name
            );
            assert!(ids.insert(launch.id));
        }
    }
}
