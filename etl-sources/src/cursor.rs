//! The cursor of an incremental run: the newest `updated_at` among the rows
//! an output already holds. The data written is the checkpoint, so a run
//! killed half-way resumes from what it wrote, with no state file.

use etl_core::EtlError;
use memchr::memmem;
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The newest of the update times `updated_at` finds in the lines of the
/// JSONL file at `path` (`None` for a missing or empty file, or one whose
/// rows carry none). `updated_at` is the source's
/// [`crate::Source::stored_updated_at`].
///
/// Times compare as instants where they read as RFC 3339 UTC timestamps
/// (`2026-11-02T08:00:00Z`, `...08:00:00.5Z`); one that does not read
/// ranks below every one that does (and by text among themselves). A torn
/// last line (a crash mid-write) is not a row.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.jsonl");
/// use etl_sources::cursor::jsonl_cursor;
/// use std::borrow::Cow;
///
/// std::fs::write(&path, concat!(
///     r#"{"id":"a","updated":"2026-11-02T08:00:00Z"}"#, "\n",
///     r#"{"id":"b","updated":"2026-11-01T08:00:00Z"}"#, "\n",
/// ))?;
/// // How a stored line's update time is read: the source knows its rows.
/// fn updated(line: &[u8]) -> Option<Cow<'_, str>> {
///     let row: serde_json::Value = serde_json::from_slice(line).ok()?;
///     Some(Cow::Owned(row["updated"].as_str()?.to_owned()))
/// }
/// assert_eq!(jsonl_cursor(&path, updated)?.as_deref(), Some("2026-11-02T08:00:00Z"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jsonl_cursor(
    path: &Path,
    updated_at: impl for<'l> Fn(&'l [u8]) -> Option<Cow<'l, str>>,
) -> Result<Option<String>, EtlError> {
    Ok(jsonl_newest(path, updated_at)?.map(|(cursor, _)| cursor))
}

/// [`jsonl_cursor`], and the line it was read from (the stored record).
pub(crate) fn jsonl_newest(
    path: &Path,
    updated_at: impl for<'l> Fn(&'l [u8]) -> Option<Cow<'l, str>>,
) -> Result<Option<(String, String)>, EtlError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(EtlError::Io(std::io::Error::new(
                e.kind(),
                format!("open {}: {e}", path.display()),
            )))
        }
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    // Bytes, not a String: the launch scan needs no UTF-8 check of each
    // line, and a source that parses checks what it parses.
    let mut line = Vec::new();
    let mut newest: Option<(Option<SystemTime>, String)> = None;
    // Where the newest line starts: read again once the scan is done,
    // rather than copied each time a newer one is met (in a file written
    // in time order, that is every line).
    let (mut at, mut newest_at) = (0u64, 0u64);
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        let Some(row) = line.strip_suffix(b"\n") else {
            break; // a torn last line is not a row
        };
        if let Some(stamp) = updated_at(row) {
            if newest.as_ref().is_none_or(|n| newer(&stamp, n)) {
                let parsed = humantime::parse_rfc3339(&stamp).ok();
                newest = Some((parsed, stamp.into_owned()));
                newest_at = at;
            }
        }
        at += read as u64;
    }
    let Some((_, cursor)) = newest else {
        return Ok(None);
    };
    reader.seek(SeekFrom::Start(newest_at))?;
    line.clear();
    reader.read_until(b'\n', &mut line)?;
    let record = line.strip_suffix(b"\n").unwrap_or(&line);
    Ok(Some((cursor, String::from_utf8_lossy(record).into_owned())))
}

/// Whether the update time `stamp` is newer than `than` (an empty `than`:
/// none yet), by the order a cursor scan keeps.
pub(crate) fn is_newer(stamp: &str, than: &str) -> bool {
    than.is_empty()
        || newer(
            stamp,
            &(humantime::parse_rfc3339(than).ok(), than.to_owned()),
        )
}

