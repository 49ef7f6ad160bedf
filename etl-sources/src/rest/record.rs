//! [`JsonRecord`]: one record of any JSON API, keyed by its content as
//! canonical JSON.

use etl_core::Record;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::pointer::Pointer;
use super::stamp::{self, UpdatedAt};
use etl_core::content::CanonicalJson;

/// The member a child resource's records carry: the values of its parent
/// record it was fetched with (`{"_parent": {NAME: value, ...}}`), so that
/// children join to their parent.
pub const PARENT_MEMBER: &str = "_parent";

/// One record of a JSON API: a JSON object, with the id and update time
/// its pipeline file points at.
///
/// It is stored as the object itself, in canonical form: compact, keys in
/// sorted order at every level. Two records equal as JSON values have one
/// content key, whatever the order of their keys or the whitespace sent;
/// the same in a JSONL file and in PostgreSQL.
///
/// ```
/// use etl_core::content_key;
/// use etl_sources::rest::{JsonRecord, Pointer};
///
/// let id = Pointer::parse("/id")?;
/// let a = JsonRecord::read(r#"{"id": 7, "name": "x", "tags": {"b": 1, "a": 2}}"#, &id, None)?;
/// let b = JsonRecord::read(r#"{"tags":{"a":2,"b":1},"name":"x","id":7}"#, &id, None)?;
/// assert_eq!(content_key(&a)?, content_key(&b)?);
/// assert_eq!(serde_json::to_string(&a)?, r#"{"id":7,"name":"x","tags":{"a":2,"b":1}}"#);
/// assert_eq!(a.id(), "7");
///
/// // Not an object, or no usable id: what did not read, for a reject.
/// assert!(JsonRecord::read("[1]", &id, None).unwrap_err().contains("not a JSON object"));
/// assert!(JsonRecord::read(r#"{"id": 1.5}"#, &id, None).unwrap_err().contains("/id"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct JsonRecord {
    /// The object in canonical form, made once when it is read: the
    /// content key hashes it and a sink writes it, as it is
    /// ([`Record::json_text`]), with no second parse.
    canonical: Box<str>,
    id: String,
    updated_at: Option<String>,
}

impl PartialEq for JsonRecord {
    fn eq(&self, other: &Self) -> bool {
        self.canonical == other.canonical
    }
}

impl JsonRecord {
    /// Reads one array entry: a JSON object whose `id` pointer finds a
    /// string or an integer, and whose `updated_at` (if any) finds an
    /// RFC 3339 string, a number of Unix seconds (or milliseconds, as its
    /// unit says) or nothing. The error says what did not read.
    pub fn read(entry: &str, id: &Pointer, updated_at: Option<&UpdatedAt>) -> Result<Self, String> {
        Self::read_in(entry, id, updated_at, None)
    }

    /// [`JsonRecord::read`] of a child record: with the member `_parent`
    /// set to `parent` (the parent's values it was fetched with, canonical
    /// JSON text), so that children join to their parent and two parents'
    /// children never share a content key by accident.
    pub(crate) fn read_in(
        entry: &str,
        id: &Pointer,
        updated_at: Option<&UpdatedAt>,
        parent: Option<&str>,
    ) -> Result<Self, String> {
        let mut canonical = CanonicalJson::of(entry).map_err(|e| e.to_string())?;
        if !canonical.is_object() {
            return Err("not a JSON object".into());
        }
        if let Some(parent) = parent {
            canonical
                .insert(PARENT_MEMBER, parent)
                .map_err(|e| e.to_string())?;
        }
        let found = |p: &Pointer| value_at(&canonical, p).map_err(|e| e.to_string());
        let id_text = match found(id)? {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
            Some(other) => {
                return Err(format!(
                    "id {id}: expected a string or an integer, found {}",
                    stamp::kind(&other)
                ))
            }
            None => return Err(format!("id {id}: not found")),
        };
        let updated_at = match updated_at {
            None => None,
            Some(at) => match found(&at.pointer)? {
                None => None,
                Some(value) => at
                    .read(value)
                    .map_err(|e| format!("updated_at {}: {e}", at.pointer))?,
            },
        };
        Ok(JsonRecord {
            canonical: canonical.into_string().into_boxed_str(),
            id: id_text,
            updated_at,
        })
    }

    /// The record's id, as text (an integer id as its digits).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The record itself, as canonical JSON text: compact, keys sorted at
    /// every level.
    pub fn json(&self) -> &str {
        &self.canonical
    }
}

/// The canonical text, as raw JSON. The bundled sinks and content keys
/// take [`Record::json_text`] instead; a serializer of its own checks the
/// text once more (serde_json raw values are checked when made), borrowing
/// it, not copying it.
impl Serialize for JsonRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue =
            serde_json::from_str(&self.canonical).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl Record for JsonRecord {
    /// Every JSON API's records share one kind: a record's key is its
    /// content alone, whichever file names it.
    const KIND: &'static str = "json";

    fn record_id(&self) -> Option<String> {
        Some(self.id.clone())
    }

    fn updated_at(&self) -> Option<String> {
        self.updated_at.clone()
    }

    fn json_text(&self) -> Option<&str> {
        Some(&self.canonical)
    }
}

