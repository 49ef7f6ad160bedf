//! The pipeline file of `etl run`: read with `toml` and serde, then checked
//! whole (pointers, URLs, headers, secrets from the environment) before any
//! request, so a bad file fails at once with the key and the line.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;
use url::Url;

use super::auth::{self, Auth};
use super::keys;
use super::paginate::{self, Paginator};
use super::pointer::Pointer;
use super::stamp::{self, TimeUnit, UpdatedAt};
use crate::throttle::RateLimit;
use std::time::Duration;

/// A pipeline file that cannot run: what is wrong, where.
///
/// Its message names the file, the line (where the TOML parser or a key's
/// position gives one), the key and, for a misspelt key or style, the
/// likeliest intended one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about a pipeline file with this message (a program's own
    /// check of a file, say).
    pub fn new(message: String) -> Self {
        ConfigError(message)
    }
}

/// The file as written (see the "Any JSON API" chapter of the docs): the
/// top level, and each `[[resource]]` entry, which takes the top level's
/// keys as its defaults.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Spanned<String>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    /// A resource's URL, resolved against the top level's `url`.
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    records: Option<Spanned<String>>,
    #[serde(default)]
    id: Option<Spanned<String>>,
    #[serde(default)]
    updated_at: Option<Spanned<String>>,
    #[serde(default)]
    updated_at_unit: Option<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    method: Option<Spanned<String>>,
    #[serde(default)]
    body: Option<Spanned<toml::Table>>,
    #[serde(default)]
    paginate: Option<Spanned<keys::Table>>,
    #[serde(default)]
    incremental: Option<Spanned<IncrementalFile>>,
    #[serde(default)]
    auth: Option<Spanned<keys::Table>>,
    #[serde(default)]
    resource: Vec<Spanned<File>>,
    /// A resource read once for each record of this one.
    #[serde(default)]
    parent: Option<Spanned<String>>,
    /// The parent record's values a child's placeholders take: NAME ->
    /// pointer into the parent record.
    #[serde(default)]
    from_parent: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// `false`: read to feed the children, never written.
    #[serde(default)]
    load: Option<Spanned<bool>>,
    /// The run's one rate limit (top level only).
    #[serde(default)]
    rate_limit: Option<Spanned<toml::Value>>,
    /// Requests in flight for the whole run (top level only).
    #[serde(default)]
    concurrency: Option<Spanned<toml::Value>>,
}

impl File {
    /// A resource's keys: its own, else the top level's (`top`). A table
    /// of its own replaces the top level's whole, but `[params]`,
    /// `[headers]` and `[body]` merge key by key, the resource's winning.
    fn merged(&self, top: &File) -> File {
        let mut params = top.params.clone();
        params.extend(self.params.clone());
        let mut headers = top.headers.clone();
        headers.extend(self.headers.clone());
        let body = match (&top.body, &self.body) {
            (Some(top), Some(own)) => {
                let mut merged = top.get_ref().clone();
                merged.extend(own.get_ref().clone());
                Some(Spanned::new(own.span(), merged))
            }
            (top, own) => own.clone().or_else(|| top.clone()),
        };
        File {
            name: self.name.clone(),
            url: self.url.clone(),
            path: self.path.clone(),
            records: self.records.clone().or_else(|| top.records.clone()),
            id: self.id.clone().or_else(|| top.id.clone()),
            updated_at: self.updated_at.clone().or_else(|| top.updated_at.clone()),
            updated_at_unit: (self.updated_at_unit.clone()).or_else(|| top.updated_at_unit.clone()),
            params,
            headers,
            method: self.method.clone().or_else(|| top.method.clone()),
            body,
            paginate: self.paginate.clone().or_else(|| top.paginate.clone()),
            incremental: self.incremental.clone().or_else(|| top.incremental.clone()),
            auth: self.auth.clone().or_else(|| top.auth.clone()),
            resource: Vec::new(),
            // A resource's own: never a default.
            parent: self.parent.clone(),
            from_parent: self.from_parent.clone(),
            load: self.load.clone(),
            // The run's: never a resource's own.
            rate_limit: top.rate_limit.clone(),
            concurrency: top.concurrency.clone(),
        }
    }
}

