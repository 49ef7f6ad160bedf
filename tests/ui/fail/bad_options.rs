use etl_core::{retry, EtlError};

#[retry(jitter = "fulll")]
async fn typo() -> Result<(), EtlError> {
    Ok(())
}

#[retry(jitter = "gaussian", deadline = "soon", max_retry_after = 60)]
async fn unknown() -> Result<(), EtlError> {
    Ok(())
}

#[retry(on_retry = |_event| ())]
async fn closure() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
