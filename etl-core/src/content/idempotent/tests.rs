use super::*;
use crate::Launch;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

fn row(id: &str) -> Row {
    Row::Launches(Launch {
        id: id.into(),
        name: format!("launch {id}"),
        ..Default::default()
    })
}

fn ids(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|Row::Launches(l)| l.id.clone()).collect()
}

/// What the recording sink does on one call of `load`.
enum Step {
    /// Fail at once with a transient error.
    Fail,
    /// Never finish (the caller's future must be dropped).
    Hang,
    /// Wait for the signal, then succeed (`true`) or fail (`false`).
    WaitThen(oneshot::Receiver<()>, bool),
}

/// A sink that records the rows it wrote, follows a script of steps (then
/// succeeds), and counts its calls.
#[derive(Default)]
struct Recorder {
    written: Mutex<Vec<Row>>,
    calls: AtomicU32,
    script: Mutex<VecDeque<Step>>,
    entered: Notify,
}

impl Recorder {
    fn scripted(steps: impl IntoIterator<Item = Step>) -> Self {
        Recorder {
            script: Mutex::new(steps.into_iter().collect()),
            ..Default::default()
        }
    }

    fn written_ids(&self) -> Vec<String> {
        ids(&self.written.lock().unwrap())
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Sink for Recorder {
    async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.entered.notify_one();
        let step = self.script.lock().unwrap().pop_front();
        match step {
            None => {}
            Some(Step::Fail) => return Err(EtlError::Network("disk went away".into())),
            Some(Step::Hang) => std::future::pending::<()>().await,
            Some(Step::WaitThen(signal, ok)) => {
                let _ = signal.await;
                if !ok {
                    return Err(EtlError::Network("write failed late".into()));
                }
            }
        }
        self.written.lock().unwrap().extend_from_slice(rows);
        Ok(rows.len())
    }
}

#[tokio::test]
async fn rerun_writes_zero_new_rows() {
    let sink = IdempotentSink::new(Recorder::default());
    let rows = [row("a"), row("b")];
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
}

#[tokio::test]
async fn distinct_rows_all_written() {
    let sink = IdempotentSink::new(Recorder::default());
    assert_eq!(sink.load(&[row("a"), row("b"), row("c")]).await.unwrap(), 3);
    assert_eq!(sink.inner().written_ids(), ["a", "b", "c"]);
    assert_eq!(sink.seen_count(), 3);
}

#[tokio::test]
async fn batch_with_nothing_fresh_never_calls_inner() {
    let sink = IdempotentSink::new(Recorder::default());
    sink.load(&[row("a")]).await.unwrap();
    assert_eq!(sink.load(&[row("a"), row("a")]).await.unwrap(), 0);
    assert_eq!(sink.load(&[]).await.unwrap(), 0);
    assert_eq!(sink.inner().calls(), 1);
}

#[tokio::test]
async fn duplicates_in_a_batch_written_once_first_copy_in_order() {
    let sink = IdempotentSink::new(Recorder::default());
    let batch = [row("b"), row("a"), row("b"), row("c"), row("a")];
    assert_eq!(sink.load(&batch).await.unwrap(), 3);
    assert_eq!(sink.inner().written_ids(), ["b", "a", "c"]);
}

#[tokio::test]
async fn changed_row_is_a_new_row() {
    let sink = IdempotentSink::new(Recorder::default());
    let before = row("a");
    let mut after = before.clone();
    let Row::Launches(l) = &mut after;
    l.net = Some("2026-01-01T00:00:00Z".into());
    assert_eq!(sink.load(std::slice::from_ref(&before)).await.unwrap(), 1);
    assert_eq!(sink.load(&[before, after]).await.unwrap(), 1);
}

#[tokio::test]
async fn with_seen_skips_known_rows_and_ignores_non_keys() {
    let known = row("a").content_key().unwrap();
    let keys = vec![known.clone(), "not a key".to_string(), known.to_uppercase()];
    let sink = IdempotentSink::with_seen(Recorder::default(), keys);
    assert!(sink.is_seen(&known));
    assert_eq!(
        sink.seen_count(),
        1,
        "only the well-formed key is remembered"
    );
    assert_eq!(sink.load(&[row("a"), row("b")]).await.unwrap(), 1);
    assert_eq!(sink.inner().written_ids(), ["b"]);
}

#[tokio::test]
async fn failed_inner_write_unmarks_its_rows() {
    let sink = IdempotentSink::new(Recorder::scripted([Step::Fail]));
    let rows = [row("a"), row("b")];
    let err = sink.load(&rows).await.unwrap_err();
    assert!(matches!(err, EtlError::Network(_)), "{err}");
    assert!(!sink.is_seen(&rows[0].content_key().unwrap()));
    assert_eq!(sink.seen_count(), 0);
    // The retry writes them.
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn cancelled_load_unmarks_its_rows() {
    let sink = IdempotentSink::new(Recorder::scripted([Step::Hang]));
    let rows = [row("a"), row("b")];
    let timed_out = tokio::time::timeout(Duration::from_secs(30), sink.load(&rows)).await;
    assert!(timed_out.is_err(), "the hanging write must time out");
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
}

/// Runs two overlapping loads: the first holds `b` in a write that ends as
/// `first_ok` says; the second (`b`, `c`) meets that claim. Returns both
/// results and the sink.
async fn overlap(
    first_ok: bool,
) -> (
    Result<usize, EtlError>,
    Result<usize, EtlError>,
    Arc<IdempotentSink<Recorder>>,
) {
    let (release, signal) = oneshot::channel();
    let sink = Arc::new(IdempotentSink::new(Recorder::scripted([Step::WaitThen(
        signal, first_ok,
    )])));

    let first = tokio::spawn({
        let sink = Arc::clone(&sink);
        async move { sink.load(&[row("a"), row("b")]).await }
    });
    sink.inner().entered.notified().await; // the first load is inside its write

    let second = tokio::spawn({
        let sink = Arc::clone(&sink);
        async move { sink.load(&[row("b"), row("c")]).await }
    });
    sink.inner().entered.notified().await; // the second wrote `c` ...
    for _ in 0..10 {
        tokio::task::yield_now().await; // ... and is now waiting on `b`
    }
    assert!(
        !second.is_finished(),
        "the second load must wait for the first one's outcome"
    );

    release.send(()).unwrap();
    (first.await.unwrap(), second.await.unwrap(), sink)
}

#[tokio::test]
async fn concurrent_overlap_with_failing_writer_writes_rows_itself() {
    let (first, second, sink) = overlap(false).await;
    assert!(first.is_err(), "the first load's write failed");
    assert_eq!(second.unwrap(), 2, "the second load wrote c, then b itself");
    assert_eq!(sink.inner().written_ids(), ["c", "b"]);
    assert_eq!(
        sink.seen_count(),
        2,
        "a was never written, so it is not remembered"
    );
}

#[tokio::test]
async fn concurrent_overlap_with_succeeding_writer_waits_and_writes_nothing_twice() {
    let (first, second, sink) = overlap(true).await;
    assert_eq!(first.unwrap(), 2);
    assert_eq!(second.unwrap(), 1, "only c was this load's to write");
    assert_eq!(sink.inner().written_ids(), ["c", "a", "b"]);
    assert_eq!(sink.inner().calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_loads_write_each_row_exactly_once() {
    // Every third inner call fails; loads retry until Ok. At the end each
    // distinct row is written exactly once.
    struct Flaky(Recorder, AtomicU32);
    #[async_trait]
    impl Sink for Flaky {
        async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
            if self.1.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
                tokio::task::yield_now().await;
                return Err(EtlError::Network("flaky".into()));
            }
            tokio::task::yield_now().await;
            self.0.load(rows).await
        }
    }
    let sink = Arc::new(IdempotentSink::new(Flaky(
        Recorder::default(),
        AtomicU32::new(0),
    )));
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let sink = Arc::clone(&sink);
            tokio::spawn(async move {
                let batch: Vec<Row> = (t..t + 8).map(|i| row(&(i % 20).to_string())).collect();
                // Bounded, so a claim that is never given back fails the
                // test instead of hanging it.
                for _ in 0..100 {
                    if let Ok(n) = sink.load(&batch).await {
                        return n;
                    }
                }
                panic!("batch {t} never loaded");
            })
        })
        .collect();
    let mut reported = 0;
    for task in tasks {
        reported += task.await.unwrap();
    }
    let mut written = sink.inner().0.written_ids();
    let n = written.len();
    written.sort();
    written.dedup();
    assert_eq!(written.len(), n, "no row written twice");
    assert_eq!(n, 20, "every distinct row written");
    // A load that fails after an earlier pass of its own wrote rows reports
    // an error, so the counts can only fall short, never overshoot.
    assert!(reported <= 20, "counted {reported} writes of 20 rows");
}

