//! The pipeline end to end against the replay server: retries on the way,
//! resume from the file, a failing page keeps what came before, changed
//! launches are new rows.

use etl_core::{IdempotentSink, JsonlRejects, Row};
use etl_sources::pipeline::{self, Summary};
use etl_sources::replay::{Replay, ReplayServer, BUNDLED_LAUNCHES};
use etl_sources::{LaunchLibrary, SourceOptions, SpaceDevsSource};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// The source of the list at `url`, `limit` a page.
fn source(url: &str, limit: u32) -> SpaceDevsSource {
    // No request timeout on the paused clock (it would fire while the idle
    // runtime waits on the socket).
    let options = SourceOptions {
        timeout: None,
        ..Default::default()
    };
    LaunchLibrary::new(url)
        .unwrap()
        .limit(limit)
        .source(options)
        .unwrap()
}

fn bundled() -> Vec<Value> {
    serde_json::from_str(BUNDLED_LAUNCHES).unwrap()
}

/// The file's rows, after checking every line is whole and parses.
fn rows_in(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "no torn last line");
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn ids(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|Row::Launches(l)| l.id.clone()).collect()
}

async fn run_once(
    server: &ReplayServer,
    out: &Path,
    limit: u32,
) -> Result<Summary, pipeline::RunError> {
    let mut source = source(server.url().as_str(), limit);
    let sink = IdempotentSink::resume(out).unwrap();
    let rejects = JsonlRejects::open(pipeline::rejects_path(out)).unwrap();
    pipeline::run(&mut source, &sink, &rejects, None).await
}

#[tokio::test(start_paused = true)]
async fn bundled_run_survives_429_and_503_and_a_rerun_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let server = ReplayServer::start(Replay::bundled()).await.unwrap();

    let start = Instant::now();
    let first = run_once(&server, &out, 5).await.unwrap();
    assert_eq!(
        first,
        Summary {
            pages: 3,
            rows: 12,
            new_rows: 12,
            ..Default::default()
        }
    );
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "a Retry-After of 1 s and a 1 s backoff"
    );
    assert_eq!(server.requests(), 5, "3 pages, one 429 and one 503");

    let second = run_once(&server, &out, 5).await.unwrap();
    assert_eq!(
        second,
        Summary {
            pages: 3,
            rows: 12,
            new_rows: 0,
            ..Default::default()
        }
    );

    let rows = rows_in(&out);
    let expected: Vec<String> = bundled()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids(&rows), expected, "every launch once, in page order");
}

#[tokio::test(start_paused = true)]
async fn moving_from_2_2_0_to_2_3_0_writes_no_launch_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let old = ReplayServer::start(Replay::bundled_2_2_0()).await.unwrap();
    assert_eq!(run_once(&old, &out, 5).await.unwrap().new_rows, 12);
    let new = ReplayServer::start(Replay::bundled()).await.unwrap();
    assert!(new.url().path().starts_with("/2.3.0/"));
    let summary = run_once(&new, &out, 5).await.unwrap();
    assert_eq!((summary.rows, summary.new_rows), (12, 0));
    assert_eq!(rows_in(&out).len(), 12);
}

#[tokio::test]
async fn a_failing_page_keeps_the_pages_before_it() {
    use wiremock::matchers::{path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let server = MockServer::start().await;
    let list = "/2.2.0/launch/upcoming/";
    let first = serde_json::json!({
        "count": 12, "next": format!("{}{list}?offset=5", server.uri()), "results": bundled()[..5].to_vec()
    });
    Mock::given(path(list))
        .and(query_param("offset", "5"))
        .respond_with(ResponseTemplate::new(404))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path(list))
        .respond_with(ResponseTemplate::new(200).set_body_json(first))
        .mount(&server)
        .await;

    let mut source = source(&format!("{}{list}", server.uri()), 5);
    let sink = IdempotentSink::resume(&out).unwrap();
    let rejects = JsonlRejects::open(pipeline::rejects_path(&out)).unwrap();
    let err = pipeline::run(&mut source, &sink, &rejects, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 404"), "{err}");
    assert_eq!(
        err.done,
        Summary {
            pages: 1,
            rows: 5,
            new_rows: 5,
            ..Default::default()
        }
    );
    assert_eq!(
        rows_in(&out).len(),
        5,
        "the rows loaded before stay written"
    );
}

#[tokio::test]
async fn max_pages_stops_early_and_a_later_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let server = ReplayServer::start(Replay::new(bundled())).await.unwrap();
    let mut source = source(server.url().as_str(), 4);
    let sink = IdempotentSink::resume(&out).unwrap();
    let rejects = JsonlRejects::open(pipeline::rejects_path(&out)).unwrap();
    let partial = pipeline::run(&mut source, &sink, &rejects, Some(2))
        .await
        .unwrap();
    assert_eq!(
        partial,
        Summary {
            pages: 2,
            rows: 8,
            new_rows: 8,
            ..Default::default()
        }
    );
    drop(sink);

    let rest = run_once(&server, &out, 4).await.unwrap();
    assert_eq!(
        rest,
        Summary {
            pages: 3,
            rows: 12,
            new_rows: 4,
            ..Default::default()
        }
    );
    assert_eq!(rows_in(&out).len(), 12);
}

