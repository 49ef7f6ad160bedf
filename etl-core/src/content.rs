//! The content half of etl-core (feature `content`, on by default):
//! content addressing, [`content_id`], [`Row::content_key`] and the
//! [`IdempotentSink`] decorator that writes each distinct row at most once,
//! with the rows and sinks it works on.
//!
//! A row's identity is the SHA-256 of its canonical form (its
//! `serde_json::to_string`), so the same data always has the same key, in
//! this process or the next, and changed data is a new row.
//!
//! Its modules, each re-exported at the crate root: `record` ([`Record`]:
//! any row type), `row` and [`launch`] ([`Row`], [`crate::Launch`]; the rest
//! of the Launch Library model stays in [`launch`]), `sink`
//! ([`crate::Sink`]), `idempotent` ([`IdempotentSink`]), `jsonl`
//! ([`crate::JsonlSink`]), `reject` (entries that did not read),
//! `parallel` (per-row work on every core, [`par_map`]), [`naming`]
//! (table and column names made from member names, as dlt makes them),
//! [`pointer`](mod@pointer) (a JSON Pointer into a record, [`Pointer`]) and
//! [`write`](mod@write) (how a run's records change a table).

mod idempotent;
pub(crate) mod jsonl;
pub mod launch;
pub mod naming;
mod parallel;
pub mod pointer;
pub(crate) mod record;
pub(crate) mod reject;
pub(crate) mod row;
pub(crate) mod sink;
pub mod typed;
pub mod write;
pub use sink::CanonicalSink;
mod canonical_json;
pub use canonical_json::{CanonicalJson, JsonKey};
pub use pointer::Pointer;
#[cfg(test)]
mod test_log;

pub use idempotent::IdempotentSink;
pub use parallel::par_map;

use sha2::{Digest as _, Sha256};
use std::io;

use crate::{EtlError, Record, Row};

/// A content key in binary: the SHA-256 digest that [`content_id`] formats
/// as hex. Stored this way it costs 32 bytes instead of a 64-byte `String`
/// plus its heap header. What [`crate::IdempotentSink`] hands a sink with a
/// batch ([`Sink::load_keyed`](crate::Sink::load_keyed)); a sink turns it
/// into keys with [`canonical_keyed`]. Only this crate makes one, so a
/// digest is always a row's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Digest(pub(crate) [u8; 32]);

