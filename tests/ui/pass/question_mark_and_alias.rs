// `?` ends one attempt, with `From` conversions as without the macro; a
// `Result` alias is accepted; `return` ends one attempt too.
use etl_core::{retry, EtlError};

type Fetched<T> = Result<T, EtlError>;

#[retry(max_attempts = 4, base = "200ms")]
async fn parse(text: String) -> Fetched<u64> {
    let n: u64 = serde_json_like(&text)?;
    if n == 0 {
        return Err(EtlError::Parse("zero".into()));
    }
    Ok(n)
}

fn serde_json_like(text: &str) -> Result<u64, EtlError> {
    text.parse().map_err(|e: std::num::ParseIntError| EtlError::Parse(e.to_string()))
}

#[retry(max = "2m", base = "1.5s")]
async fn io() -> std::result::Result<(), EtlError> {
    std::fs::metadata("/")?; // io::Error -> EtlError::Io through From
    Ok(())
}

fn main() {
    let _ = parse("7".into());
    let _ = io();
}
