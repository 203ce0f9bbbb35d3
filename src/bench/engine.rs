//! Runs one job on an open file or device with the best engine the kernel
//! offers: io_uring for real queue depth, or a pool of threads doing
//! pread/pwrite where io_uring is missing, disabled, or not built for this
//! architecture.

use super::buffer::AlignedBuf;
use super::dio::DirectIoAlignment;
use super::histogram::Histogram;
use super::job::{Direction, JobSpec, Limit, Measurement};
use super::random::FastRng;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    IoUring,
    Threads,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Threads => "threads (pread/pwrite)",
        })
    }
}

/// The engine a run uses, and why, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineChoice {
    pub kind: EngineKind,
    /// Why the preferred engine was not used, if it was not.
    pub fallback_reason: Option<String>,
}

/// Picks io_uring when it works here, else threads. `wanted` forces one
/// (io_uring is refused with the reason when it cannot work).
pub fn choose(wanted: Option<EngineKind>) -> Result<EngineChoice> {
    match (wanted, super::uring::available()) {
        (Some(EngineKind::Threads), _) => Ok(EngineChoice {
            kind: EngineKind::Threads,
            fallback_reason: None,
        }),
        (_, Ok(())) => Ok(EngineChoice {
            kind: EngineKind::IoUring,
            fallback_reason: None,
        }),
        (Some(EngineKind::IoUring), Err(reason)) => {
            anyhow::bail!("io_uring cannot be used here: {reason}; leave out --engine or use --engine threads")
        }
        (None, Err(reason)) => Ok(EngineChoice {
            kind: EngineKind::Threads,
            fallback_reason: Some(reason),
        }),
    }
}

/// How far a job has come, for the progress display.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub elapsed: Duration,
    pub ios: u64,
    pub bytes: u64,
}

/// Everything an engine needs for one job.
pub struct JobContext<'a> {
    pub file: &'a File,
    pub spec: &'a JobSpec,
    pub alignment: DirectIoAlignment,
    /// Set by the signal handler: stop issuing, drain, return.
    pub interrupted: &'a AtomicBool,
}

pub fn run_job(
    kind: EngineKind,
    ctx: &JobContext<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Measurement> {
    let cpu_before = cpu_time();
    let mut measurement = match kind {
        EngineKind::IoUring => super::uring::run(ctx, progress)?,
        EngineKind::Threads => super::threads::run(ctx, progress)?,
    };
    if ctx.spec.direction == Direction::Write && !measurement.interrupted {
        // Write timing includes the flush, as fio's end_fsync: data still in
        // the drive's cache has not been written yet.
        let started = Instant::now();
        ctx.file.sync_all().map_err(|e| {
            anyhow::anyhow!(
                "flushing after {}: {e}; the device may have gone away",
                ctx.spec.name
            )
        })?;
        let flush = started.elapsed();
        measurement.flush = Some(flush);
        measurement.elapsed += flush;
    }
    // CPU is counted from the end of the ramp, like the I/Os, so CPU time
    // per I/O compares with fio's figures.
    let cpu_start = measurement.cpu_start.unwrap_or(cpu_before);
    measurement.cpu = cpu_time().saturating_sub(cpu_start);
    Ok(measurement)
}

/// Decides whether another I/O may start; shared by all workers of a job.
pub struct Gate<'a> {
    stop_at: Option<Instant>,
    bytes_left: AtomicU64,
    block: u64,
    interrupted: &'a AtomicBool,
}

impl<'a> Gate<'a> {
    pub fn new(spec: &JobSpec, measured_from: Instant, interrupted: &'a AtomicBool) -> Gate<'a> {
        let (stop_at, bytes_left) = match spec.limit {
            Limit::Time { seconds } => (
                Some(measured_from + Duration::from_secs_f64(seconds)),
                u64::MAX,
            ),
            Limit::Bytes { bytes } => (None, bytes),
        };
        Gate {
            stop_at,
            bytes_left: AtomicU64::new(bytes_left),
            block: u64::from(spec.block_size),
            interrupted,
        }
    }

    pub fn may_issue(&self, now: Instant) -> bool {
        if self.interrupted.load(Ordering::Relaxed) {
            return false;
        }
        if self.stop_at.is_some_and(|stop| now >= stop) {
            return false;
        }
        if self.stop_at.is_some() {
            return true;
        }
        self.bytes_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(self.block)
            })
            .is_ok()
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }
}

/// Counts completions after the ramp; one per worker, merged at the end.
pub struct Tally {
    measured_from: Instant,
    block: u64,
    pub ios: u64,
    pub bytes: u64,
    pub last_completion: Option<Instant>,
    pub latency: Histogram,
    /// This process's CPU time when the first I/O after the ramp completed.
    pub cpu_start: Option<Duration>,
}

