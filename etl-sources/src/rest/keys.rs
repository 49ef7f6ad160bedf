//! [`Keys`]: a table of the pipeline file whose keys depend on one of them
//! (`[paginate] style`, `[auth] type`), each key taken by the type that
//! reads it. A type declares its keys where it reads them; a key it did not
//! take is named as another type's, with the closest one it did ask for.

use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

use super::error::{closest, ConfigError, Locator};
use super::pointer::Pointer;

/// Such a table, each value with where it stands in the file.
pub(crate) type Table = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// Finds the type a table names by its `selector` key (`style`, `type`)
/// among `known`: a missing or unknown one is an error naming the key, the
/// known names and the closest of them.
fn pick<'k, T>(
    table: &Spanned<Table>,
    at: &Locator<'_>,
    section: &str,
    selector: &str,
    known: &'k [(&'static str, T)],
) -> Result<(&'k (&'static str, T), Range<usize>), ConfigError> {
    let key = format!("{section}.{selector}");
    let Some(value) = table
        .get_ref()
        .iter()
        .find(|(k, _)| k.get_ref() == selector)
        .map(|(_, v)| v)
    else {
        return Err(at.key(table.span(), &key, "is required"));
    };
    let Some(name) = value.get_ref().as_str() else {
        return Err(at.key(value.span(), &key, "must be a string"));
    };
    if let Some(found) = known.iter().find(|(n, _)| *n == name) {
        return Ok((found, value.span()));
    }
    let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
    let mut what = format!(
        "{name:?} is not one of {}",
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(guess) = closest(name, &names) {
        what.push_str(&format!("; did you mean `{guess}`?"));
    }
    Err(at.key(value.span(), &key, &what))
}

/// Reads a table whose `selector` key names one of `known` types: finds
/// the type, has `make` take its keys, then fails on any key left over. A
/// misspelt key is reported in place of the "required" error it caused.
/// `word` names the selector in messages (`style`, `auth type`).
pub(crate) fn read<M, T>(
    table: &Spanned<Table>,
    at: &Locator<'_>,
    (section, selector, word): (&'static str, &str, &'static str),
    known: &[(&'static str, M)],
    make: impl FnOnce(&M, &mut Keys<'_>) -> Result<T, ConfigError>,
) -> Result<T, ConfigError> {
    let ((name, of), span) = pick(table, at, section, selector, known)?;
    let mut keys = Keys::new(table.get_ref(), at, section, selector, (word, name, span));
    let made = make(of, &mut keys).map_err(|e| keys.misspelling().unwrap_or(e))?;
    keys.finish()?;
    Ok(made)
}

/// The keys of such a table that its type has yet to take.
pub(crate) struct Keys<'a> {
    left: BTreeMap<String, (Range<usize>, Spanned<toml::Value>)>,
    at: &'a Locator<'a>,
    /// The table's name (`paginate`, `auth`).
    section: &'static str,
    /// What names the type (`style`, `auth type`), its name, and where it
    /// is written.
    kind: (&'static str, &'a str, Range<usize>),
    /// The keys the type asked for, written or not: a key left over that
    /// is close to one of them is a misspelling of it.
    asked: Vec<&'static str>,
}

impl<'a> Keys<'a> {
    /// The keys of `table` but its `selector` key, for the type `kind`.
    pub fn new(
        table: &Table,
        at: &'a Locator<'a>,
        section: &'static str,
        selector: &str,
        kind: (&'static str, &'a str, Range<usize>),
    ) -> Self {
        let left = table
            .iter()
            .filter(|(k, _)| k.get_ref() != selector)
            .map(|(k, v)| (k.get_ref().clone(), (k.span(), v.clone())))
            .collect();
        Keys {
            left,
            at,
            section,
            kind,
            asked: Vec::new(),
        }
    }

    /// The file's text around `span`, for an error about `key`.
    pub fn error(&self, span: Range<usize>, key: &str, what: &str) -> ConfigError {
        self.at.key(span, &format!("{}.{key}", self.section), what)
    }

    /// The error of a required key the table lacks.
    pub fn required(&self, key: &str) -> ConfigError {
        let (kind, name, span) = &self.kind;
        self.error(span.clone(), key, &format!("is required by {kind} {name}"))
    }

    /// The error of a required key the table lacks, where `other` may
    /// stand instead.
    pub fn required_either(&self, key: &str, other: &str) -> ConfigError {
        let (kind, name, span) = &self.kind;
        self.error(
            span.clone(),
            key,
            &format!("is required by {kind} {name} (or {other})"),
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

    /// Takes `key`, a string the type requires.
    pub fn needed(&mut self, key: &'static str) -> Result<Spanned<String>, ConfigError> {
        self.text(key)?.ok_or_else(|| self.required(key))
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

    /// The secret in the environment variable `var` names (written as
    /// `key`), read with `env`: it must be set and not empty.
    pub fn secret_of(
        &self,
        var: &Spanned<String>,
        key: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, ConfigError> {
        env(var.get_ref()).filter(|v| !v.is_empty()).ok_or_else(|| {
            self.error(
                var.span(),
                key,
                &format!("the environment variable {} is not set", var.get_ref()),
            )
        })
    }

    /// Fails on the first key no one took: a key of another type, or of
    /// none (with the key the type asked for that it is closest to).
    pub fn finish(self) -> Result<(), ConfigError> {
        match self.left.iter().next() {
            None => Ok(()),
            Some((key, (span, _))) => Err(self.leftover(key, span.clone())),
        }
    }

    /// A key left over that is close to one the type asked for: the error
    /// to give in place of "required" when the type's reading failed.
    pub fn misspelling(&self) -> Option<ConfigError> {
        self.left
            .iter()
            .find(|(key, _)| closest(key, &self.asked).is_some())
            .map(|(key, (span, _))| self.leftover(key, span.clone()))
    }

    fn leftover(&self, key: &str, span: Range<usize>) -> ConfigError {
        let (kind, name, _) = &self.kind;
        let mut what = format!("is not a key of {kind} {name}");
        if let Some(known) = closest(key, &self.asked) {
            what.push_str(&format!("; did you mean `{known}`?"));
        }
        self.error(span, key, &what)
    }
}