/// Rows enough for the keys to be computed on every core and in slices.
fn big_batch(n: usize) -> Vec<Row> {
    (0..n).map(|i| row(&format!("r{i:05}"))).collect()
}

#[tokio::test]
async fn a_large_batch_keeps_order_first_copies_and_keys() {
    let mut rows = big_batch(1500);
    // Duplicates across the slices and the per-core parts.
    rows.insert(900, rows[3].clone());
    rows.insert(1300, rows[1100].clone());
    let sink = IdempotentSink::new(Recorder::default());
    assert_eq!(sink.load(&rows).await.unwrap(), 1500);
    assert_eq!(sink.inner().written_ids(), ids(&big_batch(1500)));
    for r in &rows {
        assert!(sink.is_seen(&r.content_key().unwrap()));
    }
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    assert_eq!(sink.inner().calls(), 1);
}

#[tokio::test]
async fn a_large_batch_with_an_unserialisable_row_marks_nothing() {
    #[derive(Clone)]
    struct Odd(u32);
    impl serde::Serialize for Odd {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            if self.0 == 1234 {
                return Err(serde::ser::Error::custom("row 1234 cannot be written"));
            }
            s.serialize_u32(self.0)
        }
    }
    impl Record for Odd {}
    struct Counting(AtomicU32);
    #[async_trait]
    impl Sink<Odd> for Counting {
        async fn load(&self, rows: &[Odd]) -> Result<usize, EtlError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(rows.len())
        }
    }
    let rows: Vec<Odd> = (0..2000).map(Odd).collect();
    let sink = IdempotentSink::new(Counting(AtomicU32::new(0)));
    let e = sink.load(&rows).await.unwrap_err();
    assert!(e.to_string().contains("row 1234"), "{e}");
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.inner().0.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failed_or_cancelled_large_write_gives_its_keys_back() {
    let rows = big_batch(1200);
    let sink = IdempotentSink::new(Recorder::scripted([Step::Fail, Step::Hang]));
    assert!(sink.load(&rows).await.is_err());
    assert_eq!(sink.seen_count(), 0);
    let cancelled = tokio::time::timeout(Duration::from_millis(50), sink.load(&rows)).await;
    assert!(cancelled.is_err(), "the hanging write was cut");
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.load(&rows).await.unwrap(), 1200);
    assert_eq!(sink.inner().written_ids(), ids(&rows));
}

