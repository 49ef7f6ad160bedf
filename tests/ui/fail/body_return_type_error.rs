use etl_core::{retry, EtlError};

// A `return` of the wrong type is reported at the `return`, as without the
// macro, and nowhere else.
#[retry]
async fn f() -> Result<u32, EtlError> {
    if std::env::var_os("X").is_some() {
        return Ok("four");
    }
    Ok(4)
}

fn main() {}
