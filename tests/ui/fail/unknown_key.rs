use etl_core::{retry, EtlError};

#[retry(max_atempts = 4)]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

#[retry(backoff = "1s")]
async fn g() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
