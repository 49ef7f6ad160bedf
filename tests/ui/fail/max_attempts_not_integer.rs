use etl_core::{retry, EtlError};

const N: u32 = 4;

#[retry(max_attempts = "4")]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

#[retry(max_attempts = N)]
async fn g() -> Result<(), EtlError> {
    Ok(())
}

#[retry(max_attempts = 5000000000)]
async fn h() -> Result<(), EtlError> {
    Ok(())
}

#[retry(max_attempts)]
async fn i() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
