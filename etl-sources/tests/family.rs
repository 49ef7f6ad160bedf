//! Parent and child resources in one file, `etl run` as a process against
//! a local GitHub-like API: issues, and each issue's comments, one request
//! chain per issue. Every record lands once; `--incremental` reads only
//! the issues changed, and each changed issue's comments from that
//! issue's own cursor; a parent record missing its value is a reject of
//! the child; `load = false` reads a parent without writing it.

mod common;

use common::{records, text};

use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use tokio::process::Command;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A request's path and its `since`.
type Asked = (String, Option<String>);

/// The API's state: issues, and comments by issue number.
#[derive(Clone, Default)]
struct Repo {
    issues: Arc<Mutex<Vec<Value>>>,
    comments: Arc<Mutex<HashMap<u64, Vec<Value>>>>,
    /// Every request: path and its `since`.
    seen: Arc<Mutex<Vec<Asked>>>,
}

fn at(minute: u32) -> String {
    format!("2026-11-01T00:{minute:02}:00Z")
}

impl Repo {
    fn new() -> Self {
        Self::with_issues(3)
    }

    fn with_issues(count: u64) -> Self {
        let repo = Repo::default();
        for n in 1..=count {
            repo.issues.lock().unwrap().push(
                json!({"id": 100 + n, "number": n, "title": format!("issue {n}"), "updated_at": at(n as u32)}),
            );
            repo.comments.lock().unwrap().insert(
                n,
                (1..=2)
                    .map(|k| json!({"id": n * 10 + k, "body": format!("comment {k} on {n}"), "updated_at": at(10 + k as u32)}))
                    .collect(),
            );
        }
        repo
    }

    async fn serve(&self) -> MockServer {
        let server = MockServer::start().await;
        let repo = self.clone();
        Mock::given(wiremock::matchers::path_regex("^/repos/o/r/issues"))
            .respond_with(move |request: &Request| {
                let since = request
                    .url
                    .query_pairs()
                    .find(|(k, _)| k == "since")
                    .map(|(_, v)| v.into_owned());
                let path = request.url.path().to_string();
                repo.seen
                    .lock()
                    .unwrap()
                    .push((path.clone(), since.clone()));
                let fresh = |items: &[Value]| -> Vec<Value> {
                    items
                        .iter()
                        .filter(|i| {
                            since
                                .as_deref()
                                .is_none_or(|s| i["updated_at"].as_str().unwrap() >= s)
                        })
                        .cloned()
                        .collect()
                };
                // `?page=N`: one comment a page (an empty page ends).
                let page = request
                    .url
                    .query_pairs()
                    .find(|(k, _)| k == "page")
                    .map(|(_, v)| v.parse::<usize>().unwrap());
                let body = match path.strip_prefix("/repos/o/r/issues/") {
                    // `?page=N`: five issues a page.
                    None => {
                        let all = fresh(&repo.issues.lock().unwrap());
                        match page {
                            Some(n) => all.into_iter().skip((n - 1) * 5).take(5).collect(),
                            None => all,
                        }
                    }
                    Some(rest) => {
                        let number: u64 = rest.trim_end_matches("/comments").parse().unwrap();
                        let all = repo.comments.lock().unwrap().get(&number).cloned();
                        let all = fresh(&all.unwrap_or_default());
                        match page {
                            Some(n) => all.into_iter().skip(n - 1).take(1).collect(),
                            None => all,
                        }
                    }
                };
                // A round trip's worth of time, so a kill finds a run under way.
                ResponseTemplate::new(200)
                    .set_body_json(body)
                    .set_delay(std::time::Duration::from_millis(5))
            })
            .mount(&server)
            .await;
        server
    }

    /// Issue 2 changes and gets a new comment (23), and the requests seen
    /// so far are forgotten.
    fn change_issue_2(&self) {
        self.seen.lock().unwrap().clear();
        self.issues.lock().unwrap()[1]["updated_at"] = json!(at(20));
        self.comments
            .lock()
            .unwrap()
            .get_mut(&2)
            .unwrap()
            .push(json!({"id": 23, "body": "new", "updated_at": at(21)}));
    }

