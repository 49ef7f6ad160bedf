//! Exactly-once writes for any row type, and outputs written before rows
//! became generic resuming unchanged.

#![cfg(feature = "content")]

use etl_core::{
    content_id, content_key, read_record_keys, IdempotentSink, JsonlSink, Launch, Record, Row, Sink,
};
use serde::{Deserialize, Serialize};

/// A user's own record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Reading {
    sensor: String,
    at: String,
    celsius: f64,
}

impl Record for Reading {
    const KIND: &'static str = "reading";
}

fn reading(i: usize) -> Reading {
    Reading {
        sensor: format!("t{}", i % 7),
        at: format!("2026-11-30T{:02}:{:02}:00Z", i / 60 % 24, i % 60),
        celsius: 15.0 + (i % 100) as f64 / 10.0,
    }
}

#[tokio::test]
async fn a_user_struct_loads_exactly_once_into_jsonl_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("readings.jsonl");
    let first: Vec<Reading> = (0..300).map(reading).collect();

    let sink = IdempotentSink::resume_as::<Reading>(&path).unwrap();
    assert_eq!(sink.load(&first).await.unwrap(), 300);
    assert_eq!(sink.load(&first).await.unwrap(), 0);
    drop(sink);

    // The next run: 300 known, 100 new.
    let second: Vec<Reading> = (0..400).map(reading).collect();
    let sink = IdempotentSink::resume_as::<Reading>(&path).unwrap();
    assert_eq!(sink.seen_count(), 300);
    assert_eq!(sink.load(&second).await.unwrap(), 100);

    let text = std::fs::read_to_string(&path).unwrap();
    let stored: Vec<Reading> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stored, second, "each reading once, in order");
    // The key is the record's kind over its line.
    let line = text.lines().next().unwrap();
    assert_eq!(
        content_key(&second[0]).unwrap(),
        content_id("reading", line)
    );
    assert_eq!(
        read_record_keys::<Reading>(&path).unwrap()[0],
        content_id("reading", line)
    );
}

#[tokio::test]
async fn the_kind_comes_from_the_type() {
    // The same JSON under two kinds is two keys; Row keeps "row".
    #[derive(Serialize)]
    struct A(u8);
    #[derive(Serialize)]
    struct B(u8);
    impl Record for A {}
    impl Record for B {
        const KIND: &'static str = "b";
    }
    assert_eq!(content_key(&A(1)).unwrap(), content_id("row", "1"));
    assert_ne!(content_key(&A(1)).unwrap(), content_key(&B(1)).unwrap());
    let row = Row::Launches(Launch {
        id: "x".into(),
        name: "y".into(),
        ..Default::default()
    });
    assert_eq!(content_key(&row).unwrap(), row.content_key().unwrap());
}

/// `data/written-by-0.1.0.jsonl` was written by `JsonlSink` before rows
/// became generic, from the 10 real 2.3.0 launches in
/// `data/ll2-2.3.0-upcoming-results.json`.
#[tokio::test]
async fn an_output_written_before_the_change_resumes_with_zero_new_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("launches.jsonl");
    std::fs::copy("tests/data/written-by-0.1.0.jsonl", &path).unwrap();
    let launches: Vec<Launch> =
        serde_json::from_str(include_str!("data/ll2-2.3.0-upcoming-results.json")).unwrap();
    let rows: Vec<Row> = launches.into_iter().map(Row::Launches).collect();

    let sink = IdempotentSink::resume(&path).unwrap();
    assert_eq!(sink.seen_count(), 10);
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
    let file = JsonlSink::open(&path).unwrap();
    let keys = file.content_keys().unwrap();
    let expected: Vec<String> = rows.iter().map(|r| r.content_key().unwrap()).collect();
    assert_eq!(keys, expected);
}

#[tokio::test]
async fn a_large_file_resumes_on_every_core_with_lines_numbered_right() {
    // Over 1 MiB, so the file is cut into one range per core.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("readings.jsonl");
    let rows: Vec<Reading> = (0..30_000).map(reading).collect();
    let mut text = String::new();
    for (i, r) in rows.iter().enumerate() {
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
        if i == 20_000 {
            text.push_str("not a row\n"); // line 20,002
        }
    }
    text.push_str("{\"torn");
    std::fs::write(&path, &text).unwrap();
    assert!(text.len() > 1 << 20);

    let keys = read_record_keys::<Reading>(&path).unwrap();
    let mut expected: Vec<String> = rows.iter().map(|r| content_key(r).unwrap()).collect();
    expected.insert(20_001, content_id("reading", "not a row"));
    assert_eq!(keys, expected);

    let sink = IdempotentSink::resume_as::<Reading>(&path).unwrap();
    assert_eq!(sink.load(&rows).await.unwrap(), 0);
}
