use etl_core::{retry, EtlError};

// `&mut` arguments and `&mut self` are lent to each attempt in turn.
#[retry]
async fn f(buffer: &mut Vec<u8>, n: u32) -> Result<u32, EtlError> {
    buffer.push(1);
    Ok(n)
}

struct S {
    count: u32,
}

impl S {
    #[retry(max_attempts = 2, jitter = "full", deadline = "1s")]
    async fn exclusive(&mut self, extra: &mut Vec<u8>, by: u32) -> Result<u32, EtlError> {
        self.count += by;
        extra.push(0);
        if self.count > 100 {
            return Err(EtlError::Parse("too many".into()));
        }
        Ok(self.count)
    }

    #[retry]
    fn blocking(&mut self) -> Result<u32, EtlError> {
        self.count += 1;
        Ok(self.count)
    }
}

fn main() {
    let mut buffer = Vec::new();
    let _ = f(&mut buffer, 3);
    let mut s = S { count: 0 };
    let mut extra = Vec::new();
    let _ = s.exclusive(&mut extra, 1);
    assert_eq!(s.blocking().unwrap(), 1);
}
