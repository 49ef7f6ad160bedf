//! Update times as records carry them: RFC 3339 text, or a JSON number of
//! Unix seconds or milliseconds. Every time is kept as RFC 3339 text (the
//! output's `updated_at`, the cursor), and an incremental request sends the
//! cursor back in the records' own form.

use serde_json::{Number, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::pointer::Pointer;

/// Where a record's update time is (`updated_at`), and the form records
/// write it in (`updated_at_unit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdatedAt {
    /// The pointer into a record.
    pub pointer: Pointer,
    /// `Some`: records write their time as a number of this unit, and an
    /// incremental request sends the cursor as such a number. `None`: as
    /// RFC 3339 text, sent back as text (a number still reads, as
    /// seconds).
    pub unit: Option<TimeUnit>,
}

impl UpdatedAt {
    /// The update time found in a record, as RFC 3339 text; `Err` says
    /// what was found and what was expected.
    pub(crate) fn read(&self, value: Value) -> Result<Option<String>, String> {
        read(value, self.unit.unwrap_or_default())
    }

    /// The update time of a stored record (its top level read as `body`),
    /// for the cursor of a scan; `None` when it has none that reads.
    pub(crate) fn of_stored(&self, body: &crate::rest::pointer::Body<'_>) -> Option<String> {
        self.read(body.value_at(&self.pointer).ok()??).ok()?
    }

    /// Learns the records' form from one stored `record` (its JSON text)
    /// where no unit was configured: a number at the pointer says they
    /// write Unix seconds, so the cursor goes back as such a number (an
    /// API that writes numbers refuses RFC 3339 text). A configured unit,
    /// or a record that does not read, changes nothing.
    pub(crate) fn learn(&mut self, record: &str) {
        if self.unit.is_some() {
            return;
        }
        let Ok(body) = super::pointer::Body::parse(record) else {
            return;
        };
        if let Ok(Some(Value::Number(_))) = body.value_at(&self.pointer) {
            self.unit = Some(TimeUnit::Seconds);
        }
    }

    /// `cursor` (RFC 3339) as an incremental request sends it: in the
    /// records' form. `None` if it is not RFC 3339 UTC and must be a
    /// number.
    pub(crate) fn sent(&self, cursor: &str) -> Option<String> {
        match self.unit {
            None => Some(cursor.to_owned()),
            Some(unit) => to_number(cursor, unit),
        }
    }
}

/// The unit of records' numeric update times (`updated_at_unit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeUnit {
    /// Unix seconds (`"s"`, the default): Slack's `updated`, Stripe's
    /// `created`.
    #[default]
    Seconds,
    /// Unix milliseconds (`"ms"`).
    Millis,
}

impl TimeUnit {
    /// `"s"` or `"ms"`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "s" => Some(TimeUnit::Seconds),
            "ms" => Some(TimeUnit::Millis),
            _ => None,
        }
    }

    fn per_second(self) -> f64 {
        match self {
            TimeUnit::Seconds => 1.0,
            TimeUnit::Millis => 1000.0,
        }
    }
}

/// The last second RFC 3339 can write (9999-12-31T23:59:59Z).
const LAST: u64 = 253_402_300_799;

/// A record's update time as RFC 3339 text: a non-empty string as it is
/// (checked by the output that reads it), a number of `unit`s since the
/// Unix epoch made into UTC text. `Err` says what was found and what was
/// expected.
pub(crate) fn read(value: Value, unit: TimeUnit) -> Result<Option<String>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        Value::Number(n) => from_number(&n, unit).map(Some),
        other => Err(format!(
            "expected an RFC 3339 string or a number of Unix {}, found {}",
            unit_name(unit),
            kind(&other)
        )),
    }
}

fn unit_name(unit: TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Seconds => "seconds",
        TimeUnit::Millis => "milliseconds",
    }
}

/// The JSON type of `v`, for an error.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a non-integer number",
        Value::String(s) if s.is_empty() => "an empty string",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `n` `unit`s since the epoch as RFC 3339 UTC text: to the second where it
