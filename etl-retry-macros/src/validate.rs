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

const KEYS: [&str; 12] = [
    "max_attempts",
    "base",
    "max",
    "jitter",
    "deadline",
    "max_retry_after",
    "on_retry",
    "budget",
    "when",
    "attempt_timeout",
    "breaker",
    "crate",
];

const JITTERS: [&str; 3] = ["none", "full", "equal"];

/// The policy `#[retry]` expands to, all values final.
pub struct Policy {
    pub max_attempts: u32,
    pub base: Duration,
    pub max: Duration,
    /// The loop's options beyond the policy.
    pub options: Options,
    /// Where the expansion finds etl-core (`crate = "..."`, default `::etl_core`).
    pub krate: Path,
}

/// `Retry`'s options, as given (`None`: not set).
#[derive(Default)]
pub struct Options {
    /// `Jitter`'s variant name, spanned at the string.
    pub jitter: Option<Ident>,
    pub deadline: Option<Duration>,
    pub max_retry_after: Option<Duration>,
    /// A path to a `fn(&RetryEvent)`.
    pub on_retry: Option<Path>,
    /// An expression giving a `&RetryBudget`.
    pub budget: Option<Expr>,
    /// A path to a `fn(&E) -> bool` deciding what is retried.
    pub when: Option<Path>,
    /// The limit of one attempt, and the key's span (for "cannot apply").
    pub attempt_timeout: Option<(Duration, Span)>,
    /// The path of a `static` `CircuitBreaker`.
    pub breaker: Option<Path>,
}

impl Options {
    pub fn any(&self) -> bool {
        self.jitter.is_some()
            || self.deadline.is_some()
            || self.max_retry_after.is_some()
            || self.on_retry.is_some()
            || self.budget.is_some()
            || self.when.is_some()
            || self.attempt_timeout.is_some()
            || self.breaker.is_some()
    }
}

/// The keys as given, before defaults: `(value, span of the value)`.
#[derive(Default)]
struct Given {
    max_attempts: Option<u32>,
    base: Option<(Duration, Span)>,
    max: Option<(Duration, Span)>,
    options: Options,
    krate: Option<Path>,
}

pub fn policy(args: Vec<Arg>, errors: &mut Errors) -> Option<Policy> {
    let mut given = Given::default();
    let mut seen: Vec<Ident> = Vec::new();
    for Arg { key, value } in args {
        let Some(value) = checked_key(&key, value, &mut seen, errors) else {
            continue;
        };
        if let Err(e) = given.take(&key, value) {
            errors.push(e);
        }
    }
    let base = given.base.map_or(DEFAULT_BASE, |(d, _)| d);
    let max = given.max.map_or(DEFAULT_MAX, |(d, _)| d);
    check_base_below_max(&given, base, max, errors);
    if errors.is_empty() {
        Some(Policy {
            max_attempts: given.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            base,
            max,
            options: given.options,
            krate: given.krate.unwrap_or_else(|| syn::parse_quote!(::etl_core)),
        })
    } else {
        None
    }
}

/// `key`'s value, if the key is known, not given before (`seen`, which a
/// known key joins, with or without a value) and has a value; otherwise
/// the error is pushed and `None` returned.
fn checked_key(
    key: &Ident,
    value: Option<Expr>,
    seen: &mut Vec<Ident>,
    errors: &mut Errors,
) -> Option<Expr> {
    let name = key.to_string();
    if !KEYS.contains(&name.as_str()) {
        errors.push(syn::Error::new(key.span(), unknown_key(&name)));
        return None;
    }
    if let Some(first) = seen.iter().find(|k| *k == key) {
        let mut e = syn::Error::new(key.span(), format!("duplicate key `{name}`: give it once"));
        e.combine(syn::Error::new(
            first.span(),
            format!("`{name}` first given here"),
        ));
        errors.push(e);
        return None;
    }
    seen.push(key.clone());
    if value.is_none() {
        errors.push(syn::Error::new(
            key.span(),
            format!("`{name}` needs a value: {}", example(&name)),
        ));
    }
    value
}

