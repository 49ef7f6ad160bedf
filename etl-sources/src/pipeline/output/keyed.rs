//! What the outputs keyed by content (a PostgreSQL table, a Delta table)
//! share, written once: a [`Store`] decides what is new itself, whoever
//! else loads into it; a bounded [`IdempotentSink`] in front spares it the
//! rows a run meets again; a child resource's chains get their cursors
//! from the rows' `_parent`.

use etl_core::content::typed::Schema;
use etl_core::{EtlError, IdempotentSink, Record, RejectSink, Sink};
use futures_util::FutureExt;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use super::{
    CursorFuture, Described, Destination, FinishFuture, ParentCursorsFuture, RecordFuture,
    SchemaFuture, SettleFuture, StoredUpdatedAt, Table, TableFuture, Target,
};
use crate::rest::PARENT_MEMBER;

/// How many written rows a keyed output remembers (about 9 MB): enough for
/// the pages a run re-reads, while the table decides the rest.
const REMEMBERED_KEYS: usize = 100_000;

/// A table keyed by content, of one kind: how it opens, answers the
/// cursor and names itself. Its writes are its [`Sink`], its rejects its
/// [`RejectSink`].
pub(super) trait Store: RejectSink + fmt::Debug + Sized + 'static {
    /// Opens (or creates) the table of `target` at `place` (what `--out`
    /// names, its kind's prefix taken off) for rows of type `T`.
    fn open<T: Record>(
        place: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Self, EtlError>> + Send;

    /// The newest `updated_at` the table holds.
    fn newest(&self) -> CursorFuture<'_>;

    /// The stored record of that `updated_at` ([`Table::newest_record`]).
    fn newest_record(&self) -> RecordFuture<'_>;

    /// Each value of the member `member` held, with the newest
    /// `updated_at` among its rows.
    fn newest_by<'a>(&'a self, member: &'a str) -> ParentCursorsFuture<'a>;

    /// Where its rows and rejects go, in words.
    fn describe(&self) -> Result<Described, EtlError>;

    /// Waits for the work its loads left running ([`Table::settle`]).
    fn settle(&self) -> SettleFuture<'_> {
        Box::pin(async {})
    }

    /// Ends a complete run ([`Table::finish`]): a replace switches.
    fn finish(&self) -> FinishFuture<'_> {
        Box::pin(async { Ok(()) })
    }

    /// Ends a failed run ([`Table::abandon`]): a replace removes what it
    /// staged.
    fn abandon(&self) -> SettleFuture<'_> {
        Box::pin(async {})
    }

    /// The typed schema of `target`'s table at `place`, read and nothing
    /// made ([`Destination::schema`]).
    fn stored_schema(
        place: &str,
        target: Target<'_>,
    ) -> impl Future<Output = Result<Option<Schema>, EtlError>> + Send;
}

/// A keyed kind as `--out` names it: `place`, each resource's table in it.
pub(super) struct Place<S> {
    place: String,
    store: PhantomData<fn() -> S>,
}

impl<S> Place<S> {
    /// The tables at `place`.
    pub fn new(place: &str) -> Self {
        Place {
            place: place.to_owned(),
            store: PhantomData,
        }
    }
}

impl<S> fmt::Debug for Place<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Place")
            .field("store", &std::any::type_name::<S>())
            .finish_non_exhaustive()
    }
}

impl<T, S> Destination<T> for Place<S>
where
    T: Record + Clone + 'static,
    S: Store + Sink<T>,
{
    fn open<'a>(&'a self, target: Target<'a>) -> TableFuture<'a, T> {
        async move {
            let store = S::open::<T>(&self.place, target).await?;
            let keyed = Keyed {
                sink: IdempotentSink::bounded(store, REMEMBERED_KEYS),
            };
            Ok(Box::new(keyed) as Box<dyn Table<T>>)
        }
        .boxed()
    }

    fn schema<'a>(&'a self, target: Target<'a>) -> SchemaFuture<'a> {
        S::stored_schema(&self.place, target).boxed()
    }
}

/// One resource's keyed table. Nothing of it is read at start: the table
/// decides what is new.
#[derive(Debug)]
struct Keyed<S> {
    sink: IdempotentSink<S>,
}

impl<T: Record + Clone, S: Store + Sink<T>> Table<T> for Keyed<S> {
    fn sink(&self) -> &dyn Sink<T> {
        &self.sink
    }

    fn rejects(&self) -> &dyn RejectSink {
        self.sink.inner()
    }

    fn cursor(&self, _stored: &StoredUpdatedAt<'_>) -> CursorFuture<'_> {
        self.sink.inner().newest()
    }

    fn cursors_by_parent(&self) -> ParentCursorsFuture<'_> {
        self.sink.inner().newest_by(PARENT_MEMBER)
    }

    fn newest_record(&self) -> RecordFuture<'_> {
        self.sink.inner().newest_record()
    }

    fn describe(&self) -> Result<Described, EtlError> {
        self.sink.inner().describe()
    }

    fn settle(&self) -> SettleFuture<'_> {
        Store::settle(self.sink.inner())
    }

    fn finish(&self) -> FinishFuture<'_> {
        Store::finish(self.sink.inner())
    }

    fn abandon(&self) -> SettleFuture<'_> {
        Store::abandon(self.sink.inner())
    }
}