/// Whether `stamp` is newer than `newest` (its instant, if it read as one,
/// and its text). Two stamps in the API form `YYYY-MM-DDTHH:MM:SSZ`
/// compare as text, which is their time order, with no parse: the common
/// case, once a line.
fn newer(stamp: &str, newest: &(Option<SystemTime>, String)) -> bool {
    let utc_seconds = |s: &str| s.len() == 20 && s.as_bytes()[10] == b'T' && s.ends_with('Z');
    if utc_seconds(stamp) && utc_seconds(&newest.1) {
        return stamp > newest.1.as_str();
    }
    (humantime::parse_rfc3339(stamp).ok(), stamp) > (newest.0, newest.1.as_str())
}

/// The field as `serde_json` writes a `Launch`'s `last_updated`.
const LAST_UPDATED: &[u8] = br#""last_updated":""#;

/// The `last_updated` of a launch row as a `JsonlSink` stores it: the
/// line's last `"last_updated":"` rather than a parse of the whole launch.
/// Inside a JSON string a quote is always escaped, so the pattern only
/// matches a real field, and `last_updated` is the last field a
/// [`etl_core::Launch`] writes (a launch's nested objects have none of
/// their own after it).
pub(crate) fn launch_updated_at(line: &[u8]) -> Option<Cow<'_, str>> {
    // The searcher, built once (a cursor scan calls this once a line).
    static FINDER: OnceLock<memmem::FinderRev<'static>> = OnceLock::new();
    let finder = FINDER.get_or_init(|| memmem::FinderRev::new(LAST_UPDATED));
    let start = finder.rfind(line)? + LAST_UPDATED.len();
    let len = memchr::memchr(b'"', &line[start..])?;
    Some(String::from_utf8_lossy(&line[start..start + len]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_wins_and_odd_lines_are_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.jsonl");
        assert_eq!(
            jsonl_cursor(&path, launch_updated_at).unwrap(),
            None,
            "missing file"
        );
        std::fs::write(
            &path,
            concat!(
                r#"{"Launches":{"id":"a","mission":{"description":"\"last_updated\":\"9999\""},"last_updated":"2026-01-01T00:00:00Z"}}"#,
                "\n",
                "garbage\n",
                r#"{"Launches":{"id":"b","last_updated":null}}"#,
                "\n",
                r#"{"Launches":{"id":"c","last_updated":"2026-03-01T00:00:00Z"}}"#,
                "\n",
                r#"{"Launches":{"id":"torn","last_updated":"2027-01-01T00:00:00Z"}}"#,
            ),
        )
        .unwrap();
        assert_eq!(
            jsonl_cursor(&path, launch_updated_at).unwrap().as_deref(),
            Some("2026-03-01T00:00:00Z")
        );
        // The line it came from, whole: neither a later torn one nor an
        // older one before it.
        let (_, line) = jsonl_newest(&path, launch_updated_at).unwrap().unwrap();
        assert_eq!(
            line,
            r#"{"Launches":{"id":"c","last_updated":"2026-03-01T00:00:00Z"}}"#
        );
    }

    #[test]
    fn instants_beat_text_and_unreadable_stamps_rank_below() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.jsonl");
        fn stamp(line: &[u8]) -> Option<Cow<'_, str>> {
            Some(String::from_utf8_lossy(line))
        }
        for (lines, newest) in [
            // Fractional seconds: newer as instants, older as text.
            (
                "2026-11-02T08:00:00Z\n2026-11-02T08:00:00.5Z\n",
                "2026-11-02T08:00:00.5Z",
            ),
            (
                "2026-11-02T08:00:00.5Z\n2026-11-02T08:00:00Z\n",
                "2026-11-02T08:00:00.5Z",
            ),
            // The API form against itself: text order.
            (
                "2026-11-02T08:00:01Z\n2026-11-02T08:00:00Z\n",
                "2026-11-02T08:00:01Z",
            ),
            // Not a time: below any that is.
            (
                "zzz\n2026-01-01T00:00:00Z\nyesterday\n",
                "2026-01-01T00:00:00Z",
            ),
        ] {
            std::fs::write(&path, lines).unwrap();
            assert_eq!(
                jsonl_cursor(&path, stamp).unwrap().as_deref(),
                Some(newest),
                "{lines:?}"
            );
        }
    }
}