impl Given {
    /// Reads `value` as the known key `key`'s.
    fn take(&mut self, key: &Ident, value: Expr) -> syn::Result<()> {
        let name = key.to_string();
        match name.as_str() {
            "max_attempts" => max_attempts(&value).map(|n| self.max_attempts = Some(n)),
            "base" => duration(&name, &value).map(|d| self.base = Some((d, value.span()))),
            "max" => duration(&name, &value).map(|d| self.max = Some((d, value.span()))),
            "jitter" => jitter(&value).map(|j| self.options.jitter = Some(j)),
            "deadline" => duration(&name, &value).map(|d| self.options.deadline = Some(d)),
            "max_retry_after" => {
                duration(&name, &value).map(|d| self.options.max_retry_after = Some(d))
            }
            "on_retry" => fn_path(&name, &value).map(|p| self.options.on_retry = Some(p)),
            "when" => fn_path(&name, &value).map(|p| self.options.when = Some(p)),
            "breaker" => static_path(&value).map(|p| self.options.breaker = Some(p)),
            "attempt_timeout" => duration(&name, &value)
                .map(|d| self.options.attempt_timeout = Some((d, key.span()))),
            "budget" => {
                self.options.budget = Some(value);
                Ok(())
            }
            _ => crate_path(&value).map(|p| self.krate = Some(p)),
        }
    }
}

/// `base` above `max` (after defaults are filled in) is an error on the
/// key given, `base` first.
fn check_base_below_max(given: &Given, base: Duration, max: Duration, errors: &mut Errors) {
    if base <= max {
        return;
    }
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

fn example(key: &str) -> &'static str {
    match key {
        "max_attempts" => "`max_attempts = 4`",
        "base" => "`base = \"200ms\"`",
        "max" => "`max = \"10s\"`",
        "jitter" => "`jitter = \"full\"` (or \"equal\", \"none\")",
        "deadline" => "`deadline = \"30s\"`",
        "max_retry_after" => "`max_retry_after = \"60s\"`",
        "on_retry" => "`on_retry = log_retry` (a fn taking `&RetryEvent`)",
        "budget" => "`budget = &BUDGET` (a `&RetryBudget`)",
        "when" => "`when = is_worth_retrying` (a `fn(&E) -> bool`)",
        "attempt_timeout" => "`attempt_timeout = \"5s\"`",
        "breaker" => "`breaker = UPSTREAM` (a `static CircuitBreaker`)",
        _ => "`crate = \"my_crate::etl_core\"`",
    }
}

/// The candidate most like `name`, if any is close enough to be a typo.
fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|k| (strsim::jaro_winkler(name, k), *k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

fn unknown_key(name: &str) -> String {
    match closest(name, &KEYS) {
        Some(k) => format!("unknown key `{name}`: did you mean `{k}`?"),
        None => format!(
            "unknown key `{name}`: expected one of `max_attempts`, `base`, `max`, `jitter`, `deadline`, \
             `max_retry_after`, `on_retry`, `budget`, `when`, `attempt_timeout`, `breaker`, `crate`"
        ),
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

fn jitter(value: &Expr) -> syn::Result<Ident> {
    let lit = string("jitter", value)?;
    let text = lit.value();
    let variant = match text.as_str() {
        "none" => "None",
        "full" => "Full",
        "equal" => "Equal",
        other => {
            let hint = match closest(other, &JITTERS) {
                Some(k) => format!("did you mean \"{k}\"?"),
                None => "expected \"full\", \"equal\" or \"none\"".to_string(),
            };
            return Err(syn::Error::new(
                lit.span(),
                format!("`jitter`: unknown jitter \"{other}\": {hint}"),
            ));
        }
    };
    Ok(Ident::new(variant, lit.span()))
}

/// The path of a fn (`on_retry`, `when`): a closure or call is not a path.
fn fn_path(key: &str, value: &Expr) -> syn::Result<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() => Ok(path.path.clone()),
        Expr::Group(group) => fn_path(key, &group.expr),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key}` takes the path of a fn, e.g. {}; for a closure, use `etl_core::retry::Retry` directly",
                example(key)
            ),
        )),
    }
}

/// The path of a `static` (`breaker`): a reference or call is not a path.
fn static_path(value: &Expr) -> syn::Result<Path> {
    match value {
        Expr::Path(path) if path.qself.is_none() => Ok(path.path.clone()),
        Expr::Group(group) => static_path(&group.expr),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`breaker` takes the path of a `static CircuitBreaker`, e.g. {}; for a breaker \
                 built at run time, use `etl_core::retry::Retry::breaker` directly",
                example("breaker")
            ),
        )),
    }
}

/// The keys that cannot apply to this kind of fn: each is an error on the
/// key. Every key combines with every other.
pub fn fits(policy: &Policy, plan: &crate::signature::Plan, errors: &mut Errors) {
    if let Some((_, key)) = policy.options.attempt_timeout {
        if matches!(plan.shape, crate::signature::Shape::Blocking { .. }) {
            errors.push(syn::Error::new(
                key,
                "`attempt_timeout` cannot apply to a blocking fn: a running blocking call cannot be cut \
                 short; give the call its own timeout, or make the fn `async`",
            ));
        }
    }
}
