//! How much of the host other work took while a scenario ran: the share
//! of every CPU's time that went neither to this harness nor to the guests
//! it started. A speed scenario's figures only mean something on a host
//! that was otherwise quiet; when it was not, the suite says so instead of
//! failing on a ratio the neighbours decided.

use crate::machine::qemu::{BootRecord, Mark};
use anyhow::{Context, Result};
use std::time::Duration;
use std::time::Instant;

/// Above this share of the machine taken by other work, a speed
/// scenario's figures are not trusted (a quarter: on 2 cores, one busy
/// compiler or another guest).
pub const TOO_LOADED: f64 = 0.25;

/// CPU time counters at one moment, in clock ticks.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Every CPU's busy time (not idle, not waiting for I/O).
    busy: u64,
    /// This process and its reaped children (the guests' QEMUs).
    own: u64,
    at: Instant,
}

/// Measures other work's share of the host from `start` to `share`.
#[derive(Debug)]
pub struct HostLoad {
    start: Sample,
    cpus: u64,
}

impl HostLoad {
    pub fn start() -> Result<HostLoad> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Ok(HostLoad {
            start: sample()?,
            cpus,
        })
    }

    /// Other work's share of all CPUs since `start`, 0.0 to 1.0. Guests
    /// still running count as other work until QEMU exits and is reaped,
    /// so call it after the scenario's last boot.
    pub fn others_share(&self) -> Result<f64> {
        let now = sample()?;
        let ticks = ticks_per_second() as f64;
        let wall = now.at.duration_since(self.start.at).as_secs_f64();
        if wall <= 0.0 {
            return Ok(0.0);
        }
        let busy = now.busy.saturating_sub(self.start.busy) as f64 / ticks;
        let own = now.own.saturating_sub(self.start.own) as f64 / ticks;
        Ok(((busy - own) / (wall * self.cpus as f64)).clamp(0.0, 1.0))
    }
}

fn sample() -> Result<Sample> {
    let stat = std::fs::read_to_string("/proc/stat").context("cannot read /proc/stat")?;
    let busy = busy_ticks(&stat).context("/proc/stat has no cpu line")?;
    let own = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| own_ticks(&s))
        .context("cannot read this process's CPU times from /proc/self/stat")?;
    Ok(Sample {
        busy,
        own,
        at: Instant::now(),
    })
}

/// The first (all CPUs) line of /proc/stat: everything but idle and iowait.
fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let total: u64 = v.iter().take(8).sum();
    Some(total - v.get(3)? - v.get(4).unwrap_or(&0))
}

/// utime + stime + cutime + cstime of a /proc/<pid>/stat line.
fn own_ticks(stat: &str) -> Option<u64> {
    Some(proc_times(stat)?.iter().sum())
}

/// utime, stime, cutime and cstime, in clock ticks, of a /proc/PID/stat
/// line (fields 14-17; the command name in parentheses may hold spaces).
pub fn proc_times(stat: &str) -> Option<[u64; 4]> {
    let after = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state): fields 14..=17 are indices 11..=14.
    let mut times = [0; 4];
    for (t, f) in times.iter_mut().zip(fields.get(11..15)?) {
        *t = f.parse().ok()?;
    }
    Some(times)
}

/// Clock ticks (as in /proc/PID/stat) as a duration.
pub fn ticks_to_duration(ticks: u64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(ticks as f64 / ticks_per_second() as f64)
}

/// The CPU time each scenario's guests used, by scenario (a Pi is named
/// after its scenario), for the time table: wall time alone hides whether a
/// scenario grew or only had busier neighbours. Each boot's time is split
/// at the job's start and end, so the table also says how much of it went
/// to booting the system rather than to the work a scenario proves.
static GUEST_CPU: std::sync::Mutex<Vec<(String, GuestTime)>> = std::sync::Mutex::new(Vec::new());

/// A scenario's boots, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GuestTime {
    pub boots: u32,
    /// All of QEMU's CPU time.
    pub cpu: Duration,
    /// From power-on until the agent started the job (a whole boot whose
    /// job never started: a trial that failed, a power cut before it).
    pub to_job: Mark,
    /// The jobs themselves.
    pub job: Mark,
}

/// Adds one boot to `scenario`'s totals.
pub fn add_guest_boot(scenario: &str, boot: &BootRecord) {
    let mut totals = GUEST_CPU.lock().unwrap_or_else(|e| e.into_inner());
    let index = match totals.iter().position(|(name, _)| name == scenario) {
        Some(i) => i,
        None => {
            totals.push((scenario.to_string(), GuestTime::default()));
            totals.len() - 1
        }
    };
    let total = &mut totals[index].1;
    let whole = Mark {
        wall: boot.elapsed,
        cpu: boot.cpu,
    };
    let started = boot.job_started.unwrap_or(whole);
    let ended = boot.job_ended.unwrap_or(whole);
    total.boots += 1;
    total.cpu += boot.cpu;
    total.to_job.wall += started.wall;
    total.to_job.cpu += started.cpu;
    total.job.wall += ended.wall.saturating_sub(started.wall);
    total.job.cpu += ended.cpu.saturating_sub(started.cpu);
}

/// What `scenario`'s guests used so far.
pub fn guest_time(scenario: &str) -> GuestTime {
    let totals = GUEST_CPU.lock().unwrap_or_else(|e| e.into_inner());
    totals
        .iter()
        .find(|(name, _)| name == scenario)
        .map_or(GuestTime::default(), |(_, time)| *time)
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(busy_ticks(stat), Some(160));
    }

    #[test]
    fn own_reads_the_fields_after_the_command_name() {
        let stat = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 22 33 44 20 0";
        assert_eq!(own_ticks(stat), Some(11 + 22 + 33 + 44));
    }

    #[test]
    fn a_quiet_moment_is_mostly_not_others() {
        let load = HostLoad::start().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let share = load.others_share().unwrap();
        assert!((0.0..=1.0).contains(&share), "{share}");
    }
}
