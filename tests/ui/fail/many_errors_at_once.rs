use etl_core::{retry, EtlError};

struct S;

impl S {
    #[retry(max_attempts = 0, bse = "1s", max = "soon")]
    async fn f(self, out: &mut String) -> Result<(), EtlError> {
        Ok(())
    }
}

fn main() {}
