//! [`IdempotentSink`]: a [`Sink`] decorator that forwards each distinct row
//! to the sink it wraps at most once.
//!
//! The rule it keeps (the one dlt, Stripe and Flink keep too): a key counts
//! as written only once its write succeeded. Until then it is *claimed* by
//! the load that is writing it; a failed or cancelled write gives the claim
//! back, and a load that meets another's claim waits for the outcome.

use async_trait::async_trait;
use std::borrow::Cow;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

mod keys;

use keys::{Keys, LoadId};

use super::{parse_key, record_digests, Digest};
use crate::content::jsonl::each_piece;
use crate::{EtlError, JsonlSink, Prepared, Record, Row, Sink, Written};
use std::path::Path;

/// A batch larger than this is hashed in slices of this many rows, with a
/// yield to the scheduler between slices: on a current-thread runtime no
/// other task waits longer than one slice (about 1 ms of 1.3 KB rows on 2
/// cores: BENCHMARKS.md section 7 measures 414 ms for 400 batches of 500),
/// and a multi-thread worker is held no longer than that either.
const YIELD_EVERY: usize = 512;

/// Wraps a [`Sink`] so that loading the same row twice writes it once.
///
/// Rows may be of any [`Record`] type (the type is the one `load` is called
/// with; [`Row`] for the seed's pipelines), and each row's identity is its
/// [`crate::content_key`] ([`Row::content_key`] for a `Row`): a re-run of a pipeline
/// forwards only rows it has not written before, and a launch whose data
/// changed upstream is a new row. Keys are remembered in memory;
/// [`IdempotentSink::with_seen`] starts from the keys of an earlier run (for
/// example [`crate::JsonlSink::content_keys`]), so re-runs across processes
/// are safe too.
///
/// `load` answers `Ok` only when every row it was handed is written: by this
/// call, or by an earlier or concurrent call whose write succeeded.
/// - All keys of a batch are computed before any is remembered: a row that
///   cannot be serialised fails the batch and marks nothing.
/// - A failed inner write, or a load whose future is dropped mid-write,
///   forgets the keys it claimed, so a retry writes them.
/// - A batch made ready with [`Sink::prepare`] claims its keys then, and
///   holds them until it is written (or dropped unwritten, which gives
///   them back).
/// - A load meeting rows that a concurrent load is still writing waits for
///   that load; if it failed, this load writes them itself.
/// - Duplicates within one batch are written once (the first copy; rows keep
///   their input order), and a batch with nothing fresh never reaches the
///   inner sink.
///
/// # Cores and runtimes
/// The keys of a batch of 128 rows or more are computed on every core
/// (rayon's pool; smaller batches stay on the calling thread, where a
/// hand-off costs more than it saves). A batch
/// larger than 512 rows is hashed 512 rows at a time with a yield to the
/// scheduler in between. So on a current-thread runtime the other tasks run
/// between slices instead of waiting for the whole batch, and on a
/// multi-thread runtime a worker is held for one slice (about 1 ms of
/// 1.3 KB rows on 2 cores) at a time. The rows stay borrowed throughout:
/// `spawn_blocking` would need them copied or owned.
///
/// ```
/// use etl_core::{IdempotentSink, JsonlSink, Launch, Row, Sink};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), etl_core::EtlError> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.jsonl");
/// let row = |id: &str| Row::Launches(Launch { id: id.into(), name: "Electron".into(), ..Default::default() });
///
/// // First run: both rows are new.
/// let file = JsonlSink::open(&path)?;
/// let sink = IdempotentSink::new(file);
/// assert_eq!(sink.load(&[row("a"), row("b")]).await?, 2);
/// assert_eq!(sink.load(&[row("a"), row("b")]).await?, 0);
///
/// // A later run resumes from the file: only the new row is written.
/// let file = JsonlSink::open(&path)?;
/// let seen = file.content_keys()?;
/// let sink = IdempotentSink::with_seen(file, seen);
/// assert_eq!(sink.load(&[row("a"), row("b"), row("c")]).await?, 1);
/// # Ok(())
/// # }
/// ```
pub struct IdempotentSink<S> {
    inner: S,
    keys: Mutex<Keys>,
    /// Woken whenever a claim settles, so loads waiting on it look again.
    settled: Notify,
}

