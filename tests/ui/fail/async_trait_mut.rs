// An `#[async_trait]` method has already become a fn building a boxed
// future: an exclusive borrow cannot be lent to each attempt of it.
use async_trait::async_trait;
use etl_core::{retry, EtlError};

#[async_trait]
trait Counter {
    async fn bump(&mut self, by: &mut u32) -> Result<u32, EtlError>;
}

struct C(u32);

#[async_trait]
impl Counter for C {
    #[retry(max_attempts = 2)]
    async fn bump(&mut self, by: &mut u32) -> Result<u32, EtlError> {
        self.0 += *by;
        Ok(self.0)
    }
}

fn main() {}
