//! [`Pointer`]: a JSON Pointer (RFC 6901), checked once when it is read
//! (a file's `id`, `primary_key`, a page's `records`), then walked in a
//! record's text one level at a time: only the members on its path are
//! kept, the rest of each level is skipped unparsed.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

use super::JsonKey;

/// A JSON Pointer (RFC 6901): `""` is the whole document, `/data/0/id` a
/// path of reference tokens, with `~1` for `/` and `~0` for `~`.
///
/// ```
/// use etl_core::content::Pointer;
///
/// let p: Pointer = "/meta/next~1cursor".parse()?;
/// assert_eq!(p.tokens(), ["meta", "next/cursor"]);
/// let doc = serde_json::json!({"meta": {"next/cursor": "c2"}});
/// assert_eq!(p.get(&doc), Some(&serde_json::json!("c2")));
/// assert!(Pointer::parse("meta").is_err());
/// assert!(Pointer::parse("/a~2").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pointer {
    text: String,
    tokens: Vec<String>,
}

impl fmt::Debug for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Pointer {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Pointer::parse(text)
    }
}

impl Pointer {
    /// Checks `text` is a JSON Pointer; the error says why not.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return match text.is_empty() {
                true => Ok(Pointer {
                    text: String::new(),
                    tokens: Vec::new(),
                }),
                false => Err(format!(
                    "{text:?} is not a JSON Pointer (RFC 6901): it must be empty or start with `/`"
                )),
            };
        };
        let tokens = rest
            .split('/')
            .map(|token| {
                unescape(token).ok_or_else(|| {
                    format!(
                        "{text:?} is not a JSON Pointer (RFC 6901): `~` must be followed by 0 or 1"
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Pointer {
            text: text.to_owned(),
            tokens,
        })
    }

    /// The pointer as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Its reference tokens, unescaped: the member names (or array
    /// indexes) from the top down. None for the whole document.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The value it points at in `doc`, if any.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        self.tokens.iter().try_fold(doc, |node, token| match node {
            Value::Object(map) => map.get(token),
            Value::Array(items) => items.get(array_index(token)?),
            _ => None,
        })
    }

    /// The text of the value it points at below a document's top level:
    /// `member` gives the text of the top-level member (or entry) its first
    /// token names, from wherever the caller read the top level; each level
    /// below is read only as far as the path. `None` when nothing is
    /// there, or for the whole document; an error only for a level that is
    /// not JSON.
    ///
    /// ```
    /// use etl_core::content::Pointer;
    ///
    /// let p = Pointer::parse("/user/tags/1")?;
    /// let user = r#"{"login": "a", "tags": ["x", {"y": 1}]}"#;
    /// let found = p.raw_below(|first| (first == "user").then_some(user));
    /// assert_eq!(found.map_err(|e| e.to_string())?, Some(r#"{"y": 1}"#));
    /// # Ok::<(), String>(())
    /// ```
    pub fn raw_below<'a>(
        &self,
        member: impl FnOnce(&str) -> Option<&'a str>,
    ) -> Result<Option<&'a str>, serde_json::Error> {
        let Some((first, rest)) = self.tokens.split_first() else {
            return Ok(None);
        };
        match member(first) {
            Some(top) => descend(top, rest),
            None => Ok(None),
        }
    }

    /// [`Pointer::raw_below`], the value found parsed (a record's id, key
    /// or update time: small values).
    pub fn value_below<'a>(
        &self,
        member: impl FnOnce(&str) -> Option<&'a str>,
    ) -> Result<Option<Value>, serde_json::Error> {
        match self.raw_below(member)? {
            Some(raw) => serde_json::from_str(raw).map(Some),
            None => Ok(None),
        }
    }
}

/// A token's member name with `~1` and `~0` read as `/` and `~`; `None`
/// for a `~` followed by anything else.
fn unescape(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '~' => match chars.next()? {
                '0' => '~',
                '1' => '/',
                _ => return None,
            },
            c => c,
        });
    }
    Some(out)
}

/// An array index token: digits without a leading zero (RFC 6901).
///
/// ```
/// use etl_core::content::pointer::array_index;
///
/// assert_eq!(array_index("10"), Some(10));
/// assert_eq!(array_index("01"), None);
/// assert_eq!(array_index("-"), None);
/// ```
pub fn array_index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    ok.then(|| token.parse().ok()).flatten()
}