/// is whole, else to the microsecond.
pub(crate) fn from_number(n: &Number, unit: TimeUnit) -> Result<String, String> {
    let out_of_range = || {
        format!(
            "the Unix time {n} ({}) is not a time RFC 3339 can write (before 1970 or after 9999)",
            unit_name(unit)
        )
    };
    let since = match (n.as_u64(), unit) {
        (Some(secs), TimeUnit::Seconds) => Duration::from_secs(secs),
        (Some(ms), TimeUnit::Millis) => Duration::from_millis(ms),
        _ => {
            let x = n.as_f64().filter(|x| *x >= 0.0).ok_or_else(out_of_range)?;
            Duration::try_from_secs_f64(x / unit.per_second()).map_err(|_| out_of_range())?
        }
    };
    if since.as_secs() > LAST {
        return Err(out_of_range());
    }
    let at = UNIX_EPOCH + since;
    Ok(if since.subsec_nanos() == 0 {
        humantime::format_rfc3339_seconds(at).to_string()
    } else {
        humantime::format_rfc3339_micros(at).to_string()
    })
}

/// An RFC 3339 time as the number of `unit`s since the epoch, as text
/// (whole where it is whole); `None` if `stamp` is not RFC 3339 UTC.
pub(crate) fn to_number(stamp: &str, unit: TimeUnit) -> Option<String> {
    let since = parse(stamp)?.duration_since(UNIX_EPOCH).ok()?;
    Some(match unit {
        TimeUnit::Seconds if since.subsec_nanos() == 0 => since.as_secs().to_string(),
        TimeUnit::Millis if since.subsec_nanos() % 1_000_000 == 0 => since.as_millis().to_string(),
        _ => format!("{}", since.as_secs_f64() * unit.per_second()),
    })
}

/// `stamp` moved `lag` back, as RFC 3339 UTC text; `None` if `stamp` is not
/// RFC 3339 UTC.
pub(crate) fn minus(stamp: &str, lag: Duration) -> Option<String> {
    let at = parse(stamp)?
        .checked_sub(lag)
        .filter(|t| *t >= UNIX_EPOCH)
        .unwrap_or(UNIX_EPOCH);
    let whole = at.duration_since(UNIX_EPOCH).ok()?.subsec_nanos() == 0;
    Some(if whole {
        humantime::format_rfc3339_seconds(at).to_string()
    } else {
        humantime::format_rfc3339_micros(at).to_string()
    })
}

fn parse(stamp: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(stamp).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_read_as_unix_seconds_or_milliseconds() {
        let s = TimeUnit::Seconds;
        let ms = TimeUnit::Millis;
        assert_eq!(
            read(json!(1_767_225_600), s).unwrap().unwrap(),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            read(json!(1_767_225_600.25), s).unwrap().unwrap(),
            "2026-01-01T00:00:00.250000Z"
        );
        assert_eq!(
            read(json!(1_767_225_600_500u64), ms).unwrap().unwrap(),
            "2026-01-01T00:00:00.500000Z"
        );
        assert_eq!(
            read(json!("2026-01-01T00:00:00Z"), s).unwrap().unwrap(),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(read(json!(null), s).unwrap(), None);
        let e = read(json!(true), s).unwrap_err();
        assert!(
            e.contains("found a boolean") && e.contains("Unix seconds"),
            "{e}"
        );
        let e = read(json!(-5), s).unwrap_err();
        assert!(e.contains("-5"), "{e}");
        assert!(read(json!(u64::MAX), s).is_err());
        assert!(read(json!(1e300), s).is_err());
    }

    #[test]
    fn a_cursor_goes_back_in_the_records_form_and_by_the_lag() {
        assert_eq!(
            to_number("2026-01-01T00:00:00Z", TimeUnit::Seconds).unwrap(),
            "1767225600"
        );
        assert_eq!(
            to_number("2026-01-01T00:00:00.5Z", TimeUnit::Millis).unwrap(),
            "1767225600500"
        );
        assert_eq!(
            to_number("2026-01-01T00:00:00.5Z", TimeUnit::Seconds).unwrap(),
            "1767225600.5"
        );
        assert_eq!(to_number("yesterday", TimeUnit::Seconds), None);
        assert_eq!(
            minus("2026-01-01T00:00:00Z", Duration::from_secs(3600)).unwrap(),
            "2025-12-31T23:00:00Z"
        );
        assert_eq!(
            minus("1970-01-01T00:00:10Z", Duration::from_secs(3600)).unwrap(),
            "1970-01-01T00:00:00Z"
        );
    }
}
