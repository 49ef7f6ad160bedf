//! The pipeline file of `etl run`: read with `toml` and serde, then checked
//! whole (pointers, URLs, headers, secrets from the environment) before any
//! request, so a bad file fails at once with the key and the line.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;
use url::Url;

use super::auth::{self, Auth};
use super::error::{ConfigError, Locator, Problems};
use super::file_pointer::{in_record, pointer};
use super::keys;
use super::paginate::{self, Paginator};
use super::pointer::Pointer;
use super::stamp::{self, TimeUnit, UpdatedAt};
use super::table_shape::{table_shape, TableShape};
use super::write::{write_disposition, WriteKeys};
use crate::throttle::RateLimit;
use etl_core::content::write::Write;
use std::time::Duration;

/// The file as written (see the "Any JSON API" chapter of the docs): the
/// top level, and each `[[resource]]` entry, which takes the top level's
/// keys as its defaults.
// Unknown keys are not refused by serde here but by `unknown_keys`, so
// that each is reported with every other problem of the file.
#[derive(Clone, Debug, Deserialize)]
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
    /// The table's shape in a database: `json` (the default) or `typed`.
    #[serde(default)]
    shape: Option<Spanned<String>>,
    /// A typed table's column types, by column name.
    #[serde(default)]
    columns: Option<Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
    /// A typed table's `contract` and `max_nesting`.
    #[serde(default)]
    schema: Option<Spanned<keys::Table>>,
    /// How the records change the table: append, merge or replace.
    #[serde(default)]
    write: Option<Spanned<String>>,
    /// A merge's key: a pointer, or a list of them.
    #[serde(default)]
    primary_key: Option<Spanned<toml::Value>>,
    /// Where a record says it was deleted (merge).
    #[serde(default)]
    hard_delete: Option<Spanned<String>>,
}