    /// After [`Repo::change_issue_2`], a table output's incremental run:
    /// issue 3, the newest held, is met again at the issues' cursor, so
    /// the comments of 2 and 3 are asked for, each from its own newest held
    /// comment (the chains run side by side: in either order).
    fn assert_issues_2_and_3_read_from_their_own_cursors(&self) {
        let mut asked = self.comment_requests();
        asked.sort();
        assert_eq!(
            asked,
            [
                ("/repos/o/r/issues/2/comments".to_string(), Some(at(12))),
                ("/repos/o/r/issues/3/comments".to_string(), Some(at(12)))
            ],
            "the issues read, each from its own newest held comment"
        );
    }

    fn comment_requests(&self) -> Vec<Asked> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p.ends_with("/comments"))
            .cloned()
            .collect()
    }
}

fn file(uri: &str, issues_extra: &str) -> String {
    format!(
        r#"name = "github"
url = "{uri}/repos/o/r/"
records = ""
id = "/id"
updated_at = "/updated_at"

[[resource]]
name = "issues"
path = "issues"
{issues_extra}
[resource.incremental]
param = "since"

[[resource]]
name = "comments"
parent = "issues"
path = "issues/{{number}}/comments"
[resource.from_parent]
number = "/number"
[resource.incremental]
param = "since"
"#
    )
}

async fn etl(dir: &Path, file: &str, args: &[&str]) -> Output {
    let path = dir.join("github.toml");
    std::fs::write(&path, file).unwrap();
    Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap()
}

/// `etl run PATH --out OUT` started, its stderr piped for
/// [`common::kill_after`].
fn spawn_etl(path: &Path, out: &Path) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("run")
        .arg(path)
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn issues_and_their_comments_load_once_and_incrementally_per_issue() {
    let repo = Repo::new();
    // An issue with no number: its comments cannot be asked for.
    repo.issues
        .lock()
        .unwrap()
        .push(json!({"id": 109, "title": "no number", "updated_at": at(4)}));
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = file(&server.uri(), "");

    let first = etl(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(first.status.code(), Some(3), "a reject: {}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(
        stdout.contains("done: issues: 1 pages, 4 records read, 4 new rows"),
        "{stdout}"
    );
    assert!(
        stdout.contains("done: comments: ") && stdout.contains("6 records read, 6 new rows"),
        "{stdout}"
    );
    let (comments, ids) = records(&dir.path().join("out/comments.jsonl"));
    assert_eq!(comments.len(), 6);
    assert!(ids.values().all(|&n| n == 1));
    for comment in &comments {
        // Comment ids are the issue's number times ten, plus k.
        let number = comment["id"].as_u64().unwrap() / 10;
        assert_eq!(
            comment["_parent"],
            json!({ "number": number }),
            "each child names its parent"
        );
    }
    let rejects = std::fs::read_to_string(dir.path().join("out/comments.rejects.jsonl")).unwrap();
    assert!(
        rejects.contains("from_parent number (/number): nothing in issues record 109"),
        "{rejects}"
    );
    assert_eq!(
        repo.comment_requests().len(),
        3,
        "one chain per numbered issue"
    );

    // Issue 2 changes and gets a new comment; issue 3 gets a new comment
    // too, but is not changed itself, so it is not read, nor its comments.
    repo.change_issue_2();
    repo.comments
        .lock()
        .unwrap()
        .get_mut(&3)
        .unwrap()
        .push(json!({"id": 33, "body": "unseen", "updated_at": at(22)}));
    let second = etl(dir.path(), &file, &["--incremental"]).await;
    // Issue 109 is the newest held issue, so it is met again at the
    // cursor, and so is its reject (kept once: exit 3 all the same).
    assert_eq!(second.status.code(), Some(3), "{}", text(&second));
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("1 entries rejected (0 new)"),
        "{}",
        text(&second)
    );
    let asked = repo.comment_requests();
    assert_eq!(
        asked,
        [("/repos/o/r/issues/2/comments".to_string(), Some(at(12)))],
        "only the changed issue's comments, from its own newest held comment"
    );
    let (comments, ids) = records(&dir.path().join("out/comments.jsonl"));
    assert_eq!(comments.len(), 7, "comment 23 once");
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
    let (issues, ids) = records(&dir.path().join("out/issues.jsonl"));
    assert_eq!(issues.len(), 5, "issue 2 changed: a new row");
    assert_eq!(ids["102"], 2);
}

