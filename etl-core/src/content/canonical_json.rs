//! [`CanonicalJson`]: the one canonical JSON form of the workspace (content
//! keys hash it, JSONL lines and table rows store it, rejects keep it),
//! written straight from serde_json's parser: the
//! text `serde_json::to_string` gives for the `serde_json::Value` the
//! input parses into (compact, every object's keys in sorted order, the
//! last of repeated keys kept), without building that `Value`.
//!
//! Building the `Value` (a `String` and a tree node for every key and
//! every value) was most of the CPU a record cost. Here a record is one
//! output buffer: every value is written as it is parsed, and an object's
//! members are written in the order sent, then copied once in key order.
//! Scalars are written by serde_json itself (numbers and strings exactly
//! as a `Value` writes them), so the two texts are equal byte for byte: a
//! property test holds it to that.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON value in canonical form (compact, every object's keys sorted, the
/// last of repeated keys kept: the text `serde_json::to_string` gives for
/// the `serde_json::Value` it parses into), with where the members of a
/// top-level object stand in it, so that a record's id or update time is
/// found without a second parse.
///
/// ```
/// use etl_core::content::CanonicalJson;
///
/// let mut c = CanonicalJson::of(r#"{ "b": [1, 2.50], "a": {"y": null, "x": "é"} }"#)?;
/// assert_eq!(c.as_str(), r#"{"a":{"x":"é","y":null},"b":[1,2.5]}"#);
/// assert_eq!(c.member("b"), Some("[1,2.5]"));
/// c.insert("_parent", r#"{"n":1}"#)?;
/// assert_eq!(c.as_str(), r#"{"_parent":{"n":1},"a":{"x":"é","y":null},"b":[1,2.5]}"#);
/// assert!(CanonicalJson::of("{").is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct CanonicalJson<'a> {
    text: String,
    /// A top-level object's members, by key (sorted, each key once), with
    /// the range of each value in `text`; empty for any other value.
    members: Vec<(Cow<'a, str>, Range<usize>)>,
}

impl<'a> CanonicalJson<'a> {
    /// `text`'s canonical form; an error when `text` is not one JSON value.
    pub fn of(text: &'a str) -> Result<Self, serde_json::Error> {
        let mut out = Vec::with_capacity(text.len());
        let mut members = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        Canon {
            out: &mut out,
            top: Some(&mut members),
        }
        .deserialize(&mut de)?;
        de.end()?;
        // Only serde_json's own output and slices of `text` went in, so
        // this never fails; an error rather than a panic all the same.
        let text = String::from_utf8(out).map_err(serde::de::Error::custom)?;
        Ok(CanonicalJson { text, members })
    }

    /// Sets the top-level member `key` to `value` (canonical JSON text),
    /// in its sorted place: the text `Value::insert` then `to_string` would
    /// give, written into the text already made rather than parsed again.
    /// Only for an object.
    pub fn insert(&mut self, key: &'a str, value: &str) -> Result<(), serde_json::Error> {
        let written_key = serde_json::to_string(key)?;
        let member = format!("{written_key}:{value}");
        let at = self.members.binary_search_by(|(k, _)| k.as_ref().cmp(key));
        // Where a member's text starts: its key, before its value's range.
        let start = |i: usize| -> usize {
            let (k, range) = &self.members[i];
            range.start - 1 - serde_json::to_string(k.as_ref()).map_or(0, |t| t.len())
        };
        let (range, replace_with, shift_from) = match at {
            // A member of that key already: its text is replaced.
            Ok(i) => (start(i)..self.members[i].1.end, member.clone(), i + 1),
            Err(i) if self.members.is_empty() => (1..1, member.clone(), i),
            Err(i) if i < self.members.len() => (start(i)..start(i), format!("{member},"), i),
            Err(i) => {
                let end = self.members[i - 1].1.end;
                (end..end, format!(",{member}"), i)
            }
        };
        let old_len = range.end - range.start;
        let value_start = range.start + replace_with.len()
            - value.len()
            - usize::from(replace_with.ends_with(','));
        self.text.replace_range(range, &replace_with);
        let grown = replace_with.len() as isize - old_len as isize;
        for (_, r) in &mut self.members[shift_from..] {
            r.start = r.start.wrapping_add_signed(grown);
            r.end = r.end.wrapping_add_signed(grown);
        }
        let entry = (Cow::Borrowed(key), value_start..value_start + value.len());
        match at {
            Ok(i) => self.members[i] = entry,
            Err(i) => self.members.insert(i, entry),
        }
        Ok(())
    }

