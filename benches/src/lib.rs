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
