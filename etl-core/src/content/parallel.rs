//! Per-row work (serialise and hash) spread over every core, in input order.
//!
//! rayon rather than `std::thread::scope`: measured on this project's 2-core
//! machine (BENCHMARKS.md section 7), a scoped thread costs 64 to 74 us to
//! spawn and join under criterion, against about 1.1 ms of work in a
//! 500-row batch; rayon's pool keeps its threads warm and was as fast or
//! faster on the same work in every run (388 against 476 ms for 200,000
//! rows in one, 1.31x against 1.28x over one core, best of five, in
//! another). Small batches stay on the calling thread.

use rayon::prelude::*;
use std::num::NonZeroUsize;
use std::sync::OnceLock;

/// Below this many rows a batch is mapped on the calling thread: a
/// hand-off costs about as much as it saves. Measured on 1.3 KB rows, 2
/// cores (BENCHMARKS.md section 7): below 128 rows a split gained 0 to 20%,
/// and not from run to run (96 rows: nothing); at 128 it gained 1.21x and
/// 1.28x in two runs.
pub(crate) const PARALLEL_MIN: usize = 128;

/// The cores this process may use (cached: `available_parallelism` reads
/// cgroup files on Linux).
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// `f` over `items`, in order, on every core when there are enough items.
/// The first error (in input order) wins.
pub(crate) fn try_map<I, O, E>(
    items: &[I],
    f: impl Fn(&I) -> Result<O, E> + Sync + Send,
) -> Result<Vec<O>, E>
where
    I: Sync,
    O: Send,
    E: Send,
{
    if cores() == 1 || items.len() < PARALLEL_MIN {
        return items.iter().map(f).collect();
    }
    // rayon's own adaptive split: rows differ in size, and its finer pieces
    // balance the cores better than fixed ones (a floor of 32 rows a piece
    // measured 460 ms against 396 ms unbounded, BENCHMARKS.md section 7).
    // Collected as results, then the first error taken: rayon's collect
    // straight into `Result<Vec>` goes through an unindexed path, slower.
    let results: Vec<Result<O, E>> = items.par_iter().map(f).collect();
    results.into_iter().collect()
}

/// `f` over `items`, in input order, on every core when there are enough
/// items (128 or more; fewer stay on the calling thread, where a hand-off
/// would cost what it saves). The per-row work a source does before a sink
/// sees its rows (parsing each entry of a page, say) gets the cores the
/// content keys get.
///
/// ```
/// let squares = etl_core::content::par_map(&(0..1000).collect::<Vec<u64>>(), |x| x * x);
/// assert_eq!(squares[999], 998_001);
/// ```
pub fn par_map<I, O>(items: &[I], f: impl Fn(&I) -> O + Sync + Send) -> Vec<O>
where
    I: Sync,
    O: Send,
{
    match try_map(items, |item| Ok::<_, std::convert::Infallible>(f(item))) {
        Ok(mapped) => mapped,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_the_first_error() {
        let items: Vec<u32> = (0..10_000).collect();
        let doubled: Result<Vec<u32>, ()> = try_map(&items, |&x| Ok(x * 2));
        assert_eq!(
            doubled.unwrap(),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
        let failed = try_map(&items, |&x| if x % 3000 == 2999 { Err(x) } else { Ok(x) });
        assert_eq!(failed, Err(2999));
        let small: Result<Vec<u32>, ()> = try_map(&items[..3], |&x| Ok(x));
        assert_eq!(small.unwrap(), [0, 1, 2]);
    }
}
