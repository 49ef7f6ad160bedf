use etl_core::{retry, EtlError};

#[retry]
async fn no_return_type() {}

#[retry]
async fn tuple() -> (u32, u32) {
    (1, 2)
}

#[retry]
async fn plain() -> u32 {
    1
}

#[retry]
async fn other_error() -> Result<u32, String> {
    Ok(1)
}

fn main() {
    let _ = EtlError::Parse(String::new());
}
