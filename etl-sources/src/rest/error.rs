//! What a pipeline file's checks report: [`ConfigError`], every problem
//! of the file with its line; the [`Locator`] that turns a place in the
//! file into its line; [`Problems`], where the checks gather what they
//! find (as serde's `Ctxt` does), so that one reading reports them all.
//! A leaf: the file's parsers (`config`, `paginate`, `auth`) import it.

use std::fmt;
use std::ops::Range;

/// A pipeline file that cannot run: every problem found, each naming the
/// file, the line (where the TOML parser or a key's position gives one),
/// the key and, for a misspelt key or style, the likeliest intended one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    problems: Vec<String>,
    /// Each problem's line in the file, where it has one: the order they
    /// are reported in.
    lines: Vec<Option<usize>>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.problems.len() > 1 {
            writeln!(f, "{} problems:", self.problems.len())?;
        }
        f.write_str(&self.problems.join("\n"))
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about a pipeline file with this message (a program's own
    /// check of a file, say).
    pub fn new(message: String) -> Self {
        ConfigError {
            problems: vec![message],
            lines: vec![None],
        }
    }

    /// A problem found at `line` of the file.
    fn at_line(line: usize, message: String) -> Self {
        ConfigError {
            problems: vec![message],
            lines: vec![Some(line)],
        }
    }

    /// Each problem found, in the order of the file.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

/// The problems a reading of the file has found so far. Every check runs
/// and hands its result to [`Problems::take`]; the reading fails at its end
/// with all of them.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    found: Vec<(Option<usize>, String)>,
}

impl Problems {
    /// `result`'s value, or `None` with its problems kept.
    pub(crate) fn take<T>(&mut self, result: Result<T, ConfigError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(e) => {
                self.found.extend(e.lines.into_iter().zip(e.problems));
                None
            }
        }
    }

    /// `Err` with every problem found, if any.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.found.is_empty() {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// The problems found as one error: for a check that stopped with a
    /// value missing, whose problem (or its caller's) is among them.
    pub(crate) fn error(&self) -> ConfigError {
        // In the file's order (the checks run key group by key group); a
        // problem with no line last.
        // A top-level key every resource takes is reported once, not once
        // a resource.
        let mut found = self.found.clone();
        found.sort_by_key(|(line, _)| line.unwrap_or(usize::MAX));
        let mut seen = std::collections::HashSet::new();
        found.retain(|(_, message)| seen.insert(message.clone()));
        let (lines, problems) = found.into_iter().unzip();
        ConfigError { problems, lines }
    }
}

/// Turns a byte span of the file into "file, line N" and a key's name.
#[derive(Clone, Copy)]
pub(crate) struct Locator<'a> {
    pub(crate) text: &'a str,
    pub(crate) origin: &'a str,
}

impl Locator<'_> {
    /// The 1-based line of byte `at`, and that line's text.
    pub(crate) fn line(&self, at: usize) -> (usize, &str) {
        // A span is a byte offset: kept inside the text, on a character.
        let mut at = at.min(self.text.len());
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let before = &self.text[..at];
        let number = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        (number, self.text[start..end].trim_end())
    }

    /// An error about `key`, found at `span`.
    pub(crate) fn key(&self, span: Range<usize>, key: &str, what: &str) -> ConfigError {
        self.at(span, &format!("`{key}` {what}"))
    }

    /// `message`, about what stands at `span`: the file, the line, and the
    /// line's text.
    pub(crate) fn at(&self, span: Range<usize>, message: &str) -> ConfigError {
        let (line, text) = self.line(span.start);
        ConfigError::at_line(
            line,
            format!("{}, line {line}: {message}\n  {line} | {text}", self.origin),
        )
    }

    /// The TOML parser's or serde's error, with its line, the key on that
    /// line and, for an unknown key or value, the closest known one.
    pub(crate) fn toml(&self, e: &toml::de::Error) -> ConfigError {
        let mut message = e.message().trim_end().to_owned();
        if let Some(hint) = did_you_mean(&message) {
            message.push_str(&format!("; did you mean `{hint}`?"));
        }
        match e.span() {
            Some(span) => self.at(span, &message),
            None => ConfigError::new(format!("{}: {message}", self.origin)),
        }
    }
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown
/// variant"), the expected name closest to `x`, if one is close.
fn did_you_mean(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (given, expected) = rest.split_once('`')?;
    let expected: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    closest(given, &expected).map(str::to_owned)
}

/// The name among `known` closest to `given`, if one is close.
pub(crate) fn closest<'k>(given: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::jaro_winkler(given, candidate), *candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}