    /// Whether the value is an object.
    pub fn is_object(&self) -> bool {
        self.text.starts_with('{')
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The canonical text, taken out.
    pub fn into_string(self) -> String {
        self.text
    }

    /// The canonical text of the top-level member `key` of an object
    /// (`None` for another value, or a key it lacks).
    pub fn member(&self, key: &str) -> Option<&str> {
        let at = self
            .members
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()?;
        Some(&self.text[self.members[at].1.clone()])
    }
}

/// `text`'s canonical form; an error when `text` is not one JSON value.
#[cfg(test)]
fn canonical(text: &str) -> Result<String, serde_json::Error> {
    CanonicalJson::of(text).map(CanonicalJson::into_string)
}

/// An object key as the parser hands it over: borrowed from the text unless
/// it has escapes (serde's own `Cow<str>` always copies). Of a key sent
/// twice, a map keeps the last, as `serde_json::Value` does.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct JsonKey<'a>(pub Cow<'a, str>);

impl std::borrow::Borrow<str> for JsonKey<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for JsonKey<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor<'a>(std::marker::PhantomData<&'a ()>);

        impl<'de: 'a, 'a> Visitor<'de> for KeyVisitor<'a> {
            type Value = JsonKey<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<JsonKey<'a>, E> {
                Ok(JsonKey(Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<JsonKey<'a>, E> {
                Ok(JsonKey(Cow::Owned(v.to_owned())))
            }
        }

        deserializer.deserialize_str(KeyVisitor(std::marker::PhantomData))
    }
}

/// Writes the value it is handed to `out`, canonical; an object's members
/// go to `top` too when it is the top level.
struct Canon<'o, 'k> {
    out: &'o mut Vec<u8>,
    top: Option<&'o mut Vec<(Cow<'k, str>, Range<usize>)>>,
}

impl<'k> Canon<'_, 'k> {
    /// The seed of a value inside this one.
    fn nested(&mut self) -> Canon<'_, 'k> {
        Canon {
            out: self.out,
            top: None,
        }
    }
}

impl<'de: 'k, 'k> DeserializeSeed<'de> for Canon<'_, 'k> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Canon<'_, '_> {
    /// A scalar, written as serde_json writes it in a `Value`.
    fn scalar<T: serde::Serialize + ?Sized, E: serde::de::Error>(self, v: &T) -> Result<(), E> {
        serde_json::to_writer(&mut *self.out, v).map_err(E::custom)
    }
}

