//! A Delta table; its rejects go to the table `<location>_rejects`.

use etl_core::{EtlError, IdempotentSink, Record, RejectSink, Sink};
use etl_delta::DeltaSink;
use futures_util::FutureExt;

use super::{
    CursorFuture, Described, Destination, ParentCursorsFuture, StoredUpdatedAt, Table, TableFuture,
    Target, REMEMBERED_KEYS,
};

/// `--out delta:PATH`: the table at PATH, or with many resources the
/// table `PATH/<resource>` each.
#[derive(Debug)]
pub(super) struct Place {
    location: String,
}

impl Place {
    /// The table (or tables) at `location`, a local directory or
    /// `s3://BUCKET/PATH`.
    pub fn new(location: &str) -> Self {
        Place {
            location: location.to_owned(),
        }
    }
}

impl<T: Record + Clone + 'static> Destination<T> for Place {
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T> {
        async move {
            let location = if target.many {
                format!(
                    "{}/{}",
                    self.location.trim_end_matches('/'),
                    target.resource
                )
            } else {
                self.location.clone()
            };
            Ok(Box::new(Delta::open::<T>(&location).await?) as Box<dyn Table<T>>)
        }
        .boxed()
    }
}

/// A Delta output (`--out delta:PATH`). As a PostgreSQL table, the table
/// decides what is new itself, whoever else loads into it; the bounded
/// memory in front only spares it the rows met again in this run.
#[derive(Debug)]
struct Delta {
    sink: IdempotentSink<DeltaSink>,
}

impl Delta {
    /// Opens (or creates) the table at `location`, a local directory or
    /// `s3://BUCKET/PATH`, for rows of type `T`.
    async fn open<T: Record>(location: &str) -> Result<Self, EtlError> {
        let store = DeltaSink::open_as::<T>(location).await?;
        Ok(Delta {
            sink: IdempotentSink::bounded(store, REMEMBERED_KEYS),
        })
    }
}

impl<T: Record + Clone> Table<T> for Delta {
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