#[test]
fn a_large_load_lets_other_tasks_run_on_a_current_thread_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let other_ran = Arc::new(AtomicU32::new(0));
    /// Records whether the other task ran before the write began, i.e.
    /// while the batch was being hashed.
    struct Witness(Arc<AtomicU32>, AtomicU32);
    #[async_trait]
    impl Sink for Witness {
        async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
            self.1
                .store(self.0.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(rows.len())
        }
    }
    let sink = IdempotentSink::new(Witness(other_ran.clone(), AtomicU32::new(0)));
    let rows = big_batch(5 * YIELD_EVERY);
    runtime.block_on(async {
        let flag = other_ran.clone();
        tokio::spawn(async move {
            loop {
                flag.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(sink.load(&rows).await.unwrap(), rows.len());
    });
    let ran = sink.inner().1.load(Ordering::SeqCst);
    assert!(
        ran >= 4,
        "the other task ran {ran} times while the batch was hashed"
    );
}

/// An inner sink that is idempotent by itself, as `PostgresSink` is: it
/// keeps each distinct row once and counts only the rows it added.
#[derive(Default)]
struct Upsert {
    rows: Mutex<Vec<Row>>,
    calls: AtomicU32,
}

#[async_trait]
impl Sink for Upsert {
    async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut held = self.rows.lock().unwrap();
        let mut added = 0;
        for row in rows {
            if !held.contains(row) {
                held.push(row.clone());
                added += 1;
            }
        }
        Ok(added)
    }
}

#[tokio::test]
async fn bounded_forgets_the_oldest_keys_and_the_inner_sink_skips_them_when_met_again() {
    let sink = IdempotentSink::bounded(Upsert::default(), 2);
    assert_eq!(sink.load(&[row("a"), row("b")]).await.unwrap(), 2);
    assert_eq!(sink.load(&[row("c")]).await.unwrap(), 1);
    // "a" was remembered first, so it was the one forgotten.
    assert_eq!(sink.seen_count(), 2);
    assert!(!sink.is_seen(&row("a").content_key().unwrap()));
    assert!(sink.is_seen(&row("b").content_key().unwrap()));
    assert!(sink.is_seen(&row("c").content_key().unwrap()));

    // Remembered rows still stop here: no call reaches the inner sink.
    assert_eq!(sink.load(&[row("b"), row("c")]).await.unwrap(), 0);
    assert_eq!(sink.inner().calls.load(Ordering::SeqCst), 2);

    // The forgotten row goes to the inner sink, which skips it: 0 new, and
    // it is held once.
    assert_eq!(sink.load(&[row("a")]).await.unwrap(), 0);
    assert_eq!(sink.inner().calls.load(Ordering::SeqCst), 3);
    assert_eq!(ids(&sink.inner().rows.lock().unwrap()), ["a", "b", "c"]);
    // Met again, it is remembered again (and "b" is now the oldest).
    assert!(sink.is_seen(&row("a").content_key().unwrap()));
    assert!(!sink.is_seen(&row("b").content_key().unwrap()));
    assert_eq!(sink.seen_count(), 2);
}

#[tokio::test]
async fn bounded_with_a_large_batch_keeps_the_newest_keys_only() {
    let rows = big_batch(1_000);
    let sink = IdempotentSink::bounded(Upsert::default(), 100);
    assert_eq!(sink.load(&rows).await.unwrap(), 1_000);
    assert_eq!(sink.seen_count(), 100);
    assert_eq!(sink.load(&rows[900..]).await.unwrap(), 0);
    assert_eq!(
        sink.inner().calls.load(Ordering::SeqCst),
        1,
        "the newest 100 stop here"
    );
    assert_eq!(
        sink.load(&rows).await.unwrap(),
        0,
        "the inner sink skips the rest"
    );
    assert_eq!(sink.inner().rows.lock().unwrap().len(), 1_000);
}

#[tokio::test]
async fn bounded_at_one_key_a_failed_write_unmarks_its_rows() {
    let sink = IdempotentSink::bounded(Recorder::scripted([Step::Fail]), 1);
    let rows = [row("a"), row("b")];
    assert!(sink.load(&rows).await.is_err());
    assert_eq!(sink.seen_count(), 0);
    assert!(sink.inner().written_ids().is_empty());
    // The retry writes both; one key is remembered.
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
    assert_eq!(sink.seen_count(), 1);
    assert!(sink.is_seen(&row("b").content_key().unwrap()));
}

#[tokio::test(start_paused = true)]
async fn bounded_at_one_key_a_cancelled_write_unmarks_its_rows() {
    let sink = IdempotentSink::bounded(Recorder::scripted([Step::Hang]), 1);
    let rows = [row("a"), row("b")];
    let timed_out = tokio::time::timeout(Duration::from_secs(30), sink.load(&rows)).await;
    assert!(timed_out.is_err(), "the hanging write must time out");
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
    assert_eq!(sink.seen_count(), 1);
}

#[tokio::test]
async fn bounded_at_zero_keys_remembers_nothing_and_forwards_everything() {
    let sink = IdempotentSink::bounded(Upsert::default(), 0);
    assert_eq!(sink.load(&[row("a"), row("a")]).await.unwrap(), 1);
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.load(&[row("a")]).await.unwrap(), 0);
    assert_eq!(sink.inner().calls.load(Ordering::SeqCst), 2);
}

