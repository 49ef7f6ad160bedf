//! The runtime seams of a data pipeline that survives failure, in two
//! halves you can take apart:
//!
//! - **the retry half** (always built; module [`retry`](mod@retry)): [`with_retry`] +
//!   [`RetryPolicy`] retry transient failures with capped exponential
//!   backoff, honouring a server's Retry-After; [`retry::Retry`] adds
//!   jitter, deadlines, budgets, attempt timeouts, a circuit breaker and a
//!   report; the `#[retry]` attribute
//!   (feature `macros`) expands an `async fn` into a call of them; and
//!   [`EtlError`] classifies every failure as transient or permanent.
//! - **the content half** (feature `content`; module [`content`]):
//!   [`content_id`], [`Row::content_key`] and [`IdempotentSink`], content
//!   addressing so that re-running a pipeline writes each row at most once,
//!   and the types they live on: [`Row`] / [`Launch`], [`Record`] for any row
//!   type of your own, the [`Sink`] trait, [`JsonlSink`] and the rejects.
//!
//! Data walks one way: source page -> [`Row`]s -> [`IdempotentSink`] ->
//! [`JsonlSink`] -> file.
//!
//! # Features
//!
//! | feature | default | what it holds | what it compiles in |
//! |---|---|---|---|
//! | `macros` | yes | `#[etl_core::retry]` | etl-retry-macros (syn) |
//! | `content` | yes | [`content`], [`IdempotentSink`], [`JsonlSink`], [`Row`], [`Launch`], [`Record`], [`Sink`], [`Reject`] and the rest of the content half; `From<serde_json::Error> for EtlError` | serde, serde_json, sha2, rayon, foldhash, const-hex, memchr, async-trait |
//! | `reqwest` | no | `etl_core::http` (`HttpError`, `check`, Retry-After) and `RetryableError for reqwest::Error` | reqwest, httpdate |
//! | `anyhow` | no | `RetryableError for anyhow::Error`, by its chain | anyhow |
//! | `metrics` | no | `etl_core::metrics`: the retry loops, `IdempotentSink` and the rejects count through the `metrics` facade | metrics |
//!
//! With neither, the retry half stands alone: [`with_retry`],
//! [`RetryPolicy`], [`retry`](mod@retry)'s `Retry`, `RetryBudget`, `Jitter`,
//! `RetryReport`, `Stop`, `TimedOut`, `CircuitBreaker`, `RetryableError`
//! (implemented for `std::io::Error` too), and [`EtlError`]
//! (the same type in every build). A crate that only retries takes
//!
//! ```toml
//! etl-core = { version = "0.1", default-features = false, features = ["macros"] }
//! ```
//!
//! and builds tokio's `time`, tracing, thiserror, fastrand and the macro, as
//! light as backon with its macro (BENCHMARKS.md section 10).
//!
//! # Example
//!
#![cfg_attr(
    feature = "content",
    doc = r#"
```
use etl_core::{with_retry, EtlError, IdempotentSink, JsonlSink, Launch, RetryPolicy, Row, Sink};

# async fn fetch_page() -> Result<Vec<Row>, EtlError> {
#     Ok(vec![Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() })])
# }
# #[tokio::main(flavor = "current_thread")]
# async fn main() -> Result<(), EtlError> {
# let dir = tempfile::tempdir()?;
# let path = dir.path().join("launches.jsonl");
let file = JsonlSink::open(&path)?;
let seen = file.content_keys()?; // resume: rows of earlier runs are not written again
let sink = IdempotentSink::with_seen(file, seen);

let rows = with_retry(RetryPolicy::default(), fetch_page).await?;
let new = sink.load(&rows).await?;
# assert_eq!(new, 1);
# Ok(())
# }
```
"#
)]
//! The retry half alone:
//!
//! ```
//! use etl_core::{with_retry, EtlError, RetryPolicy};
//!
//! # async fn fetch_page(page: u32) -> Result<String, EtlError> { Ok(format!("page {page}")) }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), EtlError> {
//! let body = with_retry(RetryPolicy::default(), || fetch_page(1)).await?;
//! # assert_eq!(body, "page 1");
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without the content half, the docs' links into it (these crate docs, the
// `#[retry]` page) have nothing to point at: by design, not by mistake.
#![cfg_attr(not(feature = "content"), allow(rustdoc::broken_intra_doc_links))]

// The `#[retry]` expansion names `::etl_core::...`; this makes that path
// resolve inside etl-core too.
extern crate self as etl_core;

// The two halves: the retry tree (retry.rs, retry/) is always built; the
// content tree (content.rs, content/) is feature `content`. `error.rs` is
// shared by both.
#[cfg(feature = "anyhow")]
mod chain;
#[cfg(feature = "content")]
pub mod content;
mod error;
#[cfg(feature = "reqwest")]
pub mod http;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod retry;

#[cfg(feature = "content")]
pub use content::{content_id, IdempotentSink};
pub use retry::{with_retry, RetryPolicy};

pub use error::EtlError;

#[cfg(feature = "content")]
pub use content::{
    content_key,
    jsonl::{read_content_keys, read_record_keys, JsonlSink},
    launch::Launch,
    record::Record,
    reject::{JsonlRejects, Reject, RejectSink},
    row::Row,
    sink::{Prepared, Sink, Written},
};

#[cfg(feature = "macros")]
#[doc = include_str!("retry_macro.md")]
pub use etl_retry_macros::retry;

// What the `#[retry]` expansion calls (retry/private.rs): not public API.
#[doc(hidden)]
pub use retry::private as __private;
