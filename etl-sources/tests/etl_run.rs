//! `etl run PIPELINE.toml` as a process, against local JSON APIs of every
//! pagination style: every record lands exactly once, and every error is
//! the contract's.

#[path = "common/api.rs"]
mod api;
mod common;
#[path = "common/postgres.rs"]
mod pg;

use api::{issue, items, labelled, pipeline, Api, Stamps, Style};
use common::{records, text};
use pg::{drop_typed, etl_into_postgres, postgres};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::Command;
use wiremock::ResponseTemplate;

fn etl(dir: &Path, file: &str, args: &[&str]) -> Command {
    let path = dir.join("items.toml");
    std::fs::write(&path, file).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
    command
        .arg("run")
        .arg(&path)
        .args(["--out"])
        .arg(dir.join("items.jsonl"))
        .args(args)
        .env_remove("ITEMS_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn run(dir: &Path, file: &str, args: &[&str]) -> Output {
    etl(dir, file, args).output().await.unwrap()
}

/// The `[auth]` of a bearer token in `ITEMS_TOKEN`.
const BEARER: &str = "[auth]\ntype = \"bearer\"\nenv = \"ITEMS_TOKEN\"\n";

/// [`run`] with `ITEMS_TOKEN` set to `token`.
async fn run_with_token(dir: &Path, file: &str, token: &str) -> Output {
    etl(dir, file, &[])
        .env("ITEMS_TOKEN", token)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_pagination_style_loads_every_record_once_and_a_rerun_writes_nothing() {
    for style in Style::ALL {
        let api = Api::new(style, items(10));
        let server = api.clone().serve().await;
        let dir = tempfile::tempdir().unwrap();
        let extra = if style == Style::PageNumber {
            "[params]\nper_page = \"4\"\n"
        } else {
            ""
        };
        let file = pipeline(&server.uri(), style, extra);

        let first = run(dir.path(), &file, &[]).await;
        assert_eq!(first.status.code(), Some(0), "{style:?}: {}", text(&first));
        let out = String::from_utf8_lossy(&first.stdout);
        assert!(
            out.contains("10 records read, 10 new rows"),
            "{style:?}: {out}"
        );
        let (written, ids) = records(&dir.path().join("items.jsonl"));
        assert_eq!(written.len(), 10, "{style:?}");
        assert!(ids.values().all(|&n| n == 1), "{style:?}: {ids:?}");
        // The record itself, as sent (canonical key order).
        assert_eq!(written[0], items(10)[0], "{style:?}");

        let again = run(dir.path(), &file, &[]).await;
        assert_eq!(again.status.code(), Some(0), "{style:?}: {}", text(&again));
        assert!(
            String::from_utf8_lossy(&again.stdout).contains("0 new rows"),
            "{style:?}: {}",
            text(&again)
        );
        assert_eq!(records(&dir.path().join("items.jsonl")).0.len(), 10);
    }
}

/// A reject sent pretty-printed, then re-sent with its keys in another
/// order: one line of the rejects file, in canonical form, kept once.
#[tokio::test]
async fn a_reject_sent_pretty_then_in_another_key_order_is_one_line_kept_once() {
    let bodies = [
        "{\"data\": [\n  {\"id\": 1, \"name\": \"ok\"},\n  {\n    \"name\": \"no id\",\n    \"tags\": {\"b\": 1, \"a\": 2}\n  }\n]}",
        r#"{"data":[{"name":"ok","id":1},{"tags":{"a":2,"b":1},"name":"no id"}]}"#,
    ];
    let served = Arc::new(Mutex::new(0usize));
    let server = wiremock::MockServer::start().await;
    let count = served.clone();
    wiremock::Mock::given(wiremock::matchers::path("/items"))
        .respond_with(move |_: &wiremock::Request| {
            let mut n = count.lock().unwrap();
            let body = bodies[(*n).min(1)];
            *n += 1;
            ResponseTemplate::new(200).set_body_raw(body, "application/json")
        })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "name = \"items\"\nurl = \"{}/items\"\nrecords = \"/data\"\nid = \"/id\"\n",
        server.uri()
    );
    for (nth, new) in [(1, "(1 new)"), (2, "(0 new)")] {
        let output = run(dir.path(), &file, &[]).await;
        assert_eq!(
            output.status.code(),
            Some(3),
            "run {nth}: {}",
            text(&output)
        );
        assert!(
            String::from_utf8_lossy(&output.stdout).contains(new),
            "run {nth}: {}",
            text(&output)
        );
    }
    let rejects = std::fs::read_to_string(dir.path().join("items.rejects.jsonl")).unwrap();
    assert_eq!(rejects.lines().count(), 1, "{rejects}");
    let line: Value = serde_json::from_str(rejects.trim_end()).unwrap();
    assert_eq!(
        line["raw"].to_string(),
        r#"{"name":"no id","tags":{"a":2,"b":1}}"#
    );
}

/// A POST list endpoint that takes its query and its cursor in the JSON
/// body: every request is a POST of `[body]` with the cursor at the top
/// level, and every record lands once.
#[tokio::test]
async fn a_post_endpoint_with_the_cursor_in_the_body_loads_every_record_once() {
    let api = Api::new(Style::Cursor, items(10));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "name = \"items\"\nurl = \"{}/items\"\nrecords = \"/data\"\nid = \"/id\"\nmethod = \"POST\"\n\
         [body]\nfilter = {{ state = \"open\" }}\nlimit = 4\n\
         [paginate]\nstyle = \"cursor\"\ncursor = \"/meta/next_cursor\"\nparam_in = \"body\"\n",
        server.uri()
    );
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let (written, ids) = records(&dir.path().join("items.jsonl"));
    assert_eq!(written.len(), 10);
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
    let bodies = api.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert_eq!(bodies[0], json!({"filter": {"state": "open"}, "limit": 4}));
    assert_eq!(
        bodies[1],
        json!({"filter": {"state": "open"}, "limit": 4, "cursor": "c4"})
    );
    for url in api.seen.lock().unwrap().iter() {
        assert_eq!(url.query(), None, "the cursor is in the body: {url}");
    }
}

/// Records whose time is Unix seconds (Slack's `updated`): read as UTC
/// times, the cursor sent back as a number; `initial` starts a first
/// incremental run, and `lag` asks from that far before the cursor, what
/// is met again not written twice.
#[tokio::test]
async fn unix_times_are_read_and_sent_back_as_numbers_from_initial_and_less_the_lag() {
    const T0: u64 = 1_767_225_600; // 2026-01-01T00:00:00Z
    let users: Arc<Mutex<Vec<Value>>> = Arc::new(Mutex::new(
        (1..=5)
            .map(|i| json!({"id": format!("U{i}"), "name": format!("user {i}"), "updated": T0 + i}))
            .collect(),
    ));
    let asked: Arc<Mutex<Vec<Option<u64>>>> = Arc::default();
    let server = wiremock::MockServer::start().await;
    let (served, seen) = (users.clone(), asked.clone());
    wiremock::Mock::given(wiremock::matchers::path("/users.list"))
        .respond_with(move |request: &wiremock::Request| {
            let oldest = request
                .url
                .query_pairs()
                .find(|(k, _)| k == "oldest")
                .map(|(_, v)| v.parse::<u64>().expect("the cursor is sent as a number"));
            seen.lock().unwrap().push(oldest);
            let members: Vec<Value> = served
                .lock()
                .unwrap()
                .iter()
                .filter(|u| oldest.is_none_or(|o| u["updated"].as_u64().unwrap() >= o))
                .cloned()
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({"ok": true, "members": members}))
        })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "name = \"users\"\nurl = \"{}/users.list\"\nrecords = \"/members\"\nid = \"/id\"\n\
         updated_at = \"/updated\"\nupdated_at_unit = \"s\"\n\
         [incremental]\nparam = \"oldest\"\ninitial = {}\nlag = \"2s\"\n",
        server.uri(),
        T0 + 3
    );

    // Nothing held: from `initial` less the lag.
    let first = run(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert_eq!(asked.lock().unwrap().clone(), [Some(T0 + 1)]);
    assert_eq!(records(&dir.path().join("items.jsonl")).0.len(), 5);

    // One user changes; the next run asks from the newest held time (user
    // 5's) less the lag, meets users 3 and 5 again and writes only user 4.
    users.lock().unwrap()[3] = json!({"id": "U4", "name": "user 4, renamed", "updated": T0 + 10});
    let second = run(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert_eq!(asked.lock().unwrap()[1], Some(T0 + 3));
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("3 records read, 1 new rows"),
        "{}",
        text(&second)
    );
    let (written, _) = records(&dir.path().join("items.jsonl"));
    assert_eq!(written.len(), 6);
    assert_eq!(
        written[5]["updated"],
        json!(T0 + 10),
        "the record keeps its number"
    );
}

/// Two resources of one file, on one server: each into its own file of
/// `--out DIR`, one summary line each in file order, `--resource` runs one,
/// and `--pg-table` (one output's name) is refused before any request.
#[tokio::test]
async fn many_resources_load_each_into_its_own_output_and_one_is_chosen_by_name() {
    let server = wiremock::MockServer::start().await;
    let (items_api, tags_api) = (
        Api::new(Style::NextUrl, items(6)),
        Api::new(Style::Offset, items(3)),
    );
    for (path, api) in [("/v1/items", &items_api), ("/v1/tags", &tags_api)] {
        wiremock::Mock::given(wiremock::matchers::path(path))
            .respond_with(api.clone())
            .mount(&server)
            .await;
    }
    let file = format!(
        "name = \"shop\"\nurl = \"{}/v1/\"\nrecords = \"/data\"\nid = \"/id\"\n\
         [paginate]\nstyle = \"next_url\"\nnext = \"/next\"\n\
         [[resource]]\nname = \"items\"\npath = \"items\"\n\
         [[resource]]\nname = \"tags\"\npath = \"tags\"\n\
         [resource.paginate]\nstyle = \"offset\"\nlimit = 4\ntotal = \"/count\"\n",
        server.uri()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shop.toml");
    std::fs::write(&path, &file).unwrap();
    let etl = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
        command
            .arg("run")
            .arg(&path)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    };
    let out = dir.path().join("lake");
    let out = out.to_str().unwrap();

    let first = etl(&["--out", out]).output().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("done: ")).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("done: items: ") && lines[0].contains("6 new rows"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("done: tags: ") && lines[1].contains("3 new rows"),
        "{stdout}"
    );
    let (items_written, ids) = records(&dir.path().join("lake/items.jsonl"));
    assert_eq!(items_written.len(), 6);
    assert!(ids.values().all(|&n| n == 1));
    assert_eq!(records(&dir.path().join("lake/tags.jsonl")).0.len(), 3);

    // One resource by name: only its requests, and nothing written twice.
    let (items_before, tags_before) = (items_api.requests(), tags_api.requests());
    let again = etl(&["--out", out, "--resource", "tags"])
        .output()
        .await
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("done: tags: "),
        "{}",
        text(&again)
    );
    assert_eq!(items_api.requests(), items_before, "items not read");
    assert!(tags_api.requests() > tags_before);
    assert_eq!(records(&dir.path().join("lake/tags.jsonl")).0.len(), 3);

    for (args, says) in [
        (
            vec!["--out", out, "--pg-table", "t"],
            "--pg-table names one output",
        ),
        (
            vec!["--out", out, "--rejects", "r.jsonl"],
            "--rejects names one output",
        ),
        (vec!["--resource", "nope"], "--resource nope"),
    ] {
        let before = items_api.requests() + tags_api.requests();
        let refused = etl(&args).output().await.unwrap();
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&refused)
        );
        assert!(
            text(&refused).contains(says),
            "{args:?}: {}",
            text(&refused)
        );
        assert_eq!(
            items_api.requests() + tags_api.requests(),
            before,
            "nothing requested"
        );
    }
}