/// Keeps the digests it is handed with each batch.
#[derive(Default)]
struct Keyed(Mutex<Vec<(Vec<String>, Vec<String>)>>);

#[async_trait]
impl Sink for Keyed {
    async fn load(&self, _rows: &[Row]) -> Result<usize, EtlError> {
        panic!("IdempotentSink hands its batches on with their digests");
    }

    async fn load_keyed(
        &self,
        rows: &[Row],
        digests: &[crate::content::Digest],
    ) -> Result<usize, EtlError> {
        let keys = rows.iter().map(|r| r.content_key().unwrap()).collect();
        let handed = digests.iter().map(hex::encode).collect();
        self.0.lock().unwrap().push((keys, handed));
        Ok(rows.len())
    }
}

#[tokio::test]
async fn the_inner_sink_is_handed_each_rows_content_digest() {
    let sink = IdempotentSink::new(Keyed::default());
    // A duplicate and a row met before: the batch handed on is a subset,
    // and its digests must still line up with its rows.
    sink.load(&[row("a")]).await.unwrap();
    assert_eq!(
        sink.load(&[row("b"), row("a"), row("c"), row("b")])
            .await
            .unwrap(),
        2
    );
    let calls = sink.inner().0.lock().unwrap();
    assert_eq!(calls.len(), 2);
    for (keys, handed) in calls.iter() {
        assert_eq!(keys, handed);
    }
    assert_eq!(calls[1].0.len(), 2);
}

