//! The memory of an [`IdempotentSink`](super::IdempotentSink): which keys
//! are written, which a running load has claimed and is writing, and, in
//! bounded mode, which written key to forget first.
//!
//! Laid out for the serial part of a load, the part that does not spread
//! over cores: a fresh row costs one operation on the large set (`known`)
//! and two on a small one (`pending`, the keys in flight), a row already
//! written one operation on each.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::content::Digest;

/// A content key in a set. It hashes by its first 8 bytes: they are already
/// uniform (SHA-256), and the set's hasher is keyed per process anyway, so
/// rows chosen to collide would need equal 64-bit prefixes, not equal
/// buckets. Hashing all 32 bytes with a length prefix cost about twice as
/// much, on every one of a row's set operations.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key(Digest);

impl Hash for Key {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&self.0 .0[..8]);
        state.write_u64(u64::from_le_bytes(prefix));
    }
}

/// A set of content keys, with a keyed hasher (seeded per process): rows can
/// come from anyone. foldhash is that, at a fraction of SipHash's cost.
type KeySet = HashSet<Key, foldhash::fast::RandomState>;

/// Tells the loads of a process apart: a key a load meets again under its
/// own id is a later copy in its own batch, under another id a concurrent
/// write.
pub(super) type LoadId = u64;

/// What one look at the keys found for the rows still to settle.
pub(super) struct Pass {
    /// Indices of rows this load claimed and must write now.
    pub claimed: Vec<usize>,
    /// Indices of rows a concurrent load is writing.
    pub waiting: Vec<usize>,
}

pub(super) struct Keys {
    /// Every key written or being written: the one look most rows need.
    known: KeySet,
    /// Of `known`, the keys a running load has claimed and not written yet,
    /// with that load's id.
    pending: HashMap<Key, LoadId, foldhash::fast::RandomState>,
    /// Bounded mode only: the cap, and the written keys in the order they
    /// were written, oldest first.
    bounded: Option<(usize, VecDeque<Key>)>,
}

impl Keys {
    /// All keys remembered; these already written. The set is built once at
    /// its final size: no rehashing as it grows.
    pub fn written(digests: Vec<Digest>) -> Self {
        let mut known = KeySet::with_capacity_and_hasher(digests.len(), Default::default());
        known.extend(digests.into_iter().map(Key));
        Keys {
            known,
            pending: HashMap::default(),
            bounded: None,
        }
    }

    /// Adds keys already written (unbounded memory). The first call sizes
    /// the set for `expected` keys in all, so that a resume fed piece by
    /// piece rehashes at most once more.
    pub fn add_written(&mut self, digests: Vec<Digest>, expected: usize) {
        if self.known.capacity() == 0 {
            self.known.reserve(expected);
        }
        self.known.extend(digests.into_iter().map(Key));
    }

    /// At most `cap` written keys remembered, the oldest forgotten first.
    pub fn bounded(cap: usize) -> Self {
        Keys {
            bounded: Some((cap, VecDeque::new())),
            ..Keys::written(Vec::new())
        }
    }

    /// How many keys are remembered as written.
    pub fn written_len(&self) -> usize {
        self.known.len() - self.pending.len()
    }

    /// Whether `digest` is remembered as written.
    pub fn is_written(&self, digest: &Digest) -> bool {
        let key = Key(*digest);
        self.known.contains(&key) && !self.pending.contains_key(&key)
    }

    /// One look at the rows `todo` (indices into `digests`), in input order
    /// so that the first copy of a key is the one written: skips written
    /// rows and later copies of a row this load claimed, claims free ones
    /// for load `me`, and lists those another load is writing.
    pub fn claim(&mut self, digests: &[Digest], todo: &[usize], me: LoadId) -> Pass {
        let mut pass = Pass {
            claimed: Vec::with_capacity(todo.len()),
            waiting: Vec::new(),
        };
        for &i in todo {
            let key = Key(digests[i]);
            if self.known.insert(key) {
                self.pending.insert(key, me);
                pass.claimed.push(i);
                continue;
            }
            match self.pending.get(&key) {
                None => {}                       // written
                Some(&id) if id == me => {}      // an earlier copy in this batch
                Some(_) => pass.waiting.push(i), // a concurrent load's write
            }
        }
        pass
    }

    /// Settles a claim on `digests`: written, they stay known (in bounded
    /// mode, the oldest written keys beyond the cap are forgotten); not
    /// written (the write failed or was cancelled), they are forgotten, so
    /// the next load of those rows writes them.
    pub fn settle(&mut self, digests: &[Digest], written: bool) {
        for digest in digests {
            let key = Key(*digest);
            self.pending.remove(&key);
            if !written {
                self.known.remove(&key);
            } else if let Some((_, order)) = &mut self.bounded {
                order.push_back(key);
            }
        }
        if let Some((cap, order)) = &mut self.bounded {
            // A written key is in `order` once: it joins when it is first
            // written and, once forgotten here, can only join again after a
            // new claim and write.
            while order.len() > *cap {
                if let Some(oldest) = order.pop_front() {
                    self.known.remove(&oldest);
                }
            }
        }
    }
}
