//! Workspace-level tests of etl-retry (unpublished): `tests/compile.rs`
//! runs the trybuild `ui/pass` and `ui/fail` cases of `#[retry]`, the other
//! files under `tests/` test the crates together.
//!
//! It also compiles and runs every Rust block of the workspace's README.md
//! as a doctest (`cargo test -p etl-tests --doc`), so an example a user
//! pastes from there is one that builds against today's API.

#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
