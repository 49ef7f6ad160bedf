//! The cursor of an incremental run: the newest `last_updated` among the
//! launches an output already holds. The data written is the checkpoint, so
//! a run killed half-way resumes from what it wrote, with no state file.

use etl_core::EtlError;
use memchr::memmem;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// The field as `serde_json` writes a `Launch`'s `last_updated`.
const FIELD: &[u8] = br#""last_updated":""#;

/// The newest `last_updated` of the launch rows in the JSONL file at `path`
/// (`None` for a missing or empty file, or one whose rows carry none).
///
/// Each line is scanned for its last `"last_updated":"` rather than parsed:
/// inside a JSON string a quote is always escaped, so the pattern only
/// matches a real field, and `last_updated` is the last field a `Launch`
/// writes. Timestamps compare as text: the API writes them all as
/// `YYYY-MM-DDTHH:MM:SSZ`, where text order is time order.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.jsonl");
/// std::fs::write(&path, concat!(
///     r#"{"Launches":{"id":"a","name":"x","last_updated":"2026-11-02T08:00:00Z"}}"#, "\n",
///     r#"{"Launches":{"id":"b","name":"y","last_updated":"2026-11-01T08:00:00Z"}}"#, "\n",
/// ))?;
/// assert_eq!(etl_sources::cursor::jsonl_cursor(&path)?.as_deref(), Some("2026-11-02T08:00:00Z"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jsonl_cursor(path: &Path) -> Result<Option<String>, EtlError> {
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
    let finder = memmem::FinderRev::new(FIELD);
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    let mut newest: Option<Vec<u8>> = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            break; // a torn last line is not a row
        }
        if let Some(stamp) = stamp(&finder, &line) {
            if newest.as_deref().is_none_or(|n| stamp > n) {
                newest = Some(stamp.to_vec());
            }
        }
    }
    Ok(newest.map(|n| String::from_utf8_lossy(&n).into_owned()))
}

fn stamp<'a>(finder: &memmem::FinderRev<'_>, line: &'a [u8]) -> Option<&'a [u8]> {
    let start = finder.rfind(line)? + FIELD.len();
    let len = memchr::memchr(b'"', &line[start..])?;
    Some(&line[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_wins_and_odd_lines_are_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.jsonl");
        assert_eq!(jsonl_cursor(&path).unwrap(), None, "missing file");
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
            jsonl_cursor(&path).unwrap().as_deref(),
            Some("2026-03-01T00:00:00Z")
        );
    }
}
