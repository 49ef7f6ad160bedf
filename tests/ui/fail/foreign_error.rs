use etl_core::retry;

// A foreign error type with no classification: one error, whose help names
// `when` and the features.
#[derive(Debug)]
struct TheirError;

impl std::fmt::Display for TheirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("theirs")
    }
}

#[retry]
async fn plain() -> Result<(), TheirError> {
    Ok(())
}

#[retry(jitter = "full")]
async fn with_options() -> Result<(), TheirError> {
    Ok(())
}

fn main() {}
