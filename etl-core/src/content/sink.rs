//! [`Sink`]: where a pipeline's rows end up.

use async_trait::async_trait;
use std::future::Future;
use std::pin::Pin;

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

    /// [`Sink::load`] in two steps: this one makes what the load will
    /// write (keys, encodings, rows in the output's form) and writes
    /// nothing; [`Prepared::write`] writes it and answers as `load` would,
    /// with the records the sink refused beside ([`Written`]).
    /// A caller that prepares the next batch while the one before is being
    /// written keeps both the writer and the output busy: the pipeline
    /// does so, and writes its batches in order.
    ///
    /// `digests`, when given, are as in [`Sink::load_keyed`].
    ///
    /// Nothing reaches the output before the [`Prepared`] is written, and
    /// one dropped unwritten writes nothing. Several batches may be
    /// prepared before the first is written; write them in the order they
    /// were prepared (an [`crate::IdempotentSink`] batch holding rows of
    /// one prepared before it waits for that one's write). One made stale
    /// by a write in between (a schema it grew, say) is made again as it
    /// is written. The default prepares nothing ahead: its [`Prepared`]
    /// runs the whole load.
    ///
    /// ```
    /// use etl_core::{IdempotentSink, JsonlSink, Launch, Row, Sink};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), etl_core::EtlError> {
    /// # let dir = tempfile::tempdir()?;
    /// let sink = IdempotentSink::new(JsonlSink::open(dir.path().join("launches.jsonl"))?);
    /// let row = |id: &str| Row::Launches(Launch { id: id.into(), name: "Electron".into(), ..Default::default() });
    /// let (first, second) = ([row("a")], [row("b"), row("a")]);
    /// let first = sink.prepare(&first, None).await?;
    /// let second = sink.prepare(&second, None).await?; // made while the first is not yet written
    /// assert_eq!(first.write().await?.new, 1);
    /// assert_eq!(second.write().await?.new, 1, "\"a\" is written once");
    /// # Ok(())
    /// # }
    /// ```
    async fn prepare<'a>(
        &'a self,
        rows: &'a [T],
        digests: Option<&[Digest]>,
    ) -> Result<Prepared<'a>, EtlError> {
        Ok(match digests {
            None => Prepared::new(self.load(rows)),
            Some(digests) => {
                let digests = digests.to_vec();
                Prepared::new(async move { self.load_keyed(rows, &digests).await })
            }
        })
    }
}

/// What a write did: the rows it wrote, and the records the sink refused.
///
/// A sink may refuse a record it was handed (a table whose schema is
/// frozen refuses one that would change it). It keeps each refused record
/// as a reject of its own, so nothing is lost, and says how many here, so
/// that the caller counts them as it counts the entries that did not read
/// (a run that refused a record exits 3). `Written::from(n)`: `n` rows
/// written, nothing refused.
///
/// ```
/// use etl_core::Written;
///
/// let written = Written::from(3).refusing(2, 1);
/// assert_eq!((written.new, written.refused, written.new_rejects), (3, 2, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// Rows written that the sink did not hold before: what
    /// [`Sink::load`] returns.
    pub new: usize,
    /// Records the sink refused, each kept as a reject.
    pub refused: usize,
    /// Of those rejects, the ones its rejects store did not hold before.
    pub new_rejects: usize,
    /// Rows the write took out: a merge's records marked deleted.
    pub deleted: usize,
}

impl Written {
    /// This write with `deleted` rows taken out.
    pub fn deleting(self, deleted: usize) -> Self {
        Written { deleted, ..self }
    }

    /// This write with `refused` records refused, `new_rejects` of them new
    /// to the sink's rejects.
    pub fn refusing(self, refused: usize, new_rejects: usize) -> Self {
        Written {
            refused,
            new_rejects,
            ..self
        }
    }
}

impl From<usize> for Written {
    fn from(new: usize) -> Self {
        Written {
            new,
            ..Written::default()
        }
    }
}

