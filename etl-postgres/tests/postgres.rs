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
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\""))
        .await
        .unwrap();
    (admin, table)
}

async fn drop_table(admin: &tokio_postgres::Client, table: &str) {
    admin
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\""))
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
    // A table of that name with an incompatible column.
    admin
        .batch_execute(&format!(
            "CREATE TABLE \"{table}\" (content_key text PRIMARY KEY, row integer, launch_id text)"
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

#[tokio::test]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn a_table_written_before_rows_became_generic_resumes_with_zero_new_rows() {
    let (admin, table) = fresh("old").await;
    // The table as the code before the change wrote it: its own DDL, and
    // each row keyed by content_id("row", line) of the JSONL line.
    admin
        .batch_execute(&format!(
            "CREATE TABLE \"{table}\" (content_key text PRIMARY KEY, row jsonb NOT NULL, \
             launch_id text, loaded_at timestamptz NOT NULL DEFAULT now())"
        ))
        .await
        .unwrap();
    let old = include_str!("../../etl-core/tests/data/written-by-0.1.0.jsonl");
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
    let rows: Vec<Row> = old
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
async fn rejects_go_to_their_own_table_each_entry_once() {
    use etl_core::{Reject, RejectSink};
    let (admin, table) = fresh("rejects").await;
    let rejects_table = format!("{table}_rejects");
    drop_table(&admin, &rejects_table).await;
    let sink = PostgresSink::connect(&url(), &table).await.unwrap();
    assert_eq!(sink.rejects_count().await.unwrap(), 0, "no table yet");

    let a = Reject::new(r#"{"id": 1,  "odd": true}"#, "missing field `name`", "p1").unwrap();
    let b = Reject::new("42", "expected struct Launch", "p1").unwrap();
    let a_again = Reject::new(r#"{"id": 1,  "odd": true}"#, "newer reader", "p2").unwrap();
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
    assert_eq!(raw, r#"{"id": 1,  "odd": true}"#, "kept byte for byte");
    drop_table(&admin, &rejects_table).await;
    drop_table(&admin, &table).await;
}
