//! Sources built on etl-core (Launch Library 2, and any JSON API), one
//! pipeline for every source, and the runnable `launches` and `etl` commands.
//!
//! - [`Pipeline`]: a whole pipeline file (any JSON API, many resources,
//!   parents and children), run into an [`Output`] by [`Pipeline::run`]
//!   as `etl run` runs it, with [`RunOptions`], giving a [`RunReport`];
//! - [`Source`]: what the pipeline reads, page by page; implement it for an
//!   API of your own and the runner below does the rest;
//! - [`LaunchLibrary`]: a paginated Launch Library 2 (The Space Devs)
//!   list endpoint, read by the REST source ([`SpaceDevsSource`]) whose
//!   page fetch is a `#[retry]` fn, its entries decoded as launches;
//! - [`pipeline`]: any source -> [`etl_core::IdempotentSink`] -> a JSONL
//!   file, a PostgreSQL table (feature `postgres`, default) or a Delta
//!   table (feature `delta`) ([`pipeline::Output`]), resumable and safe
//!   to kill, with entries that do not read kept as rejects
//!   ([`etl_core::JsonlRejects`]), incremental runs, progress and metrics;
//! - [`rest`]: any JSON API, each resource of a file a [`rest::Resource`]
//!   read by [`rest::RestSource`];
//! - feature `cli` (default): the `launches` and `etl` binaries and what
//!   only they need: `cli` (their options and runs), `progress` (a progress
//!   bar on a terminal), `replay` (an in-process LL2-shaped server on
//!   127.0.0.1, which they serve the bundled dataset from when run offline)
//!   and the Prometheus exporter. [`metrics`] holds what a run counts beyond
//!   etl-core's metrics. With `default-features = false`, the sources and
//!   the pipeline build without clap, indicatif, the server or the exporter.
//!
//! ```no_run
//! use etl_core::{IdempotentSink, JsonlRejects};
//! use etl_sources::{pipeline, LaunchLibrary, SourceOptions};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut source = LaunchLibrary::new("https://ll.thespacedevs.com/2.3.0/launches/upcoming/")?
//!     .source(SourceOptions::default())?;
//! let out = std::path::Path::new("launches.jsonl");
//! let sink = IdempotentSink::resume(out)?;
//! // Entries that do not read as launches: kept, each once, never lost.
//! let rejects = JsonlRejects::open(pipeline::rejects_path(out))?;
//! let summary = pipeline::run(&mut source, &sink, &rejects, Some(3)).await?;
//! println!("{} new rows, {} rejected", summary.new_rows, summary.rejected);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod cursor;
pub mod metrics;
pub mod pipeline;
#[cfg(feature = "progress")]
pub mod progress;
#[cfg(feature = "cli")]
pub mod replay;
pub mod rest;
mod source;
mod spacedevs;
pub mod throttle;
mod wire;

pub use pipeline::{Output, Pipeline, PipelineError, ResourceReport, RunOptions, RunReport};
pub use source::{OnLoaded, PageRead, Source, SourceOptions};
pub use spacedevs::{AsLaunch, LaunchLibrary, SpaceDevsSource};
