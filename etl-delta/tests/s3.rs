//! DeltaSink on S3-compatible object storage: a fresh load, a re-run, and
//! two writers racing, each content key once. Opt-in: `ETL_DELTA_S3_URL`
//! (`s3://BUCKET/PREFIX`, the bucket made) with the `AWS_*` variables
//! delta-rs reads (`.ci/run` starts moto's server and sets them).
#![cfg(feature = "s3")]

mod common;

use common::{launches, stored_keys, stored_values};
use etl_core::content::typed::SchemaOptions;
use etl_core::content::write::Write;
use etl_core::{Row, Sink};
use etl_delta::DeltaSink;
use futures_util::TryStreamExt;

fn table_url(name: &str) -> String {
    let base = std::env::var("ETL_DELTA_S3_URL")
        .expect("ETL_DELTA_S3_URL: s3://BUCKET/PREFIX of an S3-compatible server");
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}/{name}-{unique}", base.trim_end_matches('/'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_S3_URL and an S3-compatible server"]
async fn loads_on_s3_write_each_key_once_whoever_races() {
    let at = table_url("launches");
    let sink = DeltaSink::open(&at).await.unwrap();
    assert_eq!(sink.load(&launches(0..100)).await.unwrap(), 100);
    assert_eq!(sink.load(&launches(0..100)).await.unwrap(), 0);
    drop(sink);

    let (a, b) = (
        DeltaSink::open(&at).await.unwrap(),
        DeltaSink::open(&at).await.unwrap(),
    );
    let (x, y) = tokio::join!(
        async {
            let mut n = 0;
            for s in (50..250).step_by(25) {
                n += a.load(&launches(s..s + 25)).await.unwrap();
            }
            n
        },
        async {
            let mut n = 0;
            for s in (100..300).step_by(25) {
                n += b.load(&launches(s..s + 25)).await.unwrap();
            }
            n
        }
    );
    assert_eq!(x + y, 200, "the rows 100..300 were new, each written once");
    let keys = stored_keys(&url::Url::parse(&at).unwrap()).await;
    assert_eq!(keys.len(), 300);
    assert!(keys.values().all(|&n| n == 1), "a key stored twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_S3_URL and an S3-compatible server"]
async fn no_secret_reaches_an_error() {
    // A bucket that does not exist: the error names the table, never the
    // secret key it was asked with.
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap();
    let e = DeltaSink::open("s3://no-such-bucket-etl-delta/t")
        .await
        .unwrap_err();
    let message = format!("{e} {e:?}");
    assert!(
        message.contains("s3://no-such-bucket-etl-delta/t"),
        "{message}"
    );
    assert!(!message.contains(&secret), "{message}");
}

/// A replace on S3: the table holds the first run's rows until the second
/// run's switch, then exactly the second's, read through the paths the
/// switch committed (inside the table's staging directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_S3_URL and an S3-compatible server"]
async fn a_replace_on_s3_switches_in_what_it_loaded() {
    let at = table_url("replaced");
    let url = url::Url::parse(&at).unwrap();
    let options = SchemaOptions::default().write(Write::Replace);
    let replace = |rows: Vec<Row>| {
        let (at, options) = (at.clone(), options.clone());
        async move {
            let sink = DeltaSink::open_replacing::<Row>(&at, "launches", options)
                .await
                .unwrap();
            for page in rows.chunks(20) {
                sink.load(page).await.unwrap();
            }
            sink
        }
    };
    replace(launches(0..50)).await.finish().await.unwrap();
    let first = stored_values(&url, "_etl_id").await;
    assert_eq!(first.len(), 50);

    let second = replace(launches(30..70)).await;
    assert_eq!(
        stored_values(&url, "_etl_id").await,
        first,
        "before its switch, the table holds what it held"
    );
    second.finish().await.unwrap();
    let held = stored_values(&url, "_etl_id").await;
    assert_eq!(held.len(), 40);
    assert!(held.values().all(|&n| n == 1), "a row twice: {held:?}");
    assert!(held.contains_key("launch-30") && held.contains_key("launch-69"));
    assert!(!held.contains_key("launch-0"));
    // The staging tables' logs are gone; their data files are the table's.
    let store = deltalake::open_table(url).await.unwrap().object_store();
    let objects: Vec<_> = store.list(None).try_collect().await.unwrap();
    let logs = objects
        .iter()
        .filter(|o| o.location.as_ref().contains("etl-replacing-"))
        .filter(|o| o.location.as_ref().contains("_delta_log"))
        .count();
    assert_eq!(logs, 0, "{objects:?}");
    assert!(objects
        .iter()
        .any(|o| o.location.as_ref().starts_with("etl-replacing-")
            && o.location.as_ref().ends_with(".parquet")));
}
