//! Auth: how requests prove who sends them. Each kind is one type
//! implementing [`Auth`], in a file of its own: it reads its keys of the
//! `[auth]` table, its secret from the environment, once, when the pipeline
//! file is read ([`from_table`]). No kind's `Debug` shows its secret.

mod basic;
mod bearer;
mod header;
mod query;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::RequestBuilder;
use std::fmt;
use toml::Spanned;
use url::Url;

use super::error::{ConfigError, Locator};
use super::keys::{self, Keys, Table};

/// How a request proves who sends it: a header, a query parameter, basic
/// auth. The kinds of a pipeline file (`[auth] type = ...`) are types of
/// this crate; a program may set a kind of its own as
/// [`super::Resource::auth`].
pub trait Auth: fmt::Debug + Send + Sync {
    /// Headers every request carries, their values marked sensitive (a
    /// `Debug` of them shows no secret).
    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        Vec::new()
    }

    /// `url` as sent: with the secret where this kind puts it in the
    /// query. By default, as it is.
    fn url(&self, url: &Url) -> Url {
        url.clone()
    }

    /// The request with what this kind adds to it (basic auth). By
    /// default, as it is.
    fn request(&self, request: RequestBuilder) -> RequestBuilder {
        request
    }

    /// The query parameter that holds the secret, if this kind has one:
    /// it is removed from any URL the server hands back, so that no URL
    /// shown (a log line, an error, a reject's source) holds it.
    fn secret_param(&self) -> Option<&str> {
        None
    }

    /// A copy, for a clone of a [`super::Resource`]: `Box::new(self.clone())`
    /// for a `Clone` type.
    fn boxed(&self) -> Box<dyn Auth>;
}

/// A header of a program's own (`Authorization: Token <key>` for Launch
/// Library), its value marked sensitive.
pub(crate) fn header(name: HeaderName, value: HeaderValue) -> Box<dyn Auth> {
    Box::new(header::Header::new(name, value))
}

impl Clone for Box<dyn Auth> {
    fn clone(&self) -> Self {
        self.boxed()
    }
}

/// One kind's constructor: it takes its keys of `[auth]`, and its secret
/// from the environment.
type Make =
    fn(&mut Keys<'_>, &dyn Fn(&str) -> Option<String>) -> Result<Box<dyn Auth>, ConfigError>;

/// Every kind a pipeline file can name: adding one is a file and a line
/// here.
const KINDS: &[(&str, Make)] = &[
    ("bearer", bearer::Bearer::from_keys),
    ("header", header::Header::from_keys),
    ("query", query::Query::from_keys),
    ("basic", basic::Basic::from_keys),
];

/// The auth an `[auth]` table describes, every key checked and every
/// secret read with `env`.
pub(crate) fn from_table(
    table: &Spanned<Table>,
    at: &Locator<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Auth>, ConfigError> {
    keys::read(
        table,
        at,
        ("auth", "type", "auth type"),
        KINDS,
        |make, keys| make(keys, env),
    )
}

/// `value`, the secret read from the variable `var`, as a header value
/// marked sensitive; an error naming `env` if a header cannot carry it.
fn sensitive(
    keys: &Keys<'_>,
    var: &Spanned<String>,
    value: &str,
) -> Result<HeaderValue, ConfigError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        keys.error(
            var.span(),
            "env",
            "the secret holds a character a header cannot carry",
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}