/// Down from the JSON text `node` by `tokens`, one level read at a time.
fn descend<'a>(mut node: &'a str, tokens: &[String]) -> Result<Option<&'a str>, serde_json::Error> {
    for token in tokens {
        match step(node, token)? {
            Some(next) => node = next,
            None => return Ok(None),
        }
    }
    Ok(Some(node))
}

/// One level down from `node` by `token`: the member of an object (of a
/// name sent twice, the last, as a map keeps it) or the entry of an array;
/// what else the level holds is skipped unparsed.
fn step<'a>(node: &'a str, token: &str) -> Result<Option<&'a str>, serde_json::Error> {
    let mut reader = serde_json::Deserializer::from_str(node);
    let found = match node.trim_start().as_bytes().first() {
        Some(b'{') => last_named(&Members(&[token]).deserialize(&mut reader)?, token),
        Some(b'[') => match array_index(token) {
            Some(at) => Nth(at).deserialize(&mut reader)?.map(RawValue::get),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    reader.end()?;
    Ok(found)
}

/// An object's members named in `.0`, each as its raw JSON text, in the
/// order they came; every other member is skipped unparsed. What a
/// pointer's step into an object reads, and what a merge reads of a
/// record's top level for all its keys at once.
pub(crate) struct Members<'n>(pub(crate) &'n [&'n str]);

/// The members [`Members`] kept, by name.
pub(crate) type Kept<'j> = Vec<(JsonKey<'j>, &'j RawValue)>;

/// The text of member `name` of `kept`: of a name sent twice, the last,
/// as a map keeps it.
pub(crate) fn last_named<'j>(kept: &Kept<'j>, name: &str) -> Option<&'j str> {
    let found = kept.iter().rev().find(|(n, _)| n.0 == name);
    found.map(|&(_, v)| v.get())
}

impl<'de> DeserializeSeed<'de> for Members<'_> {
    type Value = Kept<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Kept<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members<'_> {
    type Value = Kept<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Kept<'de>, M::Error> {
        let mut kept = Vec::new();
        while let Some(name) = map.next_key::<JsonKey<'de>>()? {
            if self.0.contains(&name.0.as_ref()) {
                kept.push((name, map.next_value::<&RawValue>()?));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(kept)
    }
}

/// An array's entry at `.0`, unparsed.
struct Nth(usize);

impl<'de> DeserializeSeed<'de> for Nth {
    type Value = Option<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Nth {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        let mut found = None;
        let mut at = 0;
        loop {
            if at == self.0 {
                match seq.next_element::<&RawValue>()? {
                    Some(entry) => found = Some(entry),
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            at += 1;
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::naming::pointer;

    #[test]
    fn a_pointers_tokens_read_back_what_naming_pointer_wrote() {
        let path = ["a/b", "~", "~1", "plain", ""];
        let text = pointer(&path);
        assert_eq!(Pointer::parse(&text).unwrap().tokens(), path);
        assert_eq!(Pointer::parse(&text).unwrap().as_str(), text);
        assert!(Pointer::parse("").unwrap().tokens().is_empty());
        for bad in ["a/b", "/a~", "/~2", "/a~x", "#/a"] {
            let why = Pointer::parse(bad).unwrap_err();
            assert!(
                why.contains("RFC 6901") && why.contains(bad),
                "{bad}: {why}"
            );
        }
    }

    #[test]
    fn raw_below_walks_objects_and_arrays_and_finds_nothing_off_the_path() {
        let top = r#" {"a": 1, "b": {"c": [10, {"d": "x"}, 12]}, "b": {"c": [0, {"d": "last"}]}} "#;
        let at = |p: &str| {
            Pointer::parse(p)
                .unwrap()
                .raw_below(|first| (first == "doc").then_some(top))
                .unwrap()
        };
        assert_eq!(at("/doc/b/c/1/d"), Some(r#""last""#), "the last of a name");
        assert_eq!(at("/doc/a"), Some("1"));
        for missing in [
            "/doc/b/c/2",
            "/doc/b/c/01",
            "/doc/a/x",
            "/doc/z",
            "/other",
            "",
        ] {
            assert_eq!(at(missing), None, "{missing}");
        }
        let broken = Pointer::parse("/doc/a/b").unwrap();
        assert!(broken.raw_below(|_| Some(r#"{"a": {"b": }"#)).is_err());
        let value = Pointer::parse("/doc/b/c/0").unwrap();
        assert_eq!(
            value.value_below(|_| Some(top)).unwrap(),
            Some(Value::from(0))
        );
    }
}
