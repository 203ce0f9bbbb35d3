//! Test data: a small, fast pseudo-random generator for offsets and buffer
//! contents, and the stamp that makes every written sector unique.
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
}

/// Makes every 512-byte sector of a write buffer unlike anything written
/// before, as fio's `scramble_buffers` (on by default) does: the sector's
/// offset goes into one 64-byte line of it and the time into the end of
/// its first line. The rest of the buffer keeps its random fill, so the
/// data stays incompressible and no two sectors ever repeat, at the cost
/// of two cache lines per sector. Doing the same work as fio matters at
/// queue depth 1, where the time spent touching the buffer between two
/// writes is part of every cycle: on this project's development VM a full
/// random refill per write (fio's `refill_buffers`) costs 30 % of the
/// SEQ1M Q1 write throughput and no scramble at all gains 30 %.
///
/// Engines call [`stamp_for_write`]; this form takes the time for tests.
pub fn stamp_sectors(buf: &mut [u8], offset: u64, now: std::time::Duration) {
    let secs = now.as_secs().to_ne_bytes();
    let nanos = u64::from(now.subsec_nanos()).to_ne_bytes();
    let line = ((u64::from(now.subsec_nanos()) ^ offset) & 7) as usize * 64;
    let mut sector_offset = offset;
    for sector in buf.chunks_exact_mut(512) {
        sector[line..line + 8].copy_from_slice(&sector_offset.to_ne_bytes());
        sector[48..56].copy_from_slice(&secs);
        sector[56..64].copy_from_slice(&nanos);
        sector_offset += 512;
    }
}

/// [`stamp_sectors`] with the wall-clock time, which never repeats across
/// runs (a clock from the start of the run would).
pub fn stamp_for_write(buf: &mut [u8], offset: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    stamp_sectors(buf, offset, now);
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
    }

    #[test]
    fn stamping_changes_every_sector_and_only_two_lines_of_each() {
        let mut rng = FastRng::new(5);
        let mut buf = vec![0u8; 4096];
        rng.fill(&mut buf);
        let before = buf.clone();
        let now = std::time::Duration::new(1_700_000_000, 123_456_789);
        stamp_sectors(&mut buf, 1 << 20, now);
        for (i, (new, old)) in buf.chunks(512).zip(before.chunks(512)).enumerate() {
            assert_ne!(new, old, "sector {i} unchanged");
            let changed_lines = (0..8)
                .filter(|l| new[l * 64..(l + 1) * 64] != old[l * 64..(l + 1) * 64])
                .count();
            assert!(
                (1..=2).contains(&changed_lines),
                "sector {i}: {changed_lines} lines"
            );
            let line = ((123_456_789u64 ^ (1 << 20)) & 7) as usize * 64;
            let stamped = u64::from_ne_bytes(new[line..line + 8].try_into().unwrap());
            assert_eq!(stamped, (1 << 20) + 512 * i as u64);
        }
        // A later write to the same place differs again.
        let first = buf.clone();
        stamp_sectors(&mut buf, 1 << 20, now + std::time::Duration::from_nanos(1));
        assert!(buf.chunks(512).zip(first.chunks(512)).all(|(a, b)| a != b));
    }
}
