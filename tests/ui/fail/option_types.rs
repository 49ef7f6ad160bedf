use etl_core::{retry, EtlError};

fn wrong_observer(attempt: u32) {
    let _ = attempt;
}

#[retry(on_retry = wrong_observer)]
async fn observer() -> Result<(), EtlError> {
    Ok(())
}

#[retry(budget = 500)]
async fn budget() -> Result<(), EtlError> {
    Ok(())
}

fn main() {}
