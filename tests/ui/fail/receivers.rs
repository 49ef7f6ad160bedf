use etl_core::{retry, EtlError};

struct S;

impl S {
    #[retry]
    async fn by_value(self) -> Result<(), EtlError> {
        Ok(())
    }

    #[retry]
    async fn boxed(self: Box<Self>) -> Result<(), EtlError> {
        Ok(())
    }
}

fn main() {}