/// The value at `pointer` in `canonical`, parsed (a record's id or update
/// time); `None` when nothing is there or `pointer` is the whole value. The
/// first step is a lookup among the top-level members found while the
/// canonical text was written, not a second parse.
fn value_at(
    canonical: &CanonicalJson<'_>,
    pointer: &Pointer,
) -> Result<Option<Value>, serde_json::Error> {
    pointer.value_below(|first| canonical.member(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_find_the_top_members_and_below() {
        let p = |t: &str| Pointer::parse(t).unwrap();
        let c = CanonicalJson::of(
            r#"{"id":1,"a/b":{"~":[10,{"x":"deep"}]},"id":"last","t":null,"n":{"id":2}}"#,
        )
        .unwrap();
        for (pointer, want) in [
            ("/id", Some(serde_json::json!("last"))),
            ("/a~1b/~0/1/x", Some(serde_json::json!("deep"))),
            ("/a~1b/~0/0", Some(serde_json::json!(10))),
            ("/t", Some(Value::Null)),
            ("/n/id", Some(serde_json::json!(2))),
            ("/missing", None),
            ("/a~1b/~0/2", None),
            ("/id/0", None),
            ("", None),
        ] {
            assert_eq!(value_at(&c, &p(pointer)).unwrap(), want, "{pointer}");
        }
        let array = CanonicalJson::of(r#"[{"id":1}]"#).unwrap();
        assert!(!array.is_object());
        assert_eq!(value_at(&array, &p("/0")).unwrap(), None, "no top member");
    }

    #[test]
    fn keys_are_sorted_at_every_level() {
        // Content keys must not depend on the order sent. (The canonical
        // module's property test compares with serde_json's `Value`, whose
        // map is sorted unless `preserve_order` is switched on: it would
        // fail then too.)
        let id = Pointer::parse("/id").unwrap();
        let r = JsonRecord::read(
            r#"{"z":1,"id":"a","m":{"y":[{"b":1,"a":2}],"x":0}}"#,
            &id,
            None,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"id":"a","m":{"x":0,"y":[{"a":2,"b":1}]},"z":1}"#
        );
    }

    #[test]
    fn a_child_record_carries_its_parent_in_canonical_form() {
        let id = Pointer::parse("/id").unwrap();
        let entry = r#"{"id": 1, "Z": 0, "a": {"y": 1, "x": 2}, "_z": 3}"#;
        let child = JsonRecord::read_in(entry, &id, None, Some(r#"{"number":7}"#)).unwrap();
        let mut expected: Value = serde_json::from_str(entry).unwrap();
        expected["_parent"] = serde_json::json!({"number": 7});
        assert_eq!(
            child.json(),
            expected.to_string(),
            "as serde_json's Value writes it"
        );
        assert_eq!(child.id(), "1");
    }

    #[test]
    fn ids_and_update_times_read_or_say_why_not() {
        let id = Pointer::parse("/meta/id").unwrap();
        let at = UpdatedAt {
            pointer: Pointer::parse("/t").unwrap(),
            unit: None,
        };
        let ok = JsonRecord::read(
            r#"{"meta":{"id":18446744073709551615},"t":"2026-01-01T00:00:00Z"}"#,
            &id,
            Some(&at),
        )
        .unwrap();
        assert_eq!(
            (ok.id(), ok.updated_at().as_deref()),
            ("18446744073709551615", Some("2026-01-01T00:00:00Z"))
        );
        let no_time = JsonRecord::read(r#"{"meta":{"id":"x"},"t":null}"#, &id, Some(&at)).unwrap();
        assert_eq!(no_time.updated_at(), None);
        // Slack's `updated`: Unix seconds, as UTC text; the record itself
        // keeps the number.
        let slack =
            JsonRecord::read(r#"{"meta":{"id":"U1"},"t":1767225600}"#, &id, Some(&at)).unwrap();
        assert_eq!(slack.updated_at().as_deref(), Some("2026-01-01T00:00:00Z"));
        assert!(slack.json().contains(r#""t":1767225600"#));
        let ms = UpdatedAt {
            unit: Some(stamp::TimeUnit::Millis),
            ..at.clone()
        };
        let r =
            JsonRecord::read(r#"{"meta":{"id":"x"},"t":1767225600000}"#, &id, Some(&ms)).unwrap();
        assert_eq!(r.updated_at().as_deref(), Some("2026-01-01T00:00:00Z"));
        for (entry, says) in [
            (r#"{"meta":{}}"#, "/meta/id: not found"),
            (r#"{"meta":{"id":""}}"#, "an empty string"),
            (r#"{"meta":{"id":true}}"#, "a boolean"),
            (r#"{"meta":{"id":"x"},"t":true}"#, "updated_at /t: expected an RFC 3339 string or a number of Unix seconds, found a boolean"),
            (r#"{"meta":{"id":1.5}}"#, "found a non-integer number"),
            (r#"{"meta":{"id":[1]}}"#, "found an array"),
            ("\"text\"", "not a JSON object"),
            ("null", "not a JSON object"),
        ] {
            let e = JsonRecord::read(entry, &id, Some(&at)).unwrap_err();
            assert!(e.contains(says), "{entry}: {e}");
        }
    }
}