impl Tally {
    pub fn new(spec: &JobSpec, measured_from: Instant) -> Tally {
        Tally {
            measured_from,
            block: u64::from(spec.block_size),
            ios: 0,
            bytes: 0,
            last_completion: None,
            latency: Histogram::new(),
            cpu_start: None,
        }
    }

    pub fn complete(&mut self, issued: Instant, now: Instant) {
        if now < self.measured_from {
            return;
        }
        if self.cpu_start.is_none() {
            self.cpu_start = Some(cpu_time());
        }
        self.ios += 1;
        self.bytes += self.block;
        self.latency
            .record(duration_ns(now.saturating_duration_since(issued)));
        self.last_completion = Some(self.last_completion.map_or(now, |last| last.max(now)));
    }

    pub fn merge(&mut self, other: Tally) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.latency.merge(&other.latency);
        self.cpu_start = match (self.cpu_start, other.cpu_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_completion = match (self.last_completion, other.last_completion) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    pub fn into_measurement(self, interrupted: bool) -> Measurement {
        let elapsed = self.last_completion.map_or(Duration::ZERO, |last| {
            last.saturating_duration_since(self.measured_from)
        });
        Measurement {
            ios: self.ios,
            bytes: self.bytes,
            elapsed,
            flush: None,
            latency: self.latency,
            cpu: Duration::ZERO,
            cpu_start: self.cpu_start,
            interrupted,
        }
    }
}

/// A buffer per in-flight I/O, filled with random data for writes.
pub fn io_buffers(ctx: &JobContext<'_>, count: usize, rng: &mut FastRng) -> Vec<AlignedBuf> {
    (0..count)
        .map(|_| {
            let mut buf =
                AlignedBuf::new(ctx.spec.block_size as usize, ctx.alignment.buffer_align());
            if ctx.spec.direction == Direction::Write {
                rng.fill(buf.as_mut_slice());
            }
            buf
        })
        .collect()
}

/// Calls `progress` at most ten times a second.
pub struct Throttle {
    started: Instant,
    next: Instant,
}

impl Throttle {
    pub fn new(started: Instant) -> Throttle {
        Throttle {
            started,
            next: started,
        }
    }

    pub fn due(&mut self, now: Instant) -> Option<Duration> {
        if now < self.next {
            return None;
        }
        self.next = now + Duration::from_millis(100);
        Some(now.saturating_duration_since(self.started))
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// User plus system CPU time of this process, all threads.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the zeroed struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    // time_t and suseconds_t are 32 bits on armhf: widen before adding
    // (a no-op conversion on 64-bit targets).
    #[allow(clippy::useless_conversion)]
    let micros = |tv: libc::timeval| i64::from(tv.tv_sec) * 1_000_000 + i64::from(tv.tv_usec);
    let total = micros(usage.ru_utime) + micros(usage.ru_stime);
    Duration::from_micros(u64::try_from(total).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::job::Pattern;

    fn spec(limit: Limit) -> JobSpec {
        JobSpec {
            name: "t".into(),
            direction: Direction::Read,
            pattern: Pattern::Random,
            block_size: 4096,
            queue_depth: 1,
            ramp: Duration::ZERO,
            limit,
            span: 1 << 20,
        }
    }

    #[test]
    fn a_byte_limited_gate_lets_exactly_that_much_through() {
        let flag = AtomicBool::new(false);
        let gate = Gate::new(
            &spec(Limit::Bytes { bytes: 3 * 4096 }),
            Instant::now(),
            &flag,
        );
        let now = Instant::now();
        assert!(gate.may_issue(now) && gate.may_issue(now) && gate.may_issue(now));
        assert!(!gate.may_issue(now));
    }

    #[test]
    fn an_interrupt_closes_the_gate() {
        let flag = AtomicBool::new(false);
        let gate = Gate::new(&spec(Limit::Time { seconds: 60.0 }), Instant::now(), &flag);
        assert!(gate.may_issue(Instant::now()));
        flag.store(true, Ordering::Relaxed);
        assert!(!gate.may_issue(Instant::now()));
    }

    #[test]
    fn completions_during_the_ramp_are_not_counted() {
        let start = Instant::now();
        let measured_from = start + Duration::from_millis(10);
        let mut tally = Tally::new(&spec(Limit::Time { seconds: 1.0 }), measured_from);
        tally.complete(start, start + Duration::from_millis(5));
        tally.complete(start, start + Duration::from_millis(20));
        assert_eq!(tally.ios, 1);
        let m = tally.into_measurement(false);
        assert_eq!(m.bytes, 4096);
        assert_eq!(m.elapsed, Duration::from_millis(10));
    }
}