#[tokio::test]
async fn a_parent_with_load_false_feeds_its_children_and_is_not_written() {
    let repo = Repo::new();
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = file(&server.uri(), "load = false");
    let run = etl(dir.path(), &file, &[]).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(
        String::from_utf8_lossy(&run.stdout)
            .contains("done: issues: 1 pages, 3 records read, none written (load = false)"),
        "{}",
        text(&run)
    );
    assert!(!dir.path().join("out/issues.jsonl").exists());
    assert_eq!(records(&dir.path().join("out/comments.jsonl")).0.len(), 6);
    // Named, a resource is written: its parent is read to feed it.
    let only = etl(dir.path(), &file, &["--resource", "comments"]).await;
    assert_eq!(only.status.code(), Some(0), "{}", text(&only));
    assert!(
        String::from_utf8_lossy(&only.stdout).contains("0 new rows"),
        "{}",
        text(&only)
    );
}

#[tokio::test]
async fn a_bad_family_is_refused_before_any_request() {
    let repo = Repo::new();
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let good = file(&server.uri(), "");
    for (from, to, says) in [
        (
            "parent = \"issues\"",
            "parent = \"isues\"",
            "\"isues\" names no resource",
        ),
        (
            "number = \"/number\"",
            "num = \"/number\"",
            "`resource comments: {number}` is a placeholder",
        ),
        (
            "path = \"issues\"\n",
            "path = \"issues\"\nparent = \"comments\"\n",
            "cycle of parents",
        ),
        ("parent = \"issues\"\n", "", "from_parent` needs `parent`"),
    ] {
        let bad = good.replacen(from, to, 1);
        let run = etl(dir.path(), &bad, &[]).await;
        assert_eq!(run.status.code(), Some(2), "{to}: {}", text(&run));
        assert!(text(&run).contains(says), "{to}: {}", text(&run));
    }
    assert!(repo.seen.lock().unwrap().is_empty(), "nothing requested");
}

/// The comments of `issues` the output holds, by issue number.
fn comments_by_issue(dir: &Path) -> HashMap<u64, usize> {
    let (comments, _) = records(&dir.join("out/comments.jsonl"));
    let mut by_issue = HashMap::new();
    for c in &comments {
        *by_issue
            .entry(c["_parent"]["number"].as_u64().unwrap())
            .or_default() += 1;
    }
    by_issue
}

/// `dir`'s `out` holds `issues` issues and `comments` comments, each once.
fn assert_each_once(dir: &Path, issues: usize, comments: usize) {
    for (name, count) in [("issues", issues), ("comments", comments)] {
        let (written, ids) = records(&dir.join(format!("out/{name}.jsonl")));
        assert_eq!(written.len(), count, "{name}: {ids:?}");
        assert!(ids.values().all(|&n| n == 1), "{name}: {ids:?}");
    }
}

/// The file at `path` run again `--incremental` into `dir`'s `out`,
/// completing.
async fn rerun_incremental(dir: &Path, path: &Path) {
    let file = std::fs::read_to_string(path).unwrap();
    let again = etl(dir, &file, &["--incremental"]).await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
}

/// Killed with SIGKILL in the middle of the children (issues five a page),
/// then run again `--incremental`: an issue is written only once its
/// comments all are, so the issues' cursor never passes an issue whose
/// chain the kill cut, and the second run gets each issue and each comment
/// once.
#[tokio::test]
async fn a_run_killed_among_the_children_then_run_incrementally_keeps_each_record_once() {
    let repo = Repo::with_issues(20);
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("github.toml");
    let paged = "[resource.paginate]\nstyle = \"page_number\"\n";
    std::fs::write(&path, file(&server.uri(), paged)).unwrap();
    let child = spawn_etl(&path, &dir.path().join("out"));
    common::kill_after(child, 8, std::time::Duration::from_millis(3)).await;
    let (issues, _) = records(&dir.path().join("out/issues.jsonl"));
    let by_issue = comments_by_issue(dir.path());
    assert!(
        by_issue.values().sum::<usize>() < 40,
        "killed before the last chain: {by_issue:?}"
    );
    for issue in &issues {
        let number = issue["number"].as_u64().unwrap();
        assert_eq!(
            by_issue.get(&number),
            Some(&2),
            "issue {number} written before its comments: {by_issue:?}"
        );
    }

    rerun_incremental(dir.path(), &path).await;
    assert_each_once(dir.path(), 20, 40);
}