/// A fresh [`LoadId`]: unique within the process.
fn next_load_id() -> LoadId {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl<S> IdempotentSink<S> {
    /// Wraps `inner`, remembering no rows yet.
    pub fn new(inner: S) -> Self {
        Self::with_keys(inner, Keys::written(Vec::new()))
    }

    /// Wraps `inner`, treating the rows with these content keys as already
    /// written (keys as [`Row::content_key`] returns them).
    ///
    /// A string that is not a content key (64 lowercase hex digits) can never
    /// equal one, so it is skipped: remembering it would change nothing.
    pub fn with_seen(inner: S, keys: impl IntoIterator<Item = String>) -> Self {
        let digests = keys.into_iter().filter_map(|k| parse_key(&k)).collect();
        Self::with_keys(inner, Keys::written(digests))
    }

    /// Wraps `inner`, remembering at most `max_keys` written rows: when the
    /// memory is full, the key remembered longest ago is forgotten (first in,
    /// first out). For an inner sink that is **idempotent by itself**: a
    /// forgotten row met again goes to the inner sink, which must skip it.
    ///
    /// Memory stays flat however long the process runs and however much the
    /// destination holds (about 85 bytes a key: the set's entry, 33 bytes
    /// in a table at most 7/8 full and sized in powers of two, plus 32 for
    /// the eviction order; BENCHMARKS.md section 5 measures the set alone),
    /// while the rows met again soon, a page re-read at an
    /// incremental cursor, a retried batch, still stop here. The contract of
    /// `load` is unchanged: `Ok` only when every row handed over is written.
    ///
    /// Which inner sinks may use it:
    /// - `etl_postgres::PostgresSink`: yes. Its `INSERT ... ON CONFLICT
    ///   (content_key) DO NOTHING` skips a row the table holds and counts
    ///   only the rows it inserted, so a forgotten row costs one round trip
    ///   and is never written or counted twice.
    /// - Any sink that keys rows by [`crate::content_key`] and skips known
    ///   keys itself (an upsert, a `PUT` to a content-addressed object
    ///   store) and returns the count of rows it actually added.
    /// - [`JsonlSink`]: **no**. It appends whatever it is handed, so a
    ///   forgotten row met again would be a second line. A file output
    ///   needs every key: use [`IdempotentSink::resume`].
    ///
    /// ```
    /// use etl_core::{IdempotentSink, Launch, Row, Sink};
    /// # use async_trait::async_trait;
    /// # use std::collections::HashSet;
    /// # use std::sync::Mutex;
    /// # /// Idempotent by itself: keeps a row once, counts only new ones.
    /// # #[derive(Default)]
    /// # struct Upsert(Mutex<HashSet<String>>);
    /// # #[async_trait]
    /// # impl Sink for Upsert {
    /// #     async fn load(&self, rows: &[Row]) -> Result<usize, etl_core::EtlError> {
    /// #         let mut held = self.0.lock().unwrap();
    /// #         let mut new = 0;
    /// #         for row in rows {
    /// #             new += usize::from(held.insert(row.content_key()?));
    /// #         }
    /// #         Ok(new)
    /// #     }
    /// # }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), etl_core::EtlError> {
    /// let row = |id: &str| Row::Launches(Launch { id: id.into(), name: "Electron".into(), ..Default::default() });
    /// // `Upsert` skips rows it holds, as PostgresSink does.
    /// let sink = IdempotentSink::bounded(Upsert::default(), 2);
    /// assert_eq!(sink.load(&[row("a"), row("b"), row("c")]).await?, 3);
    /// assert_eq!(sink.seen_count(), 2); // "a" was forgotten...
    /// assert_eq!(sink.load(&[row("a")]).await?, 0); // ...and the inner sink skipped it
    /// # Ok(())
    /// # }
    /// ```
    pub fn bounded(inner: S, max_keys: usize) -> Self {
        Self::with_keys(inner, Keys::bounded(max_keys))
    }

    fn with_keys(inner: S, keys: Keys) -> Self {
        IdempotentSink {
            inner,
            keys: Mutex::new(keys),
            settled: Notify::new(),
        }
    }

    /// The wrapped sink.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner sink, forgetting the remembered keys.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// How many distinct rows are known to be written (in bounded mode, how
    /// many are remembered: at most the cap).
    pub fn seen_count(&self) -> usize {
        self.lock().written_len()
    }

    /// Whether the row with this content key is known to be written.
    pub fn is_seen(&self, key: &str) -> bool {
        parse_key(key).is_some_and(|d| self.lock().is_written(&d))
    }

    /// The critical sections below cannot panic half-way, so a poisoned lock
    /// still guards consistent sets: carry on rather than panic.
    fn lock(&self) -> MutexGuard<'_, Keys> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for IdempotentSink<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotentSink")
            .field("inner", &self.inner)
            .field("seen", &self.seen_count())
            .finish()
    }
}

