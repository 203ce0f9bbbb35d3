//! What every engine measures a job with: its context, the gate that
//! decides whether another I/O starts, the tally of completions, the
//! progress throttle, the I/O buffers and the CPU clock. The engines
//! (`uring`, `threads`) and the one who picks them (`engine`) stand on it.

use super::buffer::AlignedBuf;
use super::dio::DirectIoAlignment;
use super::histogram::Histogram;
use super::job::{Direction, JobSpec, Limit, Measurement};
use super::random::FastRng;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// Decides whether another I/O may start; shared by all workers of a job.
pub struct Gate<'a> {
    stop_at: Option<Instant>,
    bytes_left: AtomicU64,
    block: u64,
    interrupted: &'a AtomicBool,
}

impl<'a> Gate<'a> {
    pub fn new(spec: &JobSpec, measured_from: Instant, interrupted: &'a AtomicBool) -> Gate<'a> {
        let bytes_left = match spec.limit {
            Limit::Time { .. } => u64::MAX,
            Limit::Bytes { bytes } => bytes,
        };
        let stop_at = window_end(spec, measured_from);
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

/// When a time-limited job's measured window closes: `runtime` after the
/// end of the ramp. Byte-limited jobs have no window; they run until done.
pub fn window_end(spec: &JobSpec, measured_from: Instant) -> Option<Instant> {
    match spec.limit {
        Limit::Time { seconds } => Some(measured_from + Duration::from_secs_f64(seconds)),
        Limit::Bytes { .. } => None,
    }
}

/// Counts completions after the ramp; one per worker, merged at the end.
///
/// A time-limited job's throughput counts the I/Os that complete inside
/// the fixed window from the end of the ramp to the end of the runtime,
/// over exactly that time. Neither edge of the window is tied to an I/O,
/// so the count is fair however the completions bunch up. Ending the window
/// at the last completion instead (after draining what is in flight) ends
/// it right after a bunch: on a slow, deep queue whose completions arrive
/// in bursts (a throttled emulated USB drive at 50 IOPS and depth 32
/// completes 32 writes over the 0.6 s drain, in a few bursts) that read
/// 17 % high. The drained I/Os still give their latency, as fio's do.
pub struct Tally {
    measured_from: Instant,
    /// End of the measured window; `None` for byte-limited jobs, whose
    /// window ends at their last completion.
    measured_until: Option<Instant>,
    block: u64,
    /// I/Os and bytes completed inside the window.
    pub ios: u64,
    pub bytes: u64,
    /// I/Os completed after the window, while in-flight I/O drained.
    pub drained: u64,
    pub last_completion: Option<Instant>,
    pub latency: Histogram,
    /// This process's CPU time when the first I/O after the ramp completed.
    pub cpu_start: Option<Duration>,
}

impl Tally {
    pub fn new(spec: &JobSpec, measured_from: Instant) -> Tally {
        Tally {
            measured_from,
            measured_until: window_end(spec, measured_from),
            block: u64::from(spec.block_size),
            ios: 0,
            bytes: 0,
            drained: 0,
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
        if self.measured_until.is_none_or(|until| now <= until) {
            self.ios += 1;
            self.bytes += self.block;
        } else {
            self.drained += 1;
        }
        self.latency
            .record(duration_ns(now.saturating_duration_since(issued)));
        self.last_completion = Some(self.last_completion.map_or(now, |last| last.max(now)));
    }

    pub fn merge(&mut self, other: Tally) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.drained += other.drained;
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
        let since_ramp = |end: Instant| end.saturating_duration_since(self.measured_from);
        let to_last = self.last_completion.map_or(Duration::ZERO, since_ramp);
        let (ios, elapsed) = match self.measured_until {
            Some(until) if self.ios > 0 => {
                // Cut short by Ctrl-C, the window ends where I/O stopped.
                let end = if interrupted {
                    until.min(self.last_completion.unwrap_or(until))
                } else {
                    until
                };
                (self.ios, since_ramp(end))
            }
            // Not one I/O completed inside the window (a single I/O takes
            // longer than the runtime): the drained ones are all there is
            // to measure, up to the last of them.
            Some(_) => (self.drained, to_last),
            None => (self.ios, to_last),
        };
        Measurement {
            ios,
            bytes: ios * self.block,
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
        assert_eq!(tally.latency.summary().unwrap().samples, 1);
        let m = tally.into_measurement(false);
        assert_eq!(m.bytes, 4096);
        // A time-limited job is measured over its whole window.
        assert_eq!(m.elapsed, Duration::from_secs(1));
    }

    /// Completions at 50 per second in bursts of 10 every 200 ms, the first
    /// burst `phase` after the end of the ramp, for `seconds` of window
    /// plus `drain` bursts after it.
    fn bursty(seconds: f64, phase: Duration, drain: u32) -> Measurement {
        let start = Instant::now();
        let mut tally = Tally::new(&spec(Limit::Time { seconds }), start);
        let end = start + Duration::from_secs_f64(seconds);
        let mut at = start + phase;
        let mut after = 0;
        while after < drain {
            if at > end {
                after += 1;
            }
            for _ in 0..10 {
                tally.complete(at - Duration::from_millis(640), at);
            }
            at += Duration::from_millis(200);
        }
        tally.into_measurement(false)
    }

    #[test]
    fn bursts_and_the_drain_do_not_inflate_the_rate() {
        // Whatever the phase of the bursts, the window of 1.5 s holds 7 or
        // 8 of them (70 or 80 I/Os): 47-53 IOPS, 50 on average. Counting
        // the drained bursts up to the last one instead reads 50-55 here,
        // never below 50: that window always ends on a whole burst.
        let mut sum = 0.0;
        for phase_ms in (1..200).step_by(10) {
            let m = bursty(1.5, Duration::from_millis(phase_ms), 3);
            let iops = m.ios as f64 / m.elapsed.as_secs_f64();
            assert!((46.0..=54.0).contains(&iops), "phase {phase_ms} ms: {iops}");
            assert_eq!(m.elapsed, Duration::from_millis(1500));
            // The drained I/Os give their latency all the same.
            assert_eq!(m.latency.summary().unwrap().samples, m.ios + 30);
            sum += iops;
        }
        let mean = sum / 20.0;
        assert!((mean - 50.0).abs() < 1.0, "mean over phases {mean}");
    }

    #[test]
    fn a_window_without_completions_falls_back_to_the_drained_ios() {
        // One I/O takes longer than the whole runtime: only the drain
        // tells anything, measured up to its last completion.
        let start = Instant::now();
        let mut tally = Tally::new(&spec(Limit::Time { seconds: 0.5 }), start);
        tally.complete(start, start + Duration::from_millis(700));
        tally.complete(start, start + Duration::from_millis(1000));
        let m = tally.into_measurement(false);
        assert_eq!(m.ios, 2);
        assert_eq!(m.bytes, 2 * 4096);
        assert_eq!(m.elapsed, Duration::from_millis(1000));
    }

    #[test]
    fn a_byte_limited_job_is_timed_to_its_last_completion() {
        let start = Instant::now();
        let mut tally = Tally::new(&spec(Limit::Bytes { bytes: 3 * 4096 }), start);
        for ms in [100, 200, 300] {
            tally.complete(start, start + Duration::from_millis(ms));
        }
        let m = tally.into_measurement(false);
        assert_eq!((m.ios, m.elapsed), (3, Duration::from_millis(300)));
    }

    #[test]
    fn merged_workers_keep_the_window() {
        let start = Instant::now();
        let limit = Limit::Time { seconds: 1.0 };
        let mut a = Tally::new(&spec(limit), start);
        let mut b = Tally::new(&spec(limit), start);
        a.complete(start, start + Duration::from_millis(400));
        b.complete(start, start + Duration::from_millis(900));
        b.complete(start, start + Duration::from_millis(1200));
        a.merge(b);
        assert_eq!((a.ios, a.drained), (2, 1));
        let m = a.into_measurement(false);
        assert_eq!((m.ios, m.elapsed), (2, Duration::from_secs(1)));
    }
}