impl AsRef<[u8]> for Digest {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Digest {
    /// The content key it is: 64 lowercase hex digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

/// The content id of `canonical` under the entity kind `kind`: lowercase hex
/// SHA-256 of `kind`, one `0x00` byte, then `canonical`.
///
/// The kind tag keeps equal text of different entities apart; the `0x00`
/// separator makes the boundary between kind and text unambiguous **as long
/// as `kind` holds no NUL byte** (with one, `("a\0b", "c")` and `("a", "b\0c")`
/// would hash the same bytes). Kinds are tags chosen by the programmer, not
/// data: a debug build asserts this, and [`try_content_id`] checks it for
/// kinds that come from elsewhere.
///
/// ```
/// use etl_core::content_id;
///
/// let id = content_id("row", "x");
/// assert_eq!(id.len(), 64);
/// assert_eq!(id, content_id("row", "x"));
/// assert_ne!(id, content_id("launch", "x"));
/// ```
pub fn content_id(kind: &str, canonical: &str) -> String {
    debug_assert!(
        !kind.contains('\0'),
        "content_id: kind {kind:?} holds a NUL byte, which breaks the separator"
    );
    hex::encode(digest(kind, canonical.as_bytes()))
}

/// [`content_id`] for a `kind` that is not a constant: refuses a kind holding
/// a NUL byte with [`EtlError::InvalidInput`] instead of hashing it.
///
/// ```
/// use etl_core::content::try_content_id;
///
/// assert_eq!(try_content_id("row", "x")?, etl_core::content_id("row", "x"));
/// assert!(try_content_id("r\0w", "x").is_err());
/// # Ok::<(), etl_core::EtlError>(())
/// ```
pub fn try_content_id(kind: &str, canonical: &str) -> Result<String, EtlError> {
    if kind.contains('\0') {
        return Err(EtlError::InvalidInput(format!(
            "content kind {kind:?} holds a NUL byte; the 0x00 separator needs kinds without one"
        )));
    }
    Ok(content_id(kind, canonical))
}

/// The binary digest behind [`content_id`], for bytes that are already the
/// canonical form (a stored JSONL line).
pub(crate) fn digest(kind: &str, canonical: &[u8]) -> Digest {
    digest_of(kind, &[canonical])
}

/// [`digest`] of the text that is `pieces` one after another, without
/// making that text.
pub(crate) fn digest_of(kind: &str, pieces: &[&[u8]]) -> Digest {
    let mut hasher = kind_hasher(kind);
    for piece in pieces {
        hasher.update(piece);
    }
    Digest(hasher.finalize().into())
}

#[inline]
fn kind_hasher(kind: &str) -> Sha256 {
    let mut hasher = Sha256::new();
    hasher.update(kind.as_bytes());
    hasher.update([0u8]);
    hasher
}

/// Feeds serde_json's output straight into the hasher: the bytes hashed are
/// exactly those `serde_json::to_string` would produce, without building the
/// string.
struct HashWriter<'a>(&'a mut Sha256);

// `#[inline]` on every method: the serialiser that calls them is generic,
// so it is compiled in the user's crate, and without the attribute these
// small non-generic calls stay out of line there (about 100 calls a row,
// each through the hasher's buffering: measured at half the sink's speed
// in a user's crate, BENCHMARKS.md section 10).
impl io::Write for HashWriter<'_> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.update(buf);
        Ok(())
    }

    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The content key of any [`Record`]: [`content_id`]`(T::KIND,
/// serde_json::to_string(row))`, computed without building the string.
///
/// Fallible on purpose: a row that cannot be serialised gets an
/// [`EtlError::Parse`], never a shared fallback key that would make distinct
/// rows look like duplicates and silently drop them.
///
/// ```
/// use etl_core::{content_id, content_key, Launch, Row};
///
/// let row = Row::Launches(Launch { id: "1".into(), name: "Electron".into(), ..Default::default() });
/// assert_eq!(content_key(&row)?, content_id("row", &serde_json::to_string(&row)?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn content_key<T: Record + ?Sized>(row: &T) -> Result<String, EtlError> {
    record_digest(row).map(hex::encode)
}

impl Row {
    /// The row's content key: [`content_id`]`("row", serde_json::to_string(self))`
    /// (the [`content_key`] of a [`Row`]).
    ///
    /// Fallible on purpose: a row that cannot be serialised gets an
    /// [`EtlError::Parse`], never a shared fallback key that would make
    /// distinct rows look like duplicates and silently drop them.
    ///
    /// ```
    /// use etl_core::{content_id, Launch, Row};
    ///
    /// let row = Row::Launches(Launch { id: "1".into(), name: "Electron".into(), ..Default::default() });
    /// let canonical = serde_json::to_string(&row)?;
    /// assert_eq!(row.content_key()?, content_id("row", &canonical));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn content_key(&self) -> Result<String, EtlError> {
        content_key(self)
    }
}

/// The binary form of [`content_key`]: the JSON streams into the hasher.
pub(crate) fn record_digest<T: Record + ?Sized>(row: &T) -> Result<Digest, EtlError> {
    debug_assert!(
        !T::KIND.contains('\0'),
        "Record::KIND {:?} holds a NUL byte",
        T::KIND
    );
    let mut hasher = kind_hasher(T::KIND);
    write_json(row, HashWriter(&mut hasher))?;
    Ok(Digest(hasher.finalize().into()))
}

/// Writes `row` as `serde_json::to_string(row)` would: its
/// [`Record::json_text`] as it is where it has one (no serialising), else
/// serialised into `out`.
#[inline]
pub(crate) fn write_json<T: Record + ?Sized, W: std::io::Write>(
    row: &T,
    mut out: W,
) -> Result<(), EtlError> {
    match held_text(row) {
        Some(text) => out.write_all(text.as_bytes()).map_err(EtlError::Io),
        None => serde_json::to_writer(out, row).map_err(unserialisable),
    }
}

