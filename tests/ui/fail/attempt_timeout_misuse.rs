use etl_core::retry::RetryableError;
use etl_core::{retry, EtlError};

// A blocking call cannot be cut short.
#[retry(attempt_timeout = "5s")]
fn blocking() -> Result<(), EtlError> {
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

// The error type must be able to say "timed out".
#[retry(attempt_timeout = "5s")]
async fn cannot_say_timed_out() -> Result<(), Mine> {
    Ok(())
}

fn main() {}