/// Eight chains at once, each of three pages (a comment a page, then an
/// empty one): killed mid-run, every chain written is a prefix of it and
/// no issue is written before its comments; run again `--incremental`,
/// every comment once.
#[tokio::test]
async fn eight_chains_at_once_each_written_in_order_and_a_kill_then_incremental_loses_nothing() {
    let repo = Repo::with_issues(24);
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("github.toml");
    let paged = file(&server.uri(), "").replace(
        "[resource.from_parent]",
        "[resource.paginate]\nstyle = \"page_number\"\n[resource.from_parent]",
    );
    std::fs::write(&path, format!("concurrency = 8\n{paged}")).unwrap();
    let child = spawn_etl(&path, &dir.path().join("out"));
    common::kill_after(child, 12, std::time::Duration::from_millis(2)).await;
    let (comments, _) = records(&dir.path().join("out/comments.jsonl"));
    assert!(comments.len() < 48, "killed mid-run: {}", comments.len());
    let written: Vec<u64> = comments.iter().map(|c| c["id"].as_u64().unwrap()).collect();
    for id in &written {
        if id % 10 == 2 {
            let first = written.iter().position(|w| *w == id - 1);
            let second = written.iter().position(|w| w == id);
            assert!(
                first < second && first.is_some(),
                "chain {} out of order: {written:?}",
                id / 10
            );
        }
    }
    let parents: std::collections::HashSet<u64> = written.iter().map(|id| id / 10).collect();
    assert!(parents.len() > 1, "chains ran side by side: {written:?}");
    let (issues, _) = records(&dir.path().join("out/issues.jsonl"));
    assert!(
        issues.is_empty(),
        "the issues' one page waits for every chain"
    );

    rerun_incremental(dir.path(), &path).await;
    assert_each_once(dir.path(), 24, 48);
}

/// `--max-pages 3`: the comments stop after three chains, so the issues
/// stop before their first page whose comments are not all written (and
/// say so); the summary lines stand in file order all the same, and a
/// later `--incremental` run completes both.
#[tokio::test]
async fn max_pages_on_the_children_stops_the_parent_before_a_page_they_did_not_finish() {
    let repo = Repo::with_issues(10);
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let paged = "[resource.paginate]\nstyle = \"page_number\"\n";
    let file = format!("concurrency = 1\n{}", file(&server.uri(), paged));

    let cut = etl(dir.path(), &file, &["--max-pages", "3"]).await;
    assert_eq!(cut.status.code(), Some(0), "{}", text(&cut));
    let stdout = String::from_utf8_lossy(&cut.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("done: ")).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("done: issues: 0 pages"), "{stdout}");
    assert!(lines[1].starts_with("done: comments: 3 pages"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&cut.stderr)
            .contains("issues: stopped before a page whose children comments did not all load"),
        "{}",
        text(&cut)
    );
    let (issues, _) = records(&dir.path().join("out/issues.jsonl"));
    assert!(issues.is_empty());
    assert_eq!(comments_by_issue(dir.path()).values().sum::<usize>(), 6);

    let all = etl(dir.path(), &file, &["--incremental"]).await;
    assert_eq!(all.status.code(), Some(0), "{}", text(&all));
    assert_each_once(dir.path(), 10, 20);
}