/// `[incremental]` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IncrementalFile {
    param: String,
    #[serde(default)]
    params: BTreeMap<String, String>,
    #[serde(default)]
    initial: Option<Spanned<toml::Value>>,
    #[serde(default)]
    lag: Option<Spanned<toml::Value>>,
}

/// `[incremental]`: how a request asks for what changed since the cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Incremental {
    /// The query parameter that carries the cursor.
    pub param: String,
    /// Extra query parameters of incremental requests (a sort order).
    pub params: BTreeMap<String, String>,
    /// The cursor of a read with nothing held (`initial`), as RFC 3339
    /// text: without it such a read asks for everything.
    pub initial: Option<String>,
    /// How far before the cursor a request asks from (`lag`): a safety
    /// window for records an API makes visible late. What is met again is
    /// not written twice.
    pub lag: Option<Duration>,
}

/// A pipeline file, checked: what [`super::RestSource`] runs.
#[derive(Clone, Debug)]
pub struct Resource {
    /// The resource's name: the output's default name and table.
    pub name: String,
    /// The first page.
    pub url: Url,
    /// Where a page's array of records is.
    pub records: Pointer,
    /// Where a record's id is.
    pub id: Pointer,
    /// Where a record's update time is, if it has one, and its form.
    pub updated_at: Option<UpdatedAt>,
    /// Query parameters of every request.
    pub params: BTreeMap<String, String>,
    /// Headers of every request.
    pub headers: BTreeMap<String, String>,
    /// How pages follow one another: the file's `[paginate]` style, or a
    /// paginator of the program's own ([`Resource::with_paginator`]).
    pub paginate: Box<dyn Paginator>,
    /// How a request asks for changes, if it can.
    pub incremental: Option<Incremental>,
    /// The credentials, if any: the file's `[auth]` kind, or one of the
    /// program's own.
    pub auth: Option<Box<dyn Auth>>,
    /// The requests' method (`method`, default GET).
    pub method: Method,
    /// The JSON body of a POST (`[body]`; empty without it).
    pub body: serde_json::Map<String, serde_json::Value>,
    /// Where the paginator's parameters go (`[paginate] param_in`).
    pub param_in: ParamIn,
    /// The resource read once for each of whose records this one is
    /// (`parent`); its records carry `_parent`.
    pub parent: Option<String>,
    /// The parent record's values the `{NAME}` placeholders of `url`,
    /// `[params]`, `[headers]` and `[body]` take (`[from_parent]`).
    pub from_parent: BTreeMap<String, Pointer>,
    /// Whether its records are written (`load`, default `true`); `false`:
    /// read only to feed its children.
    pub load: bool,
    /// The run's rate limit (`rate_limit`, top level only, so the same in
    /// every resource of a file): at most N requests in any window, across
    /// every resource and request of the run, retries included. A run
    /// keeps it by making its sources' [`crate::SourceOptions::throttle`]
    /// with it ([`crate::throttle::Throttle::new`]).
    pub rate_limit: Option<RateLimit>,
    /// Requests in flight (`concurrency`, top level only, default 4, at
    /// least 1): the pages of a chain sent ahead once known (`offset` and
    /// `page_number` with their total), and the chains of a child
    /// resource read at once. Resources run one after another, so it
    /// bounds the whole run.
    pub concurrency: usize,
}

/// Requests in flight when the file does not say.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// The method of every request of a pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Method {
    /// `GET` (the default).
    #[default]
    Get,
    /// `POST`, with the JSON body `[body]` (`Content-Type:
    /// application/json`): a list endpoint that takes its query as JSON.
    Post,
}

/// Where a paginator's parameters (an offset and limit, a page, a cursor)
/// go in a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParamIn {
    /// The URL's query (the default).
    #[default]
    Query,
    /// The top level of the JSON body (`method = "POST"` only).
    Body,
}

