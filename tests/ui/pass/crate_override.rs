// A crate that re-exports etl-core points the expansion at its re-export.
mod reexport {
    pub use etl_core as core_again;
}

use etl_core::EtlError;

#[etl_core::retry(crate = "reexport::core_again", max_attempts = 2)]
async fn f() -> Result<(), EtlError> {
    Ok(())
}

fn main() {
    let _ = f();
}
