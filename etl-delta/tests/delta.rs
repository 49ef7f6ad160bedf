//! DeltaSink against local tables: each content key once, fresh, re-run,
//! reopened, raced by concurrent writers, rejects, the cursor, and a table
//! of other columns refused. The keys are read back from the data files the
//! log lists, as a reader of the table sees them.

mod common;

fn dir_url(at: &std::path::Path) -> url::Url {
    url::Url::from_directory_path(at.canonicalize().unwrap()).unwrap()
}

use common::{launch, launches, stored_keys};
use etl_core::{content_key, EtlError, IdempotentSink, Reject, RejectSink, Sink};
use etl_delta::DeltaSink;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_rerun_and_reopened_loads_write_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("launches");
    let rows = launches(0..300);

    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.load(&rows).await.unwrap(), 300);
    assert_eq!(sink.load(&rows).await.unwrap(), 0, "the same sink again");
    assert_eq!(sink.count().await.unwrap(), 300);
    drop(sink);

    // A later run: the rows held are skipped, the new ones written, and a
    // batch holding a row twice writes it once.
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    let mut again = launches(250..350);
    again.push(launch(349, "2026-11-01T08:00:00Z"));
    assert_eq!(sink.load(&again).await.unwrap(), 50);

    let keys = stored_keys(&dir_url(&at)).await;
    assert_eq!(keys.len(), 350);
    assert!(keys.values().all(|&n| n == 1), "a key stored twice");
    for row in &again {
        assert!(keys.contains_key(&content_key(row).unwrap()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_writers_racing_for_one_table_store_each_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("raced");
    let path = at.to_str().unwrap().to_string();
    // Made first, so that the race is over the appends (creation races
    // are the process tests' part).
    DeltaSink::open(&path).await.unwrap();
    let mut writers = Vec::new();
    for w in 0..4usize {
        let path = path.clone();
        writers.push(tokio::spawn(async move {
            let sink = DeltaSink::open(&path).await?;
            let mut written = 0;
            // Overlapping ranges, in batches: every writer meets the others'
            // rows mid-run.
            for start in (w * 50..w * 50 + 400).step_by(40) {
                written += sink.load(&launches(start..start + 40)).await?;
            }
            Ok::<usize, EtlError>(written)
        }));
    }
    let mut total = 0;
    for w in writers {
        total += w.await.unwrap().unwrap();
    }
    let keys = stored_keys(&dir_url(&at)).await;
    // The union is 0..550.
    assert_eq!(keys.len(), 550);
    assert!(keys.values().all(|&n| n == 1), "a key stored twice");
    assert_eq!(total, 550, "the writers' counts add up to the rows stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncommitted_data_file_is_not_part_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("t");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.load(&launches(0..10)).await.unwrap(), 10);
    // What a kill between the data file's upload and the commit leaves.
    let data = std::fs::read_dir(&at)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    std::fs::copy(&data, at.join("part-99999-left-behind.snappy.parquet")).unwrap();

    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.load(&launches(5..15)).await.unwrap(), 5);
    let keys = stored_keys(&dir_url(&at)).await;
    assert_eq!(keys.len(), 15);
    assert!(keys.values().all(|&n| n == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cursor_is_the_newest_update_time_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("t");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.newest_updated_at().await.unwrap(), None);
    sink.load(&[
        launch(1, "2026-11-02T08:00:00Z"),
        launch(2, "2026-11-03T09:30:00.250Z"),
    ])
    .await
    .unwrap();
    sink.load(&[launch(3, "2026-11-01T00:00:00Z")])
        .await
        .unwrap();
    assert_eq!(
        sink.newest_updated_at().await.unwrap().as_deref(),
        Some("2026-11-03T09:30:00.250000000Z"),
        "as PostgresSink::newest_last_updated writes it"
    );
    // An RFC 3339 time at another offset is that instant, not null.
    sink.load(&[launch(4, "2026-11-04T02:00:00+02:00")])
        .await
        .unwrap();
    assert_eq!(
        sink.newest_updated_at().await.unwrap().as_deref(),
        Some("2026-11-04T00:00:00Z")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejects_are_kept_once_in_their_own_table() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("t");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.rejects_count().await.unwrap(), 0);
    let bad = Reject::new(r#"{"id":7}"#, "missing field `name`", "http://x/p1").unwrap();
    let other = Reject::new("42", "not an object", "http://x/p1").unwrap();
    assert_eq!(sink.reject(&[bad.clone(), other]).await.unwrap(), 2);
    assert_eq!(sink.reject(std::slice::from_ref(&bad)).await.unwrap(), 0);
    assert!(dir.path().join("t_rejects").join("_delta_log").is_dir());

    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.rejects_count().await.unwrap(), 2);
    assert_eq!(sink.reject(&[bad]).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_other_columns_or_a_file_is_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("t");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    sink.reject(&[Reject::new("1", "x", "y").unwrap()])
        .await
        .unwrap();
    // The rejects table is a Delta table of other columns.
    let rejects = dir.path().join("t_rejects");
    let e = DeltaSink::open(rejects.to_str().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(e, EtlError::InvalidInput(_)), "{e}");
    let message = e.to_string();
    assert!(message.contains(rejects.to_str().unwrap()), "{message}");
    assert!(message.contains("reject_key"), "{message}");

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = DeltaSink::open(file.to_str().unwrap()).await.unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_an_idempotent_sink_a_rerun_reaches_the_table_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("t");
    let rows = launches(0..100);
    let first = IdempotentSink::bounded(DeltaSink::open(at.to_str().unwrap()).await.unwrap(), 10);
    assert_eq!(first.load(&rows).await.unwrap(), 100);
    // The memory in front holds 10 keys: the table decides the other 90.
    assert_eq!(first.load(&rows).await.unwrap(), 0);
    assert_eq!(first.inner().count().await.unwrap(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_a_checkpoint_a_reopened_sink_and_a_reader_see_every_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("checkpointed");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    // A commit a load: versions 1 to 105, past the checkpoint of 99.
    for i in 0..105 {
        assert_eq!(sink.load(&launches(i..i + 1)).await.unwrap(), 1);
    }
    drop(sink);
    assert!(
        at.join("_delta_log/00000000000000000099.checkpoint.parquet")
            .is_file(),
        "the writer of version 99 writes its checkpoint"
    );
    let table = deltalake::open_table(dir_url(&at)).await.unwrap();
    assert_eq!(table.version(), Some(105));

    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    assert_eq!(sink.count().await.unwrap(), 105);
    assert_eq!(sink.load(&launches(0..110)).await.unwrap(), 5);
    let keys = stored_keys(&dir_url(&at)).await;
    assert_eq!(keys.len(), 110);
    assert!(keys.values().all(|&n| n == 1), "a key stored twice");
}

/// Python `deltalake` compacting, then vacuuming, the table while a sink
/// holds it open. The sink's next commit loses the race to the
/// compaction, reads its log entry (the small files removed, one file of
/// the same rows added) and writes only the rows that file lacks; after
/// the vacuum, it never reads a file that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs ETL_DELTA_PYTHON: a Python with deltalake"]
async fn a_compaction_under_an_open_sink_is_read_from_its_log_entry() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().join("compacted");
    let sink = DeltaSink::open(at.to_str().unwrap()).await.unwrap();
    for start in (0..100).step_by(10) {
        assert_eq!(sink.load(&launches(start..start + 10)).await.unwrap(), 10);
    }
    python("dt.optimize.compact()", &at);
    assert_eq!(sink.load(&launches(50..150)).await.unwrap(), 50);
    python(
        "dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)",
        &at,
    );
    assert_eq!(sink.load(&launches(100..200)).await.unwrap(), 50);

    let keys = stored_keys(&dir_url(&at)).await;
    assert_eq!(keys.len(), 200);
    assert!(keys.values().all(|&n| n == 1), "a key stored twice");
    assert_eq!(sink.count().await.unwrap(), 200);
}

/// Runs `op` on `dt`, the table at `at`, in Python `deltalake`.
fn python(op: &str, at: &std::path::Path) {
    let python =
        std::env::var("ETL_DELTA_PYTHON").expect("needs ETL_DELTA_PYTHON: a Python with deltalake");
    let script = format!(
        "import sys\nfrom deltalake import DeltaTable\ndt = DeltaTable(sys.argv[1])\n{op}\n"
    );
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .arg(at)
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