impl Resource {
    /// Reads and checks the pipeline file at `path`, with secrets from the
    /// process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: cannot be read: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string(), |name| {
            std::env::var(name).ok()
        })
    }

    /// Parses and checks `text` (named `origin` in errors), reading
    /// secrets with `env`.
    ///
    /// ```
    /// use etl_sources::rest::Resource;
    ///
    /// let file = r#"
    /// name = "items"
    /// url = "http://127.0.0.1:8080/items"
    /// records = "/data"
    /// id = "/id"
    /// [paginate]
    /// style = "next_url"
    /// nxt = "/next"
    /// "#;
    /// let e = Resource::parse(file, "items.toml", |_| None).unwrap_err();
    /// assert!(e.to_string().contains("items.toml, line 8"), "{e}");
    /// assert!(e.to_string().contains("did you mean `next`?"), "{e}");
    /// ```
    pub fn parse(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut all = Self::parse_every(text, origin, env)?;
        if all.len() > 1 {
            return Err(ConfigError(format!(
                "{origin}: holds {} resources, not one: read it with etl_sources::Pipeline",
                all.len()
            )));
        }
        Ok(all.remove(0))
    }

    /// Reads and checks every resource of the pipeline file at `path`.
    #[deprecated(note = "the whole file is `etl_sources::Pipeline::load`")]
    pub fn load_all(path: &Path) -> Result<Vec<Self>, ConfigError> {
        Ok(crate::Pipeline::load(path)?.into_resources())
    }

    /// Parses and checks every resource of `text`, in file order.
    #[deprecated(note = "the whole file is `etl_sources::Pipeline::parse_with`")]
    pub fn parse_all(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Self>, ConfigError> {
        Self::parse_every(text, origin, env)
    }

    /// Parses and checks every resource of `text`, in file order: each
    /// `[[resource]]` entry with the top level's keys as its defaults, or,
    /// with none, the top level as the one resource. A name given twice,
    /// a `path` or `url` that is not on the top level's origin, a key
    /// missing from both: an error naming the resource, the key and the
    /// line.
    pub(crate) fn parse_every(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Self>, ConfigError> {
        let at = Locator { text, origin };
        let file: File = toml::from_str(text).map_err(|e| at.toml(&e))?;
        if let Some(path) = &file.path {
            return Err(at.key(
                path.span(),
                "path",
                "is a key of a [[resource]], resolved against `url`",
            ));
        }
        for own in &file.resource {
            let own = own.get_ref();
            let run_keys = [
                ("rate_limit", own.rate_limit.as_ref().map(Spanned::span)),
                ("concurrency", own.concurrency.as_ref().map(Spanned::span)),
            ];
            if let Some((key, Some(span))) = run_keys.into_iter().find(|(_, s)| s.is_some()) {
                return Err(at.key(
                    span,
                    &format!("resource {}: {key}", own.name.get_ref()),
                    "is a key of the top level: it holds for every request of the run",
                ));
            }
        }
        let own_keys = [
            ("parent", file.parent.as_ref().map(Spanned::span)),
            ("from_parent", file.from_parent.as_ref().map(Spanned::span)),
            ("load", file.load.as_ref().map(Spanned::span)),
        ];
        if let Some((key, Some(span))) = own_keys.into_iter().find(|(_, s)| s.is_some()) {
            return Err(at.key(span, key, "is a key of a [[resource]]"));
        }
        let base = check_url(file.url.as_ref(), &file.name, &at)?;
        if file.resource.is_empty() {
            return Ok(vec![Self::check(&file, base, &at, &env)?]);
        }
        check_name(&file.name, &at)?;
        let mut names = std::collections::HashSet::new();
        let mut all = Vec::with_capacity(file.resource.len());
        for own in &file.resource {
            let own = own.get_ref();
            let shown = own.name.get_ref();
            if let Some(nested) = own.resource.first() {
                return Err(at.key(
                    nested.span(),
                    &format!("resource {shown}: resource"),
                    "cannot stand in a [[resource]]",
                ));
            }
            if !names.insert(shown.clone()) {
                return Err(at.key(
                    own.name.span(),
                    "resource.name",
                    &format!("{shown:?} names two resources"),
                ));
            }
            let url = match (&own.url, &own.path) {
                (Some(u), Some(p)) => {
                    return Err(at.key(
                        p.span(),
                        &format!("resource {shown}: path"),
                        &format!("and `url` ({}) are two places: give one", u.get_ref()),
                    ))
                }
                (Some(u), None) => {
                    let url = check_url(Some(u), &own.name, &at)?;
                    if url.origin() != base.origin() {
                        return Err(at.key(u.span(), &format!("resource {shown}: url"), &format!("is not on the origin of the top level's `url` ({}): a credential never leaves its origin", base.origin().ascii_serialization())));
                    }
                    url
                }
                (None, Some(p)) => base
                    .join(p.get_ref())
                    .ok()
                    .filter(|u| u.origin() == base.origin())
                    .ok_or_else(|| {
                        at.key(
                            p.span(),
                            &format!("resource {shown}: path"),
                            "does not resolve against `url` to a URL on its origin",
                        )
                    })?,
                (None, None) => base.clone(),
            };
            all.push(Self::check(&own.merged(&file), url, &at, &env)?);
        }
        check_family(&file.resource, &all, &at)?;
        Ok(all)
    }

    /// One resource's keys, checked, at `url`.
    fn check(
        file: &File,
        url: Url,
        at: &Locator<'_>,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let at = *at;
        let name = file.name.get_ref();
        check_name(&file.name, &at)?;
        let needed = |s: &Option<Spanned<String>>, key: &str| {
            s.clone().ok_or_else(|| {
                at.key(
                    file.name.span(),
                    key,
                    &format!("is required (by resource {name}, or at the top level)"),
                )
            })
        };
        let records = needed(&file.records, "records")?;
        let id = needed(&file.id, "id")?;
        let mut from_parent = BTreeMap::new();
        if let Some(table) = &file.from_parent {
            if file.parent.is_none() {
                return Err(at.key(
                    table.span(),
                    &format!("resource {name}: from_parent"),
                    "needs `parent`: the resource whose records give the values",
                ));
            }
            for (key, pointer) in table.get_ref() {
                let parsed = Pointer::parse(pointer.get_ref()).map_err(|e| {
                    at.key(
                        pointer.span(),
                        &format!("resource {name}: from_parent.{key}"),
                        &e,
                    )
                })?;
                from_parent.insert(key.clone(), parsed);
            }
        }
        // Every `{NAME}` a request holds must be a value of the parent.
        let mut texts: Vec<&Spanned<String>> = Vec::new();
        texts.extend(file.url.iter());
        texts.extend(file.path.iter());
        texts.extend(file.headers.values());
        let mut loose: Vec<String> = file.params.values().cloned().collect();
        if let Some(body) = &file.body {
            strings_in(&toml::Value::Table(body.get_ref().clone()), &mut loose);
        }
        let at_name = file.name.span();
        let placed = texts
            .iter()
            .map(|t| (t.get_ref().as_str(), t.span()))
            .chain(loose.iter().map(|t| (t.as_str(), at_name.clone())));
        for (text, span) in placed {
            for placeholder in placeholders(text) {
                if !from_parent.contains_key(placeholder) {
                    return Err(at.key(
                        span,
                        &format!("resource {name}: {{{placeholder}}}"),
                        "is a placeholder `[from_parent]` does not define",
                    ));
                }
            }
        }
        let pointer = |s: &Spanned<String>, key: &str| {
            Pointer::parse(s.get_ref()).map_err(|e| at.key(s.span(), key, &e))
        };
        // A record's id or update time is a value inside it: `""` (the
        // whole record) would reject every record, so it is refused here.
        let in_record = |s: &Spanned<String>, key: &str| {
            if s.get_ref().is_empty() {
                return Err(at.key(
                    s.span(),
                    key,
                    "is the whole record (\"\"): point at a value inside it, such as \"/id\"",
                ));
            }
            pointer(s, key)
        };
        let mut headers = BTreeMap::new();
        for (k, v) in &file.headers {
            reqwest::header::HeaderName::from_bytes(k.get_ref().as_bytes())
                .map_err(|_| at.key(k.span(), "headers", "is not a valid header name"))?;
            reqwest::header::HeaderValue::from_str(v.get_ref()).map_err(|_| {
                at.key(
                    v.span(),
                    "headers",
                    "holds a character a header cannot carry",
                )
            })?;
            headers.insert(k.get_ref().clone(), v.get_ref().clone());
        }
        let unit = match &file.updated_at_unit {
            None => None,
            Some(u) => Some(TimeUnit::parse(u.get_ref()).ok_or_else(|| {
                at.key(
                    u.span(),
                    "updated_at_unit",
                    "must be \"s\" (Unix seconds) or \"ms\" (milliseconds)",
                )
            })?),
        };
        // An `initial` given as a number says the records carry numbers:
        // without `updated_at_unit`, Unix seconds, and every cursor is sent
        // back as such a number (never as RFC 3339 text, which such an API
        // refuses).
        let unit = unit.or_else(|| {
            let initial = file.incremental.as_ref()?.get_ref().initial.as_ref()?;
            matches!(initial.get_ref(), toml::Value::Integer(_)).then_some(TimeUnit::Seconds)
        });
        let updated_at = match &file.updated_at {
            Some(p) => Some(UpdatedAt {
                pointer: in_record(p, "updated_at")?,
                unit,
            }),
            None => match &file.updated_at_unit {
                Some(u) => {
                    return Err(at.key(
                        u.span(),
                        "updated_at_unit",
                        "needs `updated_at`, the pointer to the time it is the unit of",
                    ))
                }
                None => None,
            },
        };
        let incremental = file
            .incremental
            .as_ref()
            .map(|i| Incremental::check(i.get_ref(), unit, &at))
            .transpose()?;
        let method = match &file.method {
            None => Method::Get,
            Some(m) => match m.get_ref().as_str() {
                "GET" => Method::Get,
                "POST" => Method::Post,
                _ => return Err(at.key(m.span(), "method", "must be \"GET\" or \"POST\"")),
            },
        };
        let (paginate, param_in) = match &file.paginate {
            None => (Box::new(paginate::Single) as Box<dyn Paginator>, None),
            Some(p) => paginate::from_table(p, &at)?,
        };
        let post_only = |span: std::ops::Range<usize>, key: &str| {
            at.key(
                span,
                key,
                "needs method = \"POST\" (a GET request has no body)",
            )
        };
        let param_in = match param_in {
            None => ParamIn::Query,
            Some(p) => match p.get_ref().as_str() {
                "query" => ParamIn::Query,
                "body" if method == Method::Post => ParamIn::Body,
                "body" => return Err(post_only(p.span(), "paginate.param_in")),
                _ => {
                    return Err(at.key(
                        p.span(),
                        "paginate.param_in",
                        "must be \"query\" or \"body\"",
                    ))
                }
            },
        };
        let body = match &file.body {
            None => serde_json::Map::new(),
            Some(b) if method != Method::Post => return Err(post_only(b.span(), "body")),
            Some(b) => match serde_json::to_value(b.get_ref()) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => {
                    return Err(at.key(
                        b.span(),
                        "body",
                        "must be a table of JSON values (a date or time is not one)",
                    ))
                }
            },
        };
        let auth = match &file.auth {
            None => None,
            Some(a) => Some(auth::from_table(a, &at, env)?),
        };
        let rate_limit = match &file.rate_limit {
            None => None,
            Some(limit) => Some(
                limit
                    .get_ref()
                    .as_str()
                    .ok_or_else(|| "must be a string such as \"10/s\"".to_owned())
                    .and_then(str::parse::<RateLimit>)
                    .map_err(|e| at.key(limit.span(), "rate_limit", &e))?,
            ),
        };
        let concurrency = match &file.concurrency {
            None => DEFAULT_CONCURRENCY,
            Some(n) => n
                .get_ref()
                .as_integer()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    at.key(
                        n.span(),
                        "concurrency",
                        "must be a whole number of at least 1 (requests in flight; 1 = one at a time)",
                    )
                })?,
        };
        Ok(Resource {
            name: name.clone(),
            url,
            records: pointer(&records, "records")?,
            id: in_record(&id, "id")?,
            updated_at,
            params: file.params.clone(),
            headers,
            paginate,
            incremental,
            auth,
            method,
            body,
            param_in,
            parent: file.parent.as_ref().map(|p| p.get_ref().clone()),
            from_parent,
            load: file.load.as_ref().is_none_or(|l| *l.get_ref()),
            rate_limit,
            concurrency,
        })
    }

    /// This resource's requests for one parent record: each `{NAME}` of
    /// its URL, `[params]`, `[headers]` and `[body]` strings replaced by
    /// `values[NAME]` (encoded as a URL path needs, in the URL).
    pub fn for_parent(&self, values: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let put = |text: &str, encode: bool| {
            let mut text = text.to_owned();
            for (name, value) in values {
                let value = if encode {
                    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
                        .to_string()
                } else {
                    value.clone()
                };
                text = text
                    .replace(&format!("{{{name}}}"), &value)
                    .replace(&format!("%7B{name}%7D"), &value);
            }
            text
        };
        let mut child = self.clone();
        child.url = Url::parse(&put(self.url.as_str(), true)).map_err(|e| {
            ConfigError(format!(
                "{}: the URL for a parent's values does not read: {e}",
                self.name
            ))
        })?;
        for value in child.params.values_mut() {
            *value = put(value, false);
        }
        for value in child.headers.values_mut() {
            *value = put(value, false);
        }
        fn in_json(v: &mut serde_json::Value, put: &dyn Fn(&str, bool) -> String) {
            match v {
                serde_json::Value::String(s) => *s = put(s, false),
                serde_json::Value::Array(items) => items.iter_mut().for_each(|v| in_json(v, put)),
                serde_json::Value::Object(map) => map.values_mut().for_each(|v| in_json(v, put)),
                _ => {}
            }
        }
        for value in child.body.values_mut() {
            in_json(value, &put);
        }
        Ok(child)
    }

    /// This pipeline with `paginator` in place of the file's `[paginate]`
    /// style: a pagination no style of the file describes.
    pub fn with_paginator(mut self, paginator: impl Paginator + 'static) -> Self {
        self.paginate = Box::new(paginator);
        self
    }

    /// Whether `--incremental` can run: an `[incremental]` table and an
    /// `updated_at` pointer. The error names what is missing.
    pub fn check_incremental(&self) -> Result<&Incremental, ConfigError> {
        match (&self.incremental, &self.updated_at) {
            (Some(incremental), Some(_)) => Ok(incremental),
            (None, _) => Err(ConfigError(format!(
                "{}: --incremental needs an [incremental] table (its `param` carries the cursor)",
                self.name
            ))),
            (_, None) => Err(ConfigError(format!(
                "{}: --incremental needs `updated_at`, the pointer to a record's update time",
                self.name
            ))),
        }
    }
}

