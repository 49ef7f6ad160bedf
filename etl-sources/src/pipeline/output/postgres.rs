//! A PostgreSQL table; its rejects go to `<table>_rejects`.

use etl_core::content::typed::Schema;
use etl_core::{EtlError, Record};
use etl_postgres::PostgresSink;
use futures_util::FutureExt;
use std::future::Future;

use super::keyed::Store;
use super::{
    CursorFuture, Described, FinishFuture, ParentCursorsFuture, RecordFuture, SettleFuture, Target,
};
use crate::rest::TableShape;
use etl_core::content::write::Write;

impl Store for PostgresSink {
    /// Connects to the database at `url` and opens (or creates) the table
    /// [`Target::table`], in the target's shape (a table that exists in
    /// the JSON shape keeps it), each later operation bounded by the run's
    /// timeout (the sink's default deadline without one: never none).
    fn open<T: Record>(
        url: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Self, EtlError>> + Send {
        let (url, table, shape) = (
            url.to_owned(),
            target.table.to_owned(),
            target.shape.clone(),
        );
        let deadline = target.timeout.unwrap_or(etl_postgres::DEFAULT_DEADLINE);
        let write = target.write.clone();
        async move {
            let sink = match (shape, write) {
                (TableShape::Typed(options), Write::Replace) => {
                    PostgresSink::connect_replacing::<T>(&url, &table, options).await
                }
                (TableShape::Json, _) => PostgresSink::connect_as::<T>(&url, &table).await,
                (TableShape::Typed(options), _) => {
                    PostgresSink::connect_typed::<T>(&url, &table, options).await
                }
            };
            Ok(sink?.with_deadline(deadline))
        }
    }

    /// A replace's switch ([`PostgresSink::finish`]).
    fn finish(&self) -> FinishFuture<'_> {
        PostgresSink::finish(self).boxed()
    }

    /// A failed replace's staging copy dropped ([`PostgresSink::abandon`]).
    fn abandon(&self) -> SettleFuture<'_> {
        PostgresSink::abandon(self).boxed()
    }

    /// One look into the `updated_at` index.
    fn newest(&self) -> CursorFuture<'_> {
        self.newest_last_updated().boxed()
    }

    /// One look into the `updated_at` index.
    fn newest_record(&self) -> RecordFuture<'_> {
        PostgresSink::newest_record(self).boxed()
    }

    /// One grouped read of the rows that hold `member`.
    fn newest_by<'a>(&'a self, member: &'a str) -> ParentCursorsFuture<'a> {
        self.newest_by_member(member).boxed()
    }

    /// The family's row of `_etl_schema`.
    fn stored_schema(
        url: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Option<Schema>, EtlError>> + Send {
        let (url, table) = (url.to_owned(), target.table.to_owned());
        let options = target.shape.schema_options();
        async move { PostgresSink::stored_schema(&url, &table, options).await }
    }

    fn describe(&self) -> Result<Described, EtlError> {
        // No count(*): it would read the whole table.
        Ok(Described {
            rows: format!("PostgreSQL table {}", self.table().as_str()),
            held: None,
            rejects: format!("table {}", self.table().rejects()?.as_str()),
        })
    }
}