/// Into PostgreSQL: each resource its own (typed) table, named as the
/// resource; each child row carries `_parent` (its columns `_parent__*`); a
/// re-run writes nothing; the incremental cursors are read from the typed
/// tables. Each run of the test starts from no tables and no schema rows.
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn into_postgresql_each_resource_is_its_own_table_and_children_carry_their_parent() {
    use tokio_postgres::NoTls;
    let url = std::env::var("ETL_PG_URL").expect("ETL_PG_URL is not set");
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    for table in ["issues", "comments", "issues_rejects", "comments_rejects"] {
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"))
            .await
            .unwrap();
    }
    client
        .batch_execute(
            "DO $$ BEGIN IF to_regclass('_etl_schema') IS NOT NULL THEN \
             DELETE FROM _etl_schema WHERE table_name IN ('issues', 'comments'); END IF; END $$",
        )
        .await
        .unwrap();
    let repo = Repo::new();
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("github.toml");
    std::fs::write(&path, file(&server.uri(), "")).unwrap();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("run")
            .arg(&path)
            .args(["--out", &url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
    };
    let first = run().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    let count = |sql: String| {
        let client = &client;
        async move { client.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM issues".into()).await, 3);
    assert_eq!(
        count("SELECT count(DISTINCT _etl_key) FROM comments".into()).await,
        6
    );
    assert_eq!(
        count("SELECT count(*) FROM comments WHERE _parent__number IS NOT NULL".into()).await,
        6
    );
    let again = run().await.unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(stdout.matches(" 0 new rows").count(), 2, "{stdout}");
    assert_eq!(count("SELECT count(*) FROM comments".into()).await, 6);

    // Incremental, the cursors kept by the tables: issue 2 changes and
    // gets a comment; only its comments are asked for, from its own newest.
    repo.change_issue_2();
    let incremental = Command::new(env!("CARGO_BIN_EXE_etl"))
        .arg("run")
        .arg(&path)
        .args(["--out", &url, "--incremental"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert_eq!(incremental.status.code(), Some(0), "{}", text(&incremental));
    repo.assert_issues_2_and_3_read_from_their_own_cursors();
    assert_eq!(count("SELECT count(*) FROM comments".into()).await, 7);
}

/// `etl demo --parent-child`: the launches, and each launch's provider's
/// upcoming launches from the offline server, each child with `_parent`.
#[tokio::test]
async fn the_parent_and_child_demo_runs_with_no_network() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let demo = Command::new(env!("CARGO_BIN_EXE_etl"))
        .args(["demo", "--parent-child", "--out"])
        .arg(&out)
        .output()
        .await
        .unwrap();
    assert_eq!(demo.status.code(), Some(0), "{}", text(&demo));
    let stdout = String::from_utf8_lossy(&demo.stdout);
    assert!(
        stdout.contains("parent = \"launches\""),
        "prints its file: {stdout}"
    );
    assert!(
        stdout.contains("done: launches: 3 pages, 12 records read, 12 new rows"),
        "{stdout}"
    );
    assert!(stdout.contains("done: same_provider: "), "{stdout}");
    let (children, ids) = records(&out.join("same_provider.jsonl"));
    assert!(!children.is_empty());
    assert!(ids.values().all(|&n| n == 1), "{ids:?}");
    for child in &children {
        assert_eq!(
            child["_parent"]["provider"], child["launch_service_provider"]["id"],
            "each child is a launch of its parent's provider"
        );
    }
}

/// Into Delta tables (feature `delta`): each parent's chain from its own
/// cursor, read from the child table's rows.
#[cfg(feature = "delta")]
#[tokio::test]
async fn into_delta_tables_each_parents_chain_reads_from_its_own_cursor() {
    let dir = tempfile::tempdir().unwrap();
    delta_chains(dir.path(), "").await;
}

/// As [`into_delta_tables_each_parents_chain_reads_from_its_own_cursor`],
/// into typed tables: the cursors are read from `_etl_row`, and the members
/// are columns.
#[cfg(feature = "delta")]
#[tokio::test]
async fn into_typed_delta_tables_each_parents_chain_reads_from_its_own_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let lake = delta_chains(dir.path(), "shape = \"typed\"\n").await;
    let comments = lake.join("comments");
    let sink = etl_delta::DeltaSink::open_typed::<etl_core::Row>(
        comments.to_str().unwrap(),
        "comments",
        Default::default(),
    )
    .await
    .unwrap();
    assert!(sink.is_typed());
    assert_eq!(sink.count().await.unwrap(), 7);
    let schema = sink.schema().await.unwrap();
    let columns: Vec<&str> = schema.tables()[0]
        .columns()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    for column in ["body", "id", "updated_at", "_parent__number"] {
        assert!(columns.contains(&column), "{column}: {columns:?}");
    }

    // `etl schema` reads both families from the lake, and one by name.
    let schema = |resources: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_etl"));
        command
            .arg("schema")
            .arg(dir.path().join("github.toml"))
            .args([
                "--out",
                &format!("delta:{}", lake.display()),
                "--format",
                "json",
            ]);
        for r in resources {
            command.args(["--resource", r]);
        }
        command.output()
    };
    let tables = |output: &Output| -> Vec<String> {
        assert_eq!(output.status.code(), Some(0), "{}", text(output));
        let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
        doc["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(tables(&schema(&[]).await.unwrap()), ["issues", "comments"]);
    assert_eq!(tables(&schema(&["comments"]).await.unwrap()), ["comments"]);
}

/// The Delta family run of the tests above in `dir`, the file's top level
/// starting with `head`; returns the lake's directory.
#[cfg(feature = "delta")]
async fn delta_chains(dir: &Path, head: &str) -> std::path::PathBuf {
    let repo = Repo::new();
    let server = repo.serve().await;
    let path = dir.join("github.toml");
    std::fs::write(&path, format!("{head}{}", file(&server.uri(), ""))).unwrap();
    let out = format!("delta:{}", dir.join("lake").display());
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_etl"))
            .arg("run")
            .arg(&path)
            .args(["--out", &out, "--incremental"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
    };
    let first = run().await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("6 records read, 6 new rows"),
        "{}",
        text(&first)
    );
    repo.change_issue_2();
    let second = run().await.unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    repo.assert_issues_2_and_3_read_from_their_own_cursors();
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("1 new rows written to Delta table"),
        "{}",
        text(&second)
    );
    dir.join("lake")
}

/// A child that fails (issue 2's comments answer 404) ends the run with
/// exit 1 naming it, and its parent stops before the page whose children
/// it did not finish: no issue is written whose comments are not.
#[tokio::test]
async fn a_failing_child_stops_its_parent_before_the_unfinished_page() {
    let server = MockServer::start().await;
    let issues: Vec<Value> = (1..=3)
        .map(|n| json!({"id": 100 + n, "number": n, "updated_at": at(n)}))
        .collect();
    Mock::given(wiremock::matchers::path("/repos/o/r/issues"))
        .respond_with(ResponseTemplate::new(200).set_body_json(issues))
        .mount(&server)
        .await;
    Mock::given(wiremock::matchers::path("/repos/o/r/issues/2/comments"))
        .respond_with(ResponseTemplate::new(404).set_body_string("{\"message\":\"Not Found\"}"))
        .mount(&server)
        .await;
    Mock::given(wiremock::matchers::path_regex(
        "^/repos/o/r/issues/[13]/comments$",
    ))
    .respond_with(
        ResponseTemplate::new(200).set_body_json(json!([{"id": 1, "updated_at": at(30)}])),
    )
    .mount(&server)
    .await;
    let dir = tempfile::tempdir().unwrap();
    let run = etl(
        dir.path(),
        &file(&server.uri(), ""),
        &["--log-format", "json"],
    )
    .await;
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let (issues, _) = records(&dir.path().join("out/issues.jsonl"));
    assert!(issues.is_empty(), "{issues:?}");
    // The two resources log side by side, each line naming its own.
    let lines: Vec<Value> = String::from_utf8_lossy(&run.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let said = |resource: &str, message: &str| {
        lines.iter().any(|l| {
            l["span"]["resource"] == resource
                && l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(message))
        })
    };
    // (Whether a comment page was loaded before the 404 came is a race.)
    assert!(said("comments", "output opened"), "{}", text(&run));
    assert!(said("issues", "stopped before a page"), "{}", text(&run));
    assert!(
        lines.iter().any(|l| l["span"]["resource"] == "comments"
            && l["fields"]["exit_code"] == 1
            && l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("HTTP 404"))),
        "{}",
        text(&run)
    );
}

/// Three generations: issues, their comments, and for each comment the
/// comments of the issue its id names (`issues/{id}/comments`): each
/// generation waits for the one below, and the run completes, every record
/// once, a re-run writing nothing.
#[tokio::test]
async fn three_generations_run_side_by_side_and_complete() {
    let repo = Repo::with_issues(12);
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let file = format!(
        "concurrency = 2\n{}\n[[resource]]\nname = \"replies\"\nparent = \"comments\"\n\
         path = \"issues/{{id}}/comments\"\n[resource.from_parent]\nid = \"/id\"\n",
        file(&server.uri(), "")
    );
    for run in 0..2 {
        let done = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            etl(dir.path(), &file, &[]),
        )
        .await
        .expect("the run ends");
        assert_eq!(done.status.code(), Some(0), "{}", text(&done));
        let stdout = String::from_utf8_lossy(&done.stdout).to_string();
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("done: ")).collect();
        let new = if run == 0 { [12, 24, 4] } else { [0, 0, 0] };
        for ((line, name), new) in lines.iter().zip(["issues", "comments", "replies"]).zip(new) {
            assert!(
                line.starts_with(&format!("done: {name}: "))
                    && line.contains(&format!(" {new} new rows")),
                "{stdout}"
            );
        }
        assert_eq!(lines.len(), 3, "{stdout}");
    }
    // Comments 11 and 12 name issues 11 and 12: their comments, twice each.
    let (replies, ids) = records(&dir.path().join("out/replies.jsonl"));
    assert_eq!(replies.len(), 4, "{ids:?}");
}

