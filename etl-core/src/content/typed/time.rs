//! The two string types a column can take: RFC 3339 date-times with an
//! offset (as UTC microseconds) and calendar days, read by chrono.

use chrono::{DateTime, NaiveDate};

/// A record's update time ([`crate::Record::updated_at`]) for a typed
/// table's `_etl_updated_at`, in microseconds, at any offset. A value that
/// is no RFC 3339 timestamp is `None` (stored as null: the row is kept, and
/// plays no part in the cursor), with a warning naming it and the record.
pub fn update_micros<T: crate::Record>(row: &T, key: &str) -> Option<i64> {
    let text = row.updated_at()?;
    let micros = timestamp_micros(&text);
    if micros.is_none() {
        tracing::warn!(
            value = text,
            content_key = key,
            "update time is not an RFC 3339 timestamp: stored as null"
        );
    }
    micros
}

/// `text` as microseconds since the Unix epoch, UTC, when it is an RFC 3339
/// date-time with an offset (`2024-05-01T12:00:00Z`,
/// `2024-05-01T14:00:00.5+02:00`); `None` for any other string. What makes
/// a string a [`super::ColumnType::Timestamp`].
///
/// ```
/// use etl_core::content::typed::timestamp_micros;
///
/// assert_eq!(timestamp_micros("1970-01-01T02:00:01+02:00"), Some(1_000_000));
/// assert_eq!(timestamp_micros("yesterday"), None);
/// ```
pub fn timestamp_micros(text: &str) -> Option<i64> {
    // Every string of a record is tried: most are not date-times, and the
    // shape of `YYYY-MM-DDT` turns them away before chrono is asked.
    let b = text.as_bytes();
    let shaped = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && matches!(b[10], b'T' | b't' | b' ')
        && b[..4].iter().all(u8::is_ascii_digit);
    if !shaped {
        return None;
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// `text` as days since 1970-01-01 when it is a calendar day
/// (`YYYY-MM-DD`).
pub(crate) fn date_days(text: &str) -> Option<i32> {
    if text.len() != 10 {
        return None;
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from(day.signed_duration_since(epoch).num_days()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_read_to_utc() {
        assert_eq!(timestamp_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            timestamp_micros("1970-01-01T02:00:01+02:00"),
            Some(1_000_000)
        );
        assert_eq!(
            timestamp_micros("2024-05-01T12:00:00.000001Z"),
            Some(1_714_564_800_000_001)
        );
        assert_eq!(timestamp_micros("1969-12-31T23:59:59Z"), Some(-1_000_000));
    }

    #[test]
    fn other_strings_are_not_times() {
        for s in [
            "",
            "2024-05-01",
            "2024-05-01T12:00:00",
            "2024-13-01T12:00:00Z",
            "2024-05-01T25:00:00Z",
            "hello world, how are you",
            "2024-05-01T12:00:00Zjunk",
            "२०२४-05-01T12:00:00Z",
        ] {
            assert_eq!(timestamp_micros(s), None, "{s:?}");
        }
    }

    #[test]
    fn days() {
        assert_eq!(date_days("1970-01-02"), Some(1));
        assert_eq!(date_days("1969-12-31"), Some(-1));
        assert_eq!(date_days("2024-02-30"), None);
        assert_eq!(date_days("2024-5-1"), None);
        assert_eq!(date_days("2024-05-01T00:00:00Z"), None);
    }
}
