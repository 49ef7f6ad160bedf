//! A PostgreSQL table; its rejects go to `<table>_rejects`.

use etl_core::{EtlError, IdempotentSink, Record, RejectSink, Sink};
use etl_postgres::PostgresSink;
use futures_util::FutureExt;

use super::{
    CursorFuture, Described, Options, Output, ParentCursorsFuture, StoredUpdatedAt, REMEMBERED_KEYS,
};

/// A PostgreSQL output. The table decides what is new itself, whoever else
/// loads into it: nothing of it is read at start, and the bounded memory in
/// front only spares it rows met again in this run (a page re-read at the
/// cursor, a retried batch).
#[derive(Debug)]
pub(super) struct Postgres {
    sink: IdempotentSink<PostgresSink>,
}

impl Postgres {
    /// Connects to `url` and opens (or creates) [`Options::table`] for rows
    /// of type `T`.
    pub async fn open<T: Record>(url: &str, options: &Options<'_>) -> Result<Self, EtlError> {
        let store = PostgresSink::connect_as::<T>(url, options.table).await?;
        Ok(Postgres {
            sink: IdempotentSink::bounded(store, REMEMBERED_KEYS),
        })
    }
}

impl<T: Record + Clone> Output<T> for Postgres {
    fn sink(&self) -> &dyn Sink<T> {
        &self.sink
    }

    fn rejects(&self) -> &dyn RejectSink {
        self.sink.inner()
    }

    /// One look into the `updated_at` index.
    fn cursor(&self, _stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
        self.sink.inner().newest_last_updated().boxed()
    }

    /// One grouped read of the rows that hold `_parent`.
    fn cursors_by_parent(&self) -> ParentCursorsFuture<'_> {
        self.sink.inner().newest_by_member("_parent").boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        // No count(*): it would read the whole table.
        let store = self.sink.inner();
        Ok(Described {
            rows: format!("PostgreSQL table {}", store.table().as_str()),
            held: None,
            rejects: format!("table {}", store.table().rejects()?.as_str()),
        })
    }
}
