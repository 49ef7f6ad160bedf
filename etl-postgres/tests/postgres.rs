//! `PostgresSink` against a real PostgreSQL server. Opt in with
//! `ETL_PG_URL=postgres://user@127.0.0.1:5432/db cargo test -- --include-ignored`
//! (`.ci/run` does); without the variable these tests are ignored.

use etl_core::{EtlError, IdempotentSink, Launch, Row, Sink};
use etl_postgres::PostgresSink;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::NoTls;

fn url() -> String {
    std::env::var("ETL_PG_URL")
        .expect("ETL_PG_URL is not set: these tests need a PostgreSQL server")
}

fn row(id: &str) -> Row {
    Row::Launches(Launch {
        id: id.into(),
        name: format!("launch {id}"),
        ..Default::default()
    })
}

/// A table of this test's own, dropped first in case a run was killed.
async fn fresh(name: &str) -> (tokio_postgres::Client, String) {
    let table = format!("etl_test_{name}_{}", std::process::id());
    let (admin, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"))
        .await
        .unwrap();
    (admin, table)
}

async fn drop_table(admin: &tokio_postgres::Client, table: &str) {
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"))
        .await
        .unwrap();
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn batch_load_then_reload_writes_zero() {
    let (admin, table) = fresh("reload").await;
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    let rows = [row("a"), row("b"), row("c"), row("a")];
    assert_eq!(
        sink.load(&rows).await.unwrap(),
        3,
        "a duplicate inside the batch is written once"
    );
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    assert_eq!(sink.count().await.unwrap(), 3);

    // The stored keys are Row::content_key, as a JSONL file's would be, and
    // the stored document is the row.
    let stored = admin
        .query(
            &format!(
                "SELECT content_key, row::text, launch_id FROM \"{table}\" ORDER BY launch_id"
            ),
            &[],
        )
        .await
        .unwrap();
    for (db_row, expected) in stored.iter().zip([row("a"), row("b"), row("c")]) {
        assert_eq!(db_row.get::<_, String>(0), expected.content_key().unwrap());
        let back: Row = serde_json::from_str(&db_row.get::<_, String>(1)).unwrap();
        assert_eq!(back, expected);
    }
    drop_table(&admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn concurrent_overlapping_writers_write_each_row_once() {
    let (admin, table) = fresh("concurrent").await;
    PostgresSink::connect(&url(), &table).await.unwrap();
    // 8 writers, each with its own connection, loading overlapping windows
    // of 60 distinct rows, 3 batches each.
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let table = table.clone();
            tokio::spawn(async move {
                let sink = PostgresSink::connect(&url(), &table).await.unwrap();
                let mut written = 0;
                for batch in 0..3 {
                    let rows: Vec<Row> = (0..20)
                        .map(|i| row(&((w * 5 + batch * 10 + i) % 60).to_string()))
                        .collect();
                    written += sink.load(&rows).await.unwrap();
                }
                written
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    assert_eq!(
        sink.count().await.unwrap(),
        60,
        "every distinct row is there"
    );
    assert_eq!(total, 60, "the writers' counts add up to the distinct rows");
    drop_table(&admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn connection_lost_mid_batch_is_transient_and_the_retry_completes() {
    let (admin, table) = fresh("lost").await;
    let sink = Arc::new(PostgresSink::connect(&url(), &table).await.unwrap());
    let pid = sink.backend_pid().await.unwrap();

    // Hold the table so the batch blocks mid-statement, then kill its backend.
    admin
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE \"{table}\" IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    let rows: Vec<Row> = (0..50).map(|i| row(&i.to_string())).collect();
    let load = tokio::spawn({
        let (sink, rows) = (sink.clone(), rows.clone());
        async move { sink.load(&rows).await }
    });
    let mut waited = 0;
    loop {
        let waiting = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                &[&pid],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        if waiting == 1 {
            break;
        }
        waited += 1;
        assert!(waited < 500, "the load never blocked on the lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A second connection: the first is inside the locking transaction.
    let (killer, connection) = tokio_postgres::connect(&url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    killer
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();

    let err = load.await.unwrap().unwrap_err();
    assert!(err.is_transient(), "a lost connection is transient: {err}");
    admin.batch_execute("ROLLBACK").await.unwrap();

    // The retry reconnects and writes the whole batch; nothing partial was left.
    assert_eq!(
        sink.count().await.unwrap(),
        0,
        "the killed statement left nothing behind"
    );
    assert_eq!(sink.load(&rows).await.unwrap(), 50);
    assert_ne!(sink.backend_pid().await.unwrap(), pid, "a new connection");
    drop_table(&admin, &table).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn type_error_is_permanent() {
    let (admin, table) = fresh("types").await;
    // A table of that name with an incompatible column: opening it (the
    // upgrade reads `row` as jsonb) fails, permanently, naming the table.
    admin
        .batch_execute(&format!(
            "CREATE TABLE \"{table}\" (content_key text PRIMARY KEY, row integer, launch_id text)"
        ))
        .await
        .unwrap();
    let err = PostgresSink::connect(&url(), &table).await.unwrap_err();
    assert!(
        matches!(err, EtlError::Database { sqlstate: Some(ref c), .. } if c == "42883"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains(&format!("preparing table {table}")),
        "{err}"
    );
    assert!(!err.is_transient());

    // One that opens (it has the column) but cannot take a row: the load
    // fails permanently.
    admin
        .batch_execute(&format!(
            "DROP TABLE \"{table}\"; CREATE TABLE \"{table}\" (content_key text PRIMARY KEY, \
             row integer, launch_id text, loaded_at timestamptz, updated_at timestamptz)"
        ))
        .await
        .unwrap();
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    let err = sink.load(&[row("a")]).await.unwrap_err();
    assert!(
        matches!(err, EtlError::Database { sqlstate: Some(ref c), .. } if c == "42804"),
        "{err}"
    );
    assert!(!err.is_transient());
    drop_table(&admin, &table).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn warm_start_skips_known_rows_before_the_database() {
    let (admin, table) = fresh("warm").await;
    let store = PostgresSink::connect(&url(), &table).await.unwrap();
    store.load(&[row("a"), row("b")]).await.unwrap();
    let keys = store.content_keys().await.unwrap();
    let expected: HashSet<String> = [row("a"), row("b")]
        .iter()
        .map(|r| r.content_key().unwrap())
        .collect();
    assert_eq!(keys.iter().cloned().collect::<HashSet<_>>(), expected);

    let sink = IdempotentSink::with_seen(store, keys);
    assert_eq!(sink.load(&[row("a"), row("b"), row("c")]).await.unwrap(), 1);
    assert_eq!(sink.inner().count().await.unwrap(), 3);
    drop_table(&admin, &table).await;
}

#[tokio::test]
async fn bad_url_is_permanent_and_names_the_problem() {
    let err = PostgresSink::connect("postgres://u@host:notaport/db", "t")
        .await
        .unwrap_err();
    assert!(matches!(err, EtlError::InvalidInput(_)), "{err}");
    let err = PostgresSink::connect("postgres://u@127.0.0.1/db", "bad-name")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bad-name"), "{err}");
}

#[tokio::test]
async fn unreachable_server_is_transient() {
    // Port 1 on loopback: nothing listens there.
    let err = PostgresSink::connect("postgres://u@127.0.0.1:1/db?connect_timeout=2", "t")
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}

/// With the `tls` feature, `sslmode=require` makes the connection use TLS
/// and check the server's certificate against the platform's store: the
/// test server's self-signed one (or no TLS at all) is refused.
#[cfg(feature = "tls")]
#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn tls_required_checks_the_servers_certificate() {
    let base = url();
    let separator = if base.contains('?') { '&' } else { '?' };
    let required = format!("{base}{separator}sslmode=require");
    let err = PostgresSink::connect(&required, "t").await.unwrap_err();
    let text = err.to_string().to_lowercase();
    assert!(
        text.contains("tls") || text.contains("certificate"),
        "{err}"
    );
}

/// A user's own record type.
#[derive(Clone, serde::Serialize)]
struct Reading {
    sensor: String,
    celsius: f64,
}

impl etl_core::Record for Reading {
    const KIND: &'static str = "reading";
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_user_struct_loads_exactly_once_and_resumes() {
    let (admin, table) = fresh("reading").await;
    // Enough rows for the keys to be computed on every core.
    let readings: Vec<Reading> = (0..500)
        .map(|i| Reading {
            sensor: format!("t{}", i % 5),
            celsius: f64::from(i) / 10.0,
        })
        .collect();
    let store = PostgresSink::connect(&url(), &table).await.unwrap();
    let sink = IdempotentSink::new(store);
    assert_eq!(sink.load(&readings).await.unwrap(), 500);
    assert_eq!(sink.load(&readings).await.unwrap(), 0);
    drop(sink);

    // A new process: warm start from the table's keys, and the table's own
    // ON CONFLICT for whatever the keys would not know.
    let store = PostgresSink::connect(&url(), &table).await.unwrap();
    let keys = store.content_keys().await.unwrap();
    assert_eq!(keys.len(), 500);
    assert_eq!(store.load(&readings[..10]).await.unwrap(), 0);
    let sink = IdempotentSink::with_seen(store, keys);
    assert_eq!(sink.load(&readings).await.unwrap(), 0);

    let row = admin
        .query_one(
            &format!("SELECT content_key, row::text, launch_id FROM \"{table}\" WHERE row->>'celsius' = '4.2'"),
            &[],
        )
        .await
        .unwrap();
    let (key, json, id): (String, String, Option<String>) = (row.get(0), row.get(1), row.get(2));
    let r = &readings[42];
    assert_eq!(key, etl_core::content_key(r).unwrap());
    assert_eq!(json, r#"{"sensor": "t2", "celsius": 4.2}"#);
    assert_eq!(id, None, "a record without an id leaves launch_id NULL");
    drop_table(&admin, &table).await;
}

/// The rows of `written-by-0.1.0.jsonl`, in a table made as the release
/// before issue 16 made it: its own DDL (no `updated_at`, no view), and each
/// row keyed by content_id("row", line) of the JSONL line.
async fn old_release_table(admin: &tokio_postgres::Client, table: &str) -> Vec<Row> {
    admin
        .batch_execute(&format!(
            "CREATE TABLE \"{table}\" (content_key text PRIMARY KEY, row jsonb NOT NULL, \
             launch_id text, loaded_at timestamptz NOT NULL DEFAULT now())"
        ))
        .await
        .unwrap();
    let old = include_str!("data/written-by-0.1.0.jsonl");
    for line in old.lines() {
        let row: Row = serde_json::from_str(line).unwrap();
        let Row::Launches(launch) = &row;
        admin
            .execute(
                &format!("INSERT INTO \"{table}\" VALUES ($1, $2::text::jsonb, $3)"),
                &[&etl_core::content_id("row", line), &line, &launch.id],
            )
            .await
            .unwrap();
    }
    old.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The definitions of the table's indexes.
async fn indexes(admin: &tokio_postgres::Client, table: &str) -> Vec<String> {
    admin
        .query(
            "SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexdef",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_table_written_before_rows_became_generic_resumes_with_zero_new_rows() {
    let (admin, table) = fresh("old").await;
    let rows = old_release_table(&admin, &table).await;
    let store = PostgresSink::connect(&url(), &table).await.unwrap();
    assert_eq!(
        store.load(&rows).await.unwrap(),
        0,
        "the table knows every key"
    );
    let keys = store.content_keys().await.unwrap();
    let sink = IdempotentSink::with_seen(store, keys);
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    assert_eq!(sink.inner().count().await.unwrap(), 10);
    drop_table(&admin, &table).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_table_of_the_previous_release_is_upgraded_in_place_and_resumes() {
    let (admin, table) = fresh("upgrade").await;
    let rows = old_release_table(&admin, &table).await;
    let keys_before: HashSet<String> = admin
        .query(&format!("SELECT content_key FROM \"{table}\""), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();

    let sink = IdempotentSink::bounded(PostgresSink::connect(&url(), &table).await.unwrap(), 4);

    // The column is there and filled from each row's last_updated.
    let mismatched: i64 = admin
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{table}\" \
                 WHERE updated_at IS DISTINCT FROM (row->'Launches'->>'last_updated')::timestamptz"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mismatched, 0, "every row's updated_at is its last_updated");
    // The cursor: the newest of the stored launches, in the API's form.
    let newest = rows
        .iter()
        .filter_map(|Row::Launches(l)| l.last_updated.clone())
        .max();
    assert_eq!(sink.inner().newest_last_updated().await.unwrap(), newest);
    let defs = indexes(&admin, &table).await;
    assert!(
        defs.iter().any(|d| d.ends_with("USING btree (updated_at)")),
        "{defs:?}"
    );
    // No key changed, and the rows resume with 0 new.
    let keys_after: HashSet<String> = sink
        .inner()
        .content_keys()
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(keys_after, keys_before);
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    assert_eq!(sink.inner().count().await.unwrap(), 10);

    // Opening it again changes nothing more.
    PostgresSink::connect(&url(), &table).await.unwrap();
    assert_eq!(indexes(&admin, &table).await, defs);
    drop_table(&admin, &table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn four_openers_of_an_old_table_at_once_upgrade_it_once() {
    let (admin, table) = fresh("upgrade4").await;
    let rows = old_release_table(&admin, &table).await;
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (table, rows) = (table.clone(), rows.clone());
            tokio::spawn(async move {
                let sink = PostgresSink::connect(&url(), &table).await?;
                sink.load(&rows).await
            })
        })
        .collect();
    for opener in openers {
        assert_eq!(opener.await.unwrap().unwrap(), 0, "every row was there");
    }
    let defs = indexes(&admin, &table).await;
    assert_eq!(
        defs.len(),
        3,
        "the key and two indexes, each once: {defs:?}"
    );
    let view_rows: i64 = admin
        .query_one(&format!("SELECT count(*) FROM \"{table}_current\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(view_rows, 10);
    drop_table(&admin, &table).await;
}

fn launch(id: &str, name: &str, last_updated: &str) -> Row {
    Row::Launches(Launch {
        id: id.into(),
        name: name.into(),
        last_updated: Some(last_updated.into()),
        ..Default::default()
    })
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn the_current_view_holds_the_newest_row_of_each_launch() {
    let (admin, table) = fresh("current").await;
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    let current = || async {
        admin
            .query(
                &format!(
                    "SELECT launch_id, row->'Launches'->>'name' FROM \"{table}_current\" ORDER BY launch_id"
                ),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect::<Vec<_>>()
    };
    let pair = |id: &str, name: &str| (id.to_string(), name.to_string());
    sink.load(&[
        launch("a", "A v1", "2026-11-01T00:00:00Z"),
        launch("b", "B v1", "2026-11-02T00:00:00Z"),
    ])
    .await
    .unwrap();
    assert_eq!(current().await, [pair("a", "A v1"), pair("b", "B v1")]);

    // An update of "a": the table keeps both versions, the view the newest.
    sink.load(&[launch("a", "A v2", "2026-11-05T00:00:00Z")])
        .await
        .unwrap();
    assert_eq!(sink.count().await.unwrap(), 3, "the table is a history");
    assert_eq!(current().await, [pair("a", "A v2"), pair("b", "B v1")]);

    // An older version met late (a backfill) does not win: update time first.
    sink.load(&[launch("a", "A v0", "2026-10-01T00:00:00Z")])
        .await
        .unwrap();
    assert_eq!(current().await, [pair("a", "A v2"), pair("b", "B v1")]);

    // A change that kept its update time: the later load wins.
    sink.load(&[launch("b", "B v1 fixed", "2026-11-02T00:00:00Z")])
        .await
        .unwrap();
    assert_eq!(
        current().await,
        [pair("a", "A v2"), pair("b", "B v1 fixed")]
    );
    assert_eq!(
        sink.newest_last_updated().await.unwrap().as_deref(),
        Some("2026-11-05T00:00:00Z")
    );
    drop_table(&admin, &table).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn an_update_time_that_does_not_read_is_kept_as_null_and_the_row_is_loaded() {
    let (admin, table) = fresh("badtime").await;
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    let rows = [
        launch("a", "A", "yesterday"),
        launch("b", "B", "2026-11-02T00:00:00.1234567Z"),
        // Another offset: the same instant in UTC.
        launch("c", "C", "2026-11-01T02:00:00+02:00"),
    ];
    assert_eq!(sink.load(&rows).await.unwrap(), 3);
    let stored: Vec<(String, Option<String>)> = admin
        .query(
            &format!(
                "SELECT launch_id, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') \
                 FROM \"{table}\" ORDER BY launch_id"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        stored,
        [
            ("a".to_string(), None),
            // Cut to whole microseconds, never rounded up past the source.
            (
                "b".to_string(),
                Some("2026-11-02 00:00:00.123456".to_string())
            ),
            (
                "c".to_string(),
                Some("2026-11-01 00:00:00.000000".to_string())
            )
        ]
    );
    assert_eq!(
        sink.newest_last_updated().await.unwrap().as_deref(),
        Some("2026-11-02T00:00:00.123456000Z")
    );
    drop_table(&admin, &table).await;
}

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn rejects_go_to_their_own_table_each_entry_once() {
    use etl_core::{Reject, RejectSink};
    let (admin, table) = fresh("rejects").await;
    let rejects_table = format!("{table}_rejects");
    drop_table(&admin, &rejects_table).await;
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    assert_eq!(sink.rejects_count().await.unwrap(), 0, "no table yet");

    let a = Reject::new(r#"{"id": 1,  "odd": true}"#, "missing field `name`", "p1").unwrap();
    let b = Reject::new("42", "expected struct Launch", "p1").unwrap();
    // The same entry sent pretty-printed, its keys in another order.
    let a_again = Reject::new("{\n  \"odd\": true,\n  \"id\": 1\n}", "newer reader", "p2").unwrap();
    assert_eq!(sink.reject(&[a.clone(), b, a]).await.unwrap(), 2);
    assert_eq!(sink.reject(&[a_again]).await.unwrap(), 0);
    assert_eq!(sink.rejects_count().await.unwrap(), 2);

    let raw: String = admin
        .query_one(
            &format!("SELECT raw FROM \"{rejects_table}\" WHERE source = 'p1' AND raw LIKE '{{%'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(raw, r#"{"id":1,"odd":true}"#, "kept in canonical form");
    drop_table(&admin, &rejects_table).await;
    drop_table(&admin, &table).await;
}
