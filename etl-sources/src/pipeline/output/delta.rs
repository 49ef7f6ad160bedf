//! A Delta table; its rejects go to the table `<location>_rejects`.

use etl_core::content::typed::Schema;
use etl_core::{EtlError, Record};
use etl_delta::DeltaSink;
use futures_util::FutureExt;
use std::future::Future;

use super::keyed::Store;
use super::{
    CursorFuture, Described, FinishFuture, ParentCursorsFuture, RecordFuture, SettleFuture, Target,
};
use etl_core::content::write::Write;

use crate::rest::TableShape;

impl Store for DeltaSink {
    /// Opens (or creates) the table at `location` (a local directory or
    /// `s3://BUCKET/PATH`), or with many resources `location/<resource>`,
    /// in the target's shape (a typed table named after the resource, its
    /// child tables beside it; a table that exists in the JSON shape keeps
    /// it).
    fn open<T: Record>(
        location: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Self, EtlError>> + Send {
        let location = place(location, &target);
        let (name, shape) = (target.resource.to_owned(), target.shape.clone());
        let replace = *target.write == Write::Replace;
        async move {
            match shape {
                TableShape::Json => DeltaSink::open_as::<T>(&location).await,
                TableShape::Typed(options) if replace => {
                    DeltaSink::open_replacing::<T>(&location, &name, options).await
                }
                TableShape::Typed(options) => {
                    DeltaSink::open_typed::<T>(&location, &name, options).await
                }
            }
        }
    }

    /// A replace's switch ([`DeltaSink::finish`]).
    fn finish(&self) -> FinishFuture<'_> {
        DeltaSink::finish(self).boxed()
    }

    /// A failed replace's stage removed ([`DeltaSink::abandon`]).
    fn abandon(&self) -> SettleFuture<'_> {
        DeltaSink::abandon(self).boxed()
    }

    /// The newest `updated_at` in the log's file statistics.
    fn newest(&self) -> CursorFuture<'_> {
        self.newest_updated_at().boxed()
    }

    /// The update time column of the file whose statistics hold the
    /// newest `updated_at`, then that one row's record.
    fn newest_record(&self) -> RecordFuture<'_> {
        DeltaSink::newest_record(self).boxed()
    }

    /// A read of the record and update time columns of every live file.
    fn newest_by<'a>(&'a self, member: &'a str) -> ParentCursorsFuture<'a> {
        self.newest_by_member(member).boxed()
    }

    /// The schema in the field metadata of the resource's table.
    fn stored_schema(
        location: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Option<Schema>, EtlError>> + Send {
        let location = place(location, &target);
        let options = target.shape.schema_options();
        async move { DeltaSink::stored_schema(&location, options).await }
    }

    /// The checkpoints its commits made due, written.
    fn settle(&self) -> SettleFuture<'_> {
        DeltaSink::settle(self).boxed()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        Ok(Described {
            rows: format!("Delta table {}", self.location()),
            held: None,
            rejects: format!("Delta table {}", self.rejects_location()),
        })
    }
}

/// Where `target`'s table is: `location`, or with many resources
/// `location/<resource>`.
fn place(location: &str, target: &Target<'_>) -> String {
    if target.many {
        format!("{}/{}", location.trim_end_matches('/'), target.resource)
    } else {
        location.to_owned()
    }
}
