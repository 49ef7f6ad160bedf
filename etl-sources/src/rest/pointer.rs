//! A page's body read once at its top level ([`Body`]), and looked up
//! with a [`Pointer`] (RFC 6901, etl-core's: one walker for the pointers
//! of a file and of a merge) without building the page as a tree.

use etl_core::content::pointer::array_index;
use etl_core::content::JsonKey;
pub use etl_core::content::Pointer;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// The scalar `pointer` points at in the head of `body`, reading only
/// that head: the members of a top-level object before the first whose
/// value is an array or an object. For a one-token pointer whose member
/// stands there (`"/next"` in `{"count": 9, "next": "...", "results":
/// [...]}`); `None` otherwise, or where the head is not JSON. Of a member
/// sent twice, this is the first.
pub(crate) fn in_head(pointer: &Pointer, body: &[u8]) -> Option<Value> {
    let [name] = pointer.tokens() else {
        return None;
    };
    let mut found = None;
    let mut reader = serde_json::Deserializer::from_slice(body);
    // The read stops at the member, or at the head's end, with an
    // error that says nothing about the body: `found` tells.
    let _ = (&mut reader).deserialize_map(HeadVisitor {
        name,
        found: &mut found,
    });
    found
}

/// Reads a top-level object's members in order until `name` (kept in
/// `found`), stopping at the first array or object.
struct HeadVisitor<'n> {
    name: &'n str,
    found: &'n mut Option<Value>,
}

impl<'de> Visitor<'de> for HeadVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while let Some(key) = map.next_key::<JsonKey<'de>>()? {
            let Scalar(value) = map.next_value()?;
            if key.0 == self.name {
                *self.found = Some(value);
                return Ok(());
            }
        }
        Ok(())
    }
}

/// A JSON scalar; an array or an object is an error, met at its first
/// byte (so nothing of it is read).
struct Scalar(Value);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;

        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number, a boolean or null")
            }

            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(Value::String(v.to_owned())))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar(Value::Null))
            }
        }

        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// A page's body with its top level read, once: the whole text checked to
/// be JSON, the members of a top-level object (or the entries of a
/// top-level array) kept as unparsed text for the pointers that follow.
pub(crate) struct Body<'a> {
    top: Top<'a>,
}

enum Top<'a> {
    Object(HashMap<JsonKey<'a>, &'a RawValue>),
    Array(Vec<&'a RawValue>),
    Scalar,
}

/// What a pointer found: the whole body, or a value in it.
pub(crate) enum Node<'a> {
    Top,
    Raw(&'a str),
}

