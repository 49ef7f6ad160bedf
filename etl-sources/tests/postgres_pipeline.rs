//! `launches --out postgres://...` against a real PostgreSQL server: four
//! processes loading overlapping pages at once, and runs killed with
//! SIGKILL then re-run. Opt in with `ETL_PG_URL` and `--include-ignored`
//! (`.ci/run` does).

mod common;

use etl_sources::replay::{Replay, ReplayServer, BUNDLED_LAUNCHES};
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::process::Command;
use tokio_postgres::NoTls;

fn pg_url() -> String {
    std::env::var("ETL_PG_URL")
        .expect("ETL_PG_URL is not set: these tests need a PostgreSQL server")
}

fn launches(url: &str, limit: u32, table: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_launches"));
    command
        .args([
            "--base-url",
            url,
            "--limit",
            &limit.to_string(),
            "--out",
            &pg_url(),
            "--pg-table",
            table,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn table_rows(table: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    let row = client
        .query_one(
            &format!("SELECT count(*), count(DISTINCT launch_id) FROM \"{table}\""),
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

async fn drop_table(table: &str) {
    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"))
        .await
        .unwrap();
}

fn new_rows(output: &Output) -> usize {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("done:"))
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    // "done: P pages, R launches read, N new rows written to ..."
    line.split(", ")
        .nth(2)
        .and_then(|part| part.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn four_processes_loading_overlapping_pages_leave_each_row_once() {
    let table = format!("etl_test_four_{}", std::process::id());
    drop_table(&table).await;
    let replay = Replay {
        delay: Duration::from_millis(5),
        ..Replay::new(serde_json::from_str(BUNDLED_LAUNCHES).unwrap())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let url = server.url().to_string();

    // Different page sizes: every process's pages overlap the others'.
    let runs: Vec<_> = [2, 3, 4, 5]
        .iter()
        .map(|&limit| launches(&url, limit, &table).spawn().unwrap())
        .collect();
    let mut written = 0;
    for run in runs {
        let output = run.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        written += new_rows(&output);
    }
    assert_eq!(
        table_rows(&table).await,
        (12, 12),
        "every launch exactly once"
    );
    assert_eq!(
        written, 12,
        "the processes' new-row counts add up to the distinct rows"
    );

    // The same rows as one process loading alone.
    let alone = format!("etl_test_alone_{}", std::process::id());
    drop_table(&alone).await;
    let output = launches(&url, 5, &alone).output().await.unwrap();
    assert!(output.status.success());
    assert_eq!(stored(&table).await, stored(&alone).await);
    drop_table(&table).await;
    drop_table(&alone).await;
}

/// Every (content_key, launch_id, row) of the table, sorted.
async fn stored(table: &str) -> Vec<(String, String, String)> {
    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .query(
            &format!(
                "SELECT content_key, launch_id, row::text FROM \"{table}\" ORDER BY content_key"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn killed_runs_into_postgres_resume_to_each_row_once() {
    let table = format!("etl_test_killed_{}", std::process::id());
    drop_table(&table).await;
    let replay = Replay {
        delay: Duration::from_millis(40),
        ..Replay::new(serde_json::from_str(BUNDLED_LAUNCHES).unwrap())
    };
    let server = ReplayServer::start(replay).await.unwrap();
    let url = server.url().to_string();

    for (pages, extra_ms) in [(1, 0), (2, 13), (3, 37)] {
        let child = launches(&url, 2, &table).spawn().unwrap();
        common::kill_after(child, pages, Duration::from_millis(extra_ms)).await;
    }
    let (before, _) = table_rows(&table).await;
    assert!(
        (2..12).contains(&before),
        "the kills landed mid-run: {before} rows"
    );

    let output = launches(&url, 2, &table).output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        table_rows(&table).await,
        (12, 12),
        "every launch exactly once"
    );
    drop_table(&table).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn unreadable_entries_go_to_the_rejects_table_once_and_exit_3() {
    let table = format!("etl_test_rejects_{}", std::process::id());
    let rejects = format!("{table}_rejects");
    drop_table(&table).await;
    drop_table(&rejects).await;
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(BUNDLED_LAUNCHES).unwrap();
    entries.insert(2, serde_json::json!("not an object"));
    entries.insert(7, serde_json::json!({"id": "no-name"}));
    let server = ReplayServer::start(Replay::new(entries)).await.unwrap();

    for run in 0..2 {
        let output = launches(server.url().as_str(), 5, &table)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let new = if run == 0 { "(2 new)" } else { "(0 new)" };
        assert!(
            stdout.contains(&format!("2 entries rejected {new} into table {rejects}")),
            "{stdout}"
        );
    }
    assert_eq!(table_rows(&table).await.0, 12);

    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    let stored = client
        .query(
            &format!("SELECT raw, error, source FROM \"{rejects}\" ORDER BY rejected_at, raw"),
            &[],
        )
        .await
        .unwrap();
    let stored: Vec<(String, String, String)> = stored
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(stored.len(), 2, "each entry once: {stored:?}");
    let raws: Vec<&str> = stored.iter().map(|r| r.0.as_str()).collect();
    assert!(
        raws.contains(&"\"not an object\"") && raws.contains(&r#"{"id":"no-name"}"#),
        "{raws:?}"
    );
    for (raw, error, source) in &stored {
        assert!(
            !error.is_empty() && source.starts_with("http://127.0.0.1:"),
            "{raw}: {error} {source}"
        );
    }
    drop_table(&table).await;
    drop_table(&rejects).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn incremental_loads_into_postgres_read_only_what_changed() {
    let table = format!("etl_test_incremental_{}", std::process::id());
    drop_table(&table).await;
    let mut data: Vec<serde_json::Value> =
        serde_json::from_str(etl_sources::replay::BUNDLED_LAUNCHES_2_3_0).unwrap();
    let at_230 = |launches: Vec<serde_json::Value>| Replay {
        path: "/2.3.0/launches/upcoming/".into(),
        ..Replay::new(launches)
    };
    let incremental = |url: &str| {
        let mut command = launches(url, 5, &table);
        command.arg("--incremental");
        command
    };

    let server = ReplayServer::start(at_230(data.clone())).await.unwrap();
    let first = incremental(server.url().as_str()).output().await.unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!((new_rows(&first), server.requests()), (12, 3));
    drop(server);

    data[4]["last_updated"] = serde_json::json!("2026-11-20T00:00:00Z");
    data[4]["net"] = serde_json::json!("2027-03-01T00:00:00Z");
    let server = ReplayServer::start(at_230(data)).await.unwrap();
    let second = incremental(server.url().as_str()).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        stdout.contains("incremental since 2026-11-12T12:00:00Z"),
        "{stdout}"
    );
    assert_eq!((new_rows(&second), server.requests()), (1, 1));
    let third = incremental(server.url().as_str()).output().await.unwrap();
    assert_eq!((new_rows(&third), server.requests()), (0, 2));
    assert_eq!(table_rows(&table).await, (13, 12));
    drop_table(&table).await;
}

fn at_230(launches: Vec<serde_json::Value>) -> Replay {
    Replay {
        path: "/2.3.0/launches/upcoming/".into(),
        ..Replay::new(launches)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn three_changes_and_two_new_launches_write_exactly_five_rows() {
    let table = format!("etl_test_five_{}", std::process::id());
    drop_table(&table).await;
    let data: Vec<serde_json::Value> =
        serde_json::from_str(etl_sources::replay::BUNDLED_LAUNCHES_2_3_0).unwrap();
    let server = ReplayServer::start(at_230(data.clone())).await.unwrap();
    let first = launches(server.url().as_str(), 5, &table)
        .arg("--incremental")
        .output()
        .await
        .unwrap();
    assert_eq!(new_rows(&first), 12);
    drop(server);

    // Upstream: three launches changed, two new ones.
    let mut changed = data;
    for (i, launch) in changed.iter_mut().enumerate().take(3) {
        launch["net"] = serde_json::json!("2027-02-01T00:00:00Z");
        launch["last_updated"] = serde_json::json!(format!("2026-11-2{i}T09:00:00Z"));
    }
    for id in ["new-1", "new-2"] {
        let mut fresh = changed[5].clone();
        fresh["id"] = serde_json::json!(id);
        fresh["last_updated"] = serde_json::json!("2026-11-25T10:00:00Z");
        changed.push(fresh);
    }
    let server = ReplayServer::start(at_230(changed)).await.unwrap();
    let second = launches(server.url().as_str(), 5, &table)
        .arg("--incremental")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{stdout}");
    assert_eq!(new_rows(&second), 5, "{stdout}");
    assert!(server.requests() <= 2, "{} requests", server.requests());
    assert_eq!(table_rows(&table).await, (17, 14));

    // A plain run over the whole listing: the table skips all of it.
    let plain = launches(server.url().as_str(), 5, &table)
        .output()
        .await
        .unwrap();
    assert_eq!(new_rows(&plain), 0);

    // The current view: one row per launch, the changed ones as changed.
    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    let current = client
        .query(
            &format!(
                "SELECT launch_id, row->'Launches'->>'net' FROM \"{table}_current\" \
                 WHERE launch_id = ANY($1)"
            ),
            &[&vec![
                changed_id(0),
                changed_id(1),
                changed_id(2),
                "new-1".to_string(),
            ]],
        )
        .await
        .unwrap();
    assert_eq!(current.len(), 4);
    for row in &current {
        let (id, net): (String, String) = (row.get(0), row.get(1));
        if !id.starts_with("new-") {
            assert_eq!(net, "2027-02-01T00:00:00Z", "{id}");
        }
    }
    let in_view: i64 = client
        .query_one(&format!("SELECT count(*) FROM \"{table}_current\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(in_view, 14);
    drop_table(&table).await;
}

/// The id of the bundled launch at `index`.
fn changed_id(index: usize) -> String {
    let data: Vec<serde_json::Value> =
        serde_json::from_str(etl_sources::replay::BUNDLED_LAUNCHES_2_3_0).unwrap();
    data[index]["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PostgreSQL server: set ETL_PG_URL and pass --include-ignored"]
async fn four_processes_opening_a_table_of_the_previous_release_upgrade_it_and_resume() {
    let table = format!("etl_test_oldfour_{}", std::process::id());
    drop_table(&table).await;
    let server = ReplayServer::start(at_230(
        serde_json::from_str(etl_sources::replay::BUNDLED_LAUNCHES_2_3_0).unwrap(),
    ))
    .await
    .unwrap();
    // Loaded by this release, then taken back to the previous one's schema:
    // its DDL had no updated_at, no indexes but the key, no view.
    let first = launches(server.url().as_str(), 5, &table)
        .output()
        .await
        .unwrap();
    assert_eq!(new_rows(&first), 12);
    let (client, connection) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "DROP VIEW \"{table}_current\"; ALTER TABLE \"{table}\" DROP COLUMN updated_at"
        ))
        .await
        .unwrap();

    let runs: Vec<_> = (0..4)
        .map(|_| {
            let mut command = launches(server.url().as_str(), 5, &table);
            command.arg("--incremental");
            command.spawn().unwrap()
        })
        .collect();
    for run in runs {
        let output = run.wait_with_output().await.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(new_rows(&output), 0, "{stdout}");
        // The cursor came from the upgraded column: the newest bundled launch.
        assert!(
            stdout.contains("incremental since 2026-11-12T12:00:00Z"),
            "{stdout}"
        );
    }
    assert_eq!(table_rows(&table).await, (12, 12));
    let in_view: i64 = client
        .query_one(&format!("SELECT count(*) FROM \"{table}_current\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(in_view, 12);
    drop_table(&table).await;
}
