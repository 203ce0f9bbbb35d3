//! One benchmark job: what to do, and what came out of it.

use super::histogram::Histogram;
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
}