#[tokio::test]
async fn a_429_and_a_503_are_waited_out_and_bearer_auth_stays_secret() {
    let mut api = Api::new(Style::NextUrl, items(6));
    api.token = Some("s3cret-t0ken".into());
    // A 503 (backoff: 1 s), a 429 in seconds (1 s), then a 429 whose
    // HTTP-date lies about 2 s past the time it is sent: the run waits the
    // server's time for both 429s.
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(4));
    api.script.lock().unwrap().extend([
        ResponseTemplate::new(503).set_body_string("down for a moment"),
        ResponseTemplate::new(429).insert_header("retry-after", "1"),
        ResponseTemplate::new(429).insert_header("retry-after", date.as_str()),
    ]);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, BEARER);
    let output = run_with_token(dir.path(), &file, "s3cret-t0ken").await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rate limited") && stderr.contains("HTTP 503"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("retry_after=true").count(),
        2,
        "both 429s waited the server's time: {stderr}"
    );
    assert_eq!(records(&dir.path().join("items.jsonl")).0.len(), 6);
    // Two pages of 4, plus the three failures.
    assert_eq!(api.requests(), 5);
    for place in [
        text(&output),
        std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap(),
    ] {
        assert!(!place.contains("s3cret-t0ken"), "the token leaked: {place}");
    }

    // Without the variable: exit 2 before any request, naming it.
    let before = api.requests();
    let missing = run(dir.path(), &file, &[]).await;
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(
        text(&missing).contains("ITEMS_TOKEN is not set"),
        "{}",
        text(&missing)
    );
    assert_eq!(api.requests(), before);
}

#[tokio::test]
async fn unreadable_records_are_rejected_once_and_the_run_exits_3() {
    let mut all = items(5);
    all.insert(1, json!("not an object"));
    all.insert(3, json!({"name": "no id"}));
    all.insert(4, json!({"id": 2.5, "name": "fractional id"}));
    let api = Api::new(Style::Offset, all);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::Offset, "");
    for _ in 0..2 {
        let output = run(dir.path(), &file, &[]).await;
        assert_eq!(output.status.code(), Some(3), "{}", text(&output));
        assert!(
            text(&output).contains("3 entries rejected"),
            "{}",
            text(&output)
        );
    }
    assert_eq!(records(&dir.path().join("items.jsonl")).0.len(), 5);
    let rejects = std::fs::read_to_string(dir.path().join("items.rejects.jsonl")).unwrap();
    let rejects: Vec<Value> = rejects
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rejects.len(), 3, "each kept once: {rejects:?}");
    assert_eq!(rejects[0]["raw"], json!("not an object"));
    assert!(rejects[0]["error"]
        .as_str()
        .unwrap()
        .contains("not a JSON object"));
    assert!(rejects[1]["error"]
        .as_str()
        .unwrap()
        .contains("/id: not found"));
}

#[tokio::test]
async fn a_next_link_to_another_origin_is_refused_before_any_request_goes_there() {
    let elsewhere = Api::new(Style::NextUrl, items(2));
    let other = elsewhere.clone().serve().await;
    let mut api = Api::new(Style::NextUrl, items(8));
    api.next_override = Some(format!("{}/items?offset=4", other.uri()));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, BEARER);
    let output = run_with_token(dir.path(), &file, "tok").await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let other_origin = other.uri();
    assert!(
        text(&output).contains(&format!("origin {other_origin}")),
        "names the refused origin: {}",
        text(&output)
    );
    assert_eq!(
        elsewhere.requests(),
        0,
        "no request went to the other origin"
    );
    assert_eq!(
        records(&dir.path().join("items.jsonl")).0.len(),
        4,
        "the first page stays written"
    );
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_and_names_it() {
    let elsewhere = Api::new(Style::NextUrl, items(2));
    let other = elsewhere.clone().serve().await;
    let api = Api::new(Style::NextUrl, items(8));
    api.script.lock().unwrap().push_back(
        ResponseTemplate::new(302)
            .insert_header("location", format!("{}/items", other.uri()).as_str()),
    );
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, BEARER);
    let output = run_with_token(dir.path(), &file, "tok").await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains(&format!("redirect to {}", other.uri())),
        "{}",
        text(&output)
    );
    assert_eq!(
        elsewhere.requests(),
        0,
        "no request went to the other origin"
    );
    assert_eq!(api.requests(), 1, "refused, not retried");
}

#[tokio::test]
async fn bodies_that_are_not_pages_fail_the_run_and_keep_the_pages_before() {
    for (body, says) in [
        (
            ResponseTemplate::new(200).set_body_string("<html>oops</html>"),
            "not JSON",
        ),
        (
            ResponseTemplate::new(200).set_body_json(json!({"items": []})),
            "no array at `records`",
        ),
        // Slack's answer to a request without a token: a 200 whose body
        // names the API's own error, quoted in ours.
        (
            ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "not_authed"})),
            r#"the body's members are `error`, `ok`; its `error` says "not_authed""#,
        ),
    ] {
        let mut api = Api::new(Style::LinkHeader, items(8));
        // The first page as usual, then the bad body.
        api.script_from = 1;
        api.script.lock().unwrap().push_back(body);
        let server = api.clone().serve().await;
        let dir = tempfile::tempdir().unwrap();
        let file = pipeline(&server.uri(), Style::LinkHeader, "");
        let output = run(dir.path(), &file, &[]).await;
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        assert!(text(&output).contains(says), "{}", text(&output));
        assert_eq!(records(&dir.path().join("items.jsonl")).0.len(), 4);
        assert_eq!(api.requests(), 2, "never retried");
        drop(server);
    }
}

/// `write = "replace"` into JSONL: the file becomes the run's records,
/// each once, switched in whole at the end; a run that fails leaves it as
/// it was and nothing staged beside it; an empty run empties it; what a
/// killed run staged is removed by the next.
#[tokio::test]
async fn a_replace_switches_the_file_at_the_end_and_a_failed_run_leaves_it() {
    let mut api = Api::new(Style::LinkHeader, items(10));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("items.jsonl");
    let file = format!(
        "write = \"replace\"\n{}",
        pipeline(&server.uri(), Style::LinkHeader, "")
    );
    let ids = |path: &Path| {
        let (lines, counts) = records(path);
        assert!(
            counts.values().all(|&n| n == 1),
            "each record once: {counts:?}"
        );
        let mut ids: Vec<i64> = lines.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        ids.sort_unstable();
        ids
    };
    let staged = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().contains(".replacing-")
            })
            .count()
    };
    // A killed run's file, of a process long gone.
    std::fs::write(dir.path().join(".items.jsonl.replacing-4194304999"), "{}\n").unwrap();
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(ids(&out), (1..=10).collect::<Vec<_>>());
    assert_eq!(staged(dir.path()), 0, "the killed run's file is gone");

    // Upstream, three records left, one of them changed: the file is them.
    {
        let mut held = api.items.lock().unwrap();
        held.truncate(3);
        held[1]["name"] = json!("renamed");
    }
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(ids(&out), [1, 2, 3]);
    assert_eq!(records(&out).0[1]["name"], "renamed");

    // A run that fails after its first page: the file is as it was.
    api.items
        .lock()
        .unwrap()
        .extend(items(9).into_iter().skip(3));
    api.script_from = 1;
    api.script
        .lock()
        .unwrap()
        .push_back(ResponseTemplate::new(200).set_body_string("<html>oops</html>"));
    let failing = api.clone().serve().await;
    let broken = file.replace(&server.uri(), &failing.uri());
    let output = run(dir.path(), &broken, &[]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(ids(&out), [1, 2, 3], "the old content, whole");
    assert_eq!(staged(dir.path()), 0, "nothing staged left behind");

    // A run that reads no record empties the file.
    api.items.lock().unwrap().clear();
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(ids(&out), Vec::<i64>::new());
    assert!(out.exists());
}

#[tokio::test]
async fn a_pagination_loop_ends_the_run_with_an_error_naming_it() {
    let mut api = Api::new(Style::NextUrl, items(8));
    api.next_override = Some("/items".into());
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &pipeline(&server.uri(), Style::NextUrl, ""),
        &[],
    )
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("pagination loop"),
        "{}",
        text(&output)
    );
    assert_eq!(api.requests(), 1);

    // A server that ignores the page parameter: the same page again.
    let api = Api::new(Style::PageNumber, items(8));
    let server = api.clone().serve().await;
    let file = pipeline(&server.uri(), Style::PageNumber, "").replace(
        "style = \"page_number\"\n",
        "style = \"page_number\"\npage_param = \"p\"\n",
    );
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("repeats the one before"),
        "{}",
        text(&output)
    );
    assert_eq!(api.requests(), 2);
}

