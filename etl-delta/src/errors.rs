//! delta-rs errors as [`EtlError`]s, each classified on purpose: storage
//! that may come back is transient, a table that cannot take our rows is
//! permanent.

use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
use deltalake::DeltaTableError;
use etl_core::EtlError;
use std::error::Error;

/// Whether a failed commit lost a race to another writer: checked again
/// against what the winner added, then committed again.
pub(crate) fn lost_race(e: &DeltaTableError) -> bool {
    match e {
        DeltaTableError::VersionAlreadyExists(_) => true,
        DeltaTableError::Transaction { source } => matches!(
            source,
            TransactionError::VersionAlreadyExists(_)
                | TransactionError::MaxCommitAttempts(_)
                | TransactionError::CommitConflict(
                    CommitConflictError::ConcurrentTransaction
                        | CommitConflictError::ConcurrentAppend
                )
        ),
        _ => false,
    }
}

/// `e`, met while doing `what` to the table at `location`.
///
/// The first `std::io::Error` in its chain decides where there is one (a
/// full disk is permanent, an interrupted write transient: the same list
/// as [`EtlError::Io`]); other storage errors (object storage over HTTP)
/// are transient; everything else (a schema, a protocol, a log that does
/// not read) is permanent.
pub(crate) fn from_delta(e: DeltaTableError, what: &str, location: &str) -> EtlError {
    let message = format!("Delta table {location}: {what}: {e}");
    if let Some(io) = io_source(&e) {
        return EtlError::Io(std::io::Error::new(io.kind(), message));
    }
    match e {
        DeltaTableError::ObjectStore { .. } | DeltaTableError::Io { .. } => {
            EtlError::Network(message)
        }
        DeltaTableError::Transaction {
            source: TransactionError::ObjectStore { .. },
        } => EtlError::Network(message),
        _ if lost_race(&e) => EtlError::Network(message),
        _ => EtlError::InvalidInput(message),
    }
}

/// The first `std::io::Error` among `e` and its sources.
fn io_source<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a std::io::Error> {
    let mut next: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        next = err.source();
    }
    None
}

/// A Parquet read of one of the table's files failed.
pub(crate) fn from_parquet(
    e: deltalake::parquet::errors::ParquetError,
    file: &str,
    location: &str,
) -> EtlError {
    let message = format!("Delta table {location}: reading {file}: {e}");
    match io_source(&e) {
        Some(io) => EtlError::Io(std::io::Error::new(io.kind(), message)),
        // A file of the table that cannot be read now may be readable on the
        // next attempt (object storage); a corrupt one fails every attempt,
        // and the retry policy's attempts bound that.
        None => EtlError::Network(message),
    }
}

/// An Arrow array or batch of ours that does not fit the table.
pub(crate) fn from_arrow(e: deltalake::arrow::error::ArrowError, location: &str) -> EtlError {
    EtlError::InvalidInput(format!("Delta table {location}: building a batch: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_in_the_chain_decides() {
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left");
        let e = from_delta(DeltaTableError::Io { source: full }, "writing", "/t");
        assert!(matches!(&e, EtlError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull));
        assert!(!etl_core::retry::RetryableError::is_transient(&e), "{e}");
        assert!(e.to_string().contains("/t"), "{e}");
    }

    #[test]
    fn a_lost_race_is_transient_and_a_schema_error_permanent() {
        let race = DeltaTableError::VersionAlreadyExists(3);
        assert!(lost_race(&race));
        let e = from_delta(race, "committing", "/t");
        assert!(etl_core::retry::RetryableError::is_transient(&e), "{e}");
        let schema = DeltaTableError::Generic("schema mismatch".into());
        let e = from_delta(schema, "opening", "/t");
        assert!(!etl_core::retry::RetryableError::is_transient(&e), "{e}");
    }
}
