// A method of an `#[async_trait]` impl: the trait rewrites it first, and
// `#[retry]` retries the boxed future its body builds.
use async_trait::async_trait;
use etl_core::{retry, EtlError, Row, Sink};

struct Flaky;

#[async_trait]
impl Sink for Flaky {
    #[retry(max_attempts = 3, base = "1ms")]
    async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
        Ok(rows.len())
    }
}

fn main() {
    let sink = Flaky;
    let _ = sink.load(&[]);
}