#[tokio::test]
async fn invalid_files_and_an_unwritable_metrics_file_exit_2_before_any_request() {
    let api = Api::new(Style::NextUrl, items(2));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let good = pipeline(&server.uri(), Style::NextUrl, "");
    let cases = [
        (good.replace("records =", "records = = "), vec![], "line 3"),
        (
            good.replace("records =", "recods ="),
            vec![],
            "did you mean `records`?",
        ),
        (
            format!("{good}limit = 4\n"),
            vec![],
            "`paginate.limit` is not a key of style next_url",
        ),
        (good.replace("\"/data\"", "\"data\""), vec![], "RFC 6901"),
        (good.clone(), vec!["--incremental"], "[incremental]"),
        (
            format!("write = \"merj\"\nprimary_key = \"id\"\n{good}"),
            vec![],
            "items.toml, line 1: `write` is \"merj\": the dispositions are append, merge, replace; did you mean `merge`?",
        ),
        (
            format!("write = \"merj\"\nprimary_key = \"id\"\n{good}"),
            vec![],
            "line 2: `primary_key`",
        ),
        (
            format!("hard_delete = \"/deleted\"\n{good}"),
            vec![],
            "`hard_delete` is for `write = \"merge\"`",
        ),
        (
            format!("write = \"replace\"\nshape = \"json\"\n{good}"),
            vec![],
            "`write = \"replace\"` makes a typed table",
        ),
        (
            format!("write = \"merge\"\n{good}"),
            vec![],
            "needs a table of one row per key (PostgreSQL or Delta), and a JSONL file keeps every line",
        ),
        (
            format!("write = \"replace\"\n{good}"),
            vec!["--max-pages", "1"],
            "--max-pages: resource items has `write = \"replace\"`, which needs every page",
        ),
        (
            format!("write = \"replace\"\n{good}"),
            vec!["--incremental"],
            "--incremental: resource items has `write = \"replace\"`",
        ),
        (
            format!("rate_limit = \"10/sec\"\n{good}"),
            vec![],
            "items.toml, line 1: `rate_limit` \"10/sec\" is not a rate",
        ),
        (
            format!("rate_limit = \"0/s\"\n{good}"),
            vec![],
            "\"0/s\" is not a rate",
        ),
        (
            format!("rate_limit = 10\n{good}"),
            vec![],
            "`rate_limit` must be a string such as \"10/s\"",
        ),
        (
            format!("concurrency = 0\n{good}"),
            vec![],
            "items.toml, line 1: `concurrency` must be a whole number of at least 1",
        ),
        (
            format!("concurrency = 2.5\n{good}"),
            vec![],
            "`concurrency` must be a whole number of at least 1",
        ),
        (
            good.clone(),
            vec!["--metrics-file", "/nonexistent-dir/m.prom"],
            "--metrics-file /nonexistent-dir/m.prom: cannot be written",
        ),
    ];
    for (file, args, says) in cases {
        let output = run(dir.path(), &file, &args).await;
        assert_eq!(output.status.code(), Some(2), "{says}: {}", text(&output));
        assert!(text(&output).contains(says), "{says}: {}", text(&output));
    }
    assert_eq!(api.requests(), 0, "no request for an invalid run");

    // `launches` too.
    let output = Command::new(env!("CARGO_BIN_EXE_launches"))
        .args([
            "--base-url",
            &format!("{}/items", server.uri()),
            "--metrics-file",
            "/nonexistent-dir/m.prom",
        ])
        .arg("--out")
        .arg(dir.path().join("l.jsonl"))
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert_eq!(api.requests(), 0);
}

#[tokio::test]
async fn changes_upstream_then_incremental_write_only_what_changed() {
    let api = Api::new(Style::NextUrl, items(9));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        &server.uri(),
        Style::NextUrl,
        "[incremental]\nparam = \"updated_since\"\n",
    );
    let first = run(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert!(
        text(&first).contains("incremental from the start"),
        "{}",
        text(&first)
    );

    // Two records change, one is new.
    {
        let mut items = api.items.lock().unwrap();
        items[2]["name"] = json!("item 3, renamed");
        items[2]["updated_at"] = json!("2026-11-02T00:00:00Z");
        items[5]["tags"]["colour"] = json!("red");
        items[5]["updated_at"] = json!("2026-11-02T00:00:01Z");
        items.push(json!({"id": 10, "name": "item 10", "updated_at": "2026-11-02T00:00:02Z"}));
    }
    api.seen.lock().unwrap().clear();
    let second = run(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    // The cursor is the newest update time held; the record at the cursor
    // comes again and is not written twice.
    assert!(
        text(&second).contains("incremental since 2026-11-01T00:00:09Z"),
        "{}",
        text(&second)
    );
    assert!(
        text(&second).contains("4 records read, 3 new rows"),
        "{}",
        text(&second)
    );
    let first_request = api.seen.lock().unwrap()[0].clone();
    assert!(
        first_request
            .query_pairs()
            .any(|(k, v)| k == "updated_since" && v == "2026-11-01T00:00:09Z"),
        "{first_request}"
    );
    let (written, ids) = records(&dir.path().join("items.jsonl"));
    assert_eq!(written.len(), 12, "9, then 2 changed rows and 1 new");
    assert_eq!(ids["3"], 2);
    assert_eq!(ids["10"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_resumes_to_every_record_exactly_once() {
    let mut api = Api::new(Style::Cursor, items(24));
    api.page_size = 2;
    api.delay = Duration::from_millis(30);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::Cursor, "");
    for (pages, extra_ms) in [(1, 0), (2, 13), (3, 29)] {
        let child = etl(dir.path(), &file, &[]).spawn().unwrap();
        common::kill_after(child, pages, Duration::from_millis(extra_ms)).await;
    }
    let before = records(&dir.path().join("items.jsonl")).0.len();
    assert!(
        (2..24).contains(&before),
        "the kills landed mid-run: {before}"
    );
    let finished = run(dir.path(), &file, &[]).await;
    assert_eq!(finished.status.code(), Some(0), "{}", text(&finished));
    let (written, ids) = records(&dir.path().join("items.jsonl"));
    assert_eq!(written.len(), 24);
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
}

/// Three `etl run` processes loading one API into one PostgreSQL table at
/// once, then a fourth after a change upstream: every record once, and one
/// row per id in `items_current` (a typed table: the file names no shape).
/// Opt in with `ETL_PG_URL` and
/// `--include-ignored` (`.ci/run` does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn three_concurrent_loaders_into_one_table_write_every_record_once() {
    let table = "etl_run_items_concurrent";
    let (pg, client) = postgres(table).await;
    let mut api = Api::new(Style::Offset, items(40));
    api.delay = Duration::from_millis(5);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::Offset, "");
    std::fs::write(dir.path().join("items.toml"), &file).unwrap();
    let loader = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
        command
            .arg("run")
            .arg(dir.path().join("items.toml"))
            .args(["--out", &pg, "--pg-table", table])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command.output()
    };
    let (a, b, c) = tokio::join!(loader(), loader(), loader());
    let mut new = 0;
    for output in [a, b, c] {
        let output = output.unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        let out = String::from_utf8_lossy(&output.stdout).to_string();
        let n: usize = out
            .split(" new rows")
            .next()
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        new += n;
    }
    assert_eq!(new, 40, "the three runs wrote 40 rows between them");

    api.items.lock().unwrap()[0]["name"] = json!("item 1, renamed");
    let output = loader().await.unwrap();
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 new rows"),
        "{}",
        text(&output)
    );

    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT _etl_id), (SELECT count(*) FROM {table}_current), \
                 (SELECT name FROM {table}_current WHERE _etl_id = '1') FROM {table}"
            ),
            &[],
        )
        .await
        .unwrap();
    let (rows, ids, current, name): (i64, i64, i64, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!((rows, ids, current), (41, 40, 40));
    assert_eq!(name, "item 1, renamed", "the view shows the newest");
    // The key is the JSONL file's for the same record.
    let jsonl = run(dir.path(), &file, &[]).await;
    assert_eq!(jsonl.status.code(), Some(0), "{}", text(&jsonl));
    let line = std::fs::read_to_string(dir.path().join("items.jsonl")).unwrap();
    let first = line.lines().next().unwrap();
    let key = etl_core::content_id("json", first);
    let held: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE _etl_key = $1"),
            &[&key],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 1, "the JSONL line's key is the table's");
}

/// The source itself on tokio's paused clock: a 429's Retry-After in
/// seconds and as an HTTP-date, and a 503's, are waited out as asked, and the secret of
/// `query` auth reaches the server on every request but no URL shown.
#[tokio::test(start_paused = true)]
async fn retry_after_in_seconds_and_as_a_date_is_waited_out_and_a_query_secret_is_never_shown() {
    use etl_sources::rest::{Resource, RestSource};
    use etl_sources::{Source, SourceOptions};

    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3));
    let mut all = items(6);
    all.push(json!({"name": "no id"}));
    let api = Api::new(Style::NextUrl, all);
    api.script.lock().unwrap().extend([
        ResponseTemplate::new(429).insert_header("retry-after", "7"),
        ResponseTemplate::new(429).insert_header("retry-after", date.as_str()),
        // A 503's Retry-After is the server's wait too (one reading of
        // HTTP for both sources, etl_core::http).
        ResponseTemplate::new(503).insert_header("retry-after", "5"),
    ]);
    let server = api.clone().serve().await;
    let file = format!(
        "{}[auth]\ntype = \"query\"\nname = \"api_key\"\nenv = \"K\"\n",
        pipeline(&server.uri(), Style::NextUrl, "")
    );
    let pipeline = Resource::parse(&file, "items.toml", |_| Some("q-s3cret".into())).unwrap();
    let options = SourceOptions {
        timeout: None,
        ..SourceOptions::default()
    };
    let mut source = RestSource::new(pipeline, options).unwrap();

    let start = tokio::time::Instant::now();
    let first = source.next_page().await.unwrap().unwrap();
    let waited = start.elapsed();
    // What the server asked: 7 s, then the date's 2 or 3 s (rounded up),
    // then the 503's 5 s. The paused clock may run further while the
    // runtime idles on a socket (hyper's pool timers), so the wait is
    // bounded below only.
    let asked = source.throttled();
    assert!(
        (Duration::from_secs(14)..=Duration::from_secs(15)).contains(&asked),
        "{asked:?}"
    );
    assert!(waited >= asked, "waited {waited:?} of {asked:?}");
    let second = source.next_page().await.unwrap().unwrap();
    assert!(source.next_page().await.unwrap().is_none());
    assert_eq!(first.rows.len() + second.rows.len(), 6);
    assert_eq!(second.rejects.len(), 1);
    let e = source.read_since(None).unwrap_err();
    assert!(e.to_string().contains("after the first page"), "{e}");

    for url in api.seen.lock().unwrap().iter() {
        assert!(
            url.query_pairs()
                .any(|(k, v)| k == "api_key" && v == "q-s3cret"),
            "{url}"
        );
    }
    for shown in [
        first.url.as_str(),
        second.url.as_str(),
        second.rejects[0].source.as_str(),
    ] {
        assert!(!shown.contains("q-s3cret"), "{shown}");
    }
}

