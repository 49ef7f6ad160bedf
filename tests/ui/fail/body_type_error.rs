use etl_core::{retry, EtlError};

#[retry]
async fn f() -> Result<u32, EtlError> {
    Ok("not a number")
}

fn main() {}
