//! A page's request as sent ([`Fetcher`]), and the requests sent ahead of
//! the page that needs them ([`InFlight`]): the next page is on the wire
//! while this one is read and loaded.

use bytes::Bytes;
use etl_core::{retry, EtlError};
use reqwest::header::{HeaderMap, CONTENT_TYPE};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::task::JoinHandle;
use tracing::Instrument;
use url::Url;

use super::auth::Auth;
use super::paginate::Request;
use crate::throttle::Throttle;
use crate::wire;

/// What every request of a source is sent with: its client (headers,
/// timeout, redirects), its auth, the longest wait a server may ask for,
/// and the throttle that counts the waits. Shared by the source and the
/// requests it sent ahead.
#[derive(Debug)]
pub(crate) struct Fetcher {
    pub(crate) client: reqwest::Client,
    pub(crate) auth: Option<Arc<dyn Auth>>,
    pub(crate) max_retry_after: Option<Duration>,
    pub(crate) throttle: Arc<Throttle>,
}

/// A page as it came: its body and headers.
pub(crate) type Fetched = Result<(Bytes, HeaderMap), EtlError>;

impl Fetcher {
    /// One page's body and headers: the whole request and status check is
    /// one attempt. With a `body`, the request is a POST of that JSON.
    #[retry(max_attempts = 5, base = "1s", max = "60s", on_retry = wire::announce_wait)]
    pub(crate) async fn fetch_page(
        &self,
        url: &Url,
        body: Option<&[u8]>,
    ) -> Result<(Bytes, HeaderMap), EtlError> {
        let target = match &self.auth {
            Some(auth) => auth.url(url),
            None => url.clone(),
        };
        let mut request = match body {
            Some(body) => self
                .client
                .post(target)
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec()),
            None => self.client.get(target),
        };
        if let Some(auth) = &self.auth {
            request = auth.request(request);
        }
        let (headers, body) = wire::get(request, url, self.max_retry_after, &self.throttle).await?;
        Ok((body, headers))
    }
}

/// A task of its own whose result is wanted later, cancelled if dropped
/// first (a `JoinHandle` alone would let it run on, unwanted).
#[derive(Debug)]
pub(crate) struct Task<T>(JoinHandle<T>);

impl<T: Send + 'static> Task<T> {
    /// Runs `future` on a task of its own, from now, in the current
    /// span (its log lines name the resource it reads for).
    pub(crate) fn spawn(future: impl Future<Output = T> + Send + 'static) -> Self {
        Task(tokio::spawn(future.in_current_span()))
    }
}

impl<T> Future for Task<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok(output) => output,
            // Only a drop aborts the task, so this is its panic: it goes
            // on here, where its result was wanted.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        })
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A request sent before the page that needs it was asked for: a task of
/// its own, so it runs while the source's caller loads the page before.
/// Dropped unawaited (the read moved elsewhere, or stopped), it is
/// cancelled.
#[derive(Debug)]
pub(crate) struct InFlight {
    /// What was sent, to match it against the request the read needs.
    pub(crate) request: Request,
    task: Task<Fetched>,
}

impl InFlight {
    /// Sends `url` (with `body`) now, on a task of its own.
    pub(crate) fn send(
        fetcher: &Arc<Fetcher>,
        request: Request,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Self {
        let fetcher = Arc::clone(fetcher);
        let task = Task::spawn(async move { fetcher.fetch_page(&url, body.as_deref()).await });
        InFlight { request, task }
    }

    /// The page, once it came (or the error that ended its attempts).
    pub(crate) async fn page(self) -> Fetched {
        self.task.await
    }
}
