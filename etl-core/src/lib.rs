//! The runtime seams of a data pipeline that survives failure:
//!
//! - [`with_retry`] + [`RetryPolicy`]: retry transient failures with capped
//!   exponential backoff, honouring a server's Retry-After;
//! - [`content_id`], [`Row::content_key`] and [`IdempotentSink`]: content
//!   addressing, so that re-running a pipeline writes each row at most once;
//! - the types they live on: [`EtlError`] (each failure classified as
//!   transient or permanent), [`Row`] / [`Launch`], the [`Sink`] trait and
//!   [`JsonlSink`];
//! - [`Record`]: any row type of your own (a `Serialize` struct) gets the
//!   same exactly-once writes, with [`content_key`] as its identity.
//!
//! Data walks one way: source page -> [`Row`]s -> [`IdempotentSink`] ->
//! [`JsonlSink`] -> file.
//!
//! ```
//! use etl_core::{with_retry, EtlError, IdempotentSink, JsonlSink, Launch, RetryPolicy, Row, Sink};
//!
//! # async fn fetch_page() -> Result<Vec<Row>, EtlError> {
//! #     Ok(vec![Row::Launches(Launch { id: "a".into(), name: "Electron".into(), ..Default::default() })])
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), EtlError> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("launches.jsonl");
//! let file = JsonlSink::open(&path)?;
//! let seen = file.content_keys()?; // resume: rows of earlier runs are not written again
//! let sink = IdempotentSink::with_seen(file, seen);
//!
//! let rows = with_retry(RetryPolicy::default(), fetch_page).await?;
//! let new = sink.load(&rows).await?;
//! # assert_eq!(new, 1);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

// The `#[retry]` expansion names `::etl_core::...`; this makes that path
// resolve inside etl-core too.
extern crate self as etl_core;

pub mod content;
mod error;
mod jsonl;
mod launch;
mod parallel;
mod record;
mod reject;
pub mod retry;
mod row;
mod sink;
#[cfg(test)]
mod test_log;

pub use content::{content_id, IdempotentSink};
pub use retry::{with_retry, RetryPolicy};

pub use content::content_key;
pub use error::EtlError;
pub use jsonl::{read_content_keys, read_record_keys, JsonlSink};
pub use launch::{
    Agency, Launch, Location, Mission, Orbit, Pad, Rocket, RocketConfiguration, Status,
};
pub use record::Record;
pub use reject::{JsonlRejects, Reject, RejectSink};
pub use row::Row;
pub use sink::Sink;

#[cfg(feature = "macros")]
#[doc = include_str!("retry_macro.md")]
pub use etl_retry_macros::retry;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
