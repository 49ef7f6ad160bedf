// The expansion's own names cannot clash with the user's.
use etl_core::{retry, EtlError};

#[retry]
async fn f(__retry_policy: u32, __retry_result: u32, __retry_attempt: u32) -> Result<u32, EtlError> {
    let __retry_arg0 = 1;
    Ok(__retry_policy + __retry_result + __retry_attempt + __retry_arg0)
}

#[retry]
async fn g((__retry_arg0, x): (u32, u32)) -> Result<u32, EtlError> {
    Ok(__retry_arg0 + x)
}

fn main() {
    let _ = f(1, 2, 3);
    let _ = g((1, 2));
}
