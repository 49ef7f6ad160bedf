use etl_core::{retry, EtlError};

struct Connection;

#[retry]
async fn f(connection: Connection, page: u32) -> Result<u32, EtlError> {
    let _ = connection;
    Ok(page)
}

fn main() {}
