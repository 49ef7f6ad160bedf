//! `&mut self` and `&mut T` arguments, lent to each attempt in turn: every
//! attempt sees the previous one's mutation, and the future stays `Send`.

use etl_core::{retry, EtlError};

struct Cursor {
    seen: Vec<u32>,
    fail_first: usize,
}

impl Cursor {
    #[retry(max_attempts = 5, base = "10ms")]
    async fn advance(&mut self, step: u32) -> Result<usize, EtlError> {
        self.seen.push(step);
        tokio::task::yield_now().await; // a real await point inside the attempt
        if self.seen.len() <= self.fail_first {
            return Err(EtlError::Network(format!(
                "attempt {} reset",
                self.seen.len()
            )));
        }
        Ok(self.seen.len())
    }
}

#[retry(max_attempts = 4, base = "10ms")]
async fn fill(buf: &mut Vec<u8>, byte: u8) -> Result<usize, EtlError> {
    buf.push(byte);
    if buf.len() < 3 {
        Err(EtlError::Network("short".into()))
    } else {
        Ok(buf.len())
    }
}

#[retry(max_attempts = 3, base = "1ms")]
fn fill_blocking(buf: &mut Vec<u8>) -> Result<usize, EtlError> {
    buf.push(7);
    if buf.len() < 2 {
        return Err(EtlError::Network("short".into()));
    }
    Ok(buf.len())
}

fn assert_send<T: Send>(t: T) -> T {
    t
}

// `tokio::spawn` needs a `Send + 'static` future on every runtime flavour,
// multi-thread included; the paused clock needs the current-thread one.
#[tokio::test(start_paused = true)]
async fn a_mut_self_method_sees_each_attempts_mutation_and_spawns() {
    let mut cursor = Cursor {
        seen: Vec::new(),
        fail_first: 2,
    };
    // Spawned: the future is Send.
    let handle = tokio::spawn(async move {
        let n = assert_send(cursor.advance(9)).await.unwrap();
        (n, cursor)
    });
    let (n, cursor) = handle.await.unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        cursor.seen,
        [9, 9, 9],
        "each attempt saw the last one's push"
    );
}

#[tokio::test(start_paused = true)]
async fn a_mut_argument_sees_each_attempts_mutation() {
    let mut buf = Vec::new();
    assert_eq!(assert_send(fill(&mut buf, 1)).await.unwrap(), 3);
    assert_eq!(buf, [1, 1, 1]);
}

#[test]
fn a_blocking_fn_reborrows_its_mut_argument() {
    let mut buf = Vec::new();
    assert_eq!(fill_blocking(&mut buf).unwrap(), 2);
    assert_eq!(buf, [7, 7]);
}

fn interrupted(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted
}

/// A reader over a foreign error type, with `&mut self`.
struct Reader {
    reads: u32,
}

impl Reader {
    #[retry(max_attempts = 4, base = "10ms", when = interrupted)]
    async fn read(&mut self) -> std::io::Result<u32> {
        self.reads += 1;
        if self.reads < 3 {
            return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
        }
        Ok(self.reads)
    }
}

#[tokio::test(start_paused = true)]
async fn when_with_mut_self_on_a_foreign_error() {
    let mut r = Reader { reads: 0 };
    assert_eq!(assert_send(r.read()).await.unwrap(), 3);
    assert_eq!(r.reads, 3);
}
