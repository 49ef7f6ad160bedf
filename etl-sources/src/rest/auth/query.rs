//! `type = "query"`: the query parameter `<name>=<secret>` on every
//! request, never shown.

use std::fmt;
use url::Url;

use super::Auth;
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// The secret as a query parameter.
#[derive(Clone)]
pub(crate) struct Query {
    name: String,
    secret: String,
}

impl fmt::Debug for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.debug_struct("Query")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Query {
    /// `name` (required: the parameter) and `env` (required: the variable
    /// holding the secret).
    pub fn from_keys(
        keys: &mut Keys<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Box<dyn Auth>, ConfigError> {
        let name = keys.needed("name")?.into_inner();
        let var = keys.needed("env")?;
        let secret = keys.secret_of(&var, "env", env)?;
        Ok(Box::new(Query { name, secret }))
    }
}

impl Auth for Query {
    fn url(&self, url: &Url) -> Url {
        let mut with_secret = url.clone();
        with_secret
            .query_pairs_mut()
            .append_pair(&self.name, &self.secret);
        with_secret
    }

    fn secret_param(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn boxed(&self) -> Box<dyn Auth> {
        Box::new(self.clone())
    }
}
