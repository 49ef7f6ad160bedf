//! A JSON API of `items` for `etl run` to load: every pagination style,
//! bearer auth, scripted failures and mutations, served by wiremock on
//! 127.0.0.1 (a real HTTP server).

use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// How the API pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `{"data": [...], "next": "/items?offset=N&..."}` (relative).
    NextUrl,
    /// `Link: <http://.../items?offset=N&...>; rel="next"` (absolute).
    LinkHeader,
    /// `?offset=&limit=`, `{"data": [...], "count": N}`.
    Offset,
    /// `?page=` from 1, `per_page` from the query; an empty page ends.
    PageNumber,
    /// `{"data": [...], "meta": {"next_cursor": "cN"}}`, `?cursor=`.
    Cursor,
    /// Stripe's: `{"data": [...], "has_more": true}`, then
    /// `?starting_after=<the last record's id>`.
    LastRecord,
    /// `X-Next-Cursor: cN` on the response, `?cursor=`.
    HeaderCursor,
}

impl Style {
    pub const ALL: [Style; 7] = [
        Style::NextUrl,
        Style::LinkHeader,
        Style::Offset,
        Style::PageNumber,
        Style::Cursor,
        Style::LastRecord,
        Style::HeaderCursor,
    ];

    /// The `[paginate]` table of a pipeline file for this style.
    pub fn paginate(self) -> &'static str {
        match self {
            Style::NextUrl => "[paginate]\nstyle = \"next_url\"\nnext = \"/next\"\n",
            Style::LinkHeader => "[paginate]\nstyle = \"link_header\"\n",
            Style::Offset => "[paginate]\nstyle = \"offset\"\nlimit = 4\ntotal = \"/count\"\n",
            Style::PageNumber => "[paginate]\nstyle = \"page_number\"\n",
            Style::Cursor => "[paginate]\nstyle = \"cursor\"\ncursor = \"/meta/next_cursor\"\n",
            Style::LastRecord => "[paginate]\nstyle = \"cursor\"\nlast_record = \"/id\"\ncursor_param = \"starting_after\"\nhas_more = \"/has_more\"\n",
            Style::HeaderCursor => "[paginate]\nstyle = \"header_cursor\"\nheader = \"X-Next-Cursor\"\n",
        }
    }
}

/// A pipeline file of resource `items` for the API at `uri` paging in
/// `style`, with `extra` appended to its top-level keys.
pub fn pipeline(uri: &str, style: Style, extra: &str) -> String {
    format!(
        "name = \"items\"\nurl = \"{uri}/items\"\nrecords = \"/data\"\nid = \"/id\"\nupdated_at = \"/updated_at\"\n{extra}\n{}",
        style.paginate()
    )
}

/// The API's state, shared with the test.
#[derive(Clone)]
pub struct Api {
    pub items: Arc<Mutex<Vec<Value>>>,
    pub style: Style,
    pub page_size: usize,
    /// Required as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// Answers given instead of pages, in order, once `script_from`
    /// requests were answered.
    pub script: Arc<Mutex<VecDeque<ResponseTemplate>>>,
    pub script_from: usize,
    /// Every request's URL, as received.
    pub seen: Arc<Mutex<Vec<url::Url>>>,
    /// Every request's JSON body (`null` for none), as received.
    pub bodies: Arc<Mutex<Vec<Value>>>,
    /// A next link to put on the first page instead of the real one.
    pub next_override: Option<String>,
    /// Real time each page takes.
    pub delay: std::time::Duration,
    /// When each request arrived.
    pub arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
}

/// Records with a child list, for replace: `n` of them, `labels` each.
pub fn labelled(n: usize, labels: &[&str]) -> Vec<Value> {
    (1..=n)
        .map(|i| {
            json!({"id": i, "name": format!("item {i}"),
                   "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
                   "updated_at": format!("2026-11-01T00:00:{:02}Z", i % 60)})
        })
        .collect()
}

/// A GitHub-like issue for merge: `number` is its key, `t` its update
/// time (seconds into 2026-11-01), `labels` its child rows.
pub fn issue(number: i64, t: u32, state: &str, labels: &[&str]) -> Value {
    json!({"id": number * 100 + i64::from(t), "number": number, "state": state,
           "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
           "updated_at": format!("2026-11-01T00:00:{t:02}Z")})
}

/// The second page of the merge tests, after six `issue(n, 10, "open",
/// ["bug"])`: updates, a deletion (of 2), an older version read late (3),
/// two versions of one key in one page (4: the newer last; 5: first), and
/// a new key (7).
pub fn merge_changes() -> Vec<Value> {
    let mut deleted = issue(2, 30, "open", &["bug"]);
    deleted["deleted"] = json!(true);
    vec![
        issue(1, 30, "closed", &["done", "fixed"]),
        deleted,
        issue(3, 5, "ancient", &["old"]),
        issue(4, 20, "a", &["x"]),
        issue(4, 40, "b", &["y"]),
        issue(5, 40, "newer", &[]),
        issue(5, 20, "older", &["z"]),
        issue(7, 10, "open", &["new"]),
    ]
}