#[tokio::test]
async fn a_batch_prepared_and_dropped_unwritten_gives_its_keys_back() {
    let sink = IdempotentSink::new(Recorder::default());
    let rows = [row("a"), row("b")];
    let prepared = sink.prepare(&rows, None).await.unwrap();
    assert_eq!(sink.inner().calls(), 0, "nothing is written by preparing");
    drop(prepared);
    assert_eq!(sink.seen_count(), 0);
    assert_eq!(sink.load(&rows).await.unwrap(), 2);
    assert_eq!(sink.inner().written_ids(), ["a", "b"]);
}

#[tokio::test]
async fn a_batch_prepared_behind_an_unwritten_one_writes_their_shared_rows_once() {
    let sink = IdempotentSink::new(Recorder::default());
    let (first, second) = ([row("a"), row("b")], [row("b"), row("c")]);
    let first = sink.prepare(&first, None).await.unwrap();
    let second = sink.prepare(&second, None).await.unwrap();
    assert_eq!(first.write().await.unwrap().new, 2);
    assert_eq!(second.write().await.unwrap().new, 1);
    assert_eq!(sink.inner().written_ids(), ["a", "b", "c"]);
}

#[tokio::test]
async fn a_batch_prepared_behind_one_that_fails_writes_the_shared_rows_itself() {
    let sink = IdempotentSink::new(Recorder::scripted([Step::Fail]));
    let (first, second) = ([row("a"), row("b")], [row("b"), row("c")]);
    let first = sink.prepare(&first, None).await.unwrap();
    let second = sink.prepare(&second, None).await.unwrap();
    assert!(first.write().await.is_err());
    assert_eq!(second.write().await.unwrap().new, 2);
    // Its own row first, then the one the failed write gave back.
    assert_eq!(sink.inner().written_ids(), ["c", "b"]);
}
