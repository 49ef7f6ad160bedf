//! An idempotent load of a user-defined struct into JSONL, resumed across
//! two runs: `cargo run -p etl-core --example own_rows`.
//!
//! The first run loads three invoices; the second run (a new
//! `IdempotentSink` on the same file, as a new process would open it) meets
//! the same three plus one changed and one new, and writes only those two.

use etl_core::{EtlError, IdempotentSink, Record, Sink};
use serde::{Deserialize, Serialize};

/// Any `Serialize` struct: the record's JSON is its identity.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Invoice {
    number: String,
    customer: String,
    cents: u64,
}

/// One line makes it a record; `KIND` keeps its keys apart from other
/// types whose JSON could coincide.
impl Record for Invoice {
    const KIND: &'static str = "invoice";
}

fn invoice(number: &str, customer: &str, cents: u64) -> Invoice {
    Invoice {
        number: number.into(),
        customer: customer.into(),
        cents,
    }
}

async fn run(path: &std::path::Path, batch: &[Invoice]) -> Result<usize, EtlError> {
    // Resume: every line already in the file counts as written.
    let sink = IdempotentSink::resume_as::<Invoice>(path)?;
    println!(
        "opened {} holding {} invoices",
        path.display(),
        sink.seen_count()
    );
    sink.load(batch).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), EtlError> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("invoices.jsonl");

    let monday = [
        invoice("2026-001", "ACME", 12_000),
        invoice("2026-002", "Globex", 4_550),
        invoice("2026-003", "Initech", 99_900),
    ];
    let written = run(&path, &monday).await?;
    println!("first run: {written} new");
    assert_eq!(written, 3);

    // The source re-sends everything: one invoice was corrected, one is new.
    let tuesday = [
        invoice("2026-001", "ACME", 12_000),
        invoice("2026-002", "Globex", 4_550),
        invoice("2026-003", "Initech", 89_900),
        invoice("2026-004", "Umbrella", 1_000),
    ];
    let written = run(&path, &tuesday).await?;
    println!("second run: {written} new");
    assert_eq!(written, 2);

    print!("{}", std::fs::read_to_string(&path)?);
    Ok(())
}
