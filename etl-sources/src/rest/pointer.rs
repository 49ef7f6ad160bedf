//! [`Pointer`]: a JSON Pointer (RFC 6901), checked when the file is read,
//! looked up in a page's text without building the page as a tree.

use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

/// A JSON Pointer (RFC 6901): `""` is the whole document, `/data/0/id` a
/// path of reference tokens, with `~1` for `/` and `~0` for `~`.
///
/// ```
/// use etl_sources::rest::Pointer;
///
/// let p = Pointer::parse("/meta/next~1cursor")?;
/// let doc = serde_json::json!({"meta": {"next/cursor": "c2"}});
/// assert_eq!(p.get(&doc), Some(&serde_json::json!("c2")));
/// assert!(Pointer::parse("meta").is_err());
/// assert!(Pointer::parse("/a~2").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
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

impl Pointer {
    /// Checks `text` is a JSON Pointer; the error says why not.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "{text:?} is not a JSON Pointer (RFC 6901): it must be empty or start with `/`"
            ));
        };
        let tokens = rest
            .split('/')
            .map(|token| {
                let mut out = String::with_capacity(token.len());
                let mut chars = token.chars();
                while let Some(c) = chars.next() {
                    match (c, c == '~') {
                        (_, false) => out.push(c),
                        (_, true) => match chars.next() {
                            Some('0') => out.push('~'),
                            Some('1') => out.push('/'),
                            _ => {
                                return Err(format!(
                                    "{text:?} is not a JSON Pointer (RFC 6901): `~` must be followed by 0 or 1"
                                ))
                            }
                        },
                    }
                }
                Ok(out)
            })
            .collect::<Result<_, _>>()?;
        Ok(Pointer {
            text: text.to_owned(),
            tokens,
        })
    }

    /// The value it points at in `doc`, if any.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        self.tokens.iter().try_fold(doc, |node, token| match node {
            Value::Object(map) => map.get(token),
            Value::Array(items) => items.get(index(token)?),
            _ => None,
        })
    }

    /// The value it points at in the JSON text `doc`, as text: each level
    /// is read as a map or list of unparsed values, so only the path is
    /// walked. `None` when nothing is there; an error only for a level
    /// that is not JSON.
    pub fn find<'a>(&self, doc: &'a RawValue) -> Result<Option<&'a RawValue>, serde_json::Error> {
        let mut node = doc;
        for token in &self.tokens {
            let text = node.get().trim_start();
            let next = if text.starts_with('{') {
                let map: HashMap<Cow<'a, str>, &'a RawValue> = serde_json::from_str(node.get())?;
                map.get(token.as_str()).copied()
            } else if text.starts_with('[') {
                let items: Vec<&'a RawValue> = serde_json::from_str(node.get())?;
                index(token).and_then(|i| items.get(i).copied())
            } else {
                None
            };
            match next {
                Some(next) => node = next,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }
}

/// An array index token: digits without a leading zero (RFC 6901).
fn index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    ok.then(|| token.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rfc_examples_resolve() {
        // RFC 6901 section 5.
        let doc = json!({"foo": ["bar", "baz"], "": 0, "a/b": 1, "c%d": 2, "e^f": 3,
            "g|h": 4, "i\\j": 5, "k\"l": 6, " ": 7, "m~n": 8});
        let raw = serde_json::to_string(&doc).unwrap();
        let raw: &RawValue = serde_json::from_str(&raw).unwrap();
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
            let found: Value =
                serde_json::from_str(pointer.find(raw).unwrap().unwrap().get()).unwrap();
            assert_eq!(found, want, "{p}");
        }
        for missing in ["/foo/2", "/foo/01", "/foo/-", "/nope", "/foo/0/x"] {
            let pointer = Pointer::parse(missing).unwrap();
            assert_eq!(pointer.get(&doc), None, "{missing}");
            assert!(pointer.find(raw).unwrap().is_none(), "{missing}");
        }
    }

    #[test]
    fn not_pointers_are_refused_with_the_reason() {
        for bad in ["data", "/a~", "/a~x", "#/a"] {
            assert!(
                Pointer::parse(bad).unwrap_err().contains("RFC 6901"),
                "{bad}"
            );
        }
    }
}
