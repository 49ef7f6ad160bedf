//! [`EtlError`]: every failure a pipeline meets, each classified on purpose as
//! transient (worth retrying) or permanent (retrying cannot help).

use std::io;
use std::time::Duration;

/// The error type of every etl-core seam.
///
/// Each variant is classified by [`EtlError::is_transient`]; [`crate::with_retry`]
/// retries exactly the transient ones, and waits [`EtlError::retry_after`] when
/// the server said how long to wait.
///
/// ```
/// use etl_core::EtlError;
/// use std::time::Duration;
///
/// let throttled = EtlError::RateLimited { retry_after_secs: 5 };
/// assert!(throttled.is_transient());
/// assert_eq!(throttled.retry_after(), Some(Duration::from_secs(5)));
///
/// let bad_body = EtlError::Parse("expected `results`".into());
/// assert!(!bad_body.is_transient());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtlError {
    /// The network failed: connection refused or reset, DNS, a timeout.
    /// Transient: the next attempt may well get through.
    #[error("network error: {0}")]
    Network(String),

    /// The data could not be parsed or serialised. Permanent: the same bytes
    /// parse the same way on every attempt.
    #[error("parse error: {0}")]
    Parse(String),

    /// The server throttled us and said when to come back. Transient; the
    /// server's delay beats our own backoff.
    #[error("rate limited: retry after {retry_after_secs}s")]
    RateLimited {
        /// Seconds the server asked us to wait (its `Retry-After`).
        retry_after_secs: u64,
    },

    /// The server answered with an HTTP status that is not a success and was
    /// not mapped to a more specific variant. Transient for 408, 429 (with no
    /// delay known: our backoff decides) and every 5xx; permanent otherwise.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// What the server said, or an excerpt of its body.
        message: String,
    },

    /// Reading or writing local storage failed. Transient only for the kinds
    /// of I/O failure that pass by themselves (interrupted, timed out, a reset
    /// connection); a full disk or a missing permission is permanent.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// The caller passed something the API cannot accept (named in the
    /// message). Permanent.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A database refused or lost a statement. Classified by its SQLSTATE:
    /// no code (the connection itself failed), class 08 (connection
    /// exception), 40001 and 40P01 (serialization failure, deadlock: run it
    /// again), 55P03 (a lock not had in time), class 53 (insufficient
    /// resources) and 57P01-57P03 (the server shutting down or starting)
    /// are transient; every other code (a constraint, a type, a syntax
    /// error) is permanent.
    #[error("database error{}: {message}", sqlstate.as_deref().map(|c| format!(" {c}")).unwrap_or_default())]
    Database {
        /// The five-character SQLSTATE, when the server sent one.
        sqlstate: Option<String>,
        /// What the database said.
        message: String,
    },

    /// The server throttled us and asked for a longer wait than the caller
    /// allows (a ceiling such as `launches --max-retry-after`). Permanent:
    /// ending the run beats sleeping past what the caller can afford; what
    /// was loaded before stays loaded.
    #[error("rate limited: the server asked to wait {retry_after_secs} s, longer than the {ceiling_secs} s allowed")]
    RetryAfterTooLong {
        /// Seconds the server asked us to wait.
        retry_after_secs: u64,
        /// The longest wait the caller allows, in seconds.
        ceiling_secs: u64,
    },

    /// An attempt was cut by its `attempt_timeout`, or by the retry deadline
    /// in flight ([`crate::retry::TimedOut`]). Transient: the next attempt
    /// may be quicker.
    #[error("timed out: {0}")]
    TimedOut(#[from] crate::retry::TimedOut),

    /// The attempt was not made: a [`CircuitBreaker`](crate::retry::CircuitBreaker)
    /// is open after too many failures in a row. Transient: it lets an
    /// attempt through again after its cool-down; a retry loop stops at it
    /// rather than wait ([`Stop::CircuitOpen`](crate::retry::Stop::CircuitOpen)).
    #[error("{0}")]
    CircuitOpen(#[from] crate::retry::CircuitOpen),

    /// A request was not sent because it would break a safety rule, such as
    /// following a link or redirect to another origin (named in the
    /// message). Permanent.
    #[error("refused: {0}")]
    Refused(String),
}

impl EtlError {
    /// Whether retrying the operation that failed may succeed.
    ///
    /// `Network`, `RateLimited`, HTTP 408/429/5xx and passing I/O failures
    /// are transient; everything else is permanent.
    pub fn is_transient(&self) -> bool {
        match self {
            EtlError::Network(_)
            | EtlError::RateLimited { .. }
            | EtlError::TimedOut(_)
            | EtlError::CircuitOpen(_) => true,
            EtlError::Http { status, .. } => crate::retry::status_is_transient(*status),
            EtlError::Io(e) => crate::retry::io_kind_is_transient(e.kind()),
            EtlError::Database { sqlstate, .. } => Self::sqlstate_is_transient(sqlstate.as_deref()),
            EtlError::Parse(_)
            | EtlError::InvalidInput(_)
            | EtlError::Refused(_)
            | EtlError::RetryAfterTooLong { .. } => false,
        }
    }

    /// Whether a database error with this SQLSTATE may pass by itself: no code
    /// (the connection itself failed), class 08 (connection exception), 40001
    /// and 40P01 (serialization failure, deadlock: run it again), 55P03 (a
    /// lock not had within `lock_timeout`: its holder may let go), class 53
    /// (insufficient resources) and 57P01-57P03 (the server shutting down or
    /// starting). Every other code (a constraint, a type, a syntax error) is
    /// permanent. The one place this knowledge lives ([`EtlError::Database`]'s
    /// classification and etl-postgres both ask it).
    ///
    /// ```
    /// use etl_core::EtlError;
    ///
    /// assert!(EtlError::sqlstate_is_transient(Some("40001")));
    /// assert!(EtlError::sqlstate_is_transient(Some("55P03")));
    /// assert!(!EtlError::sqlstate_is_transient(Some("23505")));
    /// assert!(EtlError::sqlstate_is_transient(None));
    /// ```
    pub fn sqlstate_is_transient(code: Option<&str>) -> bool {
        match code {
            None => true,
            Some(code) => {
                code.starts_with("08")
                    || code.starts_with("53")
                    || matches!(
                        code,
                        "40001" | "40P01" | "55P03" | "57P01" | "57P02" | "57P03"
                    )
            }
        }
    }

    /// Whether this database error means the connection is gone (no
    /// SQLSTATE: the socket closed; class 08; 57P0x: the backend was
    /// terminated, the server is shutting down or starting, the database
    /// was dropped, or the session idled out), so a client
    /// should reconnect rather than reuse it. `false` for every other error.
    pub fn connection_lost(&self) -> bool {
        match self {
            EtlError::Database { sqlstate, .. } => match sqlstate.as_deref() {
                None => true,
                Some(code) => code.starts_with("08") || code.starts_with("57P0"),
            },
            _ => false,
        }
    }

    /// The delay the server asked for, if it named one (`RateLimited`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            EtlError::RateLimited { retry_after_secs } => {
                Some(Duration::from_secs(*retry_after_secs))
            }
            _ => None,
        }
    }
}