#[test]
fn the_example_pipeline_files_read() {
    use etl_sources::rest::Resource;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut styles = Vec::new();
    for name in [
        "launch-library.toml",
        "github-issues.toml",
        "stripe-customers.toml",
        "post-search.toml",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let pipeline = Resource::parse(&text, name, |_| Some("token".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        if styles.len() < 2 {
            assert!(pipeline.check_incremental().is_ok(), "{name}");
        }
        styles.push(format!("{:?} {:?}", pipeline.paginate, pipeline.param_in));
    }
    assert!(styles[0].starts_with("NextUrl {"), "{}", styles[0]);
    assert!(styles[1].starts_with("LinkHeader"), "{}", styles[1]);
    assert!(
        styles[2].starts_with("Cursor { from: LastRecord"),
        "{}",
        styles[2]
    );
    assert!(styles[3].ends_with("Body"), "{}", styles[3]);
    let text = std::fs::read_to_string(dir.join("github-issues-comments.toml")).unwrap();
    let all = etl_sources::Pipeline::parse_with(&text, "github-issues-comments.toml", |_| {
        Some("t".into())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let all = all.resources();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].parent.as_deref(), Some("issues"));
    assert!(all.iter().all(|p| p.check_incremental().is_ok()));
}

#[tokio::test]
async fn metrics_file_and_json_logs_are_those_of_launches_and_hold_no_secret() {
    let api = Api::new(Style::Offset, items(10));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("items.prom");
    let file = pipeline(&server.uri(), Style::Offset, BEARER)
        .replace("type = \"bearer\"", "type = \"query\"\nname = \"key\"");
    let output = etl(
        dir.path(),
        &file,
        &[
            "--metrics-file",
            prom.to_str().unwrap(),
            "--log-format",
            "json",
        ],
    )
    .env("ITEMS_TOKEN", "m-s3cret")
    .output()
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    // Every stderr line is one JSON object; the last is the run's summary.
    let events: Vec<Value> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let done = events.last().unwrap();
    assert_eq!(done["fields"]["message"], "done");
    assert_eq!(
        (
            done["fields"]["pages"].as_u64(),
            done["fields"]["new"].as_u64()
        ),
        (Some(3), Some(10))
    );
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(metrics.contains("etl_pages_total 3"), "{metrics}");
    assert!(
        metrics.contains("etl_sink_rows_total{outcome=\"new\"} 10"),
        "{metrics}"
    );
    assert!(metrics.contains("etl_run_success 1"), "{metrics}");
    for place in [metrics, text(&output)] {
        assert!(!place.contains("m-s3cret"), "{place}");
    }
    assert!(api
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|u| u.query_pairs().any(|(k, v)| k == "key" && v == "m-s3cret")));
}

#[tokio::test]
async fn the_demo_runs_with_no_network_and_a_rerun_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo.jsonl");
    let demo = || {
        Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("demo")
            .arg("--out")
            .arg(&out)
            .output()
    };
    let first = demo().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("style = \"next_url\""),
        "prints its file: {stdout}"
    );
    assert!(stdout.contains("12 records read, 12 new rows"), "{stdout}");
    let again = demo().await.unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("12 records read, 0 new rows"),
        "{}",
        text(&again)
    );
    assert_eq!(records(&out).0.len(), 12);
}

/// A source of the pipeline `file` on the paused clock (no request
/// timeout: the idle runtime would fire it), its throttle made as `etl
/// run` makes it, with `max_retry_after`.
fn paused_source(
    file: &str,
    throttle: &std::sync::Arc<etl_sources::throttle::Throttle>,
    max_retry_after: Option<Duration>,
) -> etl_sources::rest::RestSource {
    use etl_sources::rest::{Resource, RestSource};
    let pipeline = Resource::parse(file, "items.toml", |_| None).unwrap();
    let options = etl_sources::SourceOptions {
        timeout: None,
        max_retry_after,
        throttle: throttle.clone(),
    };
    RestSource::new(pipeline, options).unwrap()
}

/// Unix seconds `secs` from now, as `X-RateLimit-Reset` says it.
fn reset_in(secs: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now.as_secs() + secs).to_string()
}

#[tokio::test(start_paused = true)]
async fn a_spent_quota_is_waited_out_as_github_and_the_ietf_draft_say() {
    use etl_sources::Source;

    let api = Api::new(Style::NextUrl, items(6));
    api.script.lock().unwrap().extend([
        // GitHub's answer to a spent hour: a 403, not a 429.
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-limit", "5000")
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset_in(120).as_str())
            .insert_header("x-ratelimit-resource", "core")
            .set_body_string(r#"{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}"#),
        // The IETF draft's: seconds to wait.
        ResponseTemplate::new(429)
            .insert_header("ratelimit-remaining", "0")
            .insert_header("ratelimit-reset", "20"),
    ]);
    let server = api.clone().serve().await;
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let throttle = Default::default();
    let mut source = paused_source(&file, &throttle, Some(Duration::from_secs(600)));
    let start = tokio::time::Instant::now();
    let first = source.next_page().await.unwrap().unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(139), "{waited:?}");
    assert!(
        source.throttled() >= Duration::from_secs(139),
        "{:?}",
        source.throttled()
    );
    let second = source.next_page().await.unwrap().unwrap();
    assert!(source.next_page().await.unwrap().is_none());
    assert_eq!(first.rows.len() + second.rows.len(), 6);
    assert_eq!(api.requests(), 4, "two waits, then the two pages");
}

