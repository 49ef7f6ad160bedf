//! A Delta table; its rejects go to the table `<location>_rejects`.

use etl_core::{EtlError, IdempotentSink, Record, RejectSink, Sink};
use etl_delta::DeltaSink;
use futures_util::FutureExt;

use super::{
    CursorFuture, Described, Output, ParentCursorsFuture, StoredUpdatedAt, REMEMBERED_KEYS,
};

/// A Delta output (`--out delta:PATH`). As a PostgreSQL table, the table
/// decides what is new itself, whoever else loads into it; the bounded
/// memory in front only spares it the rows met again in this run.
#[derive(Debug)]
pub(super) struct Delta {
    sink: IdempotentSink<DeltaSink>,
}

impl Delta {
    /// Opens (or creates) the table at `location`, a local directory or
    /// `s3://BUCKET/PATH`, for rows of type `T`.
    pub async fn open<T: Record>(location: &str) -> Result<Self, EtlError> {
        let store = DeltaSink::open_as::<T>(location).await?;
        Ok(Delta {
            sink: IdempotentSink::bounded(store, REMEMBERED_KEYS),
        })
    }
}

impl<T: Record + Clone> Output<T> for Delta {
    fn sink(&self) -> &dyn Sink<T> {
        &self.sink
    }

    fn rejects(&self) -> &dyn RejectSink {
        self.sink.inner()
    }

    /// The newest `updated_at` in the log's file statistics.
    fn cursor(&self, _stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
        self.sink.inner().newest_updated_at().boxed()
    }

    /// A read of the `row` and `updated_at` columns of every live file.
    fn cursors_by_parent(&self) -> ParentCursorsFuture<'_> {
        self.sink.inner().newest_by_member("_parent").boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        let store = self.sink.inner();
        Ok(Described {
            rows: format!("Delta table {}", store.location()),
            held: None,
            rejects: format!("Delta table {}", store.rejects_location()),
        })
    }
}
