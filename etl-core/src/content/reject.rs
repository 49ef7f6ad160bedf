//! Rejects: input entries that did not read as rows, kept instead of lost.
//!
//! A source that meets an entry it cannot read (the API changed a field's
//! type, an entry has no `id`) must neither stop the load nor drop the entry.
//! It hands a [`Reject`] to a [`RejectSink`], which keeps each distinct entry
//! once, however often later runs meet it again. [`JsonlRejects`] keeps them
//! in a JSONL file beside the output; `etl-postgres` has a table form.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::content::jsonl::{append, io_error, open_append};
use crate::content::{digest, CanonicalJson, Digest};
use crate::EtlError;

/// The kind tag under which [`Reject::key`] hashes the raw entry.
const REJECT_KIND: &str = "reject";

/// An input entry that did not read as a row: the entry as the source sent
/// it (in canonical form), what did not read, and where it came from.
///
/// Serialised, it is one line of a rejects file:
/// `{"raw": <entry>, "error": "...", "source": "<page URL>"}`. The entry is
/// kept as canonical JSON (compact, object keys sorted), so one line is one
/// reject whatever whitespace it was sent with, and the same entry sent
/// with its keys in another order is the same reject.
///
/// ```
/// use etl_core::Reject;
///
/// let r = Reject::new("{\"name\": null,\n \"id\": 7}", "missing field `name`", "https://ll.example/p1")?;
/// assert_eq!(
///     serde_json::to_string(&r)?,
///     r#"{"raw":{"id":7,"name":null},"error":"missing field `name`","source":"https://ll.example/p1"}"#
/// );
/// // The key is the entry's alone: met again on another page, or in another
/// // key order, it is the same reject.
/// let again = Reject::new(r#"{"id": 7, "name": null}"#, "missing field `name`", "https://ll.example/p2")?;
/// assert_eq!(r.key(), again.key());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reject {
    /// The entry as the source sent it, as canonical JSON (compact, object
    /// keys sorted). [`Reject::new`] and [`Reject::of`] make it so; one
    /// built by hand should hold it so too ([`Reject::key`] is computed
    /// from this text).
    #[serde(deserialize_with = "canonical_raw")]
    pub raw: Box<RawValue>,
    /// What did not read, naming the field (`pad.latitude: ...`).
    pub error: String,
    /// Where the entry came from (a page URL).
    pub source: String,
}

impl Reject {
    /// A reject of the JSON text `raw`; `Parse` if `raw` is not one JSON
    /// value.
    pub fn new(
        raw: impl Into<String>,
        error: impl Into<String>,
        source: impl Into<String>,
    ) -> Result<Self, EtlError> {
        let raw = RawValue::from_string(raw.into())
            .map_err(|e| EtlError::Parse(format!("a reject's raw entry is not JSON: {e}")))?;
        Ok(Reject::of(&raw, error, source))
    }

    /// A reject of `raw`, an entry already read as JSON (a page's entry),
    /// kept in canonical form.
    pub fn of(raw: &RawValue, error: impl Into<String>, source: impl Into<String>) -> Self {
        Reject {
            raw: canonical(raw),
            error: error.into(),
            source: source.into(),
        }
    }

    /// The reject's identity: [`crate::content_id`] of the raw entry under
    /// the kind `"reject"`. The error text and the source are left out, so
    /// the same entry met on another page, or described by a newer reader, is
    /// still the same reject.
    pub fn key(&self) -> String {
        hex::encode(self.digest())
    }

    fn digest(&self) -> Digest {
        digest(REJECT_KIND, self.raw.get().as_bytes())
    }
}

/// `raw` in the one canonical form ([`CanonicalJson`], the form content
/// keys hash and rows are stored in). A value that form cannot hold (a
/// number beyond `f64`) is kept as sent, on one line: JSON text has no line
/// break but as whitespace.
fn canonical(raw: &RawValue) -> Box<RawValue> {
    CanonicalJson::of(raw.get())
        .ok()
        .and_then(|c| RawValue::from_string(c.into_string()).ok())
        .unwrap_or_else(|| {
            let one_line = raw.get().replace(['\n', '\r'], " ");
            RawValue::from_string(one_line).unwrap_or_else(|_| raw.to_owned())
        })
}

