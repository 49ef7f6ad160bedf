// The future of a retried fn is `Send` when its body's is, so it can be
// spawned on a multi-threaded runtime.
use etl_core::{retry, EtlError};
use std::sync::Arc;

struct Source {
    name: String,
}

impl Source {
    #[retry(max_attempts = 3, base = "5ms")]
    async fn fetch(&self, page: u32) -> Result<String, EtlError> {
        tokio::task::yield_now().await;
        Ok(format!("{} {page}", self.name))
    }
}

#[retry]
async fn owned(text: String) -> Result<usize, EtlError> {
    tokio::task::yield_now().await;
    Ok(text.len())
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    let source = Arc::new(Source { name: "ll2".into() });
    let fut = async move { source.fetch(1).await };
    assert_send(&fut);
    let rt = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    rt.block_on(async {
        tokio::spawn(fut).await.unwrap().unwrap();
        tokio::spawn(owned("x".into())).await.unwrap().unwrap();
    });
}