impl<'de: 'k, 'k> Visitor<'de> for Canon<'_, 'k> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(&v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(&v)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        // As `Value` holds it: a number when finite (always, from JSON text).
        match serde_json::Number::from_f64(v) {
            Some(n) => self.scalar(&n),
            None => self.visit_unit(),
        }
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_seq<S: SeqAccess<'de>>(mut self, mut seq: S) -> Result<(), S::Error> {
        self.out.push(b'[');
        let mut first = true;
        loop {
            let at = self.out.len();
            if !first {
                self.out.push(b',');
            }
            if seq.next_element_seed(self.nested())?.is_none() {
                // No element after all: take the comma back.
                self.out.truncate(at);
                break;
            }
            first = false;
        }
        self.out.push(b']');
        Ok(())
    }

    fn visit_map<M: MapAccess<'de>>(mut self, mut map: M) -> Result<(), M::Error> {
        // Each value is written after what is already in `out`, in the
        // order sent; then the object is assembled once, in key order, and
        // moved down to where it starts.
        let start = self.out.len();
        let mut members: Vec<(JsonKey<'de>, Range<usize>)> = Vec::new();
        while let Some(key) = map.next_key::<JsonKey<'de>>()? {
            let at = self.out.len();
            map.next_value_seed(self.nested())?;
            members.push((key, at..self.out.len()));
        }
        // Stable: of repeated keys the last sent stays last, and is kept
        // (a `Value`'s map keeps the last insert).
        members.sort_by(|a, b| a.0 .0.cmp(&b.0 .0));
        let assembled = self.out.len();
        // Where the assembled text will start once moved down.
        let shift = assembled - start;
        self.out.push(b'{');
        let mut members = members.into_iter().peekable();
        while let Some((JsonKey(key), value)) = members.next() {
            if members.peek().is_some_and(|next| next.0 .0 == key) {
                continue;
            }
            if self.out.len() > assembled + 1 {
                self.out.push(b',');
            }
            serde_json::to_writer(&mut *self.out, key.as_ref())
                .map_err(serde::de::Error::custom)?;
            self.out.push(b':');
            let at = self.out.len();
            self.out.extend_from_within(value);
            if let Some(top) = self.top.as_deref_mut() {
                top.push((key, at - shift..self.out.len() - shift));
            }
        }
        self.out.push(b'}');
        self.out.copy_within(assembled.., start);
        self.out.truncate(start + (self.out.len() - assembled));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What the canonical form is defined as: `Value`'s compact text.
    fn by_value(text: &str) -> String {
        serde_json::to_string(&serde_json::from_str::<Value>(text).unwrap()).unwrap()
    }

    #[test]
    fn matches_value_on_the_hard_cases() {
        for text in [
            r#"{"b":1,"a":{"d":[1,{"z":0,"y":null}],"c":"x"}}"#,
            r#" { "a" : 1 , "a" : 2 , "A" : [ ] , "" : { } } "#,
            r#"{"k\u00e9y":"\u00e9\/\n\t\"\\\u0001","kéy2":"é","\ud83d\ude00":1}"#,
            r#"[1e2,-0,-0.0,0.1,1E-7,12345678901234567890,-9223372036854775808,1.7976931348623157e308]"#,
            r#"[true,false,null,"",[],{},[[]],[{}]]"#,
            r#"{"z":{"b":2,"a":1,"b":3},"y":[{"q":1,"p":2},{"p":3}]}"#,
            "\"lone string\"",
            "42",
        ] {
            assert_eq!(canonical(text).unwrap(), by_value(text), "{text}");
        }
    }

    #[test]
    fn the_top_members_are_found_in_the_text() {
        let c = CanonicalJson::of(r#"{"id":1,"a/b":{"~":[10]},"id":"last","t":null}"#).unwrap();
        assert_eq!(
            c.member("id"),
            Some(r#""last""#),
            "the last of a repeated key"
        );
        assert_eq!(c.member("a/b"), Some(r#"{"~":[10]}"#));
        assert_eq!(c.member("t"), Some("null"));
        assert_eq!(c.member("missing"), None);
        let array = CanonicalJson::of(r#"[{"id":1}]"#).unwrap();
        assert!(!array.is_object());
        assert_eq!(array.member("0"), None, "no top member");
    }

    #[test]
    fn not_json_is_an_error() {
        for text in ["", "{", r#"{"a":}"#, "[1,]", "{} {}", r#"{"a":1,}"#, "nul"] {
            assert!(canonical(text).is_err(), "{text:?}");
        }
    }

    /// Any JSON value, with keys that need escapes and numbers of every
    /// kind.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-zé\"\\\\/\u{1}\n ]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-dé\"\\\\]{0,3}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    /// `value` as a server might send it: members in reverse order, and
    /// whitespace everywhere it may go.
    fn sent(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let members: Vec<String> = map
                    .iter()
                    .rev()
                    .map(|(k, v)| format!(" {} : {} ", Value::from(k.as_str()), sent(v)))
                    .collect();
                format!("{{ {} }}", members.join(" , "))
            }
            Value::Array(items) => {
                let items: Vec<String> = items.iter().map(sent).collect();
                format!("[ {} ]", items.join(" , "))
            }
            scalar => scalar.to_string(),
        }
    }

    proptest! {
        #[test]
        fn equals_the_value_text_whatever_the_order_and_spacing(value in json()) {
            let text = sent(&value);
            prop_assert_eq!(canonical(&text).unwrap(), serde_json::to_string(&value).unwrap());
        }

        #[test]
        fn of_its_own_output_is_the_same(value in json()) {
            let once = canonical(&value.to_string()).unwrap();
            prop_assert_eq!(canonical(&once).unwrap(), once.clone());
        }
    }
}

#[cfg(test)]
mod insert_tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_member_goes_in_its_sorted_place_as_value_insert_puts_it() {
        let parent = r#"{"number":7}"#;
        for text in [
            r#"{"id": 1, "Z": 0, "a": {"y": 1, "x": 2}, "_z": 3}"#,
            r#"{"b": 1}"#,
            r#"{"A": 1}"#,
            "{}",
            r#"{"_parent": {"old": 1}, "id": 2}"#,
            r#"{"a\"b": 1, "_a": [1, 2]}"#,
        ] {
            let mut c = CanonicalJson::of(text).unwrap();
            c.insert("_parent", parent).unwrap();
            let mut expected: Value = serde_json::from_str(text).unwrap();
            expected["_parent"] = serde_json::from_str(parent).unwrap();
            assert_eq!(c.as_str(), expected.to_string(), "{text}");
            // The members still point at their values.
            for (key, value) in expected.as_object().unwrap() {
                let found: Value = serde_json::from_str(c.member(key).unwrap()).unwrap();
                assert_eq!(&found, value, "{text}: {key}");
            }
        }
    }
}
