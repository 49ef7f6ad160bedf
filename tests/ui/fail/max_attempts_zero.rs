use etl_core::{retry, EtlError};

#[retry(max_attempts = 0)]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
