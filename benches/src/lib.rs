//! Shared pieces of the benchmarks in `benches/`: a counting allocator and
//! realistic launch rows. Not published.

use etl_core::{Launch, Row};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// A global allocator that counts allocations and live bytes, so a bench
/// can report allocations per call and bytes per remembered key.
pub struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations made so far (with [`Counting`] installed).
pub fn allocations() -> usize {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Bytes allocated and not yet freed (with [`Counting`] installed).
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Launch objects in Launch Library 2.2.0's shape, as the offline dataset of
/// etl-sources holds them (synthetic, schema-true).
const LAUNCHES: &str = include_str!("../data/upcoming-2.2.0.json");

/// `n` distinct, realistic rows: the 12 dataset launches, each copy with
/// its own id and `last_updated`.
pub fn rows(n: usize) -> Vec<Row> {
    variants(LAUNCHES, n)
}

/// Ten real Launch Library 2.3.0 launches (etl-core's test data, from the
/// API's upcoming endpoint).
const REAL_LAUNCHES: &str = include_str!("../data/ll2-2.3.0-upcoming-results.json");

/// `n` distinct rows made from the real launches (about 1.3 KB each as
/// JSON): each copy with its own id and `last_updated`.
pub fn real_rows(n: usize) -> Vec<Row> {
    variants(REAL_LAUNCHES, n)
}

/// `n` distinct rows cycling through the launches of `json`, each copy with
/// its own id and `last_updated`.
fn variants(json: &str, n: usize) -> Vec<Row> {
    let base: Vec<Launch> = serde_json::from_str(json).expect("the bench launches parse");
    (0..n)
        .map(|i| {
            let mut launch = base[i % base.len()].clone();
            launch.id = format!("{}-{i:08}", &launch.id[..27]);
            launch.last_updated = Some(format!("2026-11-{:02}T{:02}:00:00Z", 1 + i % 28, i % 24));
            Row::Launches(launch)
        })
        .collect()
}

/// `n` GitHub-issue-like records as canonical JSON text (about 1 KB each):
/// objects three levels deep (`user.profile.location`), two lists of
/// objects (`labels`, `assignees`), timestamps with offsets, a null member
/// and a long text. What the typed-table benches load.
pub fn issues(n: usize) -> Vec<String> {
    issues_in(0..n)
}

/// The [`issues`] numbered `range`: the same records as `issues(range.end)`
/// from `range.start` on, so a table can be grown by ranges.
pub fn issues_in(range: std::ops::Range<usize>) -> Vec<String> {
    const LABELS: [&str; 3] = ["bug", "ui", "perf"];
    range
        .map(|i| {
            let labels: Vec<_> = (0..1 + i % 3)
                .map(|l| {
                    serde_json::json!({
                        "id": 1000 + l,
                        "name": LABELS[l],
                        "color": "d73a4a",
                        "default": l == 0,
                    })
                })
                .collect();
            let assignees: Vec<_> = (0..i % 3)
                .map(|a| serde_json::json!({"login": format!("dev{a}"), "id": 50 + a, "site_admin": false}))
                .collect();
            serde_json::json!({
                "id": 9_000_000 + i,
                "number": i,
                "title": format!("Issue {i}: the exporter drops a batch under load"),
                "state": if i % 4 == 0 { "closed" } else { "open" },
                "locked": false,
                "comments": i % 17,
                "created_at": "2024-05-01T12:00:00Z",
                "updated_at": format!("2024-05-{:02}T08:{:02}:00+02:00", 1 + i % 28, i % 60),
                "closed_at": null,
                "body": "Steps to reproduce: run the exporter with 4 workers against a slow sink and watch the batch counter; one batch in a few thousand is never written and no error is logged.",
                "score": 0.5 + (i % 10) as f64,
                "user": {
                    "login": format!("user{}", i % 500),
                    "id": 10_000 + i % 500,
                    "type": "User",
                    "profile": {"url": format!("https://example.com/u/{}", i % 500), "location": {"city": "Lisbon", "country": "PT"}},
                },
                "reactions": {"total_count": i % 7, "+1": i % 5, "heart": i % 2},
                "labels": labels,
                "assignees": assignees,
            })
            .to_string()
        })
        .collect()
}

/// An issue record as `etl run` holds one: its canonical text, id and
/// update time ([`issues`] records, for the loads into typed tables).
#[derive(Clone, Debug)]
pub struct Issue {
    /// The record's JSON text.
    pub text: String,
    /// Its `id`, as text.
    pub id: String,
    /// Its `updated_at`.
    pub updated: String,
}

/// `n` of [`issues`] as [`Issue`] records.
pub fn issue_records(n: usize) -> Vec<Issue> {
    issues(n).into_iter().map(Issue::from_text).collect()
}

impl Issue {
    /// The record whose JSON text is `text` (an object with `id` and
    /// `updated_at`, as [`issues`] makes).
    pub fn from_text(text: String) -> Self {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        Issue {
            id: v["id"].to_string(),
            updated: v["updated_at"].as_str().unwrap_or_default().to_owned(),
            text,
        }
    }
}

impl serde::Serialize for Issue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(&self.text).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl etl_core::Record for Issue {
    fn record_id(&self) -> Option<String> {
        Some(self.id.clone())
    }
    fn updated_at(&self) -> Option<String> {
        Some(self.updated.clone())
    }
    fn json_text(&self) -> Option<&str> {
        Some(&self.text)
    }
}