impl File {
    /// `shape`, `[columns]` and `[schema]`, read.
    fn table_shape(&self, at: &Locator<'_>) -> Result<TableShape, ConfigError> {
        table_shape(
            self.shape.as_ref(),
            self.columns.as_ref(),
            self.schema.as_ref(),
            at,
        )
    }

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
            shape: self.shape.clone().or_else(|| top.shape.clone()),
            columns: self.columns.clone().or_else(|| top.columns.clone()),
            schema: self.schema.clone().or_else(|| top.schema.clone()),
            write: self.write.clone().or_else(|| top.write.clone()),
            primary_key: self.primary_key.clone().or_else(|| top.primary_key.clone()),
            hard_delete: self.hard_delete.clone().or_else(|| top.hard_delete.clone()),
        }
    }

    /// `write`, `primary_key` and `hard_delete`, read.
    fn write_disposition(&self, at: &Locator<'_>) -> Result<Write, ConfigError> {
        let keys = WriteKeys {
            write: self.write.as_ref(),
            primary_key: self.primary_key.as_ref(),
            hard_delete: self.hard_delete.as_ref(),
            id: self.id.as_ref(),
            shape: self.shape.as_ref(),
        };
        write_disposition(&keys, at)
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
    /// The shape of a new table of it in a database (`shape`, `[columns]`,
    /// `[schema]`; [`TableShape::Typed`] unless `shape = "json"`).
    pub shape: TableShape,
    /// How its records change its table (`write`, `primary_key`,
    /// `hard_delete`; [`Write::Append`] unless the file says).
    pub write: Write,
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
        Self::one_of(Self::load_every(path)?, &path.display().to_string())
    }

    /// Reads and checks every resource of the pipeline file at `path`,
    /// with secrets from the process environment.
    pub(crate) fn load_every(path: &Path) -> Result<Vec<Self>, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(format!("{}: cannot be read: {e}", path.display())))?;
        Self::parse_every(&text, &path.display().to_string(), |name| {
            std::env::var(name).ok()
        })
    }

    /// The one resource of a file (`origin` in errors).
    fn one_of(all: Vec<Self>, origin: &str) -> Result<Self, ConfigError> {
        let count = all.len();
        let mut all = all.into_iter();
        match (all.next(), all.next()) {
            (Some(one), None) => Ok(one),
            _ => Err(ConfigError::new(format!(
                "{origin}: holds {count} resources, not one: read it with etl_sources::Pipeline"
            ))),
        }
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
        Self::one_of(Self::parse_every(text, origin, env)?, origin)
    }

    /// Reads and checks every resource of the pipeline file at `path`.
    #[deprecated(note = "the whole file is `etl_sources::Pipeline::load`")]
    pub fn load_all(path: &Path) -> Result<Vec<Self>, ConfigError> {
        Self::load_every(path)
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
    /// with none, the top level as the one resource. Every problem of the
    /// file is reported at once (a name given twice, a `path` or `url` not
    /// on the top level's origin, a key missing from both, ...), each
    /// naming the resource, the key and the line; a file that is not TOML,
    /// or holds a key of the wrong type, stops at that.
    pub(crate) fn parse_every(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<Self>, ConfigError> {
        let at = Locator { text, origin };
        let unknown = unknown_keys(text, &at);
        let file: File = match toml::from_str(text) {
            Ok(file) => file,
            Err(e) => {
                unknown?;
                return Err(at.toml(&e));
            }
        };
        let mut problems = Problems::default();
        problems.take(unknown);
        problems.take(check_places(&file, &at));
        let base = problems.take(check_url(file.url.as_ref(), &file.name, &at));
        if file.resource.is_empty() {
            let one = problems.take(Self::check(&file, base, &at, &env));
            problems.check()?;
            return one.map(|one| vec![one]).ok_or_else(|| problems.error());
        }
        problems.take(check_name(&file.name, &at));
        let mut names = std::collections::HashSet::new();
        let mut all = Vec::with_capacity(file.resource.len());
        for own in &file.resource {
            let own = own.get_ref();
            if !names.insert(own.name.get_ref().clone()) {
                problems.take(Err::<(), _>(at.key(
                    own.name.span(),
                    "resource.name",
                    &format!("{:?} names two resources", own.name.get_ref()),
                )));
            }
            let url = base
                .as_ref()
                .and_then(|base| problems.take(resource_url(own, base, &at)));
            if let Some(resource) = problems.take(Self::check(&own.merged(&file), url, &at, &env)) {
                all.push(resource);
            }
        }
        problems.check()?;
        check_family(&file.resource, &all, &at)?;
        Ok(all)
    }

    /// One resource's keys, checked, at `url` (`None`: it has a problem
    /// of its own, reported): every problem of them.
    fn check(
        file: &File,
        url: Option<Url>,
        at: &Locator<'_>,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let at = *at;
        let mut problems = Problems::default();
        problems.take(check_name(&file.name, &at));
        let records = problems.take(
            required(file, &file.records, "records", &at).and_then(|r| pointer(&r, "records", &at)),
        );
        let id = problems
            .take(required(file, &file.id, "id", &at).and_then(|r| in_record(&r, "id", &at)));
        let from_parent = problems.take(
            from_parent(file, &at).and_then(|f| check_placeholders(file, &f, &at).map(|()| f)),
        );
        let headers = problems.take(headers(file, &at));
        let times = problems.take(times(file, &at));
        let request = problems.take(request_shape(file, &at));
        let auth = file.auth.as_ref().map_or(Some(None), |a| {
            problems.take(auth::from_table(a, &at, env)).map(Some)
        });
        let run = problems.take(run_keys(file, &at));
        let shape = problems.take(file.table_shape(&at));
        let write = problems.take(file.write_disposition(&at));
        let (
            Some(url),
            Some(records),
            Some(id),
            Some(from_parent),
            Some(headers),
            Some((updated_at, incremental)),
            Some((method, paginate, param_in, body)),
            Some(auth),
            Some((rate_limit, concurrency)),
            Some(shape),
            Some(write),
        ) = (
            url,
            records,
            id,
            from_parent,
            headers,
            times,
            request,
            auth,
            run,
            shape,
            write,
        )
        else {
            return Err(problems.error());
        };
        problems.check()?;
        let shape = shape.written(&write);
        Ok(Resource {
            name: file.name.get_ref().clone(),
            url,
            records,
            id,
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
            shape,
            write,
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
            ConfigError::new(format!(
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
            (None, _) => Err(ConfigError::new(format!(
                "{}: --incremental needs an [incremental] table (its `param` carries the cursor)",
                self.name
            ))),
            (_, None) => Err(ConfigError::new(format!(
                "{}: --incremental needs `updated_at`, the pointer to a record's update time",
                self.name
            ))),
        }
    }
}

/// Every key of the top level and of each `[[resource]]` that a pipeline
/// file does not know, each with its line and the closest known key. (A
/// text that is not TOML is left to the parser's own error.)
fn unknown_keys(text: &str, at: &Locator<'_>) -> Result<(), ConfigError> {
    /// The keys as written, each with where it stands.
    type Keys = BTreeMap<Spanned<String>, serde::de::IgnoredAny>;
    /// The `[[resource]]` entries' keys.
    #[derive(Deserialize)]
    struct Resources {
        #[serde(default)]
        resource: Vec<Keys>,
    }
    let (Ok(top), Ok(resources)) = (
        toml::from_str::<Keys>(text),
        toml::from_str::<Resources>(text),
    ) else {
        return Ok(());
    };
    let mut problems = Problems::default();
    let tables =
        std::iter::once(("", &top)).chain(resources.resource.iter().map(|r| ("resource.", r)));
    for (prefix, keys) in tables {
        for key in keys
            .keys()
            .filter(|k| !self::keys().contains(&k.get_ref().as_str()))
        {
            let hint = super::error::closest(key.get_ref(), self::keys())
                .map_or(String::new(), |k| format!("; did you mean `{k}`?"));
            problems.take(Err::<(), _>(at.at(
                key.span(),
                &format!(
                    "unknown field `{prefix}{}`: not a key of a pipeline file{hint}",
                    key.get_ref()
                ),
            )));
        }
    }
    problems.check()
}

/// The keys of the top level and of a `[[resource]]`: [`File`]'s fields, as
/// serde's derive hands them to a deserializer, so the list cannot drift
/// from the struct.
fn keys() -> &'static [&'static str] {
    use serde::de::{self, Error as _, Visitor};

    /// A deserializer that only notes the fields a struct asks for.
    struct Fields(&'static [&'static str]);

    impl<'de> de::Deserializer<'de> for &mut Fields {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("only a struct's fields are read"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            self.deserialize_any(visitor)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut fields = Fields(&[]);
        let _ = File::deserialize(&mut fields);
        fields.0
    })
}

/// Keys standing where they mean nothing: `path` at the top level, a run's
/// key (`rate_limit`, `concurrency`) in a resource, a resource's own key
/// (`parent`, `from_parent`, `load`) at the top level, a resource in a
/// resource.
fn check_places(file: &File, at: &Locator<'_>) -> Result<(), ConfigError> {
    let mut problems = Problems::default();
    let mut misplaced = |span: Option<Range<usize>>, key: &str, what: &str| {
        if let Some(span) = span {
            problems.take(Err::<(), _>(at.key(span, key, what)));
        }
    };
    misplaced(
        file.path.as_ref().map(Spanned::span),
        "path",
        "is a key of a [[resource]], resolved against `url`",
    );
    for key in [
        ("parent", file.parent.as_ref().map(Spanned::span)),
        ("from_parent", file.from_parent.as_ref().map(Spanned::span)),
        ("load", file.load.as_ref().map(Spanned::span)),
    ] {
        misplaced(key.1, key.0, "is a key of a [[resource]]");
    }
    for own in &file.resource {
        let own = own.get_ref();
        let shown = own.name.get_ref();
        for (key, span) in [
            ("rate_limit", own.rate_limit.as_ref().map(Spanned::span)),
            ("concurrency", own.concurrency.as_ref().map(Spanned::span)),
        ] {
            misplaced(
                span,
                &format!("resource {shown}: {key}"),
                "is a key of the top level: it holds for every request of the run",
            );
        }
        misplaced(
            own.resource.first().map(Spanned::span),
            &format!("resource {shown}: resource"),
            "cannot stand in a [[resource]]",
        );
    }
    problems.check()
}

/// A resource's URL: its `url` (on the top level's origin), its `path`
/// resolved against the top level's, or the top level's.
fn resource_url(own: &File, base: &Url, at: &Locator<'_>) -> Result<Url, ConfigError> {
    let shown = own.name.get_ref();
    match (&own.url, &own.path) {
        (Some(u), Some(p)) => Err(at.key(
            p.span(),
            &format!("resource {shown}: path"),
            &format!("and `url` ({}) are two places: give one", u.get_ref()),
        )),
        (Some(u), None) => {
            let url = check_url(Some(u), &own.name, at)?;
            if url.origin() != base.origin() {
                return Err(at.key(u.span(), &format!("resource {shown}: url"), &format!("is not on the origin of the top level's `url` ({}): a credential never leaves its origin", base.origin().ascii_serialization())));
            }
            Ok(url)
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
            }),
        (None, None) => Ok(base.clone()),
    }
}

/// A key the resource must have, its own or the top level's.
fn required(
    file: &File,
    value: &Option<Spanned<String>>,
    key: &str,
    at: &Locator<'_>,
) -> Result<Spanned<String>, ConfigError> {
    value.clone().ok_or_else(|| {
        at.key(
            file.name.span(),
            key,
            &format!(
                "is required (by resource {}, or at the top level)",
                file.name.get_ref()
            ),
        )
    })
}

/// `[from_parent]`: NAME -> a pointer into the parent record.
fn from_parent(file: &File, at: &Locator<'_>) -> Result<BTreeMap<String, Pointer>, ConfigError> {
    let name = file.name.get_ref();
    let mut from_parent = BTreeMap::new();
    let Some(table) = &file.from_parent else {
        return Ok(from_parent);
    };
    if file.parent.is_none() {
        return Err(at.key(
            table.span(),
            &format!("resource {name}: from_parent"),
            "needs `parent`: the resource whose records give the values",
        ));
    }
    let mut problems = Problems::default();
    for (key, value) in table.get_ref() {
        let parsed = pointer(value, &format!("resource {name}: from_parent.{key}"), at);
        if let Some(parsed) = problems.take(parsed) {
            from_parent.insert(key.clone(), parsed);
        }
    }
    problems.check()?;
    Ok(from_parent)
}

/// Every `{NAME}` a request holds must be a value of the parent.
fn check_placeholders(
    file: &File,
    from_parent: &BTreeMap<String, Pointer>,
    at: &Locator<'_>,
) -> Result<(), ConfigError> {
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
    let mut problems = Problems::default();
    for (text, span) in placed {
        for placeholder in placeholders(text) {
            if !from_parent.contains_key(placeholder) {
                problems.take(Err::<(), _>(at.key(
                    span.clone(),
                    &format!("resource {}: {{{placeholder}}}", file.name.get_ref()),
                    "is a placeholder `[from_parent]` does not define",
                )));
            }
        }
    }
    problems.check()
}

/// `[headers]`, each name and value one a request can carry.
fn headers(file: &File, at: &Locator<'_>) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut problems = Problems::default();
    let mut headers = BTreeMap::new();
    for (k, v) in &file.headers {
        if reqwest::header::HeaderName::from_bytes(k.get_ref().as_bytes()).is_err() {
            problems.take(Err::<(), _>(at.key(
                k.span(),
                "headers",
                "is not a valid header name",
            )));
        } else if reqwest::header::HeaderValue::from_str(v.get_ref()).is_err() {
            problems.take(Err::<(), _>(at.key(
                v.span(),
                "headers",
                "holds a character a header cannot carry",
            )));
        } else {
            headers.insert(k.get_ref().clone(), v.get_ref().clone());
        }
    }
    problems.check()?;
    Ok(headers)
}

/// `updated_at` (with its unit) and `[incremental]`.
fn times(
    file: &File,
    at: &Locator<'_>,
) -> Result<(Option<UpdatedAt>, Option<Incremental>), ConfigError> {
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
    let updated_at = match (&file.updated_at, &file.updated_at_unit) {
        (Some(p), _) => Some(UpdatedAt {
            pointer: in_record(p, "updated_at", at)?,
            unit,
        }),
        (None, Some(u)) => {
            return Err(at.key(
                u.span(),
                "updated_at_unit",
                "needs `updated_at`, the pointer to the time it is the unit of",
            ))
        }
        (None, None) => None,
    };
    let incremental = file
        .incremental
        .as_ref()
        .map(|i| Incremental::check(i.get_ref(), unit, at))
        .transpose()?;
    Ok((updated_at, incremental))
}

/// What a request is: the method, the paginator and where its parameters
/// go, the JSON body.
type Shape = (
    Method,
    Box<dyn Paginator>,
    ParamIn,
    serde_json::Map<String, serde_json::Value>,
);

/// `method`, `[paginate]` and `[body]`, which depend on each other (a body
/// and `param_in = "body"` need a POST).
fn request_shape(file: &File, at: &Locator<'_>) -> Result<Shape, ConfigError> {
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
        Some(p) => paginate::from_table(p, at)?,
    };
    let post_only = |span: Range<usize>, key: &str| {
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
    Ok((method, paginate, param_in, body))
}

/// The run's keys: `rate_limit` and `concurrency`.
fn run_keys(file: &File, at: &Locator<'_>) -> Result<(Option<RateLimit>, usize), ConfigError> {
    let mut problems = Problems::default();
    let rate_limit = match &file.rate_limit {
        None => Some(None),
        Some(limit) => problems.take(
            limit
                .get_ref()
                .as_str()
                .ok_or_else(|| "must be a string such as \"10/s\"".to_owned())
                .and_then(str::parse::<RateLimit>)
                .map(Some)
                .map_err(|e| at.key(limit.span(), "rate_limit", &e)),
        ),
    };
    let concurrency = match &file.concurrency {
        None => Some(DEFAULT_CONCURRENCY),
        Some(n) => problems.take(
            n.get_ref()
                .as_integer()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    at.key(
                        n.span(),
                        "concurrency",
                        "must be a whole number of at least 1 (requests in flight; 1 = one at a time)",
                    )
                }),
        ),
    };
    match (rate_limit, concurrency) {
        (Some(rate_limit), Some(concurrency)) => Ok((rate_limit, concurrency)),
        _ => Err(problems.error()),
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

#[cfg(test)]
mod tests;