impl std::ops::AddAssign for Written {
    fn add_assign(&mut self, other: Written) {
        self.new += other.new;
        self.refused += other.refused;
        self.new_rejects += other.new_rejects;
        self.deleted += other.deleted;
    }
}

/// A batch [`Sink::prepare`] made ready and nothing of it written yet.
/// [`Prepared::write`] writes it; dropped unwritten, it writes nothing.
#[must_use = "a prepared batch is written only by `write`"]
pub struct Prepared<'a>(Pin<Box<dyn Future<Output = Result<Written, EtlError>> + Send + 'a>>);

impl<'a> Prepared<'a> {
    /// The rest of the load: `write`, not yet started (a future does
    /// nothing until it is polled). It answers how many rows were new (a
    /// `usize`), or a [`Written`] where the sink may refuse records.
    pub fn new<W: Into<Written>>(
        write: impl Future<Output = Result<W, EtlError>> + Send + 'a,
    ) -> Self {
        Prepared(Box::pin(async move { write.await.map(Into::into) }))
    }

    /// Writes the batch: the rows that were new, as [`Sink::load`] says,
    /// and the records the sink refused.
    pub async fn write(self) -> Result<Written, EtlError> {
        self.0.await
    }
}

impl std::fmt::Debug for Prepared<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").finish_non_exhaustive()
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

    async fn prepare<'a>(
        &'a self,
        rows: &'a [T],
        digests: Option<&[Digest]>,
    ) -> Result<Prepared<'a>, EtlError> {
        (**self).prepare(rows, digests).await
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
/// use etl_core::{EtlError, Launch, Record, Row, Sink, Written};
/// use std::collections::BTreeMap;
/// use std::sync::Mutex;
///
/// /// Keeps rows by content key, each once.
/// #[derive(Default)]
/// struct ByKey(Mutex<BTreeMap<String, String>>);
///
/// #[async_trait]
/// impl CanonicalSink for ByKey {
///     async fn store<T: Record>(&self, _rows: &[T], encoded: Vec<KeyedJson>) -> Result<Written, EtlError> {
///         let mut held = self.0.lock().unwrap();
///         Ok(encoded.into_iter().filter(|c| held.insert(c.key.clone(), c.json.clone()).is_none()).count().into())
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
    /// each, in order), and returns how many it did not hold before, and
    /// the records it refused (each kept as a reject of its own).
    async fn store<T: Record>(
        &self,
        rows: &[T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Written, EtlError>;

    /// [`CanonicalSink::store`] in two steps, as [`Sink::prepare`] says:
    /// what can be made before the write is made now, and the
    /// [`Prepared`] stores it. The default makes nothing ahead.
    async fn prepare_store<'a, T: Record>(
        &'a self,
        rows: &'a [T],
        encoded: Vec<KeyedJson>,
    ) -> Result<Prepared<'a>, EtlError> {
        Ok(Prepared::new(self.store(rows, encoded)))
    }
}

#[async_trait]
impl<T: Record, S: CanonicalSink> Sink<T> for S {
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        Ok(self.store(rows, canonical_batch(rows)?).await?.new)
    }

    /// The rows' JSON without hashing them again (the keys are the digests
    /// an `IdempotentSink` in front computed).
    async fn load_keyed(&self, rows: &[T], digests: &[Digest]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        Ok(self.store(rows, canonical_keyed(rows, digests)?).await?.new)
    }

    /// The rows' keys and JSON made now, then what
    /// [`CanonicalSink::prepare_store`] makes of them.
    async fn prepare<'a>(
        &'a self,
        rows: &'a [T],
        digests: Option<&[Digest]>,
    ) -> Result<Prepared<'a>, EtlError> {
        if rows.is_empty() {
            return Ok(Prepared::new(async { Ok(Written::default()) }));
        }
        let encoded = match digests {
            Some(digests) => canonical_keyed(rows, digests)?,
            None => canonical_batch(rows)?,
        };
        self.prepare_store(rows, encoded).await
    }
}