#[cfg(feature = "content")]
impl From<serde_json::Error> for EtlError {
    /// serde_json reports I/O failures of a writer through its own error;
    /// those keep their I/O classification, everything else is a `Parse`.
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            EtlError::Io(e.into())
        } else {
            EtlError::Parse(e.to_string())
        }
    }
}

/// The loop's word for an [`EtlError`]: [`EtlError::is_transient`] and
/// [`EtlError::retry_after`], and `TimedOut` as a timeout.
impl crate::retry::RetryableError for EtlError {
    fn is_transient(&self) -> bool {
        EtlError::is_transient(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        EtlError::retry_after(self)
    }

    fn timed_out(&self) -> bool {
        matches!(self, EtlError::TimedOut(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_is_deliberate() {
        assert!(EtlError::Network("reset".into()).is_transient());
        assert!(EtlError::RateLimited {
            retry_after_secs: 0
        }
        .is_transient());
        assert!(!EtlError::Parse("x".into()).is_transient());
        assert!(!EtlError::InvalidInput("x".into()).is_transient());
        assert!(!EtlError::Refused("x".into()).is_transient());
        let too_long = EtlError::RetryAfterTooLong {
            retry_after_secs: 2429,
            ceiling_secs: 600,
        };
        assert!(!too_long.is_transient());
        assert!(too_long.to_string().contains("2429 s"), "{too_long}");
        for status in [408, 429, 500, 502, 503, 599] {
            let e = EtlError::Http {
                status,
                message: String::new(),
            };
            assert!(e.is_transient(), "{status} should be transient");
        }
        for status in [400, 401, 403, 404, 410, 422, 600] {
            let e = EtlError::Http {
                status,
                message: String::new(),
            };
            assert!(!e.is_transient(), "{status} should be permanent");
        }
        let db = |code: Option<&str>| EtlError::Database {
            sqlstate: code.map(str::to_string),
            message: String::new(),
        };
        for code in [
            None,
            Some("08006"),
            Some("40001"),
            Some("40P01"),
            Some("55P03"),
            Some("53300"),
            Some("57P01"),
        ] {
            assert!(db(code).is_transient(), "{code:?} should be transient");
        }
        for code in ["23505", "42804", "42P01", "22P02"] {
            assert!(!db(Some(code)).is_transient(), "{code} should be permanent");
        }
        let io = |k| EtlError::Io(io::Error::from(k));
        assert!(io(io::ErrorKind::TimedOut).is_transient());
        assert!(!io(io::ErrorKind::PermissionDenied).is_transient());
        assert!(!io(io::ErrorKind::NotFound).is_transient());
    }

    #[test]
    fn only_rate_limited_carries_a_server_delay() {
        assert_eq!(
            EtlError::RateLimited {
                retry_after_secs: 7
            }
            .retry_after(),
            Some(Duration::from_secs(7))
        );
        assert_eq!(EtlError::Network("x".into()).retry_after(), None);
        let e = EtlError::Http {
            status: 429,
            message: "slow down".into(),
        };
        assert_eq!(e.retry_after(), None);
    }

    #[cfg(feature = "content")]
    #[test]
    fn json_errors_are_parse_errors() {
        let e: EtlError = serde_json::from_str::<u8>("nope").unwrap_err().into();
        assert!(matches!(e, EtlError::Parse(_)), "{e:?}");
    }

    #[test]
    fn errors_are_send_sync_static() {
        fn check<E: std::error::Error + Send + Sync + 'static>() {}
        check::<EtlError>();
    }
}
