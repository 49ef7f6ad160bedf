//! The content keys of the lines stored in a JSONL file, hashed on every
//! core: the file is cut into pieces of a few MB, every core's thread takes
//! the next piece until none is left, each piece is read and hashed where
//! its lines lie in the read buffer, and the digests of each piece go to the
//! calling thread as soon as it is done, so that what the caller does with
//! them (a resume builds its set of keys) overlaps the hashing of the rest.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use super::{io_error, is_json_shaped};
use crate::content::parallel::cores;
use crate::content::{digest, Digest};
use crate::EtlError;

/// A file smaller than this is hashed by the calling thread alone: a thread
/// costs more than its share of a small file.
const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// The size of a piece: about 5 ms of hashing, so the threads end within a
/// piece of each other and the caller takes each piece's keys in well under
/// a millisecond, while a piece's thread hand-off and file seek stay
/// negligible.
#[cfg(not(test))]
const PIECE_BYTES: u64 = 8 << 20;
/// Small in tests, so that a test file of a few MB is hundreds of pieces,
/// finished out of order.
#[cfg(test)]
const PIECE_BYTES: u64 = 4 << 10;

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
    let mut pieces = Vec::new();
    each_piece(path, kind, |index, _, digests| {
        pieces.push((index, digests))
    })?;
    pieces.sort_unstable_by_key(|&(index, _)| index);
    Ok(pieces
        .into_iter()
        .flat_map(|(_, digests)| digests)
        .collect())
}

/// [`stored_digests`] in no particular order: `take(index, pieces,
/// digests)` is called on the calling thread with the digests of each piece
/// of the file (`index` of `pieces`) as soon as it is hashed, while the
/// other cores hash the rest. The warnings come at the end, in file order.
pub(crate) fn each_piece(
    path: &Path,
    kind: &str,
    mut take: impl FnMut(usize, usize, Vec<Digest>),
) -> Result<(), EtlError> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(path, "open", e)),
    };
    let (pieces, threads) = plan(len);
    let bound = |i: usize| len * i as u64 / pieces as u64;
    let next = AtomicUsize::new(0);
    // Takes the next piece, if any, and hashes it with this thread's reader
    // (opened at its first piece; its buffer serves every piece after).
    let hash_next = |reader: &mut Option<BufReader<File>>| {
        let i = next.fetch_add(1, Ordering::Relaxed);
        (i < pieces).then(|| {
            let range = match reader {
                Some(reader) => hash_range(reader, kind, bound(i), bound(i + 1)),
                empty => open(path)
                    .and_then(|r| hash_range(empty.insert(r), kind, bound(i), bound(i + 1))),
            };
            (i, range)
        })
    };
    // Each piece's line count and odd lines, to number the odd lines in the
    // whole file once every piece is in; the first error, if any.
    let mut counts: Vec<(usize, u64, Vec<u64>)> = Vec::with_capacity(pieces);
    let mut failed: Option<io::Error> = None;
    let mut file_piece = |i: usize, range: io::Result<Range>| match range {
        Ok(range) => {
            counts.push((i, range.lines, range.odd));
            take(i, pieces, range.digests);
        }
        Err(e) => {
            // Let the other threads stop at their next piece.
            next.store(pieces, Ordering::Relaxed);
            failed.get_or_insert(e);
        }
    };
    std::thread::scope(|scope| {
        let (done, finished) = mpsc::channel();
        for _ in 1..threads {
            let done = done.clone();
            scope.spawn(move || {
                let mut reader = None;
                while let Some(piece) = hash_next(&mut reader) {
                    if done.send(piece).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // This thread hashes pieces too, and between them files the pieces
        // the others finished.
        let mut reader = None;
        while let Some((i, range)) = hash_next(&mut reader) {
            file_piece(i, range);
            while let Ok((i, range)) = finished.try_recv() {
                file_piece(i, range);
            }
        }
        for (i, range) in finished {
            file_piece(i, range);
        }
    });
    if let Some(e) = failed {
        return Err(io_error(path, "read", e));
    }
    warn_odd_lines(path, counts);
    Ok(())
}

/// How many pieces a file of `len` bytes is hashed in, and on how many
/// threads: one of each for a small file, else pieces of about
/// `PIECE_BYTES`, at least one a core.
fn plan(len: u64) -> (usize, usize) {
    if len < PARALLEL_MIN_BYTES {
        return (1, 1);
    }
    let threads = cores();
    let pieces = len.div_ceil(PIECE_BYTES).max(threads as u64) as usize;
    (pieces, threads)
}

/// One warning a line that is not a row, numbered in the whole file, in
/// file order: `counts` holds each piece's (index, line count, odd lines
/// counted from the piece's start).
fn warn_odd_lines(path: &Path, mut counts: Vec<(usize, u64, Vec<u64>)>) {
    counts.sort_unstable_by_key(|&(i, _, _)| i);
    let mut before = 0u64;
    for (_, lines, odd) in counts {
        for line in odd {
            tracing::warn!(path = %path.display(), line = before + line + 1, "a line of the output is not a row (hand-edited or corrupted?); left as it is");
        }
        before += lines;
    }
}

/// A reader of the file with a 1 MB buffer: lines are hashed where they lie
/// in it.
fn open(path: &Path) -> io::Result<BufReader<File>> {
    Ok(BufReader::with_capacity(1 << 20, File::open(path)?))
}

/// Hashes the lines that start in `[start, end)`: the range's first line
/// starts at `start` if a line starts there, else after the next `\n`; its
/// last line may run past `end`.
fn hash_range(reader: &mut BufReader<File>, kind: &str, start: u64, end: u64) -> io::Result<Range> {
    let mut out = Range::default();
    if start >= end {
        return Ok(out);
    }
    // Look one byte back: a line starts at `start` exactly when the byte
    // before it ends a line.
    let from = start.saturating_sub(1);
    reader.seek(SeekFrom::Start(from))?;
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
        let whole = hash_range(&mut open(&path).unwrap(), "row", 0, text.len() as u64).unwrap();
        assert_eq!(whole.digests.len(), 4);
        assert_eq!(whole.lines, 5);
        for cut in 0..=text.len() as u64 {
            for cut2 in cut..=text.len() as u64 {
                let parts = [(0, cut), (cut, cut2), (cut2, text.len() as u64)];
                let mut digests = Vec::new();
                let mut lines = 0;
                for (a, b) in parts {
                    let r = hash_range(&mut open(&path).unwrap(), "row", a, b).unwrap();
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
        let first = hash_range(&mut open(&path).unwrap(), "row", 0, half).unwrap();
        let second = hash_range(&mut open(&path).unwrap(), "row", half, text.len() as u64).unwrap();
        assert_eq!(first.lines + second.lines, 120_001);
        assert_eq!(first.lines + second.odd[0] + 1, 100_002);
        let (digests, warnings) =
            crate::content::test_log::capture(|| stored_digests(&path, "row").unwrap());
        assert_eq!(digests.len(), 120_001);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("line=100002"), "{}", warnings[0]);
        // In file order, every line once, though hundreds of pieces finish
        // in any order.
        let whole = hash_range(&mut open(&path).unwrap(), "row", 0, text.len() as u64).unwrap();
        assert_eq!(digests, whole.digests);
        let mut pieces = 0;
        each_piece(&path, "row", |_, of, _| pieces = of).unwrap();
        assert!(pieces > 100, "{pieces} pieces");
    }
}