#[tokio::test(start_paused = true)]
async fn a_429_holds_back_every_request_to_its_origin_not_only_its_own() {
    use etl_sources::Source;

    let api = Api::new(Style::NextUrl, items(4));
    api.script
        .lock()
        .unwrap()
        .push_back(ResponseTemplate::new(429).insert_header("retry-after", "30"));
    let server = api.clone().serve().await;
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let throttle = Default::default();
    // Two sources of one run: the first may not wait that long, and fails;
    // the second, sent after, waits out what the first was asked.
    let mut impatient = paused_source(&file, &throttle, Some(Duration::from_secs(5)));
    let mut patient = paused_source(&file, &throttle, None);
    let e = impatient.next_page().await.unwrap_err();
    assert!(e.to_string().contains("30"), "{e}");
    let start = tokio::time::Instant::now();
    let page = patient.next_page().await.unwrap().unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(29),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(page.rows.len(), 4);
    assert_eq!(
        api.requests(),
        2,
        "the held request was sent once, after the wait"
    );
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_holds_across_a_run_retries_included() {
    use etl_core::{IdempotentSink, JsonlRejects};
    use etl_sources::pipeline;
    use etl_sources::rest::JsonRecord;
    use etl_sources::throttle::Throttle;

    let mut api = Api::new(Style::NextUrl, items(20));
    api.page_size = 1;
    api.script_from = 5;
    api.script
        .lock()
        .unwrap()
        .push_back(ResponseTemplate::new(500));
    let server = api.clone().serve().await;
    let file = format!(
        "rate_limit = \"10/s\"\n{}",
        pipeline(&server.uri(), Style::NextUrl, "")
    );
    let limit = etl_sources::rest::Resource::parse(&file, "items.toml", |_| None)
        .unwrap()
        .rate_limit;
    assert_eq!(limit.map(|l| l.to_string()).as_deref(), Some("10/s"));
    let throttle = std::sync::Arc::new(Throttle::new(limit));
    let mut source = paused_source(&file, &throttle, None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("items.jsonl");
    let sink = IdempotentSink::resume_as::<JsonRecord>(&out).unwrap();
    let rejects = JsonlRejects::open(pipeline::rejects_path(&out)).unwrap();
    let start = tokio::time::Instant::now();
    let summary = pipeline::run(&mut source, &sink, &rejects, None)
        .await
        .unwrap();
    assert_eq!(summary.new_rows, 20);
    // 21 requests (20 pages and the retried 500) at 10 a second, evenly:
    // at least 2 s from the first to the last.
    assert_eq!(api.requests(), 21);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(records(&out).0.len(), 20);
}

#[tokio::test]
async fn a_reset_beyond_max_retry_after_ends_the_run_naming_it_and_keeps_the_pages_before() {
    let mut api = Api::new(Style::NextUrl, items(8));
    api.script_from = 1;
    api.script.lock().unwrap().push_back(
        ResponseTemplate::new(403)
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset_in(3600).as_str())
            .set_body_string(r#"{"message":"API rate limit exceeded"}"#),
    );
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let output = run(dir.path(), &file, &["--max-retry-after", "60s"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(
        said.contains("3600") || said.contains("3599"),
        "the wait is named: {said}"
    );
    assert!(said.contains("60"), "and the ceiling: {said}");
    assert_eq!(
        records(&dir.path().join("items.jsonl")).0.len(),
        4,
        "page 1 stays"
    );
    assert_eq!(api.requests(), 2, "not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_pages_go_eight_at_a_time_are_written_in_order_and_a_kill_then_incremental_loses_nothing(
) {
    let delay = Duration::from_millis(40);
    let mut api = Api::new(Style::Offset, items(96));
    api.delay = delay;
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "concurrency = 8\n{}",
        pipeline(
            &server.uri(),
            Style::Offset,
            "[incremental]\nparam = \"updated_since\"\n"
        )
    );
    let out = dir.path().join("items.jsonl");

    // Killed mid-run, twice: what is written is a prefix, in order.
    let mut at_once = Vec::new();
    for pages in [3, 9] {
        api.arrivals.lock().unwrap().clear();
        let child = etl(dir.path(), &file, &["--incremental"]).spawn().unwrap();
        common::kill_after(child, pages, Duration::from_millis(7)).await;
        // One process's requests (a killed one's last are still held by
        // the server while the next starts).
        at_once.push(api.most_at_once(delay - Duration::from_millis(5)));
        let (written, _) = records(&out);
        let ids: Vec<u64> = written.iter().map(|r| r["id"].as_u64().unwrap()).collect();
        assert!(
            ids.len() < 96,
            "the kill landed mid-run ({} written)",
            ids.len()
        );
        assert_eq!(
            ids,
            (1..=ids.len() as u64).collect::<Vec<_>>(),
            "a prefix, in order"
        );
    }
    assert!(
        at_once.iter().all(|n| (2..=8).contains(n)),
        "requests in flight together: {at_once:?}"
    );

    let finished = run(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(finished.status.code(), Some(0), "{}", text(&finished));
    let (written, ids) = records(&out);
    assert_eq!(ids.len(), 96, "every record");
    assert!(ids.values().all(|&n| n == 1), "each once: {ids:?}");
    let order: Vec<u64> = written.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "pages written in their order");
}

#[tokio::test(start_paused = true)]
async fn a_success_that_spends_the_quota_holds_back_the_next_request_until_the_reset() {
    use etl_sources::Source;

    let api = Api::new(Style::NextUrl, items(2));
    // The last request of the window, answered: its page, and a quota of 0
    // left until 40 s from now.
    api.script.lock().unwrap().push_back(
        ResponseTemplate::new(200)
            .insert_header("ratelimit-remaining", "0")
            .insert_header("ratelimit-reset", "40")
            .set_body_json(json!({"data": items(2), "next": null})),
    );
    let server = api.clone().serve().await;
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let throttle = Default::default();
    let mut first = paused_source(&file, &throttle, None);
    let start = tokio::time::Instant::now();
    assert_eq!(first.next_page().await.unwrap().unwrap().rows.len(), 2);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    // The next request of the run, another source's, waits for the reset.
    let mut second = paused_source(&file, &throttle, None);
    assert_eq!(second.next_page().await.unwrap().unwrap().rows.len(), 2);
    assert!(
        start.elapsed() >= Duration::from_secs(40),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(api.requests(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_1_keeps_one_request_in_flight() {
    let delay = Duration::from_millis(30);
    let mut api = Api::new(Style::Offset, items(24));
    api.delay = delay;
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "concurrency = 1\n{}",
        pipeline(&server.uri(), Style::Offset, "")
    );
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(records(&dir.path().join("items.jsonl")).1.len(), 24);
    assert_eq!(api.requests(), 6, "24 items, 4 a page");
    assert_eq!(api.most_at_once(delay - Duration::from_millis(5)), 1);
}

/// A server whose pages put `next` before the records, as Django REST
/// framework and Launch Library do (`{"count", "next", ..., "data"}`):
/// `pages` pages of two items, each page's body made by `body(page, next,
/// data)`; every request's `page` is kept.
async fn next_first(
    pages: usize,
    body: fn(usize, &str, &str) -> String,
) -> (wiremock::MockServer, Arc<Mutex<Vec<String>>>) {
    let server = wiremock::MockServer::start().await;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let all = items(2 * pages);
    wiremock::Mock::given(wiremock::matchers::path("/items"))
        .respond_with(move |request: &wiremock::Request| {
            let page: usize = request
                .url
                .query_pairs()
                .find(|(k, _)| k == "page")
                .map_or(1, |(_, v)| v.parse().unwrap());
            seen.lock().unwrap().push(page.to_string());
            let next = if page < pages {
                format!("\"/items?page={}\"", page + 1)
            } else {
                "null".to_string()
            };
            let data = Value::from(
                all.iter()
                    .skip(2 * (page - 1))
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            ResponseTemplate::new(200)
                .set_delay(Duration::from_millis(5))
                .set_body_raw(body(page, &next, &data.to_string()), "application/json")
        })
        .mount(&server)
        .await;
    (server, asked)
}

/// `etl run` against [`next_first`]'s server of `pages` pages made by
/// `body`: the run's records, how often each id is there, and the pages
/// asked for.
async fn run_next_first(
    pages: usize,
    body: fn(usize, &str, &str) -> String,
) -> (Vec<Value>, Vec<String>) {
    let (server, asked) = next_first(pages, body).await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let (written, ids) = records(&dir.path().join("items.jsonl"));
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
    let asked = asked.lock().unwrap().clone();
    (written, asked)
}

/// A next URL that stands before the records is sent before the page is
/// read; it is the request the page's reading then asks for, so each page
/// is asked once. A body whose head says one next URL and whose reading
/// another (a member sent twice: a map keeps the last) is followed as read:
/// the guess is dropped.
#[tokio::test]
async fn a_next_url_before_the_records_goes_out_early_and_each_page_is_asked_once() {
    let (written, asked) = run_next_first(5, |page, next, data| {
        format!(r#"{{"count": 10, "page": {page}, "next": {next}, "data": {data}}}"#)
    })
    .await;
    assert_eq!(written.len(), 10);
    assert_eq!(asked, ["1", "2", "3", "4", "5"]);

    // The head says page 9; the page read says the real next one.
    let (written, asked) = run_next_first(3, |_, next, data| {
        format!(r#"{{"next": "/items?page=9", "next": {next}, "data": {data}}}"#)
    })
    .await;
    let order: Vec<u64> = written.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(order, [1, 2, 3, 4, 5, 6], "in order, each once");
    let real: Vec<&String> = asked.iter().filter(|p| *p != "9").collect();
    assert_eq!(real, ["1", "2", "3"], "{asked:?}");
}

/// The cursors `api::cursors_sent` should see for `stamps`: the initial
/// (none without one), then the newest held, each as the number the
/// records carry.
fn numbers_sent(stamps: Stamps) -> Vec<Option<String>> {
    let sent: [Option<&str>; 2] = match stamps {
        Stamps::Seconds => [None, Some("1767227249")],
        Stamps::SecondsFromInitial => [Some("1767225600"), Some("1767227249")],
        Stamps::Millis => [Some("1767225600000"), Some("1767227249123")],
    };
    sent.iter().map(|s| s.map(str::to_owned)).collect()
}

const STAMPS: [Stamps; 3] = [Stamps::Seconds, Stamps::SecondsFromInitial, Stamps::Millis];

/// `initial` and a held cursor go back in the records' own form, the held
/// one learnt from the record it came from where the file does not say:
/// Unix seconds (with or without a numeric `initial`), milliseconds with
/// `updated_at_unit = "ms"`; never RFC 3339 text, which such an API
/// refuses. Into a JSONL file here, PostgreSQL below, Delta in the Delta
/// tests.
#[tokio::test]
async fn a_held_cursor_of_unix_seconds_or_milliseconds_goes_back_as_that_number_into_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    for (i, stamps) in STAMPS.into_iter().enumerate() {
        let out = dir.path().join(format!("{i}.jsonl"));
        let sent = api::cursors_sent(dir.path(), &["--out", out.to_str().unwrap()], stamps).await;
        assert_eq!(sent, numbers_sent(stamps), "{stamps:?}");
    }
}

/// [`a_held_cursor_of_unix_seconds_or_milliseconds_goes_back_as_that_number_into_jsonl`],
/// into typed PostgreSQL tables.
#[tokio::test]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn a_held_cursor_of_unix_seconds_or_milliseconds_goes_back_as_that_number_into_postgres() {
    let dir = tempfile::tempdir().unwrap();
    for (i, stamps) in STAMPS.into_iter().enumerate() {
        let table = format!("etl_run_cursor_{i}");
        let (pg, client) = postgres(&table).await;
        let sent =
            api::cursors_sent(dir.path(), &["--out", &pg, "--pg-table", &table], stamps).await;
        assert_eq!(sent, numbers_sent(stamps), "{stamps:?}");
        drop_typed(&client, &table).await;
    }
}

/// A file with several problems: `etl run` prints every one, each with its
/// line, and exits 2 before any request.
#[tokio::test]
async fn every_problem_of_an_invalid_file_is_printed_before_any_request() {
    let api = Api::new(Style::NextUrl, items(3));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        &server.uri(),
        Style::NextUrl,
        "concurrency = 0\nupdated_at_unit = \"h\"\nmethod = \"PUT\"\n",
    );
    let output = run(dir.path(), &file, &[]).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: 3 problems:"), "{stderr}");
    for key in ["`concurrency`", "`updated_at_unit`", "`method`"] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
    assert_eq!(api.requests(), 0, "no request for an invalid file");
}

/// `etl schema` of an output with no typed table says so and prints none;
/// a resource the file lacks is a usage error naming those it has.
#[tokio::test]
async fn etl_schema_names_what_it_cannot_print() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("items.toml");
    std::fs::write(&path, pipeline("http://127.0.0.1:9", Style::Offset, "")).unwrap();
    let schema = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("schema")
            .arg(&path)
            .args(args)
            .output()
    };
    let out = dir.path().join("items.jsonl");
    let none = schema(&["--out", out.to_str().unwrap(), "--format", "json"])
        .await
        .unwrap();
    assert_eq!(none.status.code(), Some(0), "{}", text(&none));
    assert_eq!(
        String::from_utf8_lossy(&none.stdout).trim(),
        r#"{"tables":[]}"#
    );
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("items: no typed table"),
        "{}",
        text(&none)
    );
    let unknown = schema(&["--out", out.to_str().unwrap(), "--resource", "itms"])
        .await
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("itms") && stderr.contains("it has items"),
        "{stderr}"
    );
}

/// `shape = "typed"` with `etl run` into PostgreSQL: two processes at once,
/// then a run after a change upstream adds a member: typed columns, each
/// record once, the new member's column added, `items_current` typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn a_typed_table_loads_columns_from_two_runs_at_once_and_grows_with_the_api() {
    let table = "etl_run_items_typed";
    let (pg, client) = postgres(table).await;
    let api = Api::new(Style::Offset, items(40));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        &server.uri(),
        Style::Offset,
        "shape = \"typed\"\n[columns]\nscore = \"double\"\n",
    );
    let loader = || etl_into_postgres(dir.path(), &file, (&pg, table), &[]).output();
    let (a, b) = tokio::join!(loader(), loader());
    for output in [a, b] {
        let output = output.unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    }
    api.items.lock().unwrap()[0]["owner"] = json!({"login": "ada"});
    let output = loader().await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 new rows"),
        "{}",
        text(&output)
    );
    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT _etl_id), \
                 (SELECT count(*) FROM {table}_current), \
                 (SELECT owner__login FROM {table}_current WHERE id = 1), \
                 (SELECT sum(tags__size)::bigint FROM {table}_current), \
                 (SELECT count(*) FROM {table}_current WHERE score IS NULL) FROM {table}"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 41, "40 records and one change");
    assert_eq!(row.get::<_, i64>(1), 40);
    assert_eq!(row.get::<_, i64>(2), 40);
    assert_eq!(row.get::<_, Option<String>>(3).as_deref(), Some("ada"));
    assert_eq!(
        row.get::<_, Option<i64>>(4),
        Some((1..=40).map(|i| i % 3).sum())
    );
    assert_eq!(
        row.get::<_, i64>(5),
        40,
        "the hinted column is there, all null"
    );

    // `etl schema` prints what the loads made, as JSON and as text.
    let schema = |format: &'static str| {
        Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("schema")
            .arg(dir.path().join("items.toml"))
            .args(["--out", &pg, "--pg-table", table, "--format", format])
            .output()
    };
    let json_out = schema("json").await.unwrap();
    assert_eq!(json_out.status.code(), Some(0), "{}", text(&json_out));
    let doc: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let tables = doc["tables"].as_array().unwrap();
    assert_eq!(tables[0]["name"], table);
    assert_eq!(tables[0]["parent"], Value::Null);
    let column = |name: &str| {
        tables[0]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no column {name}: {doc}"))
    };
    assert_eq!(
        column("owner__login"),
        json!({"name": "owner__login", "type": "text", "path": "/owner/login", "hint": null})
    );
    assert_eq!(column("score")["hint"], "double");
    let text_out = schema("text").await.unwrap();
    let printed = String::from_utf8_lossy(&text_out.stdout);
    assert!(
        printed.starts_with(&format!("table {table}\n")),
        "{printed}"
    );
    assert!(
        printed.contains("owner__login") && printed.contains("/owner/login"),
        "{printed}"
    );
    drop_typed(&client, table).await;
}

