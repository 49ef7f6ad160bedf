//! The sink's connection, and the deadline every use of it runs under.
//!
//! A connection can go silent: a pooler that hangs, a NAT or load balancer
//! that lost the flow. Its socket stays open and TCP keepalives are still
//! answered (by the proxy), so nothing below us ever reports it. Every
//! operation (connecting, each statement, a whole typed write from BEGIN
//! to COMMIT) therefore runs under a deadline; past it the connection is
//! dropped (its task aborted, so no write to the dead socket is left
//! waiting), the operation fails as a lost connection (transient: the
//! pipeline retries the load on a new connection), and the server session
//! it leaves behind is ended:
//! - by the next connection, which terminates it (`pg_terminate_backend`,
//!   allowed on one's own sessions): its row locks and uncommitted keys
//!   would otherwise hold up the retry;
//! - by the server, if this process dies first: every session of ours is
//!   opened with `idle_in_transaction_session_timeout` and
//!   `statement_timeout` a little past the deadline, so a session left in
//!   its transaction, or in a statement whose client gave up, ends by
//!   itself.

use etl_core::EtlError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::{Mutex, MutexGuard};
use tokio::task::AbortHandle;
use tokio::time::error::Elapsed;
use tokio_postgres::Client;
#[cfg(not(feature = "tls"))]
use tokio_postgres::NoTls;

use crate::errors;

/// How long one operation may take by default: a connect, a statement, a
/// write from BEGIN to COMMIT.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// How much longer than the deadline the server gives a session of ours
/// before ending it itself: the client's deadline comes first (its error
/// is a lost connection, retried), the server's only for a session whose
/// client is gone.
const SERVER_GRACE: Duration = Duration::from_secs(5);

/// A server session: its process id and when it started (a process id
/// alone may be reused).
#[derive(Clone, Copy, Debug)]
struct Backend {
    pid: i32,
    started: SystemTime,
}

/// A connection in use: the client, the task driving its socket, its
/// server session, and the deadline (in milliseconds) its server-side
/// timeouts were set for.
struct Live {
    client: Client,
    task: AbortHandle,
    backend: Backend,
    server_ms: u64,
}

/// The URL a sink (re)connects to, its deadline, and its connection, if
/// connected.
pub(crate) struct Session {
    url: String,
    /// The schema its names resolve in, where not the server's default
    /// (a replace's staging schema).
    search_path: Option<String>,
    /// The deadline, in milliseconds.
    deadline_ms: AtomicU64,
    live: Mutex<Option<Live>>,
    /// A session given up on, to be ended by the next connection.
    stale: std::sync::Mutex<Option<Backend>>,
}

impl Session {
    /// Connects to `url` under `deadline`.
    pub(crate) async fn open(url: &str, deadline: Duration) -> Result<Session, EtlError> {
        Self::open_in(url, deadline, None).await
    }

    /// Connects to `url` under `deadline`, its names resolving in the
    /// schema `search_path` (an identifier of ours) where one is given,
    /// on every connection it makes.
    pub(crate) async fn open_in(
        url: &str,
        deadline: Duration,
        search_path: Option<&str>,
    ) -> Result<Session, EtlError> {
        let live = within(deadline, connect(url, deadline, search_path)).await?;
        Ok(Session {
            url: url.to_owned(),
            search_path: search_path.map(str::to_owned),
            deadline_ms: AtomicU64::new(millis(deadline)),
            live: Mutex::new(Some(live)),
            stale: std::sync::Mutex::new(None),
        })
    }

    /// The deadline of each operation.
    pub(crate) fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms.load(Ordering::Relaxed))
    }

    /// Sets the deadline of the operations from now on (and of the
    /// sessions opened from now on, whose server-side timeouts follow it).
    pub(crate) fn set_deadline(&self, deadline: Duration) {
        self.deadline_ms.store(millis(deadline), Ordering::Relaxed);
    }

    /// The connection, held until the guard is dropped: one operation at a
    /// time.
    pub(crate) async fn lock(&self) -> Guard<'_> {
        Guard {
            session: self,
            live: self.live.lock().await,
        }
    }
}

/// The session's connection, locked for one operation.
pub(crate) struct Guard<'s> {
    session: &'s Session,
    live: MutexGuard<'s, Option<Live>>,
}

