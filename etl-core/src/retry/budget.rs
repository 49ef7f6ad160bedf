//! [`RetryBudget`]: a token bucket shared by many calls, so that a failing
//! dependency does not turn every caller into a retry storm.

use std::sync::atomic::{AtomicU32, Ordering};

/// A retry budget shared between calls (the AWS SDKs' "standard" retry
/// quota, gRPC's retry throttling): each retry withdraws `retry_cost`
/// tokens and is not made when the bucket cannot pay; each success puts
/// `refill` back, up to `capacity`. While a dependency fails, the budget
/// drains after `capacity / retry_cost` retries and calls fail fast; as
/// successes return, so do retries.
///
/// `new` takes the AWS SDK figures: 5 tokens a retry, 1 back a success. It
/// is a `const fn`, so a budget can be a `static` shared by a whole program.
///
/// ```
/// use etl_core::retry::{Retry, RetryBudget};
/// use etl_core::{EtlError, RetryPolicy};
///
/// static UPSTREAM: RetryBudget = RetryBudget::new(10); // two retries' worth
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let failing = || async { Err::<(), _>(EtlError::Network("down".into())) };
/// let policy = RetryPolicy { max_attempts: 10, ..RetryPolicy::default() };
/// let mut calls = 0;
/// let _ = Retry::new(policy).budget(&UPSTREAM).run(|| { calls += 1; failing() }).await;
/// assert_eq!(calls, 3, "the first attempt, then the two retries the budget paid for");
/// assert_eq!(UPSTREAM.available(), 0);
/// # }
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    tokens: AtomicU32,
    capacity: u32,
    retry_cost: u32,
    refill: u32,
}

impl RetryBudget {
    /// A full bucket of `capacity` tokens; a retry costs 5, a success
    /// refills 1.
    pub const fn new(capacity: u32) -> Self {
        Self::with_costs(capacity, 5, 1)
    }

    /// A full bucket with its own costs.
    pub const fn with_costs(capacity: u32, retry_cost: u32, refill: u32) -> Self {
        RetryBudget {
            tokens: AtomicU32::new(capacity),
            capacity,
            retry_cost,
            refill,
        }
    }

    /// Tokens in the bucket now.
    pub fn available(&self) -> u32 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// Takes one retry's tokens; `false` (and nothing taken) when the bucket
    /// cannot pay.
    pub(crate) fn try_withdraw(&self) -> bool {
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                t.checked_sub(self.retry_cost)
            })
            .is_ok()
    }

    /// Puts one success's tokens back, up to the capacity.
    pub(crate) fn deposit(&self) {
        if self.refill == 0 {
            return;
        }
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                (t < self.capacity).then(|| t.saturating_add(self.refill).min(self.capacity))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_budget_withdraws_and_refills_within_capacity() {
        let budget = RetryBudget::new(12);
        assert!(budget.try_withdraw());
        assert!(budget.try_withdraw());
        assert_eq!(budget.available(), 2);
        assert!(
            !budget.try_withdraw(),
            "2 tokens cannot pay a 5-token retry"
        );
        assert_eq!(budget.available(), 2, "a refused withdrawal takes nothing");
        for _ in 0..20 {
            budget.deposit();
        }
        assert_eq!(budget.available(), 12, "never above capacity");
    }

    #[test]
    fn retry_budget_is_shared_across_threads() {
        let budget = RetryBudget::with_costs(1000, 1, 0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..300 {
                        let _ = budget.try_withdraw();
                    }
                });
            }
        });
        assert_eq!(budget.available(), 0, "exactly 1000 withdrawals succeeded");
    }
}
