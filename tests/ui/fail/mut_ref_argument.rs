use etl_core::{retry, EtlError};

#[retry]
async fn f(buffer: &mut Vec<u8>, n: u32) -> Result<u32, EtlError> {
    buffer.push(1);
    Ok(n)
}

fn main() {}