impl Guard<'_> {
    /// The live client, connecting first if the last one was lost (and
    /// ending the session the last one left behind, if it was given up
    /// on). Meant to run under the deadline, inside the operation.
    pub(crate) async fn client(&mut self) -> Result<&Client, EtlError> {
        if self.live.as_ref().is_none_or(|l| l.client.is_closed()) {
            let session = self.session;
            let fresh = connect(
                &session.url,
                session.deadline(),
                session.search_path.as_deref(),
            )
            .await?;
            let stale = self
                .session
                .stale
                .lock()
                .map(|mut s| s.take())
                .ok()
                .flatten();
            if let Some(stale) = stale {
                end(&fresh.client, stale).await;
            }
            *self.live = Some(fresh);
        }
        let live = self.live.as_mut().ok_or_else(|| EtlError::Database {
            sqlstate: None,
            message: "no connection".into(),
        })?;
        // The deadline changed since the session opened (the sink's own,
        // set after it connected): its server-side timeouts follow.
        let want = millis(self.session.deadline());
        if live.server_ms != want {
            live.client
                .batch_execute(&format!(
                    "SET statement_timeout = {ms}; SET idle_in_transaction_session_timeout = {ms}",
                    ms = server_ms(want)
                ))
                .await
                .map_err(|e| errors::from_pg_plain(&e))?;
            live.server_ms = want;
        }
        Ok(&live.client)
    }

    /// The error of a statement. One that means the connection is gone
    /// drops the client, so that the next operation reconnects instead of
    /// failing on a dead connection. The client may not have noticed the
    /// close yet when the error arrives, so `is_closed` alone is not
    /// enough.
    pub(crate) fn error(&mut self, e: tokio_postgres::Error) -> EtlError {
        let error = errors::from_pg_plain(&e);
        if e.is_closed() {
            *self.live = None;
        }
        self.lost_if(&error);
        error
    }

    /// Drops the client after an error that means the connection is gone.
    pub(crate) fn lost_if(&mut self, error: &EtlError) {
        if error.connection_lost() {
            *self.live = None;
        }
    }

    /// The deadline of this operation.
    pub(crate) fn deadline(&self) -> Duration {
        self.session.deadline()
    }

    /// An operation's outcome, `done` under the deadline or past it. Past
    /// it, the connection is given up on: its task is aborted and its
    /// server session noted, to be ended by the next connection.
    pub(crate) fn settle<T>(
        &mut self,
        done: Result<Result<T, EtlError>, Elapsed>,
    ) -> Result<T, EtlError> {
        match done {
            Ok(done) => done,
            Err(_) => {
                if let Some(live) = self.live.take() {
                    live.task.abort();
                    if let Ok(mut stale) = self.session.stale.lock() {
                        *stale = Some(live.backend);
                    }
                }
                let deadline = self.session.deadline();
                tracing::warn!(
                    deadline = %humantime::format_duration(deadline),
                    "PostgreSQL did not answer in time: the connection is given up on"
                );
                Err(silent(deadline))
            }
        }
    }
}

/// The error of an operation past its deadline: a lost connection, so a
/// retry reconnects.
fn silent(deadline: Duration) -> EtlError {
    EtlError::Database {
        sqlstate: None,
        message: format!(
            "PostgreSQL did not answer within {} (the connection may have gone silent): given up on",
            humantime::format_duration(deadline)
        ),
    }
}

/// `op` under `deadline`, past it the error of a connection given up on.
/// For the steps of opening a sink, whose connection is dropped with the
/// sink when they fail ([`Guard::settle`] gives up on a sink's own).
pub(crate) async fn within<T>(
    deadline: Duration,
    op: impl std::future::Future<Output = Result<T, EtlError>>,
) -> Result<T, EtlError> {
    tokio::time::timeout(deadline, op)
        .await
        .unwrap_or_else(|_| Err(silent(deadline)))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The server-side timeouts, in milliseconds, of a session whose client
/// deadline is `deadline_ms`: a little past it, and within what the
/// server takes (an `int` of milliseconds).
fn server_ms(deadline_ms: u64) -> u64 {
    deadline_ms
        .saturating_add(millis(SERVER_GRACE))
        .min(i32::MAX as u64)
}

/// Opens a connection whose server session ends by itself a little past
/// `deadline` in a transaction or a statement, drives it on a task of its
/// own, and reads its session's id.
async fn connect(
    url: &str,
    deadline: Duration,
    search_path: Option<&str>,
) -> Result<Live, EtlError> {
    // Parsed apart from connecting: a malformed URL is permanent, while a
    // connection that fails is worth another attempt.
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| EtlError::InvalidInput(format!("PostgreSQL URL: {e}")))?;
    let server = server_ms(millis(deadline));
    let mut ours =
        format!("-c idle_in_transaction_session_timeout={server} -c statement_timeout={server}");
    if let Some(schema) = search_path {
        ours.push_str(&format!(" -c search_path={schema}"));
    }
    let options = match config.get_options() {
        Some(theirs) if !theirs.is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    config.options(&options);
    #[cfg(feature = "tls")]
    let connector = crate::tls()?;
    #[cfg(not(feature = "tls"))]
    let connector = NoTls;
    let (client, connection) = config
        .connect(connector)
        .await
        .map_err(|e| errors::connect(&e))?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "PostgreSQL connection ended");
        }
    })
    .abort_handle();
    let row = client
        .query_one(
            "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()",
            &[],
        )
        .await;
    let backend = match row {
        Ok(row) => Backend {
            pid: row.try_get(0).map_err(|e| errors::from_pg_plain(&e))?,
            started: row.try_get(1).map_err(|e| errors::from_pg_plain(&e))?,
        },
        Err(e) => {
            task.abort();
            return Err(errors::from_pg_plain(&e));
        }
    };
    Ok(Live {
        client,
        task,
        backend,
        server_ms: millis(deadline),
    })
}

/// Ends the server session `stale` a connection of ours was given up on
/// in, if it is still there: its locks would hold up the retry of what it
/// was writing. A session that cannot be ended (another role's, say) is
/// left to its server-side timeouts, with a warning.
async fn end(client: &Client, stale: Backend) {
    let ended = client
        .query_opt(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE pid = $1 AND backend_start = $2",
            &[&stale.pid, &stale.started],
        )
        .await;
    match ended {
        Ok(Some(row)) if row.try_get::<_, bool>(0).unwrap_or(false) => {
            tracing::info!(
                pid = stale.pid,
                "ended the PostgreSQL session a silent connection left"
            );
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(
            pid = stale.pid,
            error = %errors::from_pg_plain(&e),
            "could not end the PostgreSQL session a silent connection left: its server-side timeouts will"
        ),
    }
}
