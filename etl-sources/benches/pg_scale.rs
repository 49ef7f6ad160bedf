//! What a `launches` run into PostgreSQL costs as its table grows (issue 16):
//! the wall time and peak RSS of a run in which nothing changed upstream,
//! `--incremental` and plain, against tables of 0, 100k and 1M rows.
//!
//! ```sh
//! ETL_PG_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo bench -p etl-sources --bench pg_scale [-- 0,100000,1000000]
//! ```
//!
//! Whole processes, as cron runs them: each run is the release `launches`
//! binary under `/usr/bin/time` (GNU time, for its max RSS; the wall time
//! is taken around the process),
//! loading from an in-process replay server of the bundled 2.3.0 dataset
//! without its scripted 429 and 503 (their waits would be all we measured).
//! Each table is made by a first `launches` run (so it has the schema the
//! code under test makes), then grown with `generate_series` to the size
//! asked: copies of a real bundled launch row (about 1.35 KB of jsonb) with
//! their own id, key and an older `last_updated`, so the bundled launches
//! stay the newest and the cursor is theirs. `VACUUM ANALYZE` after, as
//! autovacuum would. At each size it also times a lookup of one launch
//! through the `<table>_current` view, and, once, the run that upgrades the
//! table after it is taken back to the previous release's schema. Not
//! criterion: one figure is a whole process, and the
//! interesting number is how it grows, not its last percent.
//!
//! Without `ETL_PG_URL` it says so and measures nothing.

use etl_sources::replay::{Replay, ReplayServer};
use std::time::Instant;
use tokio_postgres::NoTls;

/// Runs of each kind per size; the median wall time and the largest RSS
/// are reported.
#[path = "support/gnu_time.rs"]
mod gnu_time;

const RUNS: usize = 5;

fn main() {
    let Ok(url) = std::env::var("ETL_PG_URL") else {
        println!("pg_scale skipped: set ETL_PG_URL=postgres://user@127.0.0.1:5432/db to run it");
        return;
    };
    // `cargo bench` passes `--bench`; a list of sizes may follow `--`.
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| {
            a.split(',')
                .map(|n| n.parse().expect("sizes: 0,100000,..."))
                .collect()
        })
        .unwrap_or_else(|| vec![0, 100_000, 1_000_000]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let replay = Replay {
        throttle_pages: Vec::new(),
        unavailable_pages: Vec::new(),
        ..Replay::bundled()
    };
    let server = rt.block_on(ReplayServer::start(replay)).unwrap();
    let base = server.url().to_string();
    let (admin, connection) = rt.block_on(tokio_postgres::connect(&url, NoTls)).unwrap();
    rt.spawn(connection);
    let table = "etl_bench_scale";

    println!("| table rows | run | wall (median of {RUNS}) | peak RSS (max) |");
    println!("|---:|---|---:|---:|");
    for &size in &sizes {
        rt.block_on(async {
            for t in [table, "etl_bench_scale_rejects"] {
                admin
                    .batch_execute(&format!("DROP TABLE IF EXISTS \"{t}\" CASCADE"))
                    .await
                    .unwrap();
            }
        });
        // The first run makes the table and loads the 12 bundled launches.
        let first = launches(&base, &url, table, false);
        assert_eq!(first.new, Some(12), "the first run loads the dataset");
        rt.block_on(grow(&admin, table, size));
        for incremental in [true, false] {
            let mut walls = Vec::new();
            let mut rss = 0;
            for _ in 0..RUNS {
                let run = launches(&base, &url, table, incremental);
                assert_eq!(run.new, Some(0), "nothing changed upstream");
                walls.push(run.wall);
                rss = rss.max(run.max_rss_kb);
            }
            walls.sort_by(f64::total_cmp);
            println!(
                "| {} | {} | {:.3} s | {:.1} MB |",
                size + 12,
                if incremental {
                    "--incremental"
                } else {
                    "plain"
                },
                walls[RUNS / 2],
                rss as f64 / 1024.0
            );
        }
        if size > 0 && rt.block_on(has_column(&admin, table)) {
            rt.block_on(current_lookup(&admin, table, size));
            // Past a million rows, the VACUUM FULL that makes the old table
            // costs more than the figure is worth.
            if size <= 1_000_000 {
                upgrade(&rt, &admin, &base, &url, table, size);
            }
        }
    }
    rt.block_on(async {
        admin
            .batch_execute(&format!("DROP TABLE IF EXISTS \"{table}\" CASCADE"))
            .await
            .unwrap();
    });
}

