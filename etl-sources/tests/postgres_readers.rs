//! A PostgreSQL table as its readers meet it. A merge table is looked up
//! by its key's own columns through an index. And no statement of ours
//! holds a table's readers: with an analyst's
//! transaction left open on the table (`idle in transaction`, a notebook
//! or a BI tool), a replace switches without waiting on it, and a schema
//! change waits for its lock only a bounded time a try, so a reader that
//! comes meanwhile is never held longer than that bound; a lock that cannot
//! be had fails the run naming the session that holds it, and the table is
//! left as it was. Against a real server (`ETL_PG_URL`).

#[path = "common/api.rs"]
#[allow(dead_code)] // the API's other uses are in other test binaries
mod api;
#[allow(dead_code)]
mod common;
#[path = "common/postgres.rs"]
mod pg;

use api::{labelled, pipeline, Api, Style};
use common::text;
use pg::{drop_typed, etl_into_postgres, postgres};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Client;

/// The application name the analyst's session goes by.
const ANALYST: &str = "etl_test_analyst";

/// How long a reader may be held: the lock bound (1 s) and room for a
/// loaded CI machine. A reader's statement past it fails.
const READER_PATIENCE_MS: u64 = 2_500;

/// A session of its own on `pg`, named `name`.
async fn session(pg: &str, name: &str) -> Client {
    let sep = if pg.contains('?') { '&' } else { '?' };
    let url = format!("{pg}{sep}application_name={name}");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A reader that counts `table`'s rows every 50 ms until stopped, each
/// count under a statement timeout of [`READER_PATIENCE_MS`]: what it
/// gives back is every count that failed (held past the bound), and how
/// many it made.
struct Reader {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(Vec<String>, usize)>,
}

impl Reader {
    async fn start(pg: &str, table: &str) -> Reader {
        let client = session(pg, "etl_test_reader").await;
        client
            .batch_execute(&format!("SET statement_timeout = {READER_PATIENCE_MS}"))
            .await
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (sql, stopped) = (format!("SELECT count(*) FROM {table}"), Arc::clone(&stop));
        let task = tokio::spawn(async move {
            let (mut failed, mut made) = (Vec::new(), 0);
            while !stopped.load(Ordering::Relaxed) {
                if let Err(e) = client.query_one(&sql, &[]).await {
                    failed.push(e.to_string());
                }
                made += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (failed, made)
        });
        Reader { stop, task }
    }

    /// Stops it; asserts that no count was held past the bound.
    async fn none_held(self) {
        self.stop.store(true, Ordering::Relaxed);
        let (failed, made) = self.task.await.unwrap();
        assert!(made > 0, "the reader never read");
        assert!(failed.is_empty(), "readers held: {failed:?}");
    }
}

/// The analyst: a repeatable-read transaction that has read `table` and
/// stays open, holding its `ACCESS SHARE` lock. Returns the session and
/// its pid.
async fn analyst(pg: &str, table: &str) -> (Client, i32) {
    let client = session(pg, ANALYST).await;
    client
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {table}"
        ))
        .await
        .unwrap();
    let pid = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    (client, pid)
}

/// A table `etl run` loaded once from a local API: the test changes the
/// API's records and runs again.
struct Loaded {
    table: String,
    pg: String,
    client: Client,
    api: Api,
    _server: wiremock::MockServer,
    dir: tempfile::TempDir,
    file: String,
    timeout: &'static str,
}

impl Loaded {
    /// `records` loaded into a fresh table `etl_readers_NAME_PID` by a
    /// file with `top` above the resource, each run under `--timeout-secs
    /// timeout`.
    async fn new(
        name: &str,
        top: &str,
        records: Vec<serde_json::Value>,
        timeout: &'static str,
    ) -> Loaded {
        let table = format!("etl_readers_{name}_{}", std::process::id());
        let (pg, client) = postgres(&table).await;
        let api = Api::new(Style::LinkHeader, records);
        let server = api.clone().serve().await;
        let file = format!("{top}{}", pipeline(&server.uri(), Style::LinkHeader, ""));
        let loaded = Loaded {
            table,
            pg,
            client,
            api,
            _server: server,
            dir: tempfile::tempdir().unwrap(),
            file,
            timeout,
        };
        let output = loaded.run().await;
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        loaded
    }