/// A frozen table refuses a record whose value does not fit its column and
/// one with a new member: both are kept as rejects naming the member, and
/// counted as rejects are (the page's, the resource's, the exit status).
#[tokio::test]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn a_frozen_tables_refusals_are_counted_and_the_run_exits_3() {
    let table = "etl_run_frozen";
    let (pg, client) = postgres(table).await;
    let api = Api::new(Style::NextUrl, items(3));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(
        &server.uri(),
        Style::NextUrl,
        "[schema]\ncontract = \"freeze\"\n",
    );
    let json_logs = ["--log-format", "json"];
    let run = || etl_into_postgres(dir.path(), &file, (&pg, table), &json_logs).output();
    let first = run().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    api.items.lock().unwrap().extend(api::refused_by_freeze(3));
    let second = run().await.unwrap();
    assert_eq!(second.status.code(), Some(3), "{}", text(&second));
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        stdout.contains("3 records read, 0 new rows written")
            && stdout.contains("; 2 entries rejected (2 new) into table etl_run_frozen_rejects"),
        "{}",
        text(&second)
    );
    // The pages' log lines count them too.
    let rejected: u64 = String::from_utf8_lossy(&second.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "page loaded")
        .map(|l| l["fields"]["rejected"].as_u64().unwrap())
        .sum();
    assert_eq!(rejected, 2, "{}", text(&second));
    let errors: Vec<String> = client
        .query(
            &format!("SELECT error FROM {table}_rejects ORDER BY error"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("\"/extra\""), "{errors:?}");
    assert!(errors[1].contains("\"/tags/size\""), "{errors:?}");
    let held: i64 = client
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, 3);
    // Run again: the same two are refused again, and are not new.
    let third = run().await.unwrap();
    assert_eq!(third.status.code(), Some(3), "{}", text(&third));
    assert!(
        String::from_utf8_lossy(&third.stdout).contains("2 entries rejected (0 new)"),
        "{}",
        text(&third)
    );
    drop_typed(&client, table).await;
}

/// A TCP proxy to PostgreSQL whose open connections can be made to go
/// silent, as a hung pooler's or a NAT's that lost the flow: their sockets
/// stay open and nothing more crosses them either way. Connections made
/// after that are forwarded.
mod silent_proxy {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::watch;

    #[derive(Clone)]
    struct Shared {
        /// Connections made so far; a silence takes those below it.
        made: Arc<AtomicUsize>,
        /// Armed: the next COMMIT a client sends silences every connection
        /// open then, the COMMIT with them (never reaching the server).
        at_commit: Arc<AtomicBool>,
        silence: Arc<watch::Sender<usize>>,
    }

    pub struct Proxy {
        pub port: u16,
        shared: Shared,
    }

    impl Proxy {
        pub async fn start(upstream: &str) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let shared = Shared {
                made: Arc::default(),
                at_commit: Arc::default(),
                silence: Arc::new(watch::channel(0).0),
            };
            let (upstream, each) = (upstream.to_owned(), shared.clone());
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let n = each.made.fetch_add(1, Ordering::SeqCst);
                    let server = TcpStream::connect(&upstream).await.unwrap();
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pipe(cr, sw, n, each.clone(), true));
                    tokio::spawn(pipe(sr, cw, n, each.clone(), false));
                }
            });
            Proxy { port, shared }
        }

        /// Silences every connection open at the next COMMIT a client
        /// sends: the server session is left in its transaction, holding
        /// its locks, as a silent network leaves it.
        pub fn silence_at_commit(&self) {
            self.shared.at_commit.store(true, Ordering::SeqCst);
        }

        /// How many connections were silenced (0 until then).
        pub fn silenced(&self) -> usize {
            *self.shared.silence.borrow()
        }

        pub fn connections(&self) -> usize {
            self.shared.made.load(Ordering::SeqCst)
        }
    }

    /// Forwards `from` to `to` until connection `n` is silenced, then
    /// holds both open, reading nothing.
    async fn pipe(
        mut from: OwnedReadHalf,
        mut to: OwnedWriteHalf,
        n: usize,
        shared: Shared,
        to_server: bool,
    ) {
        let mut silenced = shared.silence.subscribe();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if *silenced.borrow() > n {
                break;
            }
            tokio::select! {
                read = from.read(&mut buf) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(len) => {
                        let commit = to_server && buf[..len].windows(6).any(|w| w == b"COMMIT");
                        if commit && shared.at_commit.swap(false, Ordering::SeqCst) {
                            shared.silence.send_replace(shared.made.load(Ordering::SeqCst));
                        }
                        if *silenced.borrow() > n {
                            break;
                        }
                        if to.write_all(&buf[..len]).await.is_err() {
                            return;
                        }
                    }
                },
                _ = silenced.changed() => {}
            }
        }
        // Silent: the sockets stay open until the test ends.
        std::future::pending::<()>().await;
        drop((from, to));
    }
}

