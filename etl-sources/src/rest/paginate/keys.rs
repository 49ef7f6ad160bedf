//! [`Keys`]: a `[paginate]` table as written, each key taken by the style
//! that reads it, so that a style declares its keys where it reads them
//! and a key it did not take is named as another style's.

use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

use crate::rest::config::{ConfigError, Locator};
use crate::rest::pointer::Pointer;

/// A `[paginate]` table, each value with where it stands in the file.
pub(crate) type Table = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// The keys of a `[paginate]` table that a style has yet to take.
pub(crate) struct Keys<'a> {
    left: BTreeMap<String, (Range<usize>, Spanned<toml::Value>)>,
    at: &'a Locator<'a>,
    /// The style's name, and where it is written.
    style: (&'a str, Range<usize>),
    /// The keys the style asked for, written or not: a key left over that
    /// is close to one of them is a misspelling of it.
    asked: Vec<&'static str>,
}

impl<'a> Keys<'a> {
    pub fn new(table: &Table, at: &'a Locator<'a>, style: (&'a str, Range<usize>)) -> Self {
        let left = table
            .iter()
            .filter(|(k, _)| k.get_ref() != "style")
            .map(|(k, v)| (k.get_ref().clone(), (k.span(), v.clone())))
            .collect();
        Keys {
            left,
            at,
            style,
            asked: Vec::new(),
        }
    }

    /// An error about `key` at `span`.
    pub fn error(&self, span: Range<usize>, key: &str, what: &str) -> ConfigError {
        self.at.key(span, &format!("paginate.{key}"), what)
    }

    /// The error of a required key the table lacks.
    pub fn required(&self, key: &str) -> ConfigError {
        let (style, span) = &self.style;
        self.error(span.clone(), key, &format!("is required by style {style}"))
    }

    /// The error of a required key the table lacks, where `other` may
    /// stand instead.
    pub fn required_either(&self, key: &str, other: &str) -> ConfigError {
        let (style, span) = &self.style;
        self.error(
            span.clone(),
            key,
            &format!("is required by style {style} (or {other})"),
        )
    }

    /// Takes `key`'s value, if written.
    fn take(&mut self, key: &'static str) -> Option<Spanned<toml::Value>> {
        self.asked.push(key);
        self.left.remove(key).map(|(_, v)| v)
    }

    /// Takes `key` as a string.
    pub fn text(&mut self, key: &'static str) -> Result<Option<Spanned<String>>, ConfigError> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::String(s) => Ok(Some(Spanned::new(v.span(), s.clone()))),
                other => Err(self.error(
                    v.span(),
                    key,
                    &format!("must be a string, not {}", other.type_str()),
                )),
            },
        }
    }

    /// Takes `key` as a string, or `default` when it is not written.
    pub fn text_or(&mut self, key: &'static str, default: &str) -> Result<String, ConfigError> {
        Ok(self
            .text(key)?
            .map_or_else(|| default.to_owned(), Spanned::into_inner))
    }

    /// Takes `key` as a JSON Pointer (RFC 6901).
    pub fn pointer(&mut self, key: &'static str) -> Result<Option<Pointer>, ConfigError> {
        match self.text(key)? {
            None => Ok(None),
            Some(s) => Pointer::parse(s.get_ref())
                .map(Some)
                .map_err(|e| self.error(s.span(), key, &e)),
        }
    }

    /// Takes `key` as a non-negative integer.
    pub fn number(&mut self, key: &'static str) -> Result<Option<Spanned<u64>>, ConfigError> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => match v.get_ref() {
                toml::Value::Integer(n) if *n >= 0 => {
                    Ok(Some(Spanned::new(v.span(), n.unsigned_abs())))
                }
                toml::Value::Integer(n) => Err(self.error(
                    v.span(),
                    key,
                    &format!("must be a non-negative integer, not {n}"),
                )),
                other => Err(self.error(
                    v.span(),
                    key,
                    &format!("must be a non-negative integer, not {}", other.type_str()),
                )),
            },
        }
    }

    /// Fails on the first key no one took: a key of another style, or of
    /// none (with the key the style asked for that it is closest to).
    pub fn finish(self) -> Result<(), ConfigError> {
        match self.left.iter().next() {
            None => Ok(()),
            Some((key, (span, _))) => Err(self.leftover(key, span.clone())),
        }
    }

    /// A key left over that is close to one the style asked for: the error
    /// to give in place of "required" when the style's reading failed.
    pub fn misspelling(&self) -> Option<ConfigError> {
        self.left
            .iter()
            .find(|(key, _)| self.guess(key).is_some())
            .map(|(key, (span, _))| self.leftover(key, span.clone()))
    }

    fn leftover(&self, key: &str, span: Range<usize>) -> ConfigError {
        let mut what = format!("is not a key of style {}", self.style.0);
        if let Some(known) = self.guess(key) {
            what.push_str(&format!("; did you mean `{known}`?"));
        }
        self.at.key(span, &format!("paginate.{key}"), &what)
    }

    /// The key the style asked for that `key` is closest to, if close.
    fn guess(&self, key: &str) -> Option<&'static str> {
        self.asked
            .iter()
            .map(|known| (strsim::jaro_winkler(key, known), *known))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, known)| known)
    }
}
