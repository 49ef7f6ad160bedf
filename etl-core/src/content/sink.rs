//! [`Sink`]: where a pipeline's rows end up.

use async_trait::async_trait;

use super::{canonical_batch, canonical_keyed, Digest, KeyedJson};
use crate::{EtlError, Record, Row};

/// A destination for rows of type `T` ([`Row`] unless said otherwise: the
/// seed's `impl Sink for MySink { async fn load(&self, rows: &[Row]) ... }`
/// is an `impl Sink<Row>`).
///
/// `load` returns how many rows it wrote. An `Ok` means those rows are
/// written (as durably as the sink promises); an `Err` means the caller must
/// assume none of the batch was, and may retry it.
///
/// ```
/// use async_trait::async_trait;
/// use etl_core::{EtlError, Row, Sink};
/// use std::sync::Mutex;
///
/// /// Keeps rows in memory.
/// #[derive(Default)]
/// struct MemorySink(Mutex<Vec<Row>>);
///
/// #[async_trait]
/// impl Sink for MemorySink {
///     async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
///         self.0.lock().unwrap().extend_from_slice(rows);
///         Ok(rows.len())
///     }
/// }
/// ```
#[async_trait]
pub trait Sink<T: Sync = Row>: Send + Sync {
    /// Writes `rows` and returns how many were written.
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError>;

    /// [`Sink::load`], for a caller that already hashed the rows:
    /// `digests[i]` is the [`Digest`] whose hex form is
    /// [`crate::content_key`]`(&rows[i])`. [`crate::IdempotentSink`] hands
    /// its batches on this way, so that a sink keyed by content (a database
    /// table) need not hash every row a second time. The default ignores
    /// the digests and calls `load`.
    async fn load_keyed(&self, rows: &[T], digests: &[Digest]) -> Result<usize, EtlError> {
        let _ = digests;
        self.load(rows).await
    }
}

/// A shared sink is a sink: lets one sink serve several pipelines or tasks.
#[async_trait]
impl<T: Sync, S: Sink<T> + ?Sized> Sink<T> for std::sync::Arc<S> {
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        (**self).load(rows).await
    }

    async fn load_keyed(&self, rows: &[T], digests: &[Digest]) -> Result<usize, EtlError> {
        (**self).load_keyed(rows, digests).await
    }
}

/// A sink keyed by content, such as a database table whose key is the
/// content key: it stores each row with its key and canonical JSON
/// ([`KeyedJson`]), and is a [`Sink`] for any [`Record`] through this
/// trait. Each row is serialised and hashed once, on every core for a large
/// batch; a batch an [`crate::IdempotentSink`] in front already hashed
/// ([`Sink::load_keyed`]) is serialised and not hashed again. An empty
/// batch never reaches [`CanonicalSink::store`]; a row that cannot be
/// serialised fails its batch before anything is stored.
///
/// ```
/// use async_trait::async_trait;
/// use etl_core::content::{KeyedJson, CanonicalSink};
/// use etl_core::{EtlError, Launch, Record, Row, Sink};
/// use std::collections::BTreeMap;
/// use std::sync::Mutex;
///
/// /// Keeps rows by content key, each once.
/// #[derive(Default)]
/// struct ByKey(Mutex<BTreeMap<String, String>>);
///
/// #[async_trait]
/// impl CanonicalSink for ByKey {
///     async fn store<T: Record>(&self, _rows: &[T], encoded: Vec<KeyedJson>) -> Result<usize, EtlError> {
///         let mut held = self.0.lock().unwrap();
///         Ok(encoded.into_iter().filter(|c| held.insert(c.key.clone(), c.json.clone()).is_none()).count())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), EtlError> {
/// let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
/// let table = ByKey::default();
/// assert_eq!(table.load(&[row.clone(), row.clone()]).await?, 1);
/// assert_eq!(table.load(&[row]).await?, 0);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait CanonicalSink: Send + Sync {
    /// Stores `rows`, whose keys and canonical JSON are `encoded` (one
    /// each, in order), and returns how many it did not hold before.
    async fn store<T: Record>(
        &self,
        rows: &[T],
        encoded: Vec<KeyedJson>,
    ) -> Result<usize, EtlError>;
}

#[async_trait]
impl<T: Record, S: CanonicalSink> Sink<T> for S {
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        self.store(rows, canonical_batch(rows)?).await
    }

    /// The rows' JSON without hashing them again (the keys are the digests
    /// an `IdempotentSink` in front computed).
    async fn load_keyed(&self, rows: &[T], digests: &[Digest]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        self.store(rows, canonical_keyed(rows, digests)?).await
    }
}
