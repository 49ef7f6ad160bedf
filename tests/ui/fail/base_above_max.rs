use etl_core::{retry, EtlError};

#[retry(base = "2s", max = "1s")]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

// `max` defaults to 10s.
#[retry(base = "1m")]
async fn g() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