    /// `etl run` of the file again.
    async fn run(&self) -> std::process::Output {
        let args = ["--timeout-secs", self.timeout];
        etl_into_postgres(self.dir.path(), &self.file, (&self.pg, &self.table), &args)
            .output()
            .await
            .unwrap()
    }
}

async fn count(client: &Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// Each row of `table`: its key, its load time and how many labels it has.
async fn rows_of(client: &Client, table: &str) -> Vec<(String, String, i64)> {
    let sql = format!(
        "SELECT t._etl_key, t._etl_loaded_at::text, count(l._etl_key) FROM {table} t \
         LEFT JOIN {table}__labels l ON l._etl_root_key = t._etl_key GROUP BY 1, 2 ORDER BY 1"
    );
    client
        .query(&sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

async fn has_column(client: &Client, table: &str, column: &str) -> bool {
    client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) \
             AND attname = $2 AND NOT attisdropped)",
            &[&table, &column],
        )
        .await
        .unwrap()
        .get(0)
}

/// A replace with an analyst's transaction open on the table: the switch
/// waits on nothing and readers are never held; the analyst goes on seeing
/// its snapshot. A replace that adds a column needs the table's strong lock
/// for the column: it gives way every second, readers pass meanwhile, and
/// the run fails naming the analyst, the table as it was. Once the analyst
/// is gone the same run goes in.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_replace_holds_no_reader_behind_an_open_transaction() {
    let loaded = Loaded::new(
        "replace",
        "write = \"replace\"\n",
        labelled(10, &["a", "b"]),
        "3",
    )
    .await;
    let Loaded {
        table,
        pg,
        client,
        api,
        ..
    } = &loaded;
    let run = || loaded.run();

    // Nine records, relabelled: no new column. The switch goes in with
    // the analyst's transaction open.
    let (analyst, pid) = analyst(pg, table).await;
    *api.items.lock().unwrap() = labelled(9, &["c"]);
    let reader = Reader::start(pg, table).await;
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    reader.none_held().await;
    let sql = format!("SELECT count(*) FROM {table}");
    assert_eq!(count(client, &sql).await, 9);
    assert_eq!(count(&analyst, &sql).await, 10, "the analyst's snapshot");

    // A member of its own on one record: a column to add, which waits on
    // the analyst. Readers pass; the run fails naming the analyst.
    api.items.lock().unwrap()[2]["extra"] = json!(true);
    let reader = Reader::start(pg, table).await;
    let output = run().await;
    reader.none_held().await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(
        said.contains(&format!("pid {pid}"))
            && said.contains(ANALYST)
            && said.contains("idle in transaction"),
        "{said}"
    );
    assert_eq!(count(client, &sql).await, 9, "the table as it was");
    assert!(!has_column(client, table, "extra").await);

    // The analyst done, the same run goes in.
    analyst.batch_execute("COMMIT").await.unwrap();
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(has_column(client, table, "extra").await);
    assert_eq!(
        count(client, &format!("SELECT count(*) FROM {table} WHERE extra")).await,
        1
    );

    // A re-run that reads every record as it was changes no row: each
    // keeps its first load time. One record changed upstream is the one
    // row (and child rows) that change.
    let before = rows_of(client, table).await;
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(rows_of(client, table).await, before, "an unchanged re-run");
    api.items.lock().unwrap()[4]["labels"] = json!([{"name": "x"}, {"name": "y"}]);
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let after = rows_of(client, table).await;
    let kept = after.iter().filter(|row| before.contains(row)).count();
    assert_eq!((after.len(), kept), (9, 8), "{after:?}");
    assert!(after.iter().any(|(_, _, labels)| *labels == 2));

    // A user's lock that writers wait on (`LOCK TABLE ... IN SHARE
    // MODE`, as a `CREATE INDEX` takes): the switch waits for it a bounded
    // time a try, then fails naming that session; the table as it was.
    let locker = session(pg, "etl_test_locker").await;
    locker
        .batch_execute(&format!("BEGIN; LOCK TABLE {table} IN SHARE MODE"))
        .await
        .unwrap();
    let pid: i32 = locker
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    api.items.lock().unwrap()[5]["labels"] = json!([{"name": "z"}]);
    let output = run().await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(
        said.contains("the lock the replace's switch needs")
            && said.contains(&format!("pid {pid}")),
        "{said}"
    );
    assert_eq!(rows_of(client, table).await, after, "the table as it was");
    locker.batch_execute("COMMIT").await.unwrap();
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    drop_typed(client, table).await;
}

