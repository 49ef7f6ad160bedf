//! `type = "bearer"`: `Authorization: Bearer <secret>`.

use reqwest::header::{HeaderName, HeaderValue, AUTHORIZATION};

use super::{sensitive, Auth};
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// The secret as a bearer token.
#[derive(Clone, Debug)]
pub(crate) struct Bearer {
    /// `Bearer <secret>`, marked sensitive.
    value: HeaderValue,
}

impl Bearer {
    /// `env` (required): the variable holding the token.
    pub fn from_keys(
        keys: &mut Keys<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Box<dyn Auth>, ConfigError> {
        let var = keys.needed("env")?;
        let token = keys.secret_of(&var, "env", env)?;
        let value = sensitive(keys, &var, &format!("Bearer {token}"))?;
        Ok(Box::new(Bearer { value }))
    }
}

impl Auth for Bearer {
    fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![(AUTHORIZATION, self.value.clone())]
    }

    fn boxed(&self) -> Box<dyn Auth> {
        Box::new(self.clone())
    }
}
