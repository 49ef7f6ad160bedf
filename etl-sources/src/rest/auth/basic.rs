//! `type = "basic"`: HTTP basic auth.

use reqwest::RequestBuilder;
use std::fmt;

use super::Auth;
use crate::rest::error::ConfigError;
use crate::rest::keys::Keys;

/// A user name and a password, both from the environment.
#[derive(Clone)]
pub(crate) struct Basic {
    username: String,
    password: String,
}

impl fmt::Debug for Basic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets.
        f.debug_struct("Basic").finish_non_exhaustive()
    }
}

impl Basic {
    /// `username_env` and `password_env` (both required).
    pub fn from_keys(
        keys: &mut Keys<'_>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Box<dyn Auth>, ConfigError> {
        let user = keys.needed("username_env")?;
        let pass = keys.needed("password_env")?;
        Ok(Box::new(Basic {
            username: keys.secret_of(&user, "username_env", env)?,
            password: keys.secret_of(&pass, "password_env", env)?,
        }))
    }
}

impl Auth for Basic {
    fn request(&self, request: RequestBuilder) -> RequestBuilder {
        request.basic_auth(&self.username, Some(&self.password))
    }

    fn boxed(&self) -> Box<dyn Auth> {
        Box::new(self.clone())
    }
}