/// A typed append whose records add a column, with an analyst's
/// transaction open: each try of the `ALTER TABLE` waits at most the
/// bound, readers pass between, and the run's retries end in an error
/// naming the analyst; no row of the run is written. Once the analyst
/// commits, the run goes in.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_schema_change_holds_no_reader_behind_an_open_transaction() {
    let loaded = Loaded::new("append", "shape = \"typed\"\n", labelled(10, &["a"]), "2").await;
    let Loaded {
        table,
        pg,
        client,
        api,
        ..
    } = &loaded;
    let run = || loaded.run();

    let (analyst, pid) = analyst(pg, table).await;
    api.items.lock().unwrap()[0]["extra"] = json!("new");
    let reader = Reader::start(pg, table).await;
    let output = run().await;
    reader.none_held().await;
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let said = text(&output);
    assert!(
        said.contains(&format!("pid {pid}")) && said.contains(ANALYST),
        "{said}"
    );
    let sql = format!("SELECT count(*) FROM {table}");
    assert_eq!(count(client, &sql).await, 10, "nothing of the run written");
    assert!(!has_column(client, table, "extra").await);

    analyst.batch_execute("COMMIT").await.unwrap();
    let output = run().await;
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(has_column(client, table, "extra").await);
    assert_eq!(
        count(client, &sql).await,
        11,
        "the changed record's version"
    );
    drop_typed(client, table).await;
}

/// The plan of `query` with sequential scans off: whether an index can
/// serve it, whatever the table's size.
async fn plan(client: &Client, query: &str) -> String {
    client
        .batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    let rows = client
        .query(&format!("EXPLAIN {query}"), &[])
        .await
        .unwrap();
    client.batch_execute("RESET enable_seqscan").await.unwrap();
    rows.iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A merge table's lookup by its key's own columns reads an index: one
/// column (`number`), and a compound key (`org` and `number`) as one index
/// over both. A table made before the index gets it when next opened.
#[tokio::test]
#[ignore = "needs ETL_PG_URL: a PostgreSQL server"]
async fn a_merge_table_is_looked_up_by_its_keys_own_columns_through_an_index() {
    for (key, query) in [
        ("\"/number\"", "number = 3"),
        ("[\"/org\", \"/number\"]", "org = 'x' AND number = 3"),
    ] {
        let records = (1..=12)
            .map(|n| {
                json!({"id": n, "org": if n % 2 == 0 { "x" } else { "y" }, "number": n / 2,
                            "updated_at": "2026-11-01T00:00:00Z"})
            })
            .collect();
        let top = format!("write = \"merge\"\nprimary_key = {key}\n");
        let loaded = Loaded::new("key", &top, records, "30").await;
        let Loaded { table, client, .. } = &loaded;
        let run = || loaded.run();
        let index = format!("{table}_primary_key");
        let lookup = format!("SELECT * FROM {table} WHERE {query}");
        let read = plan(client, &lookup).await;
        assert!(read.contains(&index), "{key}: {read}");
        let found = count(
            client,
            &format!("SELECT count(*) FROM {table} WHERE {query}"),
        )
        .await;
        assert!(found >= 1, "{key}: {found}");

        // A table an earlier release made has no such index: the next
        // run makes it.
        client
            .batch_execute(&format!("DROP INDEX {index}"))
            .await
            .unwrap();
        assert!(!plan(client, &lookup).await.contains(&index));
        let output = run().await;
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        let read = plan(client, &lookup).await;
        assert!(read.contains(&index), "{key}, made again: {read}");
        let definition: String = client
            .query_one("SELECT pg_get_indexdef(to_regclass($1))", &[&index])
            .await
            .unwrap()
            .get(0);
        let columns = if key.starts_with('[') {
            "(org, number)"
        } else {
            "(number)"
        };
        assert!(definition.ends_with(columns), "{definition}");
        drop_typed(client, table).await;
    }
}