/// `n` items, ids 1..=n, updated at distinct times.
pub fn items(n: usize) -> Vec<Value> {
    (1..=n)
        .map(|i| {
            json!({
                "id": i,
                "name": format!("item {i}"),
                "tags": {"colour": "blue", "size": i % 3},
                "updated_at": format!("2026-11-01T00:{:02}:{:02}Z", i / 60, i % 60),
            })
        })
        .collect()
}

/// Two records a frozen table of [`items`] refuses: one whose
/// `tags.size` is text (the column is bigint), one with a new member
/// `extra`.
pub fn refused_by_freeze(after: usize) -> [Value; 2] {
    let mut misfit = items(after + 1).pop().unwrap();
    misfit["tags"]["size"] = json!("many");
    let mut extra = items(after + 2).pop().unwrap();
    extra["extra"] = json!(true);
    [misfit, extra]
}

impl Api {
    pub fn new(style: Style, items: Vec<Value>) -> Self {
        Api {
            items: Arc::new(Mutex::new(items)),
            style,
            page_size: 4,
            token: None,
            script: Default::default(),
            script_from: 0,
            seen: Default::default(),
            bodies: Default::default(),
            next_override: None,
            delay: std::time::Duration::ZERO,
            arrivals: Default::default(),
        }
    }

    /// Serves it on a server of its own; `/items` is the list.
    pub async fn serve(self) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::path("/items"))
            .respond_with(self)
            .mount(&server)
            .await;
        server
    }

    /// The requests received so far.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The most requests that arrived within `window` of each other: with
    /// each answer held `delay`, and `window` under it, requests that were
    /// all awaiting their answers at once.
    #[allow(dead_code)] // not every test binary that shares it asks
    pub fn most_at_once(&self, window: std::time::Duration) -> usize {
        let mut at = self.arrivals.lock().unwrap().clone();
        at.sort();
        (0..at.len())
            .map(|i| at[i..].iter().take_while(|t| **t - at[i] < window).count())
            .max()
            .unwrap_or(0)
    }
}

impl Respond for Api {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let answered = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(request.url.clone());
            self.arrivals
                .lock()
                .unwrap()
                .push(std::time::Instant::now());
            seen.len() - 1
        };
        // A POST's JSON body: its top-level members count as the query's.
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        self.bodies.lock().unwrap().push(body.clone());
        if let Some(token) = &self.token {
            let sent = request
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            if sent != Some(format!("Bearer {token}").as_str()) {
                return ResponseTemplate::new(401).set_body_string("{\"detail\":\"no token\"}");
            }
        }
        if answered >= self.script_from {
            if let Some(scripted) = self.script.lock().unwrap().pop_front() {
                return scripted;
            }
        }
        let query = |name: &str| {
            request
                .url
                .query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .or_else(|| match &body[name] {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
        };
        // An incremental request: the items changed since, oldest first.
        let mut items = self.items.lock().unwrap().clone();
        if let Some(since) = query("updated_since") {
            items.retain(|i| i["updated_at"].as_str().unwrap() >= since.as_str());
            items.sort_by(|a, b| a["updated_at"].as_str().cmp(&b["updated_at"].as_str()));
        }
        let size = match self.style {
            Style::Offset => query("limit").map_or(self.page_size, |l| l.parse().unwrap()),
            Style::PageNumber => query("per_page").map_or(self.page_size, |l| l.parse().unwrap()),
            _ => self.page_size,
        };
        let start = match self.style {
            Style::PageNumber => {
                (query("page").map_or(1, |p| p.parse::<usize>().unwrap()) - 1) * size
            }
            Style::Cursor | Style::HeaderCursor => {
                query("cursor").map_or(0, |c| c[1..].parse().unwrap())
            }
            // Just past the record of that id.
            Style::LastRecord => query("starting_after").map_or(0, |after| {
                1 + items
                    .iter()
                    .position(|i| {
                        i["id"].as_u64().map(|id| id.to_string()).as_deref() == Some(after.as_str())
                    })
                    .expect("starting_after names a record")
            }),
            _ => query("offset").map_or(0, |o| o.parse().unwrap()),
        };
        let page: Vec<Value> = items.iter().skip(start).take(size).cloned().collect();
        let next_start = start + size;
        let more = next_start < items.len();
        // The request's own query, with the position moved.
        let moved = |param: &str, value: String| {
            // wiremock's URL says `localhost`; the Host header says where
            // the client really went.
            let mut url = request.url.clone();
            if let Some(host) = request.headers.get("host").and_then(|h| h.to_str().ok()) {
                url = format!("http://{host}{}", request.url.path())
                    .parse()
                    .unwrap();
            }
            let kept: Vec<(String, String)> = request
                .url
                .query_pairs()
                .filter(|(k, _)| k != param)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            url.query_pairs_mut()
                .clear()
                .extend_pairs(kept)
                .append_pair(param, &value);
            url
        };
        let mut body = json!({ "data": page });
        let mut response = ResponseTemplate::new(200).set_delay(self.delay);
        match self.style {
            Style::NextUrl => {
                let next = match (&self.next_override, start) {
                    (Some(over), 0) => json!(over),
                    _ if more => {
                        let url = moved("offset", next_start.to_string());
                        json!(format!("{}?{}", url.path(), url.query().unwrap_or("")))
                    }
                    _ => Value::Null,
                };
                body["next"] = next;
            }
            Style::LinkHeader => {
                if more {
                    let url = moved("offset", next_start.to_string());
                    response = response.insert_header(
                        "link",
                        format!("<{url}>; rel=\"next\", <{}>; rel=\"first\"", request.url),
                    );
                }
            }
            Style::Offset => body["count"] = json!(items.len()),
            Style::PageNumber => {}
            Style::Cursor => {
                body["meta"] = json!({ "next_cursor": if more { json!(format!("c{next_start}")) } else { Value::Null } });
            }
            Style::LastRecord => body["has_more"] = json!(more),
            Style::HeaderCursor => {
                if more {
                    response =
                        response.insert_header("x-next-cursor", format!("c{next_start}").as_str());
                }
            }
        }
        response.set_body_json(body)
    }
}

