//! Step 2 of 3: the parsed pairs into a final [`Policy`], every error of the
//! attribute collected and reported together, each on its own tokens.

use proc_macro2::Span;
use std::time::Duration;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path};

use crate::errors::Errors;
use crate::parse::Arg;

/// `RetryPolicy::default()` of etl-core, known here at compile time so that
/// `base` above `max` can be judged with defaults filled in. A test in the
/// workspace's `tests/` crate keeps the two equal.
const DEFAULT_MAX_ATTEMPTS: u32 = 4;
const DEFAULT_BASE: Duration = Duration::from_millis(200);
const DEFAULT_MAX: Duration = Duration::from_secs(10);

const KEYS: [&str; 4] = ["max_attempts", "base", "max", "crate"];

/// The policy `#[retry]` expands to, all values final.
pub struct Policy {
    pub max_attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// Where the expansion finds etl-core (`crate = "..."`, default `::etl_core`).
    pub krate: Path,
}

/// The keys as given, before defaults: `(value, span of the value)`.
#[derive(Default)]
struct Given {
    max_attempts: Option<u32>,
    base: Option<(Duration, Span)>,
    max: Option<(Duration, Span)>,
    krate: Option<Path>,
}

pub fn policy(args: Vec<Arg>, errors: &mut Errors) -> Option<Policy> {
    let mut given = Given::default();
    let mut seen: Vec<Ident> = Vec::new();
    for Arg { key, value } in args {
        let name = key.to_string();
        if !KEYS.contains(&name.as_str()) {
            errors.push(syn::Error::new(key.span(), unknown_key(&name)));
            continue;
        }
        if let Some(first) = seen.iter().find(|k| **k == key) {
            let mut e =
                syn::Error::new(key.span(), format!("duplicate key `{name}`: give it once"));
            e.combine(syn::Error::new(
                first.span(),
                format!("`{name}` first given here"),
            ));
            errors.push(e);
            continue;
        }
        seen.push(key.clone());
        let Some(value) = value else {
            errors.push(syn::Error::new(
                key.span(),
                format!("`{name}` needs a value: {}", example(&name)),
            ));
            continue;
        };
        let outcome = match name.as_str() {
            "max_attempts" => max_attempts(&value).map(|n| given.max_attempts = Some(n)),
            "base" => duration(&name, &value).map(|d| given.base = Some((d, value.span()))),
            "max" => duration(&name, &value).map(|d| given.max = Some((d, value.span()))),
            _ => crate_path(&value).map(|p| given.krate = Some(p)),
        };
        if let Err(e) = outcome {
            errors.push(e);
        }
    }

    let base = given.base.map_or(DEFAULT_BASE, |(d, _)| d);
    let max = given.max.map_or(DEFAULT_MAX, |(d, _)| d);
    if base > max {
        let span = given
            .base
            .map(|(_, s)| s)
            .or(given.max.map(|(_, s)| s))
            .unwrap_or_else(Span::call_site);
        errors.push(syn::Error::new(
            span,
            format!(
                "`base` ({}) is above `max` ({}): the first wait would already exceed the cap{}",
                humantime::format_duration(base),
                humantime::format_duration(max),
                if given.max.is_none() {
                    " (`max` defaults to 10s)"
                } else {
                    ""
                },
            ),
        ));
    }
    if errors.is_empty() {
        Some(Policy {
            max_attempts: given.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            base,
            max,
            krate: given.krate.unwrap_or_else(|| syn::parse_quote!(::etl_core)),
        })
    } else {
        None
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "max_attempts" => "`max_attempts = 4`",
        "base" => "`base = \"200ms\"`",
        "max" => "`max = \"10s\"`",
        _ => "`crate = \"my_crate::etl_core\"`",
    }
}

fn unknown_key(name: &str) -> String {
    let closest = KEYS
        .iter()
        .map(|k| (strsim::jaro_winkler(name, k), *k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((_, k)) => format!("unknown key `{name}`: did you mean `{k}`?"),
        None => format!("unknown key `{name}`: expected `max_attempts`, `base`, `max` or `crate`"),
    }
}

fn literal(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(group) => literal(&group.expr),
        _ => None,
    }
}

fn max_attempts(value: &Expr) -> syn::Result<u32> {
    let Some(Lit::Int(int)) = literal(value) else {
        return Err(syn::Error::new_spanned(
            value,
            "`max_attempts` takes an integer literal (attempts in all, the first included), e.g. `max_attempts = 4`",
        ));
    };
    if !int.suffix().is_empty() && int.suffix() != "u32" {
        return Err(syn::Error::new(
            int.span(),
            "`max_attempts` is a u32: drop the suffix",
        ));
    }
    match int.base10_parse::<u32>() {
        Ok(0) => Err(syn::Error::new(
            int.span(),
            "`max_attempts` must be at least 1: it counts the first attempt too",
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(syn::Error::new(
            int.span(),
            "`max_attempts` must fit a u32 (at most 4294967295)",
        )),
    }
}

fn string<'a>(key: &str, value: &'a Expr) -> syn::Result<&'a LitStr> {
    match literal(value) {
        Some(Lit::Str(s)) => Ok(s),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{key}` takes a string literal: {}", example(key)),
        )),
    }
}

/// A duration in the usual human form (`"250us"`, `"200ms"`, `"1.5s"`,
/// `"2m"`, `"1h 30m"`), parsed now so the expansion holds a constant.
fn duration(key: &str, value: &Expr) -> syn::Result<Duration> {
    let lit = string(key, value)?;
    let text = lit.value();
    humantime::parse_duration(&text).map_err(|e| {
        let why = match e {
            humantime::DurationError::UnknownUnit {
                ref unit, value, ..
            } if unit.is_empty() => {
                format!("`{text}` has no unit: write e.g. \"{value}ms\" or \"{value}s\"")
            }
            humantime::DurationError::Empty => "the duration is empty".to_string(),
            other => format!("`{text}` is not a duration ({other})"),
        };
        syn::Error::new(
            lit.span(),
            format!("`{key}`: {why}; durations look like \"250us\", \"200ms\", \"1.5s\", \"2m\""),
        )
    })
}

fn crate_path(value: &Expr) -> syn::Result<Path> {
    let lit = string("crate", value)?;
    lit.parse::<Path>().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`crate`: `{}` is not a path", lit.value()),
        )
    })
}
