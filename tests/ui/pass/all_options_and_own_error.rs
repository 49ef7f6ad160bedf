// Every key at once, on a method, with an error type of the user's own.
use etl_core::retry::{RetryBudget, RetryEvent, RetryableError};
use etl_core::{retry, EtlError};
use std::fmt;

#[derive(Debug)]
struct Throttled(u64);

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "throttled for {}s", self.0)
    }
}

impl RetryableError for Throttled {
    fn is_transient(&self) -> bool {
        true
    }
    fn retry_after(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(self.0))
    }
}

fn log(event: &RetryEvent<'_>) {
    eprintln!("{event:?}");
}

struct Client {
    budget: RetryBudget,
}

impl Client {
    #[retry(
        max_attempts = 8,
        base = "100ms",
        max = "5s",
        jitter = "equal",
        deadline = "1m",
        max_retry_after = "30s",
        on_retry = log,
        budget = &self.budget,
    )]
    async fn fetch(&self, page: u32) -> Result<u32, Throttled> {
        Ok(page)
    }

    #[retry(jitter = "none", on_retry = crate::log)]
    async fn etl(&self) -> Result<(), EtlError> {
        Ok(())
    }
}

fn main() {
    let client = Client { budget: RetryBudget::new(100) };
    let _ = client.fetch(1);
    let _ = client.etl();
}
