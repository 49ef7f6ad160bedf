//! The cursor of an incremental run: the newest `updated_at` among the rows
//! an output already holds. The data written is the checkpoint, so a run
//! killed half-way resumes from what it wrote, with no state file.

use etl_core::EtlError;
use memchr::memmem;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::SystemTime;

/// The newest of the update times `updated_at` finds in the lines of the
/// JSONL file at `path` (`None` for a missing or empty file, or one whose
/// rows carry none). `updated_at` is the source's
/// [`crate::Source::stored_updated_at`].
///
/// Times compare as instants where they read as RFC 3339 UTC timestamps
/// (`2026-11-02T08:00:00Z`, `...08:00:00.5Z`), else as text, after every
/// time that reads. A torn last line (a crash mid-write) is not a row.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("launches.jsonl");
/// use etl_sources::cursor::{jsonl_cursor, launch_updated_at};
///
/// std::fs::write(&path, concat!(
///     r#"{"Launches":{"id":"a","name":"x","last_updated":"2026-11-02T08:00:00Z"}}"#, "\n",
///     r#"{"Launches":{"id":"b","name":"y","last_updated":"2026-11-01T08:00:00Z"}}"#, "\n",
/// ))?;
/// assert_eq!(jsonl_cursor(&path, launch_updated_at)?.as_deref(), Some("2026-11-02T08:00:00Z"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jsonl_cursor(
    path: &Path,
    updated_at: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, EtlError> {
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
    let mut line = String::new();
    let mut newest: Option<(Option<SystemTime>, String)> = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            break;
        }
        if !line.ends_with('\n') {
            break;
        }
        if let Some(stamp) = updated_at(line.trim_end()) {
            let key = (humantime::parse_rfc3339(&stamp).ok(), stamp);
            if newest.as_ref().is_none_or(|n| key > *n) {
                newest = Some(key);
            }
        }
    }
    Ok(newest.map(|(_, text)| text))
}

/// The field as `serde_json` writes a `Launch`'s `last_updated`.
const LAST_UPDATED: &[u8] = br#""last_updated":""#;

/// The `last_updated` of a launch row as a `JsonlSink` stores it: the
/// line's last `"last_updated":"` rather than a parse of the whole launch.
/// Inside a JSON string a quote is always escaped, so the pattern only
/// matches a real field, and `last_updated` is the last field a
/// [`etl_core::Launch`] writes (a launch's nested objects have none of
/// their own after it).
pub fn launch_updated_at(line: &str) -> Option<String> {
    let line = line.as_bytes();
    let start = memmem::rfind(line, LAST_UPDATED)? + LAST_UPDATED.len();
    let len = memchr::memchr(b'"', &line[start..])?;
    Some(String::from_utf8_lossy(&line[start..start + len]).into_owned())
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
    }
}
