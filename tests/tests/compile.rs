//! trybuild: what `#[retry]` accepts (`ui/pass`) and the error it gives for
//! every misuse (`ui/fail`, pinned by `.stderr` files).
//!
//! Compiler wording changes between releases, so the `.stderr` files are
//! pinned to the toolchain they were written with (1.95); on any other
//! toolchain the test is ignored rather than failing by surprise, and
//! `.ci/run` checks that CI runs the pinned one. To regenerate them:
//! `TRYBUILD=overwrite cargo test -p etl-tests --test compile`.

#[rustversion::attr(
    not(stable(1.95)),
    ignore = "the .stderr files are pinned to Rust 1.95"
)]
#[test]
fn retry_macro_compile_cases() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}

#[rustversion::not(stable(1.95))]
#[test]
fn retry_macro_compile_cases_skipped_off_the_pinned_toolchain() {
    eprintln!("skipped: the #[retry] .stderr files are pinned to Rust 1.95");
}