/// Reads a stored reject's entry into canonical form (a rejects file
/// written before entries were kept so holds them as sent).
fn canonical_raw<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Box<RawValue>, D::Error> {
    let raw = <&RawValue>::deserialize(d)?;
    Ok(canonical(raw))
}

/// Where rejects are kept, each distinct entry ([`Reject::key`]) once.
#[async_trait]
pub trait RejectSink: Send + Sync {
    /// Keeps the rejects not kept before and returns how many those were.
    /// On `Ok` every reject handed in is kept (by this call or an earlier
    /// one).
    async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError>;
}

/// Rejects appended to a JSONL file, one [`Reject`] a line, each entry once.
///
/// Opening reads the keys of the rejects already in the file (and cuts a
/// torn last line, as [`crate::JsonlSink`] does), so a re-run that meets the
/// same entries appends nothing. A batch is one `write_all` plus `sync_data`.
///
/// ```
/// use etl_core::{JsonlRejects, Reject, RejectSink};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), etl_core::EtlError> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.rejects.jsonl");
/// let bad = Reject::new("42", "not an object", "https://ll.example/p1")?;
/// let log = JsonlRejects::open(&path)?;
/// assert_eq!(log.reject(&[bad.clone()]).await?, 1);
///
/// // The next run meets the same entry: nothing is appended.
/// let log = JsonlRejects::open(&path)?;
/// assert_eq!(log.reject(&[bad]).await?, 0);
/// assert_eq!(std::fs::read_to_string(&path)?.lines().count(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct JsonlRejects {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Opened at the first reject: a clean run leaves no empty file behind.
    file: Option<File>,
    kept: HashSet<Digest>,
}

impl JsonlRejects {
    /// Opens the rejects file at `path` and reads the keys of the rejects it
    /// holds; a missing file is created at the first reject. A line that is
    /// not a reject is reported as a warning with its line number and left
    /// as it is.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, EtlError> {
        let path = path.as_ref().to_path_buf();
        let file = if path.exists() {
            Some(open_append(&path)?)
        } else {
            None
        };
        let kept = read_keys(&path)?;
        Ok(JsonlRejects {
            path,
            state: Mutex::new(State { file, kept }),
        })
    }

    /// The file the rejects go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many distinct rejects the file holds.
    pub fn len(&self) -> usize {
        self.lock().kept.len()
    }

    /// Whether the file holds no reject.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl RejectSink for JsonlRejects {
    async fn reject(&self, rejects: &[Reject]) -> Result<usize, EtlError> {
        // No `.await` below: a cancelled call has appended all or nothing.
        let mut state = self.lock();
        let mut fresh = HashSet::new();
        let mut batch = Vec::new();
        for reject in rejects {
            let key = reject.digest();
            if !state.kept.contains(&key) && fresh.insert(key) {
                serde_json::to_writer(&mut batch, reject)?;
                batch.push(b'\n');
            }
        }
        if fresh.is_empty() {
            return Ok(0);
        }
        let file = match &mut state.file {
            Some(file) => file,
            empty => empty.insert(open_append(&self.path)?),
        };
        append(file, &self.path, &batch, true)?;
        let new = fresh.len();
        state.kept.extend(fresh);
        #[cfg(feature = "metrics")]
        crate::metrics::rejects_kept(new as u64);
        Ok(new)
    }
}

