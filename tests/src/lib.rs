//! Workspace-level tests of etl-retry (unpublished): `tests/compile.rs`
//! runs the trybuild `ui/pass` and `ui/fail` cases of `#[retry]`, the other
//! files under `tests/` test the crates together.
