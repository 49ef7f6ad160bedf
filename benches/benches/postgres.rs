//! Rows per second into a local PostgreSQL: `PostgresSink`'s one batched
//! `INSERT ... SELECT FROM UNNEST(...) ON CONFLICT DO NOTHING` against one
//! `INSERT` per row (autocommit, and inside one transaction). Needs
//! `ETL_PG_URL`; without it, it says so and measures nothing.

use criterion::{Criterion, Throughput};
use etl_core::{Row, Sink};
use etl_postgres::PostgresSink;
use std::time::{Duration, Instant};
use tokio_postgres::NoTls;

const ROWS: usize = 2_000;

fn bench(c: &mut Criterion, url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rows = etl_benches::rows(ROWS);
    let prepared: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            let Row::Launches(l) = r;
            (
                r.content_key().unwrap(),
                serde_json::to_string(r).unwrap(),
                l.id.clone(),
            )
        })
        .collect();
    let table = format!("etl_bench_{}", std::process::id());
    let sink = rt.block_on(PostgresSink::connect(url, &table)).unwrap();
    let (admin, connection) = rt.block_on(tokio_postgres::connect(url, NoTls)).unwrap();
    rt.spawn(connection);
    let truncate = format!("TRUNCATE \"{table}\"");
    let insert_one = format!(
        "INSERT INTO \"{table}\" (content_key, row, launch_id) VALUES ($1, $2::text::jsonb, $3) \
         ON CONFLICT (content_key) DO NOTHING"
    );

    let mut group = c.benchmark_group("postgres_load");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(ROWS as u64));

    // Each sample loads the rows into an empty table (or, with `full`, one
    // that already holds them all); preparing the table is not timed.
    let mut timed = |name: &str, full: bool, load: &mut dyn FnMut()| {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    rt.block_on(admin.batch_execute(&truncate)).unwrap();
                    if full {
                        rt.block_on(sink.load(&rows)).unwrap();
                    }
                    let start = Instant::now();
                    load();
                    total += start.elapsed();
                }
                total
            })
        });
    };
    timed(
        "PostgresSink, one batched INSERT per 500 rows",
        false,
        &mut || {
            for batch in rows.chunks(500) {
                assert_eq!(rt.block_on(sink.load(batch)).unwrap(), batch.len());
            }
        },
    );
    // A re-run over data the table holds: what `launches` sends when
    // nothing changed upstream.
    timed(
        "PostgresSink, batches of 500 the table already holds",
        true,
        &mut || {
            for batch in rows.chunks(500) {
                assert_eq!(rt.block_on(sink.load(batch)).unwrap(), 0);
            }
        },
    );
    timed("one INSERT per row, autocommit", false, &mut || {
        rt.block_on(async {
            let statement = admin.prepare(&insert_one).await.unwrap();
            for (key, doc, id) in &prepared {
                admin.execute(&statement, &[key, doc, id]).await.unwrap();
            }
        })
    });
    timed("one INSERT per row, one transaction", false, &mut || {
        rt.block_on(async {
            admin.batch_execute("BEGIN").await.unwrap();
            let statement = admin.prepare(&insert_one).await.unwrap();
            for (key, doc, id) in &prepared {
                admin.execute(&statement, &[key, doc, id]).await.unwrap();
            }
            admin.batch_execute("COMMIT").await.unwrap();
        })
    });
    group.finish();
    rt.block_on(admin.batch_execute(&format!("DROP TABLE \"{table}\" CASCADE")))
        .unwrap();
}

fn main() {
    let Ok(url) = std::env::var("ETL_PG_URL") else {
        println!(
            "postgres bench skipped: set ETL_PG_URL=postgres://user@127.0.0.1:5432/db to run it"
        );
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &url);
    c.final_summary();
}