/// A connection to PostgreSQL that goes silent mid-load (its socket open,
/// nothing crossing it; here as its COMMIT is sent, so the server session
/// is left in its transaction holding the page's locks) does not hang the
/// run: the write is given up on past the run's timeout, retried on a new
/// connection (which ends the session the silent one left), and the run
/// finishes with every row and child row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn a_connection_that_goes_silent_mid_load_is_given_up_on_and_the_load_finishes() {
    let table = "etl_run_silent";
    let (pg, client) = postgres(table).await;
    let config: tokio_postgres::Config = pg.parse().unwrap();
    let upstream = match (config.get_hosts().first(), config.get_ports().first()) {
        (Some(tokio_postgres::config::Host::Tcp(host)), port) => {
            format!("{host}:{}", port.copied().unwrap_or(5432))
        }
        _ => "127.0.0.1:5432".to_owned(),
    };
    let proxy = silent_proxy::Proxy::start(&upstream).await;
    let via_proxy = {
        let user = config.get_user().unwrap_or("postgres");
        let db = config.get_dbname().unwrap_or("test");
        format!("postgres://{user}@127.0.0.1:{}/{db}", proxy.port)
    };
    let records: Vec<Value> = items(2_000)
        .into_iter()
        .map(|mut r| {
            let id = r["id"].as_u64().unwrap();
            r["labels"] = json!([{"name": "a", "n": id}, {"name": "b", "n": id}]);
            r
        })
        .collect();
    let api = Api {
        page_size: 100,
        delay: Duration::from_millis(30),
        ..Api::new(Style::NextUrl, records)
    };
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let timeout = ["--timeout-secs", "2"];
    let run = etl_into_postgres(dir.path(), &file, (&via_proxy, table), &timeout)
        .spawn()
        .unwrap();
    // Silence mid-load, once some pages are written.
    let loaded = async {
        loop {
            let held: i64 = client
                .query_one(
                    &format!("SELECT count(*) FROM pg_tables WHERE tablename = '{table}'"),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if held == 1 {
                let rows: i64 = client
                    .query_one(&format!("SELECT count(*) FROM {table}"), &[])
                    .await
                    .unwrap()
                    .get(0);
                if rows >= 300 {
                    return rows;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let before = tokio::time::timeout(Duration::from_secs(60), loaded)
        .await
        .expect("the load began");
    proxy.silence_at_commit();
    let started = std::time::Instant::now();
    // The bound the docs state: the run's timeout a try, a few tries.
    let output = tokio::time::timeout(Duration::from_secs(60), run.wait_with_output())
        .await
        .expect("the run ends: nothing waits for ever on a silent connection")
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let silenced = proxy.silenced();
    assert!(
        silenced > 0 && before < 2_000,
        "silenced mid-load (after {before} rows), not at its end"
    );
    assert!(
        proxy.connections() > silenced,
        "a new connection was made after the silence"
    );
    eprintln!(
        "silenced at a COMMIT after {before} rows; the run ended {:?} later",
        started.elapsed()
    );
    // The session the silent connection left, in its transaction, was
    // ended by the run (not by the server's timeout, which would also let
    // the retry through, a few seconds later).
    assert!(
        text(&output).contains("ended the PostgreSQL session a silent connection left"),
        "{}",
        text(&output)
    );
    let counts = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT _etl_id),                  (SELECT count(*) FROM {table}__labels),                  (SELECT count(DISTINCT _etl_key) FROM {table}__labels) FROM {table}"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(counts.get::<_, i64>(0), 2_000, "each row once");
    assert_eq!(counts.get::<_, i64>(1), 2_000);
    assert_eq!(counts.get::<_, i64>(2), 4_000, "each child row once");
    assert_eq!(counts.get::<_, i64>(3), 4_000);
    // No session of the run is left behind holding a transaction on its
    // tables. (Only those: the tests beside this one, running at the same
    // time, are idle in their transactions between statements.)
    let idle: Vec<String> = client
        .query(
            "SELECT format('%s %s %s: %s', pid, backend_start, state, query) \
             FROM pg_stat_activity a WHERE state LIKE 'idle in transaction%' \
             AND pid <> pg_backend_pid() AND EXISTS (SELECT 1 FROM pg_locks l \
             JOIN pg_class c ON c.oid = l.relation \
             WHERE l.pid = a.pid AND starts_with(c.relname, $1))",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(idle, Vec::<String>::new(), "{}", text(&output));
    drop_typed(&client, table).await;
}

/// A record holding a map of 2,000 ids keeps `id` and `updated_at` as
/// columns: the map is one jsonb column, not a column an id that would
/// spend the table's budget before the record's own members.
#[tokio::test]
#[ignore = "needs PostgreSQL: set ETL_PG_URL and pass --include-ignored"]
async fn a_map_of_2000_ids_is_one_jsonb_column_beside_id_and_updated_at() {
    let table = "etl_run_by_id";
    let (pg, client) = postgres(table).await;
    let by_id: serde_json::Map<String, Value> = (0..2_000)
        .map(|i| (i.to_string(), json!({"n": i})))
        .collect();
    let record = json!({"by_id": by_id, "id": 1, "updated_at": "2026-01-01T00:00:00Z"});
    let api = Api::new(Style::NextUrl, vec![record]);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let output = etl_into_postgres(dir.path(), &file, (&pg, table), &[])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let columns: Vec<(String, String)> = client
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_name = $1 AND column_name NOT LIKE '\\_etl\\_%' ORDER BY ordinal_position",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let want = [
        ("by_id", "jsonb"),
        ("id", "bigint"),
        ("updated_at", "timestamp with time zone"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(c, t)| (c.to_string(), t.to_string()))
        .collect();
    assert_eq!(columns, want);
    let n: i64 = client
        .query_one(
            &format!("SELECT (by_id -> '1999' ->> 'n')::bigint FROM {table}"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1999);
    drop_typed(&client, table).await;
}

/// The PostgreSQL server of `ETL_PG_URL`: its URL, and a client of it with
/// the typed table family `table` dropped (left by an earlier run).
/// `write = "merge"` into PostgreSQL: one row per key, the newest version
/// read, with its own child rows; an older version (read later, or in the
/// same page) never replaces a newer one; a deletion takes the row and its
/// child rows out and is remembered, so an older version does not bring
/// it back and a newer one does; a record without its key is a reject.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_merge_into_postgres_keeps_the_newest_version_of_each_key_and_its_deletions() {
    let table = format!("etl_merge_{}", std::process::id());
    let labels = format!("{table}__labels");
    let (pg, client) = postgres(&table).await;
    client
        .batch_execute(&format!(
            "DO $$ BEGIN IF to_regclass('_etl_deleted') IS NOT NULL THEN \
             DELETE FROM _etl_deleted WHERE table_name = '{table}'; END IF; END $$"
        ))
        .await
        .unwrap();
    let first: Vec<Value> = (1..=6).map(|n| issue(n, 10, "open", &["bug"])).collect();
    let api = Api::new(Style::LinkHeader, first);
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "write = \"merge\"\nprimary_key = \"/number\"\nhard_delete = \"/deleted\"\n{}",
        pipeline(&server.uri(), Style::LinkHeader, "")
    );
    let run = |file: String| run_into(dir.path().to_owned(), file, (pg.clone(), table.clone()));
    let read = |sql: String| {
        let client = &client;
        async move {
            client
                .query(&sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    format!(
                        "{} {} {}",
                        r.get::<_, i64>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2)
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let now = format!(
        "SELECT t.number, t.state, coalesce(string_agg(l.name, ',' ORDER BY l.name), '') \
         FROM {table} t LEFT JOIN {labels} l ON l._etl_parent_key = t._etl_key \
         GROUP BY t.number, t.state ORDER BY t.number"
    );
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(read(now.clone()).await.len(), 6);

    // Updates, a deletion, an older version read late, two versions of
    // one key in one page (the newer last, then first), a new key.
    *api.items.lock().unwrap() = api::merge_changes();
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains(", 1 deleted"), "{}", text(&output));
    let want = [
        "1 closed done,fixed",
        "3 open bug",
        "4 b y",
        "5 newer ",
        "6 open bug",
        "7 open new",
    ];
    assert_eq!(read(now.clone()).await, want);

    // The deleted key's older version does not bring it back; a run read
    // again changes nothing; a record without its key is a reject (exit 3).
    *api.items.lock().unwrap() = vec![
        issue(2, 20, "resurrected", &["no"]),
        issue(1, 30, "closed", &["done", "fixed"]),
        json!({"id": 99, "state": "keyless", "updated_at": "2026-11-01T00:00:50Z"}),
    ];
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert_eq!(read(now.clone()).await, want);
    let reject: String = client
        .query_one(&format!("SELECT error FROM {table}_rejects"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        reject.contains("primary key /number: not found"),
        "{reject}"
    );

    // A newer version brings it back.
    *api.items.lock().unwrap() = vec![issue(2, 50, "reopened", &["again"])];
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let rows = read(now.clone()).await;
    assert_eq!(rows[1], "2 reopened again");
    assert_eq!(rows.len(), 7);
    assert_eq!(
        client
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        7,
        "one row per key"
    );
    let unique = indexes_like(&client, &table, "CREATE UNIQUE INDEX%(_etl_id)").await;
    assert_eq!(unique, 1, "unique on its key");
    // A merge takes child rows out by their record's key.
    let by_root = indexes_like(&client, &labels, "%(_etl_root_key)").await;
    assert_eq!(by_root, 1, "its child table is indexed on _etl_root_key");

    // `etl schema --format json` says how the table is written, on the
    // resource's table alone.
    let schema = Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("schema")
        .arg(dir.path().join("items.toml"))
        .args(["--out", &pg, "--pg-table", &table, "--format", "json"])
        .output()
        .await
        .unwrap();
    assert_eq!(schema.status.code(), Some(0), "{}", text(&schema));
    let doc: Value = serde_json::from_slice(&schema.stdout).unwrap();
    assert_eq!(
        doc["tables"][0]["write"],
        json!({"disposition": "merge", "primary_key": ["/number"], "hard_delete": "/deleted"})
    );
    assert_eq!(doc["tables"][1]["name"], labels);
    assert_eq!(doc["tables"][1].get("write"), None);
    drop_typed(&client, &table).await;
}

/// How many indexes of `table` have a definition `LIKE` `pattern`.
async fn indexes_like(client: &tokio_postgres::Client, table: &str, pattern: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE $2",
            &[&table, &pattern],
        )
        .await
        .unwrap()
        .get(0)
}

/// A merge killed (SIGKILL) mid-run, then run again: the table equals a
/// clean run's, each key once with its newest version and that version's
/// child rows alone.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_merge_killed_mid_run_then_run_again_leaves_what_a_clean_run_does() {
    let table = format!("etl_merge_kill_{}", std::process::id());
    let labels = format!("{table}__labels");
    let (pg, client) = postgres(&table).await;
    // Every key's old version first, its new one three pages later.
    let versions: Vec<Value> = (1..=12)
        .map(|k| issue(k, 10, "old", &["o"]))
        .chain((1..=12).map(|k| issue(k, 20, "new", &["n1", "n2"])))
        .collect();
    let mut api = Api::new(Style::LinkHeader, versions);
    api.delay = Duration::from_millis(150);
    let slow = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = |uri: &str| {
        format!(
            "write = \"merge\"\nprimary_key = \"/number\"\n{}",
            pipeline(uri, Style::LinkHeader, "")
        )
    };
    let count = |sql: String| {
        let client = &client;
        async move {
            client
                .query_one(&sql, &[])
                .await
                .map_or(0, |r| r.get::<_, i64>(0))
        }
    };
    let mut killed = etl_into_postgres(dir.path(), &file(&slow.uri()), (&pg, &table), &[])
        .spawn()
        .unwrap();
    for _ in 0..400 {
        if count(format!("SELECT count(*) FROM {table}")).await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    let partial = count(format!("SELECT count(*) FROM {table} WHERE state = 'new'")).await;
    assert!(partial < 12, "killed before the end ({partial} new)");

    api.delay = Duration::ZERO;
    let fast = api.clone().serve().await;
    let output = run_into(
        dir.path().to_owned(),
        file(&fast.uri()),
        (pg.clone(), table.clone()),
    )
    .await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 12);
    assert_eq!(
        count(format!("SELECT count(*) FROM {table} WHERE state = 'new'")).await,
        12
    );
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 24);
    assert_eq!(
        count(format!(
            "SELECT count(*) FROM {labels} l JOIN {table} t ON l._etl_parent_key = t._etl_key"
        ))
        .await,
        24,
        "every child row is its row's version's"
    );
    drop_typed(&client, &table).await;
}

/// Four writers merging overlapping versions of the same keys into one
/// table at once: each key once, with its newest version and that
/// version's child rows alone.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn four_writers_merging_at_once_leave_each_key_once_with_its_newest_version() {
    let table = format!("etl_merge4_{}", std::process::id());
    let labels = format!("{table}__labels");
    let (pg, client) = postgres(&table).await;
    let time = |w: i64, k: i64| u32::try_from((k * (w + 2) * 7 + w * 13) % 59).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Vec::new();
    let mut loaders = Vec::new();
    for w in 0..4 {
        let versions = (1..=24)
            .map(|k| {
                issue(
                    k,
                    time(w, k),
                    &format!("w{w}"),
                    &[&format!("w{w}k{k}"), "all"],
                )
            })
            .collect();
        let mut api = Api::new(Style::LinkHeader, versions);
        api.delay = Duration::from_millis(2);
        let server = api.serve().await;
        let file = format!(
            "write = \"merge\"\nprimary_key = \"/number\"\n{}",
            pipeline(&server.uri(), Style::LinkHeader, "")
        );
        let own = dir.path().join(format!("w{w}"));
        std::fs::create_dir_all(&own).unwrap();
        loaders.push(etl_into_postgres(&own, &file, (&pg, &table), &[]));
        servers.push(server);
    }
    let outputs = futures_util::future::join_all(loaders.iter_mut().map(|l| l.output())).await;
    for output in outputs {
        let output = output.unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    }
    let rows = client
        .query(
            &format!(
                "SELECT t.number, extract(second FROM t.updated_at)::bigint, t.state, \
                 (SELECT count(*) FROM {labels} l WHERE l._etl_parent_key = t._etl_key), \
                 (SELECT count(*) FROM {labels} l WHERE l._etl_root_key = t._etl_key AND l.name <> 'all' \
                    AND l.name <> t.state || 'k' || t.number) \
                 FROM {table} t ORDER BY t.number"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 24, "each key once");
    for row in rows {
        let k: i64 = row.get(0);
        let newest = (0..4).map(|w| time(w, k)).max().unwrap();
        assert_eq!(
            row.get::<_, i64>(1),
            i64::from(newest),
            "key {k}: the newest version"
        );
        assert_eq!(row.get::<_, i64>(3), 2, "key {k}: its version's child rows");
        assert_eq!(
            row.get::<_, i64>(4),
            0,
            "key {k}: no other version's child rows"
        );
    }
    let children: i64 = client
        .query_one(&format!("SELECT count(*) FROM {labels}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(children, 48, "no child row of a replaced version is left");
    drop_typed(&client, &table).await;
}

/// The staging schemas of replaces of `table` left in the database.
async fn staging_schemas(client: &tokio_postgres::Client, table: &str) -> Vec<String> {
    client
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, '_etl_replace_') \
             AND to_regclass(quote_ident(nspname) || '.' || quote_ident($1)) IS NOT NULL",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The rows a replace of `table` under way has staged; 0 when there is no
/// replace (or it ended while it was looked at).
async fn staged_rows(client: &tokio_postgres::Client, table: &str) -> i64 {
    let Some(staging) = staging_schemas(client, table).await.first().cloned() else {
        return 0;
    };
    client
        .query_one(&format!("SELECT count(*) FROM \"{staging}\".{table}"), &[])
        .await
        .map_or(0, |r| r.get(0))
}

/// How many indexes the copy of `table` a replace under way stages into
/// has; `None` when there is none (or it went in while it was looked at).
async fn copy_indexes(client: &tokio_postgres::Client, table: &str) -> Option<i64> {
    let staging = staging_schemas(client, table).await.first()?.clone();
    let indexes = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND tablename = $2",
            &[&staging, &table],
        )
        .await
        .ok()?
        .get(0);
    // Still there after: the count was of the copy, not of one dropped.
    staging_schemas(client, table)
        .await
        .contains(&staging)
        .then_some(indexes)
}

/// The indexes on `table`: each one's name, definition and object id,
/// by name.
async fn table_indexes(client: &tokio_postgres::Client, table: &str) -> Vec<(String, String, u32)> {
    client
        .query(
            "SELECT c.relname::text, pg_get_indexdef(c.oid), c.oid FROM pg_index i \
             JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass($1) ORDER BY c.relname::text COLLATE \"C\"",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// `write = "replace"` into PostgreSQL: while the run stages the new rows,
/// readers see the old ones and are not held up; at the end the table and
/// its child table hold exactly the run's records, in one switch that
/// keeps a user's view and grant; a run that fails leaves the old rows
/// and drops what it staged (the next replace drops what a killed run
/// staged); an empty run empties the tables.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_replace_into_postgres_switches_at_once_and_keeps_views_and_grants() {
    let table = format!("etl_replace_{}", std::process::id());
    let labels = format!("{table}__labels");
    let (pg, client) = postgres(&table).await;
    let mut api = Api::new(Style::LinkHeader, labelled(10, &["a", "b"]));
    let server = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "write = \"replace\"\n{}",
        pipeline(&server.uri(), Style::LinkHeader, "")
    );
    let run = |file: String| run_into(dir.path().to_owned(), file, (pg.clone(), table.clone()));
    let count = |sql: String| {
        let client = &client;
        async move { client.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 10);
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 20);

    // What a user adds to the table.
    client
        .batch_execute(&format!(
            "CREATE VIEW {table}_named AS SELECT id, name FROM {table}; \
             CREATE INDEX {table}_by_name ON {table} (name); \
             DO $$ BEGIN CREATE ROLE etl_test_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
             GRANT SELECT ON {table} TO etl_test_reader"
        ))
        .await
        .unwrap();
    let indexes_before = table_indexes(&client, &table).await;
    assert_eq!(indexes_before.len(), 4, "{indexes_before:?}");

    // Upstream: nine records left, one relabelled, one with a member of
    // its own; pages slow enough to look at the table mid-run.
    {
        let mut held = api.items.lock().unwrap();
        *held = labelled(9, &["c"]);
        held[1]["labels"] = json!([{"name": "d"}, {"name": "e"}]);
        held[2]["extra"] = json!(true);
    }
    api.delay = Duration::from_millis(300);
    let slow = api.clone().serve().await;
    let slow_file = file.replace(&server.uri(), &slow.uri());
    let running = tokio::spawn(run(slow_file));
    // Mid-run: the run's rows are staged, the table still holds the old.
    let mut seen_mid_run = false;
    for _ in 0..400 {
        // The table read first: if the run's rows are still staged after,
        // the switch had not come when it was read.
        let held = count(format!("SELECT count(*) FROM {table}")).await;
        if staged_rows(&client, &table).await > 0 {
            assert_eq!(held, 10);
            // The copy has the key only: the table's other indexes, the
            // user's among them, are kept up by the switch. (Looked at
            // again if the copy went in between: the count was of none.)
            if let Some(indexes) = copy_indexes(&client, &table).await {
                assert_eq!(indexes, 1, "the copy's indexes");
                seen_mid_run = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let output = running.await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(seen_mid_run, "the run's rows were never seen staged");
    let names = client
        .query(
            &format!(
                "SELECT t.id, l.name, t.extra FROM {table} t JOIN {labels} l ON l._etl_parent_key = t._etl_key \
                 WHERE t.id <= 3 ORDER BY t.id, l.name"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1), r.get::<_, Option<bool>>(2)))
        .collect::<Vec<_>>();
    assert_eq!(
        names,
        [
            (1, "c".to_owned(), None),
            (2, "d".to_owned(), None),
            (2, "e".to_owned(), None),
            (3, "c".to_owned(), Some(true)),
        ]
    );
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 9);
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 10);
    assert_eq!(
        count(format!("SELECT count(*) FROM {table}_named")).await,
        9
    );
    let granted: bool = client
        .query_one(
            &format!("SELECT has_table_privilege('etl_test_reader', '{table}', 'SELECT')"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(granted, "the grant survives");
    // Every index is as it was: the same objects, by name and
    // definition. The switch deletes and inserts rows; it drops, builds
    // and locks no index (a drop would hold every reader).
    let indexes_after = table_indexes(&client, &table).await;
    assert_eq!(indexes_after, indexes_before);
    assert!(staging_schemas(&client, &table).await.is_empty());

    // A run that fails after its first page: the tables are as they were.
    api.delay = Duration::ZERO;
    api.items
        .lock()
        .unwrap()
        .extend(labelled(12, &["z"]).into_iter().skip(9));
    api.script_from = 1;
    api.script
        .lock()
        .unwrap()
        .push_back(ResponseTemplate::new(200).set_body_string("<html>oops</html>"));
    let failing = api.clone().serve().await;
    let output = run(file.replace(&server.uri(), &failing.uri())).await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 9);
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 10);
    assert!(
        staging_schemas(&client, &table).await.is_empty(),
        "the failed run dropped its copy"
    );

    // A run killed (SIGKILL) once it has staged rows: the same.
    api.delay = Duration::from_millis(300);
    api.script.lock().unwrap().clear();
    let slow = api.clone().serve().await;
    let mut killed = etl_into_postgres(
        dir.path(),
        &file.replace(&server.uri(), &slow.uri()),
        (&pg, &table),
        &[],
    )
    .spawn()
    .unwrap();
    for _ in 0..400 {
        if staged_rows(&client, &table).await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 9);
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 10);

    // A run that reads nothing empties the tables, and drops what the
    // killed run staged. A user's view grouping by the key depends on the
    // key constraint: the switch keeps it.
    client
        .batch_execute(&format!(
            "CREATE VIEW {table}_keyed AS SELECT _etl_key, name FROM {table} GROUP BY _etl_key"
        ))
        .await
        .unwrap();
    let indexes_before = table_indexes(&client, &table).await;
    api.delay = Duration::ZERO;
    api.items.lock().unwrap().clear();
    let output = run(file.clone()).await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(count(format!("SELECT count(*) FROM {table}")).await, 0);
    assert_eq!(count(format!("SELECT count(*) FROM {labels}")).await, 0);
    let indexes_after = table_indexes(&client, &table).await;
    let key = |indexes: &[(String, String, u32)]| {
        indexes
            .iter()
            .find(|(name, ..)| *name == format!("{table}_pkey"))
            .cloned()
    };
    assert!(key(&indexes_before).is_some());
    assert_eq!(key(&indexes_after), key(&indexes_before), "the key kept");
    assert_eq!(indexes_after.len(), indexes_before.len());
    assert!(staging_schemas(&client, &table).await.is_empty());

    // The table knows how it is written: `etl schema` says so, and a file
    // that would append to it is refused before any request.
    let schema = Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("schema")
        .arg(dir.path().join("items.toml"))
        .args(["--out", &pg, "--pg-table", &table, "--format", "text"])
        .output()
        .await
        .unwrap();
    assert_eq!(schema.status.code(), Some(0), "{}", text(&schema));
    assert!(
        text(&schema).contains("\n  write: replace\n"),
        "{}",
        text(&schema)
    );
    let before = api.requests();
    let appending = file.replace("write = \"replace\"\n", "");
    let output = run(appending).await;
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains(
            "it is written by `write = \"replace\"`, and the run asks for `write = \"append\"`"
        ) && text(&output).contains("load into a new table"),
        "{}",
        text(&output)
    );
    assert_eq!(api.requests(), before, "refused before any request");
    client
        .batch_execute(&format!("DROP VIEW {table}_named, {table}_keyed"))
        .await
        .unwrap();
    drop_typed(&client, &table).await;
}

/// `etl run` of `file` (written to `dir` first) into the table `table` of
/// the database `pg`, to its end.
async fn run_into(dir: std::path::PathBuf, file: String, (pg, table): (String, String)) -> Output {
    etl_into_postgres(&dir, &file, (&pg, &table), &[])
        .output()
        .await
        .unwrap()
}

/// `Source::next_sent_ahead` says when the next page's request is on the
/// wire already: not before the first page, after a page with a next one
/// (its request went out as the page was read), and not after the last.
#[tokio::test]
async fn a_rest_source_says_when_its_next_request_was_sent_ahead() {
    use etl_sources::rest::{Resource, RestSource};
    use etl_sources::{Source, SourceOptions};

    let api = Api::new(Style::NextUrl, items(6));
    let server = api.clone().serve().await;
    let file = pipeline(&server.uri(), Style::NextUrl, "");
    let resource = Resource::parse(&file, "items.toml", |_| None).unwrap();
    let mut source = RestSource::new(resource, SourceOptions::default()).unwrap();
    assert!(
        !source.next_sent_ahead(),
        "nothing sent before the first page"
    );
    let first = source.next_page().await.unwrap().unwrap();
    assert_eq!(first.rows.len(), 4);
    assert!(
        source.next_sent_ahead(),
        "the second page's request went ahead"
    );
    let second = source.next_page().await.unwrap().unwrap();
    assert_eq!(second.rows.len(), 2);
    assert!(!source.next_sent_ahead(), "no page after the last");
    assert!(source.next_page().await.unwrap().is_none());
}