#[tokio::test]
async fn a_launch_changed_upstream_is_a_new_row() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("launches.jsonl");
    let launches = bundled();
    let server = ReplayServer::start(Replay::new(launches.clone()))
        .await
        .unwrap();
    run_once(&server, &out, 5).await.unwrap();
    drop(server);

    let mut changed = launches;
    changed[0]["net"] = Value::from("2027-01-15T09:30:00Z");
    changed[0]["last_updated"] = Value::from("2026-12-01T08:00:00Z");
    let server = ReplayServer::start(Replay::new(changed)).await.unwrap();
    let summary = run_once(&server, &out, 5).await.unwrap();
    assert_eq!(
        summary.new_rows, 1,
        "only the changed launch is written again"
    );

    let rows = rows_in(&out);
    assert_eq!(rows.len(), 13);
    let distinct: HashSet<String> = rows.iter().map(|r| r.content_key().unwrap()).collect();
    assert_eq!(distinct.len(), 13, "no row content twice");
}

/// Fetch and load overlap, on the paused clock: a source whose every page
/// takes 50 ms to arrive and a sink whose every load takes 50 ms.
mod overlap {
    use super::*;
    use async_trait::async_trait;
    use etl_core::content::Digest;
    use etl_core::{EtlError, Prepared, Record, Reject, RejectSink, Sink};
    use etl_sources::{PageRead, Source};
    use serde::Serialize;
    use std::sync::Mutex;

    const ROUND_TRIP: Duration = Duration::from_millis(50);

    #[derive(Clone, Debug, Serialize)]
    struct Item {
        id: u32,
    }

    impl Record for Item {
        const KIND: &'static str = "item";
        fn record_id(&self) -> Option<String> {
            Some(self.id.to_string())
        }
    }

    /// `pages` pages of one item each; the page numbered `fail_at` fails.
    struct Slow {
        pages: u32,
        served: u32,
        fail_at: Option<u32>,
    }

    impl Slow {
        /// Ten pages, the one numbered `fail_at` failing.
        fn ten(fail_at: Option<u32>) -> Slow {
            Slow {
                pages: 10,
                served: 0,
                fail_at,
            }
        }
    }

    impl Source for Slow {
        type Row = Item;

        async fn next_page(&mut self) -> Result<Option<PageRead<Item>>, EtlError> {
            tokio::time::sleep(ROUND_TRIP).await;
            if self.served == self.pages {
                return Ok(None);
            }
            self.served += 1;
            if self.fail_at == Some(self.served) {
                return Err(EtlError::Parse(format!("page {} is not JSON", self.served)));
            }
            Ok(Some(PageRead {
                url: format!("memory://items/{}", self.served).parse().unwrap(),
                rows: vec![Item { id: self.served }],
                rejects: vec![],
                count: None,
                on_loaded: None,
            }))
        }
    }

    /// Keeps the ids it loaded, each load taking 50 ms; the load of the
    /// item `fail_on` fails (permanently).
    #[derive(Default)]
    struct SlowSink {
        loaded: Mutex<Vec<u32>>,
        fail_on: Option<u32>,
    }

    #[async_trait]
    impl Sink<Item> for SlowSink {
        async fn load(&self, rows: &[Item]) -> Result<usize, EtlError> {
            tokio::time::sleep(ROUND_TRIP).await;
            if rows.iter().any(|r| Some(r.id) == self.fail_on) {
                return Err(EtlError::InvalidInput("the disk is full".into()));
            }
            self.loaded
                .lock()
                .unwrap()
                .extend(rows.iter().map(|r| r.id));
            Ok(rows.len())
        }
    }

    struct NoRejects;

    #[async_trait]
    impl RejectSink for NoRejects {
        async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError> {
            Ok(rejects.len())
        }
    }

    /// Ten pages into `sink`, and how long they took.
    async fn timed(sink: &impl Sink<Item>) -> (pipeline::Summary, Duration) {
        let start = Instant::now();
        let summary = pipeline::run(&mut Slow::ten(None), sink, &NoRejects, None)
            .await
            .unwrap();
        (summary, start.elapsed())
    }

