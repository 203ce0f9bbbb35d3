//! Latency histogram built the way fio builds its completion-latency
//! ("plat") histogram, so our percentiles can be compared with fio's.
//!
//! Values (nanoseconds) below 128 get one bucket each. Above that, every
//! power of two is a group of 64 buckets, so a bucket's width is 1/64 of its
//! group's base and the relative error of a reported percentile stays below
//! 1/128 (0.8 %). 29 groups reach about 2^34 ns (17 s); anything slower lands
//! in the last bucket. A percentile is reported as the middle of the bucket
//! where the running count first reaches that fraction of all samples.

use serde::{Deserialize, Serialize};

/// Bits of a value kept exactly inside one group (fio's FIO_IO_U_PLAT_BITS).
const PLAT_BITS: u32 = 6;
/// Buckets per group.
const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// Groups (fio's FIO_IO_U_PLAT_GROUP_NR).
const PLAT_GROUPS: usize = 29;
/// Total number of buckets.
pub const BUCKETS: usize = PLAT_GROUPS * PLAT_VAL as usize;

#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Box<[u64; BUCKETS]>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

/// The summary a report keeps, in microseconds as people read latencies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            buckets: Box::new([0; BUCKETS]),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    pub fn record(&mut self, nanos: u64) {
        self.buckets[bucket_of(nanos)] += 1;
        self.count += 1;
        self.sum_ns += u128::from(nanos);
        self.min_ns = self.min_ns.min(nanos);
        self.max_ns = self.max_ns.max(nanos);
    }

    /// Adds another histogram's samples (one per worker thread).
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// Nanoseconds at `percent` (0 < percent <= 100), as fio computes it;
    /// `None` without samples.
    pub fn percentile_ns(&self, percent: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let wanted = percent / 100.0 * self.count as f64;
        let mut running = 0u64;
        for (index, &n) in self.buckets.iter().enumerate() {
            running += n;
            if n > 0 && running as f64 >= wanted {
                return Some(bucket_value(index));
            }
        }
        Some(bucket_value(BUCKETS - 1))
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        let us = |ns: f64| ns / 1000.0;
        Some(LatencySummary {
            samples: self.count,
            min_us: us(self.min_ns as f64),
            mean_us: us(self.mean_ns()?),
            max_us: us(self.max_ns as f64),
            p50_us: us(self.percentile_ns(50.0)?),
            p99_us: us(self.percentile_ns(99.0)?),
            p99_9_us: us(self.percentile_ns(99.9)?),
        })
    }
}

/// The bucket a value falls in (fio's plat_val_to_idx).
fn bucket_of(value: u64) -> usize {
    let msb = if value == 0 {
        0
    } else {
        63 - value.leading_zeros()
    };
    if msb <= PLAT_BITS {
        return value as usize;
    }
    let error_bits = msb - PLAT_BITS;
    let base = u64::from(error_bits + 1) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (value >> error_bits);
    ((base + offset) as usize).min(BUCKETS - 1)
}

/// The value a bucket stands for: its middle (fio's plat_idx_to_val).
fn bucket_value(index: usize) -> f64 {
    let index = index as u64;
    if index < (PLAT_VAL << 1) {
        return index as f64;
    }
    let error_bits = (index >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(PLAT_BITS));
    let k = index % PLAT_VAL;
    base as f64 + (k as f64 + 0.5) * (1u64 << error_bits) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        for value in 0..128 {
            assert_eq!(bucket_of(value), value as usize);
            assert_eq!(bucket_value(value as usize), value as f64);
        }
    }

    #[test]
    fn buckets_follow_fio_layout() {
        // 128 = 2^7: msb 7, one error bit, group base 128 -> index 128.
        assert_eq!(bucket_of(128), 128);
        assert_eq!(bucket_of(129), 128);
        assert_eq!(bucket_of(130), 129);
        // 1000 ns: msb 9, error bits 3, base 256, offset (1000>>3)&63 = 61.
        assert_eq!(bucket_of(1000), 256 + 61);
        // Its bucket covers 1000..1008; the middle is reported.
        assert_eq!(bucket_value(256 + 61), 1004.0);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn every_value_lands_in_a_bucket_that_contains_it() {
        let mut value = 1u64;
        while value < 1 << 33 {
            let reported = bucket_value(bucket_of(value));
            let error = (reported - value as f64).abs() / value as f64;
            assert!(error <= 1.0 / 64.0, "{value} reported as {reported}");
            value = value * 3 / 2 + 1;
        }
    }

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let mut h = Histogram::new();
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        let p50 = h.percentile_ns(50.0).unwrap();
        let p99 = h.percentile_ns(99.0).unwrap();
        let p999 = h.percentile_ns(99.9).unwrap();
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.01, "{p50}");
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.01, "{p99}");
        assert!((p999 - 999_000.0).abs() / 999_000.0 < 0.01, "{p999}");
        let summary = h.summary().unwrap();
        assert_eq!(summary.samples, 1000);
        assert_eq!(summary.min_us, 1.0);
        assert_eq!(summary.max_us, 1000.0);
        assert!((summary.mean_us - 500.5).abs() < 1e-9);
    }

    #[test]
    fn a_rare_slow_outlier_shows_only_in_the_tail() {
        let mut h = Histogram::new();
        for _ in 0..9_999 {
            h.record(100_000);
        }
        h.record(50_000_000);
        assert!(h.percentile_ns(99.0).unwrap() < 110_000.0);
        assert!(h.percentile_ns(99.9).unwrap() < 110_000.0);
        assert!(h.percentile_ns(100.0).unwrap() > 49_000_000.0);
    }

    #[test]
    fn merging_equals_recording_together() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        let mut both = Histogram::new();
        for v in [5u64, 700, 90_000, 3_000_000] {
            a.record(v);
            both.record(v);
        }
        for v in [12u64, 800_000] {
            b.record(v);
            both.record(v);
        }
        a.merge(&b);
        assert_eq!(a.summary(), both.summary());
    }

    #[test]
    fn empty_histogram_has_no_percentiles() {
        assert_eq!(Histogram::new().percentile_ns(50.0), None);
        assert_eq!(Histogram::new().summary(), None);
    }
}
