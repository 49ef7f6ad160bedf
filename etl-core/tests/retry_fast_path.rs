//! The success path of `with_retry` costs nothing beyond the call it wraps:
//! no allocation and no timer. Its own binary, because it installs a
//! counting global allocator.

use etl_core::{with_retry, EtlError, RetryPolicy};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

struct Counting;

thread_local! {
    // Per thread: the test harness allocates on its other threads meanwhile.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn retry_success_path_allocates_nothing_and_needs_no_runtime() {
    let mut cx = Context::from_waker(Waker::noop());
    let call = || with_retry(RetryPolicy::default(), || async { Ok::<_, EtlError>(7u64) });
    // With the metrics feature, an op's metric keys are built at its first
    // call, once per process: warm them up, then count.
    if cfg!(feature = "metrics") {
        assert!(matches!(
            pin!(call()).as_mut().poll(&mut cx),
            Poll::Ready(Ok(7))
        ));
    }
    let before = allocations();
    let mut fut = pin!(call());
    // Polled without any tokio runtime: a timer would panic here.
    let polled = fut.as_mut().poll(&mut cx);
    let after = allocations();
    assert!(matches!(polled, Poll::Ready(Ok(7))));
    assert_eq!(after - before, 0, "the success path allocated");
}

#[test]
fn retry_future_holds_no_timer() {
    let fut = with_retry(RetryPolicy::default(), || async { Ok::<_, EtlError>(()) });
    // The retry path (its counters and timer) is boxed and built only on a
    // failure, so the whole future is smaller than the timer alone.
    let size = std::mem::size_of_val(&fut);
    let timer = std::mem::size_of::<tokio::time::Sleep>();
    assert!(
        size < timer,
        "with_retry's future is {size} bytes, a timer {timer}"
    );
}