    /// Ten pages into `sink`, whose write of page 4 fails: the run ends
    /// with that error, pages 1 to 3 loaded.
    async fn ends_at_page_4(sink: &impl Sink<Item>) {
        let err = pipeline::run(&mut Slow::ten(None), sink, &NoRejects, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("the disk is full"), "{err}");
        assert_eq!(err.done.pages, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_page_is_fetched_while_this_one_loads() {
        let sink = SlowSink::default();
        let (summary, took) = timed(&sink).await;
        assert_eq!(summary.pages, 10);
        assert_eq!(*sink.loaded.lock().unwrap(), (1..=10).collect::<Vec<_>>());
        // One at a time: 10 fetches + 10 loads + the fetch that finds the
        // end = 21 x 50 ms. Overlapped: each load hides a fetch.
        assert_eq!(took, ROUND_TRIP * 11, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn max_pages_fetches_no_page_beyond_it() {
        let mut source = Slow::ten(None);
        let sink = SlowSink::default();
        let summary = pipeline::run(&mut source, &sink, &NoRejects, Some(3))
            .await
            .unwrap();
        assert_eq!(summary.pages, 3);
        assert_eq!(source.served, 3, "no fourth page was asked for");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_load_drops_the_page_fetched_beside_it() {
        let sink = SlowSink {
            fail_on: Some(4),
            ..Default::default()
        };
        ends_at_page_4(&sink).await;
        assert_eq!(*sink.loaded.lock().unwrap(), vec![1, 2, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_ends_the_run_after_the_load_beside_it() {
        let mut source = Slow::ten(Some(5));
        let sink = SlowSink::default();
        let err = pipeline::run(&mut source, &sink, &NoRejects, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("page 5 is not JSON"), "{err}");
        assert_eq!(err.done.pages, 4, "page 4 was loading when 5 failed");
        assert_eq!(*sink.loaded.lock().unwrap(), vec![1, 2, 3, 4]);
    }

    /// What [`Preparing`] did, in order.
    #[derive(Debug, PartialEq)]
    enum Step {
        Made(u32),
        Writing(u32),
        Written(u32),
    }

    /// A sink whose loads come in two halves ([`Sink::prepare`]): making a
    /// page ready takes 50 ms, writing it 150 ms; the write of the item
    /// `fail_on` fails (permanently).
    #[derive(Default)]
    struct Preparing {
        steps: Mutex<Vec<Step>>,
        fail_on: Option<u32>,
    }

    impl Preparing {
        fn step(&self, step: Step) {
            self.steps.lock().unwrap().push(step);
        }
    }

    #[async_trait]
    impl Sink<Item> for Preparing {
        async fn load(&self, rows: &[Item]) -> Result<usize, EtlError> {
            Ok(self.prepare(rows, None).await?.write().await?.new)
        }

        async fn prepare<'a>(
            &'a self,
            rows: &'a [Item],
            _digests: Option<&[Digest]>,
        ) -> Result<Prepared<'a>, EtlError> {
            let id = rows[0].id;
            tokio::time::sleep(ROUND_TRIP).await;
            self.step(Step::Made(id));
            Ok(Prepared::new(async move {
                self.step(Step::Writing(id));
                tokio::time::sleep(ROUND_TRIP * 3).await;
                if self.fail_on == Some(id) {
                    return Err(EtlError::InvalidInput("the disk is full".into()));
                }
                self.step(Step::Written(id));
                Ok(rows.len())
            }))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_page_is_made_ready_while_this_one_is_written_and_written_after_it() {
        let sink = Preparing::default();
        let (summary, took) = timed(&sink).await;
        assert_eq!(summary.pages, 10);
        let steps = sink.steps.lock().unwrap();
        // Each page is written after the one before it is, never beside it.
        let writes: Vec<&Step> = steps
            .iter()
            .filter(|s| !matches!(s, Step::Made(_)))
            .collect();
        let in_order: Vec<Step> = (1..=10)
            .flat_map(|i| [Step::Writing(i), Step::Written(i)])
            .collect();
        assert_eq!(writes, in_order.iter().collect::<Vec<_>>());
        // Page 2 is ready before page 1 is written.
        let at = |step: Step| steps.iter().position(|s| *s == step).unwrap();
        assert!(at(Step::Made(2)) < at(Step::Written(1)), "{steps:?}");
        // The first fetch and making (100 ms), then a write each (150 ms)
        // with the next page's fetch and making (100 ms) behind it. One
        // after another, a page would take 200 ms: 2,050 ms in all.
        assert_eq!(took, ROUND_TRIP * 32, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_write_leaves_the_page_made_behind_it_unwritten() {
        let sink = Preparing {
            fail_on: Some(4),
            ..Default::default()
        };
        ends_at_page_4(&sink).await;
        let steps = sink.steps.lock().unwrap();
        assert!(steps.contains(&Step::Made(5)), "page 5 was made: {steps:?}");
        assert!(!steps.contains(&Step::Writing(5)), "{steps:?}");
        assert!(!steps.contains(&Step::Written(4)), "{steps:?}");
    }
}
