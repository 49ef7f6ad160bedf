//! Workspace-level tests of etl-retry (unpublished): `tests/compile.rs`
//! runs the trybuild `ui/pass` and `ui/fail` cases of `#[retry]`, the other
//! files under `tests/` test the crates together.
//!
//! It also compiles and runs every Rust block of the workspace's README.md
//! and of the chapters in `docs/` as doctests (`cargo test -p etl-tests
//! --doc`), so an example a user pastes from there is one that builds
//! against today's API.

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[doc = include_str!("../../docs/launches.md")]
#[cfg(doctest)]
pub struct LaunchesDoctests;

#[doc = include_str!("../../docs/etl-run.md")]
#[cfg(doctest)]
pub struct EtlRunDoctests;

#[doc = include_str!("../../docs/postgres.md")]
#[cfg(doctest)]
pub struct PostgresDoctests;

#[doc = include_str!("../../docs/monitoring.md")]
#[cfg(doctest)]
pub struct MonitoringDoctests;

#[doc = include_str!("../../docs/library.md")]
#[cfg(doctest)]
pub struct LibraryDoctests;