/// How an API's records write their update time, and what a pipeline file
/// says of it.
#[allow(dead_code)] // not every test binary that shares it asks
#[derive(Clone, Copy, Debug)]
pub enum Stamps {
    /// Unix seconds, with neither `updated_at_unit` nor `initial`.
    Seconds,
    /// Unix seconds, with an `initial` of 1767225600 (a number).
    SecondsFromInitial,
    /// Milliseconds, with `updated_at_unit = "ms"` and an `initial` of
    /// 1767225600000.
    Millis,
}

/// What an API whose records write `updated` as `stamps` say received as
/// `updated_after` from two incremental `etl run`s into `out` (the
/// arguments that name the output), in order. The API reads the parameter
/// as a number and answers text with a 400; the second run finds one
/// record more than the first, newer than the held 1767227249(.123).
#[allow(dead_code)] // not every test binary that shares it asks
pub async fn cursors_sent(
    dir: &std::path::Path,
    out: &[&str],
    stamps: Stamps,
) -> Vec<Option<String>> {
    let asked: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let ms = matches!(stamps, Stamps::Millis);
    let scale: i64 = if ms { 1_000 } else { 1 };
    let first = [
        1_767_227_100 * scale + 7,
        1_767_227_249 * scale + 123 * (scale / 1_000),
    ];
    let records = Arc::new(Mutex::new(
        first
            .iter()
            .enumerate()
            .map(|(i, at)| json!({"id": i + 1, "updated": at}))
            .collect::<Vec<_>>(),
    ));
    let server = MockServer::start().await;
    let (seen, held) = (Arc::clone(&asked), Arc::clone(&records));
    Mock::given(wiremock::matchers::path("/items"))
        .respond_with(move |request: &Request| {
            let after = request
                .url
                .query_pairs()
                .find(|(k, _)| k == "updated_after")
                .map(|(_, v)| v.into_owned());
            seen.lock().unwrap().push(after.clone());
            let Ok(after) = after.map(|a| a.parse::<i64>()).transpose() else {
                return ResponseTemplate::new(400)
                    .set_body_json(json!({"error": "updated_after: not a number"}));
            };
            let data: Vec<Value> = held
                .lock()
                .unwrap()
                .iter()
                .filter(|r| after.is_none_or(|a| r["updated"].as_i64().unwrap() >= a))
                .cloned()
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({ "data": data }))
        })
        .mount(&server)
        .await;
    let unit = match stamps {
        Stamps::Seconds => "[incremental]\nparam = \"updated_after\"\n",
        Stamps::SecondsFromInitial => {
            "[incremental]\nparam = \"updated_after\"\ninitial = 1767225600\n"
        }
        Stamps::Millis => {
            "updated_at_unit = \"ms\"\n[incremental]\nparam = \"updated_after\"\ninitial = 1767225600000\n"
        }
    };
    let file = dir.join("numbers.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"numbers\"\nurl = \"{}/items\"\nrecords = \"/data\"\nid = \"/id\"\nupdated_at = \"/updated\"\n{unit}",
            server.uri()
        ),
    )
    .unwrap();
    let run = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("run")
            .arg(&file)
            .args(out)
            .arg("--incremental")
            .output()
    };
    for round in 0..2 {
        if round == 1 {
            records
                .lock()
                .unwrap()
                .push(json!({"id": 3, "updated": 1_767_227_300 * scale}));
        }
        let output = run().await.unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let asked = asked.lock().unwrap().clone();
    asked
}
