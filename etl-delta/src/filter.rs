//! [`KeyFilter`]: a Parquet split-block bloom filter, probed with a key's
//! hash made once.
//!
//! A load looks each of its keys up in every live file's filter. parquet's
//! [`Sbbf::check`] hashes the key on every call (its hash-taking check is
//! private), so a key probed against a hundred files was hashed a hundred
//! times. The filter's layout and probe are fixed by the Parquet format
//! (`BloomFilter.md`: xxHash64 with seed 0, 256-bit blocks of eight 32-bit
//! words, a block chosen by the hash's upper half, one bit a word set by
//! its lower half times the eight salts); this holds the same bits as the
//! [`Sbbf`] it is made from, so it answers as that filter does.

use deltalake::parquet::bloom_filter::Sbbf;
use deltalake::parquet::errors::ParquetError;
use twox_hash::XxHash64;

/// The format's salts, one a word of a block.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// A key's hash, as every filter of the table is probed with it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHash(u64);

impl KeyHash {
    /// The hash the Parquet format gives `key`'s bytes.
    pub(crate) fn of(key: &str) -> Self {
        KeyHash(XxHash64::oneshot(0, key.as_bytes()))
    }
}

/// The bits of one split-block bloom filter.
#[derive(Debug)]
pub(crate) struct KeyFilter {
    blocks: Vec<[u32; 8]>,
}

impl KeyFilter {
    /// The filter holding the bits of `sbbf`.
    pub(crate) fn new(sbbf: &Sbbf) -> Self {
        let mut bytes = Vec::with_capacity(sbbf.num_blocks() * 32);
        // Into a Vec: writing cannot fail.
        let _ = sbbf.write_bitset(&mut bytes);
        // The format stores each word little-endian.
        let blocks = bytes
            .chunks_exact(32)
            .map(|block| {
                std::array::from_fn(|i| {
                    u32::from_le_bytes([
                        block[4 * i],
                        block[4 * i + 1],
                        block[4 * i + 2],
                        block[4 * i + 3],
                    ])
                })
            })
            .collect();
        KeyFilter { blocks }
    }

    /// The filter stored as `stored`: a Parquet bloom filter's header and
    /// bitset, the bytes a column chunk's `bloom_filter_offset` and
    /// `bloom_filter_length` point at.
    pub(crate) fn from_stored(stored: &[u8]) -> Result<Self, ParquetError> {
        Ok(KeyFilter::new(&Sbbf::from_bytes(stored)?))
    }

    /// The bytes its bits take in memory.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(self.blocks.as_slice())
    }

    /// Whether the key of `hash` may be in the filter (`false`: it is not).
    pub(crate) fn may_hold(&self, KeyHash(hash): KeyHash) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let at = ((hash >> 32) * self.blocks.len() as u64) >> 32;
        let block = &self.blocks[at as usize];
        let x = hash as u32;
        (0..8).all(|i| block[i] & (1 << (x.wrapping_mul(SALT[i]) >> 27)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every answer is parquet's own, for keys in the filter and not,
    /// across filter sizes (one block, and many).
    #[test]
    fn it_answers_as_the_parquet_filter_does() {
        for (ndv, inserted) in [(1, 1), (1_000, 1_000), (100_000, 20_000)] {
            let mut sbbf = Sbbf::new_with_ndv_fpp(ndv, 0.01).unwrap();
            for i in 0..inserted {
                sbbf.insert(format!("key-{i}").as_str());
            }
            let filter = KeyFilter::new(&sbbf);
            let mut positives = 0;
            for i in 0..inserted * 3 {
                let key = format!("key-{i}");
                let ours = filter.may_hold(KeyHash::of(&key));
                assert_eq!(ours, sbbf.check(key.as_str()), "{key} at ndv {ndv}");
                positives += usize::from(ours);
            }
            assert!(positives >= inserted, "every inserted key is held");
        }
    }

    /// A filter as a Parquet file stores it (header, then bitset) reads
    /// back holding the same bits; bytes that are not one are refused.
    #[test]
    fn a_stored_filter_reads_back_as_written() {
        let mut sbbf = Sbbf::new_with_ndv_fpp(1_000, 1e-5).unwrap();
        for i in 0..1_000 {
            sbbf.insert(format!("key-{i}").as_str());
        }
        let mut stored = Vec::new();
        sbbf.write(&mut stored).unwrap();
        let filter = KeyFilter::from_stored(&stored).unwrap();
        assert_eq!(filter.bytes(), sbbf.num_blocks() * 32);
        for i in 0..3_000 {
            let key = format!("key-{i}");
            assert_eq!(filter.may_hold(KeyHash::of(&key)), sbbf.check(key.as_str()));
        }
        assert!(KeyFilter::from_stored(&stored[..stored.len() - 1]).is_err());
        assert!(KeyFilter::from_stored(b"not a filter").is_err());
    }
}
