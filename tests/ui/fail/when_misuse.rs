use etl_core::retry;
use std::io;

fn wrong_error_type(_: &u32) -> bool {
    true
}

// The predicate's argument is not the fn's error type.
#[retry(when = wrong_error_type)]
async fn f() -> io::Result<()> {
    Ok(())
}

// A closure is not a fn path.
#[retry(when = |_: &io::Error| true)]
async fn g() -> io::Result<()> {
    Ok(())
}

fn is_transient(_: &io::Error) -> bool {
    true
}

// With it, a blocking fn still has to return a Result.
#[retry(when = is_transient)]
fn k() -> u32 {
    1
}

fn main() {}