impl<'a> Body<'a> {
    /// Reads `text`'s top level; an error when `text` is not JSON.
    pub fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        let top = serde_json::from_str(text)?;
        Ok(Body { top })
    }

    /// What `pointer` finds in the body: the whole body, or the text of a
    /// value in it; below the top level (read once), each level is read
    /// only as far as the path. `None` when nothing is there; an error
    /// only for a level that is not JSON.
    pub(crate) fn find(&self, pointer: &Pointer) -> Result<Option<Node<'a>>, serde_json::Error> {
        if pointer.tokens().is_empty() {
            return Ok(Some(Node::Top));
        }
        let top = |first: &str| {
            let raw = match &self.top {
                Top::Object(map) => map.get(first).copied(),
                Top::Array(items) => array_index(first).and_then(|i| items.get(i).copied()),
                Top::Scalar => None,
            };
            raw.map(RawValue::get)
        };
        Ok(pointer.raw_below(top)?.map(Node::Raw))
    }

    /// The text of the top-level member `name`, as sent; `None` when the
    /// body is not an object or has no such member.
    pub fn member(&self, name: &str) -> Option<&'a str> {
        match &self.top {
            Top::Object(members) => members.get(name).map(|raw| raw.get()),
            _ => None,
        }
    }

    /// The entries of the array at `pointer`; `None` when there is none.
    pub fn array_at(
        &self,
        pointer: &Pointer,
    ) -> Result<Option<Vec<&'a RawValue>>, serde_json::Error> {
        match self.find(pointer)? {
            Some(Node::Top) => Ok(match &self.top {
                Top::Array(items) => Some(items.clone()),
                _ => None,
            }),
            Some(Node::Raw(raw)) if raw.trim_start().starts_with('[') => {
                serde_json::from_str(raw).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// What the body holds, for an error that found no records in it: the
    /// first few top-level members (sorted), and what its `error`,
    /// `message` or `detail` member says where it has one, as an API that
    /// answers 200 `{"ok": false, "error": "not_authed"}` does.
    pub fn describe(&self) -> String {
        const SHOWN: usize = 8;
        match &self.top {
            Top::Object(members) if members.is_empty() => "the body is an empty object".into(),
            Top::Object(members) => {
                let mut names: Vec<&str> = members.keys().map(|k| k.0.as_ref()).collect();
                names.sort_unstable();
                let more = names.len().saturating_sub(SHOWN);
                let mut text = format!(
                    "the body's members are {}",
                    names
                        .iter()
                        .take(SHOWN)
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if more > 0 {
                    text.push_str(&format!(" and {more} more"));
                }
                let said = ["error", "message", "detail"]
                    .into_iter()
                    .find_map(|name| Some((name, *members.get(name)?)));
                if let Some((name, raw)) = said {
                    let value = match serde_json::from_str::<Value>(raw.get()) {
                        Ok(Value::String(s)) => s,
                        _ => raw.get().to_owned(),
                    };
                    text.push_str(&format!(
                        "; its `{name}` says {:?}",
                        etl_core::http::excerpt(value.as_bytes())
                    ));
                }
                text
            }
            Top::Array(items) => format!("the body is an array of {} entries", items.len()),
            Top::Scalar => "the body is a single value, not an object or array".into(),
        }
    }

    /// The value at `pointer`, parsed (for small values: a next URL, a
    /// cursor, a count); `None` when nothing is there.
    pub fn value_at(&self, pointer: &Pointer) -> Result<Option<Value>, serde_json::Error> {
        match self.find(pointer)? {
            None => Ok(None),
            Some(Node::Raw(raw)) => serde_json::from_str(raw).map(Some),
            // The whole body is never a next URL or a count.
            Some(Node::Top) => Ok(None),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Top<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TopVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for TopVisitor<'a> {
            type Value = Top<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON document")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Top<'a>, M::Error> {
                let mut members = HashMap::new();
                while let Some((k, v)) = map.next_entry::<JsonKey<'a>, &'de RawValue>()? {
                    members.insert(k, v);
                }
                Ok(Top::Object(members))
            }

            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Top<'a>, S::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<&'de RawValue>()? {
                    items.push(item);
                }
                Ok(Top::Array(items))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
            fn visit_str<E>(self, _: &str) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
            fn visit_unit<E>(self) -> Result<Top<'a>, E> {
                Ok(Top::Scalar)
            }
        }

        deserializer.deserialize_any(TopVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_head_reads_a_top_level_scalar_only_before_the_first_array_or_object() {
        let next = Pointer::parse("/next").unwrap();
        let head = |text: &str| in_head(&next, text.as_bytes());
        assert_eq!(
            head(r#"{"count": 9, "next": "u2", "results": [1, 2]}"#),
            Some(Value::from("u2"))
        );
        assert_eq!(head(r#"{"next": null, "results": []}"#), Some(Value::Null));
        assert_eq!(head(r#"{"next": 7}"#), Some(Value::from(7)));
        // An escaped key reads as its text.
        assert_eq!(head(r#"{"ne\u0078t": "u2"}"#), Some(Value::from("u2")));
        // Of a member sent twice, the first.
        assert_eq!(
            head(r#"{"next": "a", "next": "b"}"#),
            Some(Value::from("a"))
        );
        // After an array or object: not in the head.
        assert_eq!(head(r#"{"results": [1], "next": "u2"}"#), None);
        assert_eq!(head(r#"{"meta": {}, "next": "u2"}"#), None);
        assert_eq!(head(r#"{"next": {"href": "u2"}}"#), None);
        // Not an object, not JSON as far as it goes, or cut short.
        assert_eq!(head(r#"[{"next": "u2"}]"#), None);
        assert_eq!(head(r#"{"count": 9, "next": "#), None);
        assert_eq!(head("<html>"), None);
        // Only a one-token pointer.
        assert_eq!(
            in_head(&Pointer::parse("/meta/next").unwrap(), br#"{"meta": 1}"#),
            None
        );
        assert_eq!(in_head(&Pointer::parse("").unwrap(), b"{}"), None);
    }

    use serde_json::json;

    #[test]
    fn the_rfc_examples_resolve() {
        // RFC 6901 section 5.
        let doc = json!({"foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3,
            "g|h": 4, "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8});
        let text = serde_json::to_string(&doc).unwrap();
        let body = Body::parse(&text).unwrap();
        for (p, want) in [
            ("", doc.clone()),
            ("/foo", json!(["bar", "baz"])),
            ("/foo/0", json!("bar")),
            ("/", json!(0)),
            ("/a~1b", json!(1)),
            ("/c%d", json!(2)),
            ("/e^f", json!(3)),
            ("/g|h", json!(4)),
            ("/i\\j", json!(5)),
            ("/k\"l", json!(6)),
            ("/ ", json!(7)),
            ("/m~0n", json!(8)),
        ] {
            let pointer = Pointer::parse(p).unwrap();
            assert_eq!(pointer.get(&doc), Some(&want), "{p}");
            let found = match body.find(&pointer).unwrap().unwrap() {
                Node::Top => doc.clone(),
                Node::Raw(raw) => serde_json::from_str(raw).unwrap(),
            };
            assert_eq!(found, want, "{p}");
        }
        for missing in ["/foo/2", "/foo/01", "/foo/-", "/nope", "/foo/0/x"] {
            let pointer = Pointer::parse(missing).unwrap();
            assert_eq!(pointer.get(&doc), None, "{missing}");
            assert!(body.find(&pointer).unwrap().is_none(), "{missing}");
        }
    }

    #[test]
    fn a_body_gives_its_array_and_values_or_says_it_is_not_json() {
        let whole = Pointer::parse("").unwrap();
        let data = Pointer::parse("/data").unwrap();
        let next = Pointer::parse("/meta/next").unwrap();
        let body = Body::parse(r#"[{"id":1}, 2]"#).unwrap();
        let entries = body.array_at(&whole).unwrap().unwrap();
        assert_eq!(
            entries.iter().map(|e| e.get()).collect::<Vec<_>>(),
            [r#"{"id":1}"#, "2"]
        );
        assert!(body.array_at(&data).unwrap().is_none());
        let body = Body::parse(r#"{"data": {"x": []}, "meta": {"next": "/p2"}}"#).unwrap();
        assert!(
            body.array_at(&data).unwrap().is_none(),
            "an object is not the array"
        );
        assert!(body.array_at(&whole).unwrap().is_none());
        assert_eq!(
            body.value_at(&next).unwrap(),
            Some(serde_json::json!("/p2"))
        );
        assert_eq!(Body::parse("3").unwrap().value_at(&next).unwrap(), None);
        for bad in ["", "<html>", r#"{"data": [1,}"#, r#"{"a": 1} x"#] {
            assert!(Body::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_body_describes_its_members_and_the_apis_own_error() {
        let slack = Body::parse(r#"{"ok": false, "error": "not_authed"}"#).unwrap();
        assert_eq!(
            slack.describe(),
            r#"the body's members are `error`, `ok`; its `error` says "not_authed""#
        );
        let many: String = (0..10).map(|i| format!(r#""m{i}": {i},"#)).collect();
        let wide = format!(r#"{{{many} "detail": {{"code": 7}}}}"#);
        let text = Body::parse(&wide).unwrap().describe();
        assert!(
            text.contains("`detail`, `m0`") && text.ends_with(r#"says "{\"code\": 7}""#),
            "{text}"
        );
        assert!(text.contains("and 3 more"), "{text}");
        assert_eq!(
            Body::parse("[1, 2]").unwrap().describe(),
            "the body is an array of 2 entries"
        );
        assert!(Body::parse("{}")
            .unwrap()
            .describe()
            .contains("empty object"));
    }
}