/// The names of the `{NAME}` placeholders in `text` (plain identifiers
/// between braces; other braces are left as they are).
pub(crate) fn placeholders(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        if let Some(close) = rest.find('}') {
            let name = &rest[..close];
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                found.push(name);
            }
        }
    }
    found
}

/// Every string value of `value`, nested ones included.
fn strings_in(value: &toml::Value, out: &mut Vec<String>) {
    match value {
        toml::Value::String(s) => out.push(s.clone()),
        toml::Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        toml::Value::Table(table) => table.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

/// Parents and children: each `parent` names another resource, and no
/// chain of parents comes back to where it started.
fn check_family(
    written: &[Spanned<File>],
    all: &[Resource],
    at: &Locator<'_>,
) -> Result<(), ConfigError> {
    let index: std::collections::HashMap<&str, usize> = all
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    for (own, pipeline) in written.iter().zip(all) {
        let Some(parent) = &own.get_ref().parent else {
            continue;
        };
        let name = &pipeline.name;
        if !index.contains_key(parent.get_ref().as_str()) {
            return Err(at.key(
                parent.span(),
                &format!("resource {name}: parent"),
                &format!("{:?} names no resource of the file", parent.get_ref()),
            ));
        }
        // Up the chain: at most as many steps as there are resources.
        let mut at_step = parent.get_ref().as_str();
        for _ in 0..all.len() {
            if at_step == name {
                return Err(at.key(
                    parent.span(),
                    &format!("resource {name}: parent"),
                    "makes a cycle of parents: a resource would be its own ancestor",
                ));
            }
            match all[index[at_step]].parent.as_deref() {
                Some(next) => at_step = next,
                None => break,
            }
        }
    }
    Ok(())
}

/// `url` as the http(s) URL of `owner`'s requests; one is required at
/// the top level.
fn check_url(
    url: Option<&Spanned<String>>,
    owner: &Spanned<String>,
    at: &Locator<'_>,
) -> Result<Url, ConfigError> {
    let Some(url) = url else {
        return Err(at.key(owner.span(), "url", "is required"));
    };
    Url::parse(url.get_ref())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| at.key(url.span(), "url", "is not an http(s) URL"))
}

/// Checks a pipeline's or resource's name.
fn check_name(name: &Spanned<String>, at: &Locator<'_>) -> Result<(), ConfigError> {
    if is_identifier(name.get_ref()) {
        return Ok(());
    }
    Err(at.key(
        name.span(),
        "name",
        "must be a plain identifier: a lowercase letter or `_`, then up to 47 lowercase letters, digits or `_` (it names the output file and table as it stands)",
    ))
}

/// Whether `name` is a plain identifier, `[a-z_][a-z0-9_]{0,47}`: a table
/// name in PostgreSQL (and a Delta directory, a file stem) as it stands,
/// with no quoting, folding or mapping that two names could meet in.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.len() <= 48
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Incremental {
    /// `initial` as RFC 3339 text (a string that is one, or a number of the
    /// records' unit) and `lag` as a duration (`"1h"`, or seconds).
    fn check(
        i: &IncrementalFile,
        unit: Option<TimeUnit>,
        at: &Locator<'_>,
    ) -> Result<Self, ConfigError> {
        let initial = match &i.initial {
            None => None,
            Some(v) => Some(match v.get_ref() {
                toml::Value::String(s) if humantime::parse_rfc3339(s).is_ok() => s.clone(),
                toml::Value::Integer(n) => stamp::from_number(&(*n).into(), unit.unwrap_or_default())
                    .map_err(|e| at.key(v.span(), "incremental.initial", &e))?,
                _ => {
                    return Err(at.key(
                        v.span(),
                        "incremental.initial",
                        "must be an RFC 3339 UTC time (\"2026-01-01T00:00:00Z\") or a Unix time in the records' unit",
                    ))
                }
            }),
        };
        let lag = match &i.lag {
            None => None,
            Some(v) => Some(match v.get_ref() {
                toml::Value::String(s) => humantime::parse_duration(s).map_err(|e| {
                    at.key(
                        v.span(),
                        "incremental.lag",
                        &format!("is not a duration: {e}"),
                    )
                })?,
                toml::Value::Integer(n) if *n >= 0 => Duration::from_secs(n.unsigned_abs()),
                _ => {
                    return Err(at.key(
                        v.span(),
                        "incremental.lag",
                        "must be a duration (\"1h\", \"90s\") or a number of seconds",
                    ))
                }
            }),
        };
        Ok(Incremental {
            param: i.param.clone(),
            params: i.params.clone(),
            initial,
            lag,
        })
    }
}

/// Turns a byte span of the file into "file, line N" and a key's name.
#[derive(Clone, Copy)]
pub(crate) struct Locator<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Locator<'_> {
    /// The 1-based line of byte `at`, and that line's text.
    fn line(&self, at: usize) -> (usize, &str) {
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
        let (line, text) = self.line(span.start);
        ConfigError(format!(
            "{}, line {line}: `{key}` {what}\n  {line} | {text}",
            self.origin
        ))
    }

    /// The TOML parser's or serde's error, with its line, the key on that
    /// line and, for an unknown key or value, the closest known one.
    fn toml(&self, e: &toml::de::Error) -> ConfigError {
        let mut message = e.message().trim_end().to_owned();
        if let Some(hint) = did_you_mean(&message) {
            message.push_str(&format!("; did you mean `{hint}`?"));
        }
        match e.span() {
            Some(span) => {
                let (line, text) = self.line(span.start);
                ConfigError(format!(
                    "{}, line {line}: {message}\n  {line} | {text}",
                    self.origin
                ))
            }
            None => ConfigError(format!("{}: {message}", self.origin)),
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
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (strsim::jaro_winkler(given, candidate), candidate))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate.to_owned())
}

#[cfg(test)]
mod tests;
