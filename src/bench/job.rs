//! One benchmark job: what to do, and what came out of it.

use super::histogram::{Histogram, LatencySummary};
use crate::units::MIB;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Read,
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Sequential,
    Random,
}

/// When a job stops issuing I/O.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// Run for this long after the ramp (fio's time_based).
    Time { seconds: f64 },
    /// Move this many bytes once (fio's size-based job).
    Bytes { bytes: u64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Short name: "SEQ1M Q8 read".
    pub name: String,
    pub direction: Direction,
    pub pattern: Pattern,
    pub block_size: u32,
    pub queue_depth: u32,
    /// I/O done during the ramp is not counted: caches and queues settle.
    pub ramp: Duration,
    pub limit: Limit,
    /// I/O stays within `0..span` bytes of the file or device.
    pub span: u64,
}

impl JobSpec {
    /// How long the job is expected to take, for the progress display.
    pub fn expected(&self) -> Option<Duration> {
        match self.limit {
            Limit::Time { seconds } => Some(self.ramp + Duration::from_secs_f64(seconds)),
            Limit::Bytes { .. } => None,
        }
    }

    pub fn blocks_in_span(&self) -> u64 {
        self.span / u64::from(self.block_size)
    }
}

/// What an engine measured for one job.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// I/Os completed in the measured window: from the end of the ramp to
    /// the end of the runtime (time-limited jobs), or to the last
    /// completion (byte-limited jobs).
    pub ios: u64,
    pub bytes: u64,
    /// The measured window's length, plus the final flush for writes.
    pub elapsed: Duration,
    /// Time the final fsync took (writes only).
    pub flush: Option<Duration>,
    /// Per-I/O latency, from submission to completion, of every I/O that
    /// completed after the ramp (those drained after the window too).
    pub latency: Histogram,
    /// CPU time this process spent after the ramp (user + system).
    pub cpu: Duration,
    /// Process CPU time at the end of the ramp, as the engine saw it.
    pub cpu_start: Option<Duration>,
    /// The run was cut short by Ctrl-C or a termination signal.
    pub interrupted: bool,
}

/// Picks the offset of the next I/O within a job's span.
pub struct OffsetPicker {
    pattern: Pattern,
    block_size: u64,
    blocks: u64,
    next_block: u64,
    rng: super::random::FastRng,
}

impl OffsetPicker {
    pub fn new(spec: &JobSpec, seed: u64) -> OffsetPicker {
        OffsetPicker {
            pattern: spec.pattern,
            block_size: u64::from(spec.block_size),
            blocks: spec.blocks_in_span().max(1),
            next_block: 0,
            rng: super::random::FastRng::new(seed),
        }
    }

    /// Sequential jobs wrap around at the end of the span.
    pub fn next_offset(&mut self) -> u64 {
        let block = match self.pattern {
            Pattern::Sequential => {
                let block = self.next_block;
                self.next_block = (self.next_block + 1) % self.blocks;
                block
            }
            Pattern::Random => self.rng.below(self.blocks),
        };
        block * self.block_size
    }
}

/// One test's figures, as reports keep them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// "SEQ1M Q8 read"; also the key later commands look results up by.
    pub name: String,
    pub direction: Direction,
    pub pattern: Pattern,
    pub block_size: u32,
    pub queue_depth: u32,
    pub ios: u64,
    pub bytes: u64,
    /// Measured time: the window after the ramp (the runtime; for
    /// byte-limited jobs up to the last completion), plus the final flush
    /// for writes.
    pub seconds: f64,
    pub flush_seconds: Option<f64>,
    /// 10^6 bytes per second, as drives are sold.
    pub mb_per_s: f64,
    /// 2^20 bytes per second.
    pub mib_per_s: f64,
    pub iops: f64,
    pub latency: Option<LatencySummary>,
    pub cpu_seconds: f64,
    /// CPU time per I/O in microseconds: what the engine costs.
    pub cpu_us_per_io: Option<f64>,
}

impl TestResult {
    pub fn from_measurement(spec: &JobSpec, m: &Measurement) -> TestResult {
        let seconds = m.elapsed.as_secs_f64();
        let per_second = |v: f64| if seconds > 0.0 { v / seconds } else { 0.0 };
        TestResult {
            name: spec.name.clone(),
            direction: spec.direction,
            pattern: spec.pattern,
            block_size: spec.block_size,
            queue_depth: spec.queue_depth,
            ios: m.ios,
            bytes: m.bytes,
            seconds,
            flush_seconds: m.flush.map(|d| d.as_secs_f64()),
            mb_per_s: per_second(m.bytes as f64) / 1e6,
            mib_per_s: per_second(m.bytes as f64) / MIB as f64,
            iops: per_second(m.ios as f64),
            latency: m.latency.summary(),
            cpu_seconds: m.cpu.as_secs_f64(),
            cpu_us_per_io: (m.ios > 0).then(|| m.cpu.as_secs_f64() * 1e6 / m.ios as f64),
        }
    }

    pub fn kib_per_s(&self) -> f64 {
        self.mib_per_s * 1024.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern) -> JobSpec {
        JobSpec {
            name: "t".into(),
            direction: Direction::Read,
            pattern,
            block_size: 4096,
            queue_depth: 1,
            ramp: Duration::ZERO,
            limit: Limit::Time { seconds: 1.0 },
            span: 4096 * 3 + 100,
        }
    }

    #[test]
    fn sequential_offsets_wrap_inside_the_span() {
        let mut picker = OffsetPicker::new(&spec(Pattern::Sequential), 1);
        let offsets: Vec<u64> = (0..5).map(|_| picker.next_offset()).collect();
        assert_eq!(offsets, [0, 4096, 8192, 0, 4096]);
    }

    #[test]
    fn random_offsets_are_aligned_and_inside_the_span() {
        let mut picker = OffsetPicker::new(&spec(Pattern::Random), 1);
        for _ in 0..1000 {
            let offset = picker.next_offset();
            assert_eq!(offset % 4096, 0);
            assert!(offset + 4096 <= 4096 * 3 + 100);
        }
    }

    #[test]
    fn results_are_computed_in_both_units() {
        let spec = &spec(Pattern::Sequential);
        let mut latency = Histogram::new();
        latency.record(1_000_000);
        let m = Measurement {
            ios: 100,
            bytes: 100 * MIB,
            elapsed: Duration::from_secs(2),
            flush: None,
            latency,
            cpu: Duration::from_millis(10),
            cpu_start: None,
            interrupted: false,
        };
        let r = TestResult::from_measurement(spec, &m);
        assert!((r.mib_per_s - 50.0).abs() < 1e-9);
        assert!((r.mb_per_s - 52.428_8).abs() < 1e-9);
        assert!((r.iops - 50.0).abs() < 1e-9);
        assert!((r.cpu_us_per_io.unwrap() - 100.0).abs() < 1e-9);
    }
}
