use etl_core::retry::RetryableError;
use etl_core::{retry, EtlError};
use std::io;

// A blocking call cannot be cut short.
#[retry(attempt_timeout = "5s")]
fn blocking() -> Result<(), EtlError> {
    Ok(())
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

// Not with `when` (yet).
#[retry(when = interrupted, attempt_timeout = "5s")]
async fn with_when() -> io::Result<()> {
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

// A cut attempt would take a lent borrow down with it.
#[retry(attempt_timeout = "5s")]
async fn lent(buf: &mut Vec<u8>) -> Result<(), EtlError> {
    buf.push(1);
    Ok(())
}

fn main() {}
