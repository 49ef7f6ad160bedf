use etl_core::{retry, EtlError};

#[retry]
fn f() -> Result<(), EtlError> {
    Ok(())
}

#[retry]
struct NotAFn;

fn main() {}
