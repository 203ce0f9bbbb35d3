//! A small, fast pseudo-random generator for offsets and test data.
//!
//! Benchmarks draw one number per I/O and fill gigabytes of buffers, so the
//! generator must cost next to nothing; it needs no cryptographic quality,
//! only data a compressing or deduplicating controller cannot shrink.

/// xoshiro256** seeded through splitmix64.
#[derive(Debug, Clone)]
pub struct FastRng {
    state: [u64; 4],
}

impl FastRng {
    pub fn new(seed: u64) -> FastRng {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        FastRng {
            state: [next(), next(), next(), next()],
        }
    }

    /// Seeded from the OS, so two runs never write the same data.
    pub fn from_entropy() -> FastRng {
        FastRng::new(rand::random())
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A value in `0..bound` (bound > 0), without modulo bias worth noticing
    /// for bounds far below 2^64 (Lemire's multiply-shift).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        let mut chunks = bytes.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_ne_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next_u64().to_ne_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }

    /// Changes one word in every 512-byte sector, so each write carries new
    /// data without paying for a full refill (fio's scramble_buffers).
    pub fn scramble(&mut self, bytes: &mut [u8]) {
        for sector in bytes.chunks_exact_mut(512) {
            let word = (self.next_u64() as usize & 63) * 8;
            sector[word..word + 8].copy_from_slice(&self.next_u64().to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = FastRng::new(7);
        let mut b = FastRng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn below_stays_in_range_and_spreads() {
        let mut rng = FastRng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let v = rng.below(10);
            seen[v as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }

    #[test]
    fn filled_data_does_not_compress_to_repeats() {
        let mut rng = FastRng::new(3);
        let mut buf = vec![0u8; 4096];
        rng.fill(&mut buf);
        let zeros = buf.iter().filter(|&&b| b == 0).count();
        assert!(zeros < 64, "{zeros} zero bytes");
        let before = buf.clone();
        rng.scramble(&mut buf);
        assert_ne!(before, buf);
    }
}
