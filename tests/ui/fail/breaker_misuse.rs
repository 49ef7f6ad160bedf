use etl_core::retry::{CircuitBreaker, RetryableError};
use etl_core::{retry, EtlError};
use std::time::Duration;

static UPSTREAM: CircuitBreaker = CircuitBreaker::new(3, Duration::from_secs(30));

// Not a path: a reference.
#[retry(breaker = &UPSTREAM)]
async fn by_reference() -> Result<(), EtlError> {
    Ok(())
}

// Given twice.
#[retry(breaker = UPSTREAM, breaker = UPSTREAM)]
async fn twice() -> Result<(), EtlError> {
    Ok(())
}

// A typo of the key.
#[retry(breakr = UPSTREAM)]
async fn typo() -> Result<(), EtlError> {
    Ok(())
}

#[derive(Debug)]
struct Mine;

impl std::fmt::Display for Mine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mine")
    }
}

impl RetryableError for Mine {
    fn is_transient(&self) -> bool {
        true
    }
}

// The error type must be able to say "circuit open".
#[retry(breaker = UPSTREAM)]
async fn cannot_say_open() -> Result<(), Mine> {
    Ok(())
}

// Not a breaker.
static NOT_A_BREAKER: u32 = 3;

#[retry(breaker = NOT_A_BREAKER)]
async fn not_a_breaker() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
