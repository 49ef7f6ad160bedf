//! The content keys of the lines stored in a JSONL file, hashed on every
//! core: the file is cut into one byte range per core, each range is read
//! and hashed by its own thread where its lines lie in the read buffer, and
//! the digests come back in file order.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use super::{io_error, is_json_shaped};
use crate::content::parallel::cores;
use crate::content::{digest, Digest};
use crate::EtlError;

/// A file smaller than this is hashed by the calling thread alone: a thread
/// costs more than its share of a small file.
const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// What one range of the file held.
#[derive(Default)]
struct Range {
    digests: Vec<Digest>,
    /// Lines the range holds (empty ones too), to number the lines of the
    /// ranges after it.
    lines: u64,
    /// Line numbers, within the range (0-based), of lines that are not rows.
    odd: Vec<u64>,
}

/// The digests, under `kind`, of every whole line of the file at `path`, in
/// file order. A missing file holds no rows; a last line without its `\n`
/// is a torn write, not a row; an empty line is passed over. A line that is
/// not one JSON value's outline is reported as a warning with its number.
pub(crate) fn stored_digests(path: &Path, kind: &str) -> Result<Vec<Digest>, EtlError> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(path, "open", e)),
    };
    let parts = if len < PARALLEL_MIN_BYTES {
        1
    } else {
        cores() as u64
    };
    let bounds: Vec<u64> = (0..=parts).map(|i| len * i / parts).collect();
    let ranges: Vec<io::Result<Range>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .windows(2)
            .skip(1)
            .map(|w| {
                let (start, end) = (w[0], w[1]);
                scope.spawn(move || hash_range(path, kind, start, end))
            })
            .collect();
        let mut ranges = vec![hash_range(path, kind, bounds[0], bounds[1])];
        ranges.extend(
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))),
        );
        ranges
    });
    let mut digests = Vec::new();
    let mut before = 0u64;
    for range in ranges {
        let range = range.map_err(|e| io_error(path, "read", e))?;
        for line in &range.odd {
            tracing::warn!(path = %path.display(), line = before + line + 1, "a line of the output is not a row (hand-edited or corrupted?); left as it is");
        }
        before += range.lines;
        if digests.is_empty() {
            digests = range.digests;
        } else {
            digests.extend(range.digests);
        }
    }
    Ok(digests)
}

/// Hashes the lines that start in `[start, end)`: the range's first line
/// starts at `start` if a line starts there, else after the next `\n`; its
/// last line may run past `end`.
fn hash_range(path: &Path, kind: &str, start: u64, end: u64) -> io::Result<Range> {
    let mut out = Range::default();
    if start >= end {
        return Ok(out);
    }
    let mut file = File::open(path)?;
    // Look one byte back: a line starts at `start` exactly when the byte
    // before it ends a line.
    let from = start.saturating_sub(1);
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    // Where the next unread byte of the file is.
    let mut pos = from;
    if start > 0 {
        let mut skipped = Vec::new();
        let n = reader.read_until(b'\n', &mut skipped)?;
        pos += n as u64;
        if skipped.last() != Some(&b'\n') {
            return Ok(out); // no line starts in this range
        }
    }
    // A line that straddles two reads is gathered here; every other line is
    // hashed where it lies in the read buffer, without a copy.
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(out); // what is left without its `\n` is torn
        }
        let mut rest = buf;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let line_start = pos - partial.len() as u64;
            if line_start >= end {
                return Ok(out);
            }
            let line = if partial.is_empty() {
                &rest[..at]
            } else {
                partial.extend_from_slice(&rest[..at]);
                &partial[..]
            };
            if !line.is_empty() {
                if !is_json_shaped(line) {
                    out.odd.push(out.lines);
                }
                out.digests.push(digest(kind, line));
            }
            out.lines += 1;
            pos += at as u64 + 1;
            partial.clear();
            rest = &rest[at + 1..];
        }
        // The line still open starts here; at or past `end` it is the next
        // range's.
        if pos - partial.len() as u64 >= end {
            return Ok(out);
        }
        partial.extend_from_slice(rest);
        pos += rest.len() as u64;
        let consumed = buf.len();
        reader.consume(consumed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split of the file into ranges yields the same digests as one
    /// range: no line lost or hashed twice at a boundary.
    #[test]
    fn any_cut_gives_every_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        let text = "{\"a\":1}\n\n[2]\n{\"long\":\"xxxxxxxxxxxxxxxx\"}\n3\n{\"torn\"";
        std::fs::write(&path, text).unwrap();
        let whole = hash_range(&path, "row", 0, text.len() as u64).unwrap();
        assert_eq!(whole.digests.len(), 4);
        assert_eq!(whole.lines, 5);
        for cut in 0..=text.len() as u64 {
            for cut2 in cut..=text.len() as u64 {
                let parts = [(0, cut), (cut, cut2), (cut2, text.len() as u64)];
                let mut digests = Vec::new();
                let mut lines = 0;
                for (a, b) in parts {
                    let r = hash_range(&path, "row", a, b).unwrap();
                    digests.extend(r.digests);
                    lines += r.lines;
                }
                assert_eq!(digests, whole.digests, "cuts at {cut}, {cut2}");
                assert_eq!(lines, whole.lines, "cuts at {cut}, {cut2}");
            }
        }
    }

    #[test]
    fn a_bad_line_is_numbered_in_the_whole_file_not_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.jsonl");
        let mut text = String::new();
        for i in 0..120_000 {
            text.push_str(&format!("{{\"n\":{i}}}\n"));
            if i == 100_000 {
                text.push_str("garbage\n"); // line 100,002, in the second half
            }
        }
        std::fs::write(&path, &text).unwrap();
        assert!(text.len() as u64 > PARALLEL_MIN_BYTES);
        // Cut in two ranges whatever the machine's cores.
        let half = text.len() as u64 / 2;
        let first = hash_range(&path, "row", 0, half).unwrap();
        let second = hash_range(&path, "row", half, text.len() as u64).unwrap();
        assert_eq!(first.lines + second.lines, 120_001);
        assert_eq!(first.lines + second.odd[0] + 1, 100_002);
        let (digests, warnings) =
            crate::content::test_log::capture(|| stored_digests(&path, "row").unwrap());
        assert_eq!(digests.len(), 120_001);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("line=100002"), "{}", warnings[0]);
    }
}