/// `serde_json::to_string(row)`: its [`Record::json_text`] copied where it
/// has one.
#[inline]
fn json_string<T: Record + ?Sized>(row: &T) -> Result<String, EtlError> {
    match held_text(row) {
        Some(text) => Ok(text.to_owned()),
        None => serde_json::to_string(row).map_err(unserialisable),
    }
}

/// The row's [`Record::json_text`], checked in debug builds to be its
/// serialisation (a key hashed from other text would key it wrongly).
#[inline]
fn held_text<T: Record + ?Sized>(row: &T) -> Option<&str> {
    let text = row.json_text()?;
    debug_assert_eq!(
        serde_json::to_string(row).ok().as_deref(),
        Some(text),
        "Record::json_text differs from the record's serialisation"
    );
    Some(text)
}

/// The error of a row serde cannot serialise.
fn unserialisable(e: serde_json::Error) -> EtlError {
    EtlError::Parse(format!("row cannot be serialised for its content key: {e}"))
}

/// The digests of `rows`, in order, on every core for a large batch
/// (the first row that cannot be serialised fails them all).
pub(crate) fn record_digests<T: Record>(rows: &[T]) -> Result<Vec<Digest>, EtlError> {
    parallel::try_map(rows, |row| record_digest(row))
}

/// A row's JSON text as stored (`serde_json::to_string` of it: for a
/// [`crate::content::CanonicalJson`]-read record, its canonical text) and
/// its content key, computed from that same text: what a sink that stores
/// the JSON needs (see [`canonical_batch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedJson {
    /// [`content_key`] of the record.
    pub key: String,
    /// `serde_json::to_string` of the record.
    pub json: String,
}

/// The old name of [`KeyedJson`].
#[deprecated(note = "renamed `KeyedJson`: the row's JSON text and its key")]
pub type Canonical = KeyedJson;

/// Each row's [`KeyedJson`] form, in order: serialised once and hashed, on
/// every core for a batch of 128 rows or more (as [`IdempotentSink`] does).
/// For a sink that stores the JSON text, such as a database table keyed by
/// the content key.
///
/// ```
/// use etl_core::content::canonical_batch;
/// use etl_core::{content_key, Launch, Row};
///
/// let rows: Vec<Row> = (0..100)
///     .map(|i| Row::Launches(Launch { id: i.to_string(), name: "Electron".into(), ..Default::default() }))
///     .collect();
/// let encoded = canonical_batch(&rows)?;
/// assert_eq!(encoded[42].key, content_key(&rows[42])?);
/// assert_eq!(encoded[42].json, serde_json::to_string(&rows[42])?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn canonical_batch<T: Record>(rows: &[T]) -> Result<Vec<KeyedJson>, EtlError> {
    parallel::try_map(rows, |row| {
        let json = json_string(row)?;
        Ok(KeyedJson {
            key: content_id(T::KIND, &json),
            json,
        })
    })
}

