//! [`Sink`]: where a pipeline's rows end up.

use async_trait::async_trait;

use crate::{EtlError, Row};

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
    /// `digests[i]` is the SHA-256 digest whose hex form is
    /// [`crate::content_key`]`(&rows[i])`. [`crate::IdempotentSink`] hands
    /// its batches on this way, so that a sink keyed by content (a database
    /// table) need not hash every row a second time. The default ignores
    /// the digests and calls `load`.
    async fn load_keyed(&self, rows: &[T], digests: &[[u8; 32]]) -> Result<usize, EtlError> {
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

    async fn load_keyed(&self, rows: &[T], digests: &[[u8; 32]]) -> Result<usize, EtlError> {
        (**self).load_keyed(rows, digests).await
    }
}
