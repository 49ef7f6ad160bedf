//! [`Budget`]: how many bytes of key filters a process keeps in memory.
//!
//! Every file of a table has a filter per row group, and a load probes its
//! keys against all of them. Held in memory, they grow with the table (a
//! few bytes a row), whatever the load's own size. Past the budget, an
//! index keeps only where each file's filters are stored in the file (a
//! few bytes a row group) and reads them again at each probe: a probe then
//! costs a read of those bytes, and the memory stays the budget's.
//!
//! One budget is shared by every table the process opens, so that a
//! family of tables (a resource and its child tables) or several sinks
//! are bounded together, and a table's filters are held first come first
//! served: every probe reads every file's filters, so which ones are held
//! changes only how many bytes are read, never the answer.

use etl_core::EtlError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

/// The bytes of key filters a process holds in memory, across all its
/// tables: the filters of a family of tables of about a million rows fit,
/// so such a table is probed in memory alone; a larger one reads the rest
/// from its files at each probe.
pub(crate) const PROCESS_BUDGET: usize = 32 << 20;

/// The environment variable that sets the process's budget, in bytes, in
/// place of [`PROCESS_BUDGET`]: less memory for a small machine, or more
/// for a large table probed in memory alone. `0` holds no filter.
pub(crate) const BUDGET_VAR: &str = "ETL_DELTA_KEY_FILTER_BYTES";

static PROCESS: LazyLock<Result<Arc<Budget>, String>> =
    LazyLock::new(|| Ok(Arc::new(Budget::new(limit_of(std::env::var(BUDGET_VAR))?))));

/// The budget [`BUDGET_VAR`]'s value `var` sets.
fn limit_of(var: Result<String, std::env::VarError>) -> Result<usize, String> {
    match var {
        Err(std::env::VarError::NotPresent) => Ok(PROCESS_BUDGET),
        Err(e) => Err(format!("{BUDGET_VAR}: {e}")),
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| format!("{BUDGET_VAR}: `{text}` is not a number of bytes: {e}")),
    }
}

/// A limit on the bytes of filters held, and what is held against it.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: usize,
    held: AtomicUsize,
}

/// Bytes held against a [`Budget`]: given back when dropped (the file
/// gone from the index, or the index itself).
#[derive(Debug)]
pub(crate) struct Taken {
    bytes: usize,
    budget: Arc<Budget>,
}

impl Budget {
    /// A budget of `limit` bytes, none held.
    pub(crate) fn new(limit: usize) -> Self {
        Budget {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// The budget every table of this process shares ([`PROCESS_BUDGET`],
    /// or [`BUDGET_VAR`]'s bytes); an error naming the variable where its
    /// value is not a number.
    pub(crate) fn process() -> Result<Arc<Budget>, EtlError> {
        PROCESS.clone().map_err(EtlError::InvalidInput)
    }

    /// `bytes` held, if they fit in what is left; `None` otherwise.
    pub(crate) fn take(self: &Arc<Self>, bytes: usize) -> Option<Taken> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&now| now <= self.limit)
            })
            .ok()
            .map(|_| self.taken(bytes))
    }

    /// `bytes` held whether they fit or not: a filter that cannot be read
    /// again (one built of a file without its own) is held at any size.
    pub(crate) fn force(self: &Arc<Self>, bytes: usize) -> Taken {
        self.held.fetch_add(bytes, Ordering::AcqRel);
        self.taken(bytes)
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    fn taken(self: &Arc<Self>, bytes: usize) -> Taken {
        Taken {
            bytes,
            budget: Arc::clone(self),
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_held_while_they_fit_and_given_back_when_dropped() {
        let budget = Arc::new(Budget::new(100));
        let first = budget.take(60).expect("fits");
        assert!(budget.take(50).is_none(), "110 of 100");
        let second = budget.take(40).expect("exactly fits");
        assert_eq!(budget.held(), 100);
        drop(first);
        assert_eq!(budget.held(), 40);
        let forced = budget.force(500);
        assert_eq!(budget.held(), 540);
        assert!(budget.take(1).is_none());
        drop((second, forced));
        assert_eq!(budget.held(), 0);
        assert!(budget.take(usize::MAX).is_none(), "no overflow");
    }

    #[test]
    fn the_variable_sets_the_budget_and_a_bad_value_is_named() {
        assert_eq!(
            limit_of(Err(std::env::VarError::NotPresent)),
            Ok(PROCESS_BUDGET)
        );
        assert_eq!(limit_of(Ok(" 0 ".into())), Ok(0));
        assert_eq!(limit_of(Ok("67108864".into())), Ok(64 << 20));
        let e = limit_of(Ok("64MB".into())).unwrap_err();
        assert!(e.contains(BUDGET_VAR) && e.contains("`64MB`"), "{e}");
    }
}
