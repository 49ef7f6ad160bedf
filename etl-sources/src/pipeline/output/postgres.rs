//! A PostgreSQL table; its rejects go to `<table>_rejects`.

use etl_core::{EtlError, IdempotentSink, Record, RejectSink, Sink};
use etl_postgres::PostgresSink;
use futures_util::FutureExt;

use super::{
    CursorFuture, Described, Destination, ParentCursorsFuture, StoredUpdatedAt, Table, TableFuture,
    Target, REMEMBERED_KEYS,
};

/// `--out postgres://...`: a database, each resource's table in it.
#[derive(Debug)]
pub(super) struct Place {
    url: String,
}

impl Place {
    /// The database at `url`.
    pub fn new(url: &str) -> Self {
        Place {
            url: url.to_owned(),
        }
    }
}

impl<T: Record + Clone + 'static> Destination<T> for Place {
    /// Connects and opens (or creates) the table [`Target::table`].
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T> {
        async move {
            let table = Postgres::open::<T>(&self.url, target.table).await?;
            Ok(Box::new(table) as Box<dyn Table<T>>)
        }
        .boxed()
    }
}

/// A PostgreSQL output. The table decides what is new itself, whoever else
/// loads into it: nothing of it is read at start, and the bounded memory in
/// front only spares it rows met again in this run (a page re-read at the
/// cursor, a retried batch).
#[derive(Debug)]
struct Postgres {
    sink: IdempotentSink<PostgresSink>,
}

impl Postgres {
    /// Connects to `url` and opens (or creates) `table` for rows of type
    /// `T`.
    async fn open<T: Record>(url: &str, table: &str) -> Result<Self, EtlError> {
        let store = PostgresSink::connect_as::<T>(url, table).await?;
        Ok(Postgres {
            sink: IdempotentSink::bounded(store, REMEMBERED_KEYS),
        })
    }
}

impl<T: Record + Clone> Table<T> for Postgres {
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