/// Keys claimed by one inner write. Dropping it without [`Claim::written`]
/// (the write failed, panicked or its future was dropped) gives the keys
/// back, so the next load of those rows writes them.
struct Claim<'a> {
    keys: &'a Mutex<Keys>,
    settled: &'a Notify,
    digests: Vec<Digest>,
    written: bool,
}

impl Claim<'_> {
    fn written(mut self) {
        self.written = true;
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.digests.is_empty() {
            return;
        }
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .settle(&self.digests, self.written);
        self.settled.notify_waiters();
    }
}

impl<S> IdempotentSink<S> {
    /// The claim of the keys `digests`, settled when it is dropped.
    fn claim_of(&self, digests: Vec<Digest>) -> Claim<'_> {
        Claim {
            keys: &self.keys,
            settled: &self.settled,
            digests,
            written: false,
        }
    }

    /// A wait for the next claim to settle, registered now: a claim that
    /// settles after a look made from here on cannot be missed.
    fn next_settle(&self) -> Pin<Box<Notified<'_>>> {
        let mut settled = Box::pin(self.settled.notified());
        settled.as_mut().enable();
        settled
    }

    /// The claimed rows of `rows` (their places in `claimed`) as the batch
    /// the inner sink is handed. The common case,
    /// a batch of all-new distinct rows, goes through without copying a
    /// row.
    fn claimed_rows<'r, T: Clone>(rows: &'r [T], claimed: &[usize]) -> Cow<'r, [T]> {
        if claimed.len() == rows.len() {
            Cow::Borrowed(rows)
        } else {
            Cow::Owned(claimed.iter().map(|&i| rows[i].clone()).collect())
        }
    }

    /// The rest of a load whose first look claimed `claimed` (its claim
    /// `claim`) and found `waiting` claimed by others: writes what it
    /// claimed, then waits for the others' claims to settle and looks
    /// again, until every row is written.
    async fn finish<T>(
        &self,
        rows: &[T],
        digests: &[Digest],
        me: LoadId,
        mut pass: keys::Pass,
        mut claim: Claim<'_>,
        mut settled: Pin<Box<Notified<'_>>>,
    ) -> Result<Written, EtlError>
    where
        T: Record + Clone,
        S: Sink<T>,
    {
        let mut written = Written::default();
        loop {
            if !pass.claimed.is_empty() {
                let batch = Self::claimed_rows(rows, &pass.claimed);
                // The claim's digests are the batch's, in its order: handed
                // on, so that a sink keyed by content does not hash the
                // rows again.
                written += self
                    .inner
                    .prepare(&batch, Some(&claim.digests))
                    .await?
                    .write()
                    .await?;
                claim.written();
            } else {
                drop(claim);
            }
            if pass.waiting.is_empty() {
                break;
            }
            // Another load is writing some of our rows: wait for it, then
            // look again (they are written, or free for us to write).
            settled.await;
            settled = self.next_settle();
            pass = self.lock().claim(digests, &pass.waiting, me);
            claim = self.claim_of(pass.claimed.iter().map(|&i| digests[i]).collect());
        }
        Ok(written)
    }
}

