//! Every key with every other: `when` with `attempt_timeout`,
//! `attempt_timeout` on `&mut self` and a `&mut` argument, a breaker with
//! everything, and the futures stay `Send`.
use etl_core::retry::{CircuitBreaker, RetryBudget, RetryEvent};
use etl_core::{retry, EtlError};
use std::io;
use std::time::Duration;

static UPSTREAM: CircuitBreaker = CircuitBreaker::new(5, Duration::from_secs(30));
static BUDGET: RetryBudget = RetryBudget::new(100);

fn log(_: &RetryEvent<'_>) {}

fn worth_it(e: &EtlError) -> bool {
    e.is_transient()
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

struct Reader {
    buf: Vec<u8>,
}

impl Reader {
    #[retry(when = worth_it, attempt_timeout = "5s", deadline = "30s", jitter = "full",
            max_retry_after = "1m", on_retry = log, budget = &BUDGET, breaker = UPSTREAM)]
    async fn everything(&mut self, out: &mut Vec<u8>, page: u32) -> Result<usize, EtlError> {
        self.buf.push(page as u8);
        out.extend_from_slice(&self.buf);
        Ok(out.len())
    }

    #[retry(attempt_timeout = "5s")]
    async fn timed_mut(&mut self) -> Result<usize, EtlError> {
        self.buf.push(1);
        Ok(self.buf.len())
    }

    #[retry(breaker = UPSTREAM, max_attempts = 2)]
    fn blocking_with_breaker(&self) -> Result<usize, EtlError> {
        Ok(self.buf.len())
    }
}

// `when` over a foreign error, with `deadline`: io::Error has no
// From<TimedOut>, so the deadline stops new waits only.
#[retry(when = interrupted, deadline = "10s")]
async fn read_foreign() -> io::Result<u8> {
    Ok(1)
}

// io::Error is classified by its kind, without `when`.
#[retry]
async fn read_io() -> io::Result<u8> {
    Ok(2)
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    let mut reader = Reader { buf: Vec::new() };
    let mut out = Vec::new();
    {
        let fut = reader.everything(&mut out, 1);
        assert_send(&fut);
    }
    {
        let fut = reader.timed_mut();
        assert_send(&fut);
    }
    assert_send(&read_foreign());
    assert_send(&read_io());
    let _ = reader.blocking_with_breaker();
}
