// `&self` methods, generics, `where` clauses, `Self` and `impl Trait`
// arguments all keep working inside the retried body.
use etl_core::{retry, EtlError};
use std::fmt::Display;

struct Client {
    base: String,
}

impl Client {
    fn new() -> Self {
        Client { base: "https://ll.example".into() }
    }

    #[retry(max_attempts = 3, base = "10ms")]
    async fn get<T>(&self, id: T) -> Result<String, EtlError>
    where
        T: Display + Clone,
    {
        let _fresh: Self = Self::new();
        Ok(format!("{}/{id}", self.base))
    }

    #[retry]
    async fn labels(&self, names: impl IntoIterator<Item = String> + Clone) -> Result<usize, EtlError> {
        Ok(names.into_iter().count() + self.base.len())
    }
}

fn main() {
    let client = Client::new();
    let _ = client.get(7);
    let _ = client.labels(vec!["a".to_string()]);
}