impl IdempotentSink<JsonlSink> {
    /// Opens the JSONL file at `path` for a resumable run: a torn last line
    /// is cut off ([`JsonlSink::open`]) and every row already in the file
    /// counts as written. The same as `with_seen(file, file.content_keys()?)`,
    /// without formatting and parsing each key as hex.
    ///
    /// ```
    /// use etl_core::{IdempotentSink, Launch, Row, Sink};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), etl_core::EtlError> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("launches.jsonl");
    /// let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
    /// IdempotentSink::resume(&path)?.load(&[row.clone()]).await?;
    /// assert_eq!(IdempotentSink::resume(&path)?.load(&[row]).await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn resume(path: impl AsRef<Path>) -> Result<Self, EtlError> {
        Self::resume_as::<Row>(path)
    }

    /// [`IdempotentSink::resume`] for a file of records of type `T`: every
    /// stored line counts as written under `T::KIND`. The file's lines are
    /// hashed on every core.
    ///
    /// ```
    /// use etl_core::{IdempotentSink, Record, Sink};
    /// use serde::Serialize;
    ///
    /// #[derive(Clone, Serialize)]
    /// struct Reading { sensor: &'static str, celsius: f64 }
    /// impl Record for Reading { const KIND: &'static str = "reading"; }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), etl_core::EtlError> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("readings.jsonl");
    /// let r = Reading { sensor: "t1", celsius: 21.5 };
    /// IdempotentSink::resume_as::<Reading>(&path)?.load(&[r.clone()]).await?;
    /// assert_eq!(IdempotentSink::resume_as::<Reading>(&path)?.load(&[r]).await?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn resume_as<T: Record>(path: impl AsRef<Path>) -> Result<Self, EtlError> {
        let file = JsonlSink::open(path)?;
        // The file is hashed in pieces on every core; this thread puts each
        // finished piece's keys into the set between pieces of its own, so
        // building the set overlaps the hashing instead of following it.
        // The first piece sizes the set for the whole file (pieces are of
        // equal size): no growing table's random writes among the hashing
        // (BENCHMARKS.md section 5).
        let mut keys = Keys::written(Vec::new());
        each_piece(file.path(), T::KIND, |_, pieces, digests| {
            let expected = digests.len().saturating_mul(pieces);
            keys.add_written(digests, expected);
        })?;
        Ok(Self::with_keys(file, keys))
    }
}

/// The digests of a batch, on every core, a slice of [`YIELD_EVERY`] rows
/// at a time with a yield in between (see "Cores and runtimes").
async fn batch_digests<T: Record>(rows: &[T]) -> Result<Vec<Digest>, EtlError> {
    if rows.len() <= YIELD_EVERY {
        return record_digests(rows);
    }
    let mut digests = Vec::with_capacity(rows.len());
    for (i, slice) in rows.chunks(YIELD_EVERY).enumerate() {
        if i > 0 {
            tokio::task::yield_now().await;
        }
        digests.extend(record_digests(slice)?);
    }
    Ok(digests)
}

#[async_trait]
impl<T, S> Sink<T> for IdempotentSink<S>
where
    T: Record + Clone,
    S: Sink<T>,
{
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        Ok(self.prepare(rows, None).await?.write().await?.new)
    }

    /// Hashes the rows (unless `digests` are given) and claims the new
    /// ones now. When the batch is all new and none of it is another
    /// load's to write, the inner sink prepares it now too; otherwise its
    /// rows are sorted out as it is written. The claims are given back if
    /// the [`Prepared`] is dropped unwritten.
    async fn prepare<'a>(
        &'a self,
        rows: &'a [T],
        digests: Option<&[Digest]>,
    ) -> Result<Prepared<'a>, EtlError> {
        // Every key before any is claimed: a row that cannot be serialised
        // fails the batch here, with nothing marked.
        let digests = match digests {
            Some(digests) => digests.to_vec(),
            None => batch_digests(rows).await?,
        };

        // Duplicates within the batch are found by the claims themselves
        // (a key claimed under our own id), not by a set of its own: one
        // hash-table operation a row less on the serial part of a load.
        let me = next_load_id();
        let settled = self.next_settle();
        let todo: Vec<usize> = (0..rows.len()).collect();
        let pass = self.lock().claim(&digests, &todo, me);
        let claim = self.claim_of(pass.claimed.iter().map(|&i| digests[i]).collect());
        let total = rows.len();
        if total > 0 && pass.waiting.is_empty() && pass.claimed.len() == total {
            let inner = self.inner.prepare(rows, Some(&claim.digests)).await?;
            return Ok(Prepared::new(async move {
                let written = inner.write().await?;
                claim.written();
                count_rows(written, total);
                Ok(written)
            }));
        }
        Ok(Prepared::new(async move {
            let written = self
                .finish(rows, &digests, me, pass, claim, settled)
                .await?;
            count_rows(written, total);
            Ok(written)
        }))
    }
}

/// A load's rows in the metrics: of `total`, those `written` new or
/// refused, and the rest seen.
fn count_rows(written: Written, total: usize) {
    #[cfg(feature = "metrics")]
    crate::metrics::sink_rows(
        written.new as u64,
        total.saturating_sub(written.new + written.refused) as u64,
        written.refused as u64,
    );
    #[cfg(not(feature = "metrics"))]
    let _ = (written, total);
}

#[cfg(test)]
mod tests;
