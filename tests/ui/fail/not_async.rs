use etl_core::retry;

// A blocking fn is fine (tests/ui/pass/blocking_and_when.rs); anything that
// is not a fn is not.
#[retry]
struct NotAFn;

fn main() {}
