// Argument patterns, `mut` bindings, owned arguments consumed by the body,
// and references.
use etl_core::{retry, EtlError};

struct Point {
    x: u32,
    y: u32,
}

#[retry(max_attempts = 2)]
async fn sum((a, b): (u32, u32), Point { x, y }: Point) -> Result<u32, EtlError> {
    Ok(a + b + x + y)
}

#[retry(base = "1ms", max = "1s")]
async fn push(mut items: Vec<String>, item: String, note: &str) -> Result<Vec<String>, EtlError> {
    items.push(item); // consumes this attempt's copy
    items.push(note.to_owned());
    Ok(items)
}

impl Clone for Point {
    fn clone(&self) -> Self {
        Point { x: self.x, y: self.y }
    }
}

fn main() {
    let _ = sum((1, 2), Point { x: 3, y: 4 });
    let note = String::from("n");
    let _ = push(Vec::new(), "a".into(), &note);
}