/// The run as a library: `Pipeline::run` into a directory writes what `etl
/// run` writes from the same server, with the same counts, and a second run
/// writes nothing.
#[tokio::test]
async fn the_library_run_writes_what_etl_run_writes_and_a_rerun_nothing() {
    use etl_sources::{Pipeline, RunOptions};

    let repo = Repo::with_issues(4);
    // An issue with no number: a reject of the comments.
    repo.issues
        .lock()
        .unwrap()
        .push(json!({"id": 109, "title": "no number", "updated_at": at(4)}));
    let server = repo.serve().await;
    let dir = tempfile::tempdir().unwrap();
    let text = file(&server.uri(), "");
    let cli = etl(dir.path(), &text, &[]).await;
    assert_eq!(cli.status.code(), Some(3), "{}", common::text(&cli));

    let pipeline = Pipeline::parse_with(&text, "github.toml", |_| None).unwrap();
    let lib = dir.path().join("lib");
    let output = etl_sources::Output::parse(lib.to_str().unwrap()).unwrap();
    let report = pipeline.run(&output, RunOptions::default()).await.unwrap();
    assert_eq!(report.exit_code(), 3);
    let counts: Vec<_> = report
        .resources()
        .map(|r| {
            (
                r.name(),
                r.pages(),
                r.read(),
                r.new(),
                r.seen(),
                r.rejects(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [("issues", 1, 5, 5, 0, 0), ("comments", 5, 8, 8, 0, 1)]
    );
    // The same counts as `etl run`'s from the same server.
    let stdout = String::from_utf8_lossy(&cli.stdout);
    for r in report.resources() {
        let line = format!(
            "done: {}: {} pages, {} records read, {} new rows",
            r.name(),
            r.pages(),
            r.read(),
            r.new()
        );
        assert!(stdout.contains(&line), "{line}: {stdout}");
    }
    for name in ["issues.jsonl", "comments.jsonl", "comments.rejects.jsonl"] {
        let lines = |path: &Path| {
            let mut lines: Vec<String> = std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            lines.sort();
            lines
        };
        let (by_cli, by_lib) = (
            lines(&dir.path().join("out").join(name)),
            lines(&lib.join(name)),
        );
        assert!(!by_lib.is_empty(), "{name}");
        assert_eq!(by_cli, by_lib, "{name}: the same lines");
    }

    let again = pipeline.run(&output, RunOptions::default()).await.unwrap();
    let counts: Vec<_> = again
        .resources()
        .map(|r| (r.name(), r.read(), r.new(), r.seen()))
        .collect();
    assert_eq!(counts, [("issues", 5, 0, 5), ("comments", 8, 0, 8)]);
}

/// An output of one's own: a `Destination` whose tables keep rows in
/// memory, handed to `Pipeline::run_into`, gets each resource's records
/// once, children carrying their parent; a failing child is reported with
/// its resource, and what ended is in the error's report.
#[tokio::test]
async fn an_output_of_ones_own_takes_a_whole_run() {
    use etl_core::{EtlError, IdempotentSink, Reject, RejectSink, Sink};
    use etl_sources::pipeline::output::{
        CursorFuture, Described, Destination, StoredUpdatedAt, Table, TableFuture, Target,
    };
    use etl_sources::rest::JsonRecord;
    use etl_sources::{Pipeline, RunOptions};

    /// Every resource's rows, as JSON text, by resource.
    #[derive(Debug, Default)]
    struct Memory(Arc<Mutex<HashMap<String, Vec<String>>>>);

    #[derive(Debug)]
    struct Rows(String, Arc<Mutex<HashMap<String, Vec<String>>>>);

    #[async_trait::async_trait]
    impl Sink<JsonRecord> for Rows {
        async fn load(&self, rows: &[JsonRecord]) -> Result<usize, EtlError> {
            let mut held = self.1.lock().unwrap();
            let table = held.entry(self.0.clone()).or_default();
            for row in rows {
                table.push(serde_json::to_string(row).map_err(|e| EtlError::Parse(e.to_string()))?);
            }
            Ok(rows.len())
        }
    }

    #[async_trait::async_trait]
    impl RejectSink for Rows {
        async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError> {
            Ok(rejects.len())
        }
    }

    #[derive(Debug)]
    struct Kept(IdempotentSink<Rows>);

    impl Table<JsonRecord> for Kept {
        fn sink(&self) -> &dyn Sink<JsonRecord> {
            &self.0
        }
        fn rejects(&self) -> &dyn RejectSink {
            self.0.inner()
        }
        fn cursor(&self, _: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
            Box::pin(async { Ok(None) })
        }
        fn describe(&self) -> Result<Described, EtlError> {
            Ok(Described {
                rows: format!("memory {}", self.0.inner().0),
                held: None,
                rejects: "nowhere".into(),
            })
        }
    }

    impl Destination<JsonRecord> for Memory {
        fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, JsonRecord> {
            let rows = Rows(target.table.to_owned(), Arc::clone(&self.0));
            Box::pin(async move {
                Ok(Box::new(Kept(IdempotentSink::new(rows))) as Box<dyn Table<JsonRecord>>)
            })
        }
    }

    let repo = Repo::new();
    let server = repo.serve().await;
    let pipeline = Pipeline::parse_with(&file(&server.uri(), ""), "github.toml", |_| None).unwrap();
    let memory = Memory::default();
    let report = pipeline
        .run_into(&memory, RunOptions::default())
        .await
        .unwrap();
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.entries()[1].place().unwrap().rows, "memory comments");
    {
        let held = memory.0.lock().unwrap();
        assert_eq!(held["issues"].len(), 3);
        assert_eq!(held["comments"].len(), 6);
        assert!(held["comments"]
            .iter()
            .all(|c| c.contains("\"_parent\":{\"number\":")));
    }

    // A server that knows no such path (404, never retried): the run
    // fails, naming the resource; nothing of it was written.
    let empty = MockServer::start().await;
    let pipeline = Pipeline::parse_with(&file(&empty.uri(), ""), "github.toml", |_| None).unwrap();
    let memory = Memory::default();
    let e = pipeline
        .run_into(&memory, RunOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.exit_code(), 1, "{e}");
    assert_eq!(e.failures()[0].resource.as_deref(), Some("issues"), "{e}");
    assert!(e.failures()[0].message.contains("404"), "{e}");
    assert!(memory.0.lock().unwrap().is_empty());
}

/// A run the library refuses before any request: a resource the file
/// lacks, `--incremental` a resource cannot serve, one JSONL file for many
/// resources.
#[tokio::test]
async fn a_run_the_library_cannot_serve_is_refused_before_any_request() {
    use etl_sources::{Pipeline, RunOptions};

    let repo = Repo::new();
    let server = repo.serve().await;
    let text = file(&server.uri(), "").replace(
        "[resource.incremental]\nparam = \"since\"\n\n[[resource]]",
        "[[resource]]",
    );
    let pipeline = Pipeline::parse_with(&text, "github.toml", |_| None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let into_dir = etl_sources::Output::parse(dir.path().to_str().unwrap()).unwrap();
    let one_file =
        etl_sources::Output::parse(dir.path().join("all.jsonl").to_str().unwrap()).unwrap();
    for (output, options, says) in [
        (
            &into_dir,
            RunOptions::default().resources(["nope"]),
            "--resource nope: github.toml has no such resource (it has issues, comments)",
        ),
        (
            &into_dir,
            RunOptions::default().incremental(true),
            "issues: --incremental needs an [incremental] table",
        ),
        (
            &one_file,
            RunOptions::default(),
            "one JSONL file holds one resource",
        ),
    ] {
        let e = pipeline.run(output, options).await.unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(repo.seen.lock().unwrap().is_empty(), "no request");
}