/// Adds `n` rows to `table`, copies of one of its rows with their own id,
/// key and `last_updated` (older than every bundled launch), filling the
/// update-time column too when the table has one.
async fn grow(admin: &tokio_postgres::Client, table: &str, n: u64) {
    if n == 0 {
        return;
    }
    let (column, value) = if has_column(admin, table).await {
        (", updated_at", ", stamp::timestamptz")
    } else {
        ("", "")
    };
    // Two md5s make a 64-hex-digit key, like a real one; the stamps count
    // seconds back from 2020, before every bundled launch.
    let sql = format!(
        "INSERT INTO \"{table}\" (content_key, row, launch_id{column})
         SELECT md5('k' || g) || md5('e' || g),
                jsonb_set(jsonb_set(t.row, '{{Launches,id}}', to_jsonb(id)),
                          '{{Launches,last_updated}}', to_jsonb(stamp)),
                id{value}
         FROM (SELECT row FROM \"{table}\" ORDER BY content_key LIMIT 1) t,
              generate_series(1, {n}) g,
              LATERAL (SELECT 'synthetic-' || g AS id,
                              to_char(timestamp '2020-01-01' - g * interval '1 second',
                                      'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS stamp) s"
    );
    admin.batch_execute(&sql).await.unwrap();
    admin
        .batch_execute(&format!("VACUUM ANALYZE \"{table}\""))
        .await
        .unwrap();
}

async fn has_column(admin: &tokio_postgres::Client, table: &str) -> bool {
    admin
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns \
             WHERE table_name = $1 AND column_name = 'updated_at')",
            &[&table],
        )
        .await
        .unwrap()
        .get(0)
}

/// An analyst's look at one launch as it is now, through the view.
async fn current_lookup(admin: &tokio_postgres::Client, table: &str, size: u64) {
    let sql = format!("SELECT row FROM \"{table}_current\" WHERE launch_id = $1");
    let id = format!("synthetic-{}", size / 2);
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let rows = admin.query(&sql, &[&id]).await.unwrap();
        times.push(start.elapsed().as_secs_f64());
        assert_eq!(rows.len(), 1);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "| {} | `{table}_current WHERE launch_id = ...` (a query) | {:.4} s | |",
        size + 12,
        times[RUNS / 2]
    );
}

/// Takes the table back to the previous release's schema (no `updated_at`,
/// its indexes or the view) and times the run that upgrades it: once.
fn upgrade(
    rt: &tokio::runtime::Runtime,
    admin: &tokio_postgres::Client,
    base: &str,
    url: &str,
    table: &str,
    size: u64,
) {
    rt.block_on(async {
        // One statement a call: VACUUM cannot run in a transaction block.
        for sql in [
            format!("DROP VIEW \"{table}_current\""),
            format!("ALTER TABLE \"{table}\" DROP COLUMN updated_at"),
            format!("VACUUM FULL \"{table}\""),
            format!("ANALYZE \"{table}\""),
        ] {
            admin.batch_execute(&sql).await.unwrap();
        }
    });
    let run = launches(base, url, table, true);
    assert_eq!(run.new, Some(0));
    println!(
        "| {} | --incremental, upgrading a previous release's table (once) | {:.3} s | {:.1} MB |",
        size + 12,
        run.wall,
        run.max_rss_kb as f64 / 1024.0
    );
}

/// What one `launches` process did and cost.
struct Run {
    wall: f64,
    max_rss_kb: u64,
    new: Option<usize>,
}

fn launches(base: &str, url: &str, table: &str, incremental: bool) -> Run {
    let mut command = gnu_time::command(env!("CARGO_BIN_EXE_launches"));
    command.args(["--base-url", base, "--out", url, "--pg-table", table]);
    if incremental {
        command.arg("--incremental");
    }
    let gnu_time::Timed {
        wall,
        max_rss_kb,
        stdout,
    } = gnu_time::run(command);
    // "done: P pages, R launches read, N new rows written to ..."
    let new = stdout
        .lines()
        .find(|l| l.starts_with("done:"))
        .and_then(|l| l.split(", ").nth(2))
        .and_then(|part| part.split(' ').next())
        .and_then(|n| n.parse().ok());
    Run {
        wall,
        max_rss_kb,
        new,
    }
}
