use etl_core::{retry, EtlError};

#[retry(base = "200")]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

#[retry(base = "fast")]
async fn g() -> Result<(), EtlError> {
    Ok(())
}

#[retry(max = 10)]
async fn h() -> Result<(), EtlError> {
    Ok(())
}

#[retry(base = "")]
async fn i() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