/// [`canonical_batch`] for rows already hashed: `digests[i]` is the digest
/// of `rows[i]` (as [`Sink::load_keyed`](crate::Sink::load_keyed) is handed
/// them), so each row is serialised but not hashed again. `InvalidInput` if
/// the two lengths differ.
///
/// ```
/// use async_trait::async_trait;
/// use etl_core::content::{canonical_batch, canonical_keyed, KeyedJson, Digest};
/// use etl_core::{EtlError, IdempotentSink, Launch, Row, Sink};
/// use std::sync::Mutex;
///
/// /// Keeps what it is handed, keys made from the digests it is given.
/// #[derive(Default)]
/// struct Kept(Mutex<Vec<KeyedJson>>);
///
/// #[async_trait]
/// impl Sink for Kept {
///     async fn load(&self, rows: &[Row]) -> Result<usize, EtlError> {
///         self.0.lock().unwrap().extend(canonical_batch(rows)?);
///         Ok(rows.len())
///     }
///     async fn load_keyed(&self, rows: &[Row], digests: &[Digest]) -> Result<usize, EtlError> {
///         assert!(canonical_keyed(rows, &digests[1..]).is_err(), "one digest a row");
///         self.0.lock().unwrap().extend(canonical_keyed(rows, digests)?);
///         Ok(rows.len())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rows = vec![Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() })];
/// let sink = IdempotentSink::new(Kept::default());
/// sink.load(&rows).await?; // hashes the rows, and hands their digests on
/// assert_eq!(*sink.inner().0.lock().unwrap(), canonical_batch(&rows)?);
/// # Ok(())
/// # }
/// ```
pub fn canonical_keyed<T: Record>(
    rows: &[T],
    digests: &[Digest],
) -> Result<Vec<KeyedJson>, EtlError> {
    if rows.len() != digests.len() {
        return Err(EtlError::InvalidInput(format!(
            "{} rows with {} digests",
            rows.len(),
            digests.len()
        )));
    }
    let indexes: Vec<usize> = (0..rows.len()).collect();
    parallel::try_map(&indexes, |&i| {
        let json = json_string(&rows[i])?;
        Ok(KeyedJson {
            key: hex::encode(digests[i]),
            json,
        })
    })
}

/// Parses a key as [`content_id`] formats it (64 lowercase hex digits).
pub(crate) fn parse_key(key: &str) -> Option<Digest> {
    let bytes = key.as_bytes();
    if bytes.len() != 64 || !bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(bytes, &mut out).ok()?;
    Some(Digest(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Launch;

    fn launch(id: &str, name: &str) -> Row {
        Row::Launches(Launch {
            id: id.into(),
            name: name.into(),
            ..Default::default()
        })
    }

    #[test]
    fn same_content_hashes_stable_distinct_content_differs() {
        assert_eq!(content_id("row", "x"), content_id("row", "x"));
        assert_ne!(content_id("row", "x"), content_id("row", "y"));
        assert_ne!(content_id("a", "x"), content_id("b", "x"));
    }

    #[test]
    fn content_id_is_sha256_of_kind_nul_canonical() {
        // Computed outside Rust: `printf 'row\0x' | sha256sum`.
        assert_eq!(
            content_id("row", "x"),
            "1a6787d3e9f760f3e6b0194d997042b2e554bf4970cce7f365ca0929a7e43123"
        );
    }

    #[test]
    fn separator_keeps_kind_and_text_apart() {
        assert_ne!(content_id("ab", "c"), content_id("a", "bc"));
    }

    #[test]
    fn try_content_id_refuses_nul_in_kind() {
        let err = try_content_id("a\0b", "c").unwrap_err();
        assert!(
            matches!(err, EtlError::InvalidInput(ref m) if m.contains("NUL")),
            "{err}"
        );
        assert_eq!(try_content_id("row", "x").unwrap(), content_id("row", "x"));
    }

    #[test]
    fn content_key_is_stable_and_distinguishes_rows() {
        let a = launch("1", "Falcon 9 | Starlink");
        let b = launch("1", "Falcon 9 | Starlink");
        assert_eq!(a.content_key().unwrap(), b.content_key().unwrap());
        let mut c = a.clone();
        let Row::Launches(l) = &mut c;
        l.net = Some("2025-10-31T20:41:10Z".into());
        assert_ne!(a.content_key().unwrap(), c.content_key().unwrap());
    }

    #[test]
    fn content_key_hashes_exactly_the_jsonl_line() {
        let row = launch("7", "Electron | \"quoted\" \u{1F680}");
        let line = serde_json::to_string(&row).unwrap();
        assert_eq!(row.content_key().unwrap(), content_id("row", &line));
    }

    #[test]
    fn parse_key_accepts_only_content_id_output() {
        let key = content_id("row", "x");
        assert_eq!(parse_key(&key).map(hex::encode), Some(key.clone()));
        assert_eq!(parse_key(&key.to_uppercase()), None);
        assert_eq!(parse_key(&key[..63]), None);
        assert_eq!(parse_key("zz"), None);
    }
}
