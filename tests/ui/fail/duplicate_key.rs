use etl_core::{retry, EtlError};

#[retry(base = "100ms", max_attempts = 3, base = "200ms")]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