/// The keys of the rejects stored in `path`.
fn read_keys(path: &Path) -> Result<HashSet<Digest>, EtlError> {
    #[derive(Deserialize)]
    struct Stored<'a> {
        #[serde(borrow)]
        raw: &'a RawValue,
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(io_error(path, "open", e)),
    };
    let mut reader = BufReader::new(file);
    let mut kept = HashSet::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_error(path, "read", e))?;
        if n == 0 {
            return Ok(kept);
        }
        number += 1;
        match serde_json::from_slice::<Stored<'_>>(&line) {
            Ok(stored) => {
                let raw = canonical(stored.raw);
                kept.insert(digest(REJECT_KIND, raw.get().as_bytes()));
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), line = number, error = %e, "a line of the rejects file is not a reject; left as it is");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reject(raw: &str, source: &str) -> Reject {
        Reject::new(raw, "missing field `id`", source).unwrap()
    }

    #[tokio::test]
    async fn each_entry_is_kept_once_across_batches_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let log = JsonlRejects::open(&path).unwrap();
        assert!(!path.exists(), "no file before the first reject");
        assert_eq!(log.reject(&[]).await.unwrap(), 0);
        assert!(!path.exists());
        let a = reject(r#"{"name": "a"}"#, "p1");
        let b = reject("[1, 2]", "p1");
        // A duplicate inside the batch is kept once.
        assert_eq!(
            log.reject(&[a.clone(), b.clone(), a.clone()])
                .await
                .unwrap(),
            2
        );
        // The same entry from another page is the same reject.
        assert_eq!(
            log.reject(&[reject(r#"{"name": "a"}"#, "p2")])
                .await
                .unwrap(),
            0
        );
        drop(log);

        let log = JsonlRejects::open(&path).unwrap();
        assert_eq!(log.len(), 2);
        assert_eq!(log.reject(&[b, a]).await.unwrap(), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"raw\":{\"name\":\"a\"},\"error\":\"missing field `id`\",\"source\":\"p1\"}\n\
             {\"raw\":[1,2],\"error\":\"missing field `id`\",\"source\":\"p1\"}\n"
        );
    }

    #[tokio::test]
    async fn an_entry_sent_pretty_then_in_another_key_order_is_one_line_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let pretty = "{\n  \"b\": [1,\n 2],\n  \"a\": {\"d\": 1, \"c\": \"x y\"}\n}";
        let reordered = r#"{"a":{"c":"x y","d":1},"b":[1,2]}"#;
        let log = JsonlRejects::open(&path).unwrap();
        assert_eq!(log.reject(&[reject(pretty, "p1")]).await.unwrap(), 1);
        assert_eq!(log.reject(&[reject(reordered, "p2")]).await.unwrap(), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["raw"].to_string(), reordered);
        drop(log);
        // A file written before entries were canonical holds them as sent:
        // read back, such an entry is the same reject as its canonical form.
        std::fs::write(
            &path,
            "{\"raw\":{\"b\": [1, 2], \"a\": {\"d\": 1, \"c\": \"x y\"}},\"error\":\"e\",\"source\":\"p\"}\n",
        )
        .unwrap();
        let log = JsonlRejects::open(&path).unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log.reject(&[reject(reordered, "p3")]).await.unwrap(), 0);
    }

    #[test]
    fn a_number_beyond_f64_is_kept_as_sent_on_one_line() {
        let r = Reject::new("[1e400,\n 2]", "x", "p").unwrap();
        assert_eq!(r.raw.get(), "[1e400,  2]");
    }

    #[tokio::test]
    async fn a_garbage_line_is_left_and_a_torn_tail_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let a = reject("1", "p");
        let good = serde_json::to_string(&a).unwrap();
        std::fs::write(&path, format!("garbage\n{good}\n{{\"raw\":")).unwrap();
        let log = JsonlRejects::open(&path).unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log.reject(&[a]).await.unwrap(), 0);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("garbage\n{good}\n")
        );
    }

    #[test]
    fn raw_must_be_json() {
        let e = Reject::new("{not json", "x", "p").unwrap_err();
        assert!(
            matches!(e, EtlError::Parse(ref m) if m.contains("raw")),
            "{e}"
        );
    }
}
