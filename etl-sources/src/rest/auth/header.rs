//! `type = "header"`: `<name>: <secret>` (an API key header).

use reqwest::header::{HeaderName, HeaderValue};

use super::{sensitive, Auth};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// The secret in a header of its own name.
#[derive(Clone, Debug)]
pub(crate) struct Header {
    name: HeaderName,
    /// Marked sensitive.
    value: HeaderValue,
}

impl Header {
    /// `name: value`, the value marked sensitive.
    pub(crate) fn new(name: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        Header { name, value }
    }

    /// `name` (required: the header) and `env` (required: the variable
    /// holding the secret).
    pub fn from_keys(
        keys: &mut Keys<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Box<dyn Auth>, ConfigError> {
        let written = keys.needed("name")?;
        let name = HeaderName::from_bytes(written.get_ref().as_bytes())
            .map_err(|_| keys.error(written.span(), "name", "is not a valid header name"))?;
        let var = keys.needed("env")?;
        let secret = keys.secret_of(&var, "env", env)?;
        let value = sensitive(keys, &var, &secret)?;
        Ok(Box::new(Header { name, value }))
    }
}

impl Auth for Header {
    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![(self.name.clone(), self.value.clone())]
    }

    fn boxed(&self) -> Box<dyn Auth> {
        Box::new(self.clone())
    }
}
