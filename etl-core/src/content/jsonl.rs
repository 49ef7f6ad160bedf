//! [`JsonlSink`]: rows appended to a file, one JSON document per line.

use async_trait::async_trait;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

mod stored;

pub(crate) use stored::{each_piece, stored_digests};

use crate::{EtlError, Record, Row, Sink};

/// A [`Sink`] appending each row as `serde_json::to_string(row)` + `\n`,
/// for rows of any [`Record`] type ([`Row`] by default).
///
/// Crash safety:
/// - a batch goes to the file in one `write_all`, then `sync_data` (unless
///   [`JsonlSink::sync`] turned it off); a write that fails half-way is cut
///   back off, so the file never keeps a partial line of ours;
/// - [`JsonlSink::open`] cuts a torn last line (a crash mid-write) back to
///   the last `\n`, so the next append cannot glue onto it;
/// - writes are synchronous, with no `.await` inside `load`: a load whose
///   future is dropped has either written its whole batch or nothing.
///
/// Each line is the canonical form [`Row::content_key`] hashes, so
/// [`JsonlSink::content_keys`] recovers the keys of every stored row by
/// hashing lines, without parsing them, for [`crate::IdempotentSink::with_seen`].
///
/// One `JsonlSink` should be the only writer of its file.
///
/// ```
/// use etl_core::{JsonlSink, Launch, Row, Sink};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), etl_core::EtlError> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.jsonl");
/// let sink = JsonlSink::open(&path)?;
/// let row = Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() });
/// assert_eq!(sink.load(&[row.clone()]).await?, 1);
///
/// let text = std::fs::read_to_string(&path)?;
/// assert_eq!(text, serde_json::to_string(&row)? + "\n");
/// assert_eq!(sink.content_keys()?, [row.content_key()?]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    file: Mutex<File>,
    sync: bool,
}

impl JsonlSink {
    /// Opens `path` for appending, creating it if missing, and cuts a torn
    /// last line (one with no `\n`, left by a crash) off an existing file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, EtlError> {
        let path = path.as_ref().to_path_buf();
        let file = open_append(&path)?;
        Ok(JsonlSink {
            path,
            file: Mutex::new(file),
            sync: true,
        })
    }

    /// Whether each batch is followed by `sync_data` (the default: a row
    /// counted as written survives a power cut). Turn it off where the data
    /// can be fetched again and speed matters more.
    pub fn sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The file this sink appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The content keys of the rows already in the file, in file order: the
    /// [`crate::content_id`] of each stored line under the "row" kind, which
    /// is exactly its row's [`Row::content_key`].
    pub fn content_keys(&self) -> Result<Vec<String>, EtlError> {
        self.record_keys::<Row>()
    }

    /// [`JsonlSink::content_keys`] for a file of records of type `T`: each
    /// stored line hashed under `T::KIND`, which is exactly that record's
    /// [`crate::content_key`].
    pub fn record_keys<T: Record>(&self) -> Result<Vec<String>, EtlError> {
        let _writer = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        read_record_keys::<T>(&self.path)
    }
}

/// The content keys of the rows stored in the JSONL file at `path` (see
/// [`JsonlSink::content_keys`]). A missing file holds no rows; a last line
/// without its `\n` is a torn write, not a row, and is skipped. The lines
/// are hashed on every core.
pub fn read_content_keys(path: impl AsRef<Path>) -> Result<Vec<String>, EtlError> {
    read_record_keys::<Row>(path)
}

/// [`read_content_keys`] for records of type `T`: the keys under `T::KIND`.
pub fn read_record_keys<T: Record>(path: impl AsRef<Path>) -> Result<Vec<String>, EtlError> {
    let digests = stored_digests(path.as_ref(), T::KIND)?;
    Ok(digests.iter().map(hex::encode).collect())
}

/// Whether `line` has the outline of one JSON value as `serde_json` writes
/// it: `{...}`, `[...]`, `"..."` or a bare scalar. A full parse would halve
/// the speed of a resume; the outline catches hand-edited garbage and a
/// line cut short in the middle of a file.
fn is_json_shaped(line: &[u8]) -> bool {
    match (line.first(), line.last()) {
        (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']')) => true,
        (Some(b'"'), Some(b'"')) => line.len() >= 2,
        _ => {
            line.iter()
                .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
        }
    }
}

/// Truncates `file` after its last `\n` (to empty when it has none) and
/// returns how many bytes were cut.
fn repair_torn_tail(file: &mut File) -> std::io::Result<u64> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = [0u8; 8192];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(len - keep);
        }
        end = start;
    }
    if len > 0 {
        file.set_len(0)?;
    }
    Ok(len)
}

