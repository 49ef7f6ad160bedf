use etl_core::{retry, EtlError};
use std::io;

#[retry(max_attempts = 2, base = "1ms", jitter = "full", deadline = "1s")]
fn blocking(n: u32) -> Result<u32, EtlError> {
    if n == 0 {
        return Err(EtlError::Parse("zero".into()));
    }
    Ok(n)
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

#[retry(when = interrupted)]
fn read(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

#[retry(when = interrupted, max_attempts = 3)]
async fn read_async(path: &str) -> io::Result<usize> {
    Ok(std::fs::read(path)?.len())
}

struct Store;

impl Store {
    #[retry(max_attempts = 2)]
    fn get(&self, key: &str) -> Result<String, EtlError> {
        Ok(key.to_uppercase())
    }
}

fn main() {
    assert_eq!(blocking(3).unwrap(), 3);
    assert!(read("/nonexistent/file").is_err());
    let _ = read_async("/nonexistent/file");
    assert_eq!(Store.get("k").unwrap(), "K");
}
