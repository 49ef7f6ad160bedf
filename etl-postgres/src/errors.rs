//! tokio-postgres errors as [`EtlError::Database`]. What a SQLSTATE means
//! (transient or not, connection lost or not) is etl-core's to say
//! (`EtlError::sqlstate_is_transient`, `EtlError::connection_lost`): it is
//! known in one place.

use etl_core::EtlError;

/// The error as an [`EtlError::Database`], with its SQLSTATE and the whole
/// message chain.
pub fn from_pg_plain(e: &tokio_postgres::Error) -> EtlError {
    let sqlstate = e.code().map(|c| c.code().to_string());
    let message = match e.as_db_error() {
        Some(db) => db.to_string(),
        None => chain(e),
    };
    EtlError::Database { sqlstate, message }
}

/// A failed connect: transient unless the server said why (a wrong password,
/// a database that does not exist).
pub fn connect(e: &tokio_postgres::Error) -> EtlError {
    match from_pg_plain(e) {
        EtlError::Database { sqlstate, message } => EtlError::Database {
            sqlstate,
            message: format!("cannot connect to PostgreSQL: {message}"),
        },
        other => other,
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