/// Appends `batch` (whole lines) to `file` with one `write_all`, then
/// `sync_data` if `sync`. A write that fails half-way is cut back to where
/// the batch began, so the file never keeps part of it; if even that fails,
/// the next [`open_append`] cuts the torn line.
pub(crate) fn append(
    file: &mut File,
    path: &Path,
    batch: &[u8],
    sync: bool,
) -> Result<(), EtlError> {
    let before = file
        .metadata()
        .map_err(|e| io_error(path, "stat", e))?
        .len();
    let written = file
        .write_all(batch)
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(e) = written {
        let _ = file.set_len(before);
        return Err(io_error(path, "write", e));
    }
    Ok(())
}

/// Opens `path` for appending, creating it if missing, and cuts a torn last
/// line (one with no `\n`, left by a crash) so the next append cannot glue
/// onto it.
///
/// A file it creates has its directory synced before it is returned: the
/// batches appended later are synced with `sync_data`, which makes the
/// file's data durable but not the directory entry that names it, so
/// without this a power cut could lose a new file, rows counted as written
/// and all.
pub(crate) fn open_append(path: &Path) -> Result<File, EtlError> {
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    // create_new tells whether this call made the file.
    let mut file = match options.clone().create_new(true).open(path) {
        Ok(file) => {
            sync_directory_of(path).map_err(|e| io_error(path, "sync the directory of", e))?;
            return Ok(file);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => options.open(path),
        Err(e) => Err(e),
    }
    .map_err(|e| io_error(path, "open", e))?;
    let cut = repair_torn_tail(&mut file).map_err(|e| io_error(path, "repair", e))?;
    if cut > 0 {
        tracing::warn!(path = %path.display(), bytes = cut, "cut a torn last line left by an interrupted write");
    }
    Ok(file)
}

/// Makes the directory entry of the file at `path` durable: `fsync` on its
/// directory. Where a directory cannot be opened as a file (Windows), there
/// is nothing to do: the file system keeps its entries itself.
fn sync_directory_of(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if cfg!(unix) {
        File::open(dir)?.sync_all()?;
        tracing::debug!(dir = %dir.display(), file = %path.display(), "created the file; its directory synced");
    }
    Ok(())
}

pub(crate) fn io_error(path: &Path, what: &str, e: std::io::Error) -> EtlError {
    EtlError::Io(std::io::Error::new(
        e.kind(),
        format!("{what} {}: {e}", path.display()),
    ))
}

#[async_trait]
impl<T: Record> Sink<T> for JsonlSink {
    async fn load(&self, rows: &[T]) -> Result<usize, EtlError> {
        if rows.is_empty() {
            return Ok(0);
        }
        // Serialise the whole batch first: a row that fails writes nothing.
        let mut batch = Vec::with_capacity(rows.len() * 512);
        for row in rows {
            super::write_json(row, &mut batch)?;
            batch.push(b'\n');
        }
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        append(&mut file, &self.path, &batch, self.sync)?;
        Ok(rows.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IdempotentSink, Launch};

    fn row(id: &str) -> Row {
        Row::Launches(Launch {
            id: id.into(),
            name: format!("launch {id}"),
            ..Default::default()
        })
    }

    fn line(r: &Row) -> String {
        serde_json::to_string(r).unwrap() + "\n"
    }

    #[tokio::test]
    async fn appends_one_line_per_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let sink = JsonlSink::open(&path).unwrap();
        assert_eq!(sink.load(&[row("a"), row("b")]).await.unwrap(), 2);
        assert_eq!(sink.load(&[row("c")]).await.unwrap(), 1);
        assert_eq!(sink.load(&[] as &[Row]).await.unwrap(), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, line(&row("a")) + &line(&row("b")) + &line(&row("c")));
        for l in text.lines() {
            serde_json::from_str::<Row>(l).unwrap();
        }
    }

    #[cfg(unix)]
    #[test]
    fn creating_the_file_syncs_its_directory_and_opening_it_again_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let (sink, events) =
            crate::content::test_log::capture_at(tracing::Level::DEBUG, || JsonlSink::open(&path));
        assert!(sink.is_ok() && path.exists());
        let synced: Vec<_> = events
            .iter()
            .filter(|e| e.contains("its directory synced"))
            .collect();
        assert_eq!(synced.len(), 1, "{events:?}");
        assert!(
            synced[0].contains(&format!("dir={}", dir.path().display())),
            "{events:?}"
        );

        // The file exists now: nothing new to make durable.
        let (again, events) =
            crate::content::test_log::capture_at(tracing::Level::DEBUG, || JsonlSink::open(&path));
        assert!(again.is_ok());
        assert!(
            !events.iter().any(|e| e.contains("directory synced")),
            "{events:?}"
        );

        // A relative path's directory is the working directory.
        assert_eq!(
            sync_directory_of(Path::new("bare.jsonl")).map_err(|e| e.kind()),
            Ok(())
        );
    }

    #[tokio::test]
    async fn open_cuts_a_torn_jsonl_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let good = line(&row("a"));
        let torn = &line(&row("b"))[..20];
        std::fs::write(&path, format!("{good}{torn}")).unwrap();

        let sink = JsonlSink::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), good);
        sink.load(&[row("c")]).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, good + &line(&row("c")));
    }

    #[test]
    fn a_garbage_line_in_the_middle_is_reported_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let good = line(&row("a"));
        std::fs::write(&path, format!("{good}not a row\n{good}")).unwrap();
        let warnings = crate::content::test_log::capture(|| read_content_keys(&path).unwrap());
        assert_eq!(warnings.1.len(), 1, "{:?}", warnings.1);
        assert!(warnings.1[0].contains("line=2"), "{}", warnings.1[0]);
        // Kept, and still counted: the file is left as it is.
        assert_eq!(warnings.0.len(), 3);
        assert!(is_json_shaped(b"12.5") && is_json_shaped(b"null") && is_json_shaped(b"[1]"));
        assert!(!is_json_shaped(b"{\"Launches\":{\"id") && !is_json_shaped(b"\""));
    }

    #[test]
    fn open_cuts_a_file_that_is_all_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        // Longer than one read chunk, so the backwards scan crosses chunks.
        std::fs::write(&path, "x".repeat(20_000)).unwrap();
        JsonlSink::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn open_keeps_a_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let text = line(&row("a")).repeat(300);
        std::fs::write(&path, &text).unwrap();
        JsonlSink::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn content_keys_match_row_content_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let rows = [row("a"), row("b")];
        let torn = &line(&row("c"))[..10];
        std::fs::write(&path, line(&rows[0]) + "\n" + &line(&rows[1]) + torn).unwrap();
        let expected: Vec<String> = rows.iter().map(|r| r.content_key().unwrap()).collect();
        assert_eq!(
            read_content_keys(&path).unwrap(),
            expected,
            "blank and torn lines are not rows"
        );
        assert!(read_content_keys(dir.path().join("missing.jsonl"))
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn resume_from_an_existing_file_writes_only_new_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        {
            let sink = IdempotentSink::new(JsonlSink::open(&path).unwrap());
            assert_eq!(sink.load(&[row("a"), row("b")]).await.unwrap(), 2);
        }
        // A crash mid-write of the next batch left a torn line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&line(&row("c")).as_bytes()[..15]).unwrap();
        drop(f);

        let file = JsonlSink::open(&path).unwrap();
        let seen = file.content_keys().unwrap();
        let sink = IdempotentSink::with_seen(file, seen);
        assert_eq!(sink.load(&[row("a"), row("b"), row("c")]).await.unwrap(), 1);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, line(&row("a")) + &line(&row("b")) + &line(&row("c")));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn failed_write_is_an_error_and_marks_nothing() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let sink = IdempotentSink::new(JsonlSink::open("/dev/full").unwrap().sync(false));
        let err = sink.load(&[row("a")]).await.unwrap_err();
        assert!(matches!(err, EtlError::Io(_)), "{err:?}");
        assert!(err.to_string().contains("/dev/full"), "{err}");
        assert_eq!(sink.seen_count(), 0, "an unwritten row is not remembered");
    }

    #[tokio::test]
    async fn content_keys_of_lines_that_straddle_read_buffers() {
        // Over 1 MiB of lines of uneven length: some cross the reader's
        // buffer boundary and are hashed from the gathered copy.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let rows: Vec<Row> = (0..6000)
            .map(|i| row(&format!("{i}-{}", "x".repeat(i % 300))))
            .collect();
        JsonlSink::open(&path)
            .unwrap()
            .sync(false)
            .load(&rows)
            .await
            .unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 1 << 20);
        let expected: Vec<String> = rows.iter().map(|r| r.content_key().unwrap()).collect();
        assert_eq!(read_content_keys(&path).unwrap(), expected);
    }

    #[tokio::test]
    async fn resume_remembers_what_content_keys_lists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let rows = [row("a"), row("b"), row("a")];
        JsonlSink::open(&path).unwrap().load(&rows).await.unwrap();

        let resumed = IdempotentSink::resume(&path).unwrap();
        assert_eq!(resumed.seen_count(), 2, "the duplicate line is one key");
        for key in read_content_keys(&path).unwrap() {
            assert!(resumed.is_seen(&key));
        }
        assert_eq!(resumed.load(&[row("b"), row("c")]).await.unwrap(), 1);
    }

    #[test]
    fn open_names_the_path_it_could_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("out.jsonl");
        let err = JsonlSink::open(&path).unwrap_err();
        assert!(err.to_string().contains("no-such-dir"), "{err}");
    }
}
