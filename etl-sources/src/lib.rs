//! Sources built on etl-core, and the runnable `launches` pipeline.
//!
//! - [`SpaceDevsSource`]: a paginated Launch Library 2 (The Space Devs)
//!   list endpoint whose page fetch is a `#[retry]` fn;
//! - [`pipeline`]: source -> [`etl_core::IdempotentSink`] ->
//!   [`etl_core::JsonlSink`], resumable and safe to kill;
//! - [`replay`]: an in-process LL2-shaped server on 127.0.0.1, which the
//!   binary serves its bundled dataset from when run offline.
//!
//! ```no_run
//! use etl_sources::{pipeline, SourceOptions, SpaceDevsSource};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut source = SpaceDevsSource::new(
//!     "https://ll.thespacedevs.com/2.2.0/launch/upcoming/",
//!     SourceOptions::default(),
//! )?;
//! let sink = pipeline::open_output("launches.jsonl".as_ref())?;
//! let summary = pipeline::run(&mut source, &sink, Some(3)).await?;
//! println!("{} new rows", summary.new_rows);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub mod pipeline;
pub mod replay;
mod source;
pub mod wire;

pub use source::{SourceOptions, SpaceDevsSource};
