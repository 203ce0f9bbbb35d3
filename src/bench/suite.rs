//! The tests a run consists of, and turning measurements into results.
//!
//! The standard suite is CrystalDiskMark's (SEQ1M Q8, SEQ1M Q1, RND4K Q32,
//! RND4K Q1, each read and write); the `a1` preset is Raspberry Pi's own SD
//! card test (agnostics).

use super::dio::DirectIoAlignment;
use super::engine::{run_job, EngineKind};
use super::job::{Direction, JobSpec, Limit, Pattern, TestResult};
use super::measure::{JobContext, Progress};
use super::progress::ProgressUi;
use crate::units::{GIB, KIB, MIB};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// SEQ1M Q8/Q1 and RND4K Q32/Q1, read and write (how long each preset
    /// takes: [`super::times`]).
    Standard,
    /// The standard tests, shorter and on a smaller file.
    Quick,
    /// Raspberry Pi's SD card test: 256 MiB, queue depth 32, 4 MiB
    /// sequential, 4K random for 10 s; graded A1/A2.
    A1,
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Preset::Standard => "standard",
            Preset::Quick => "quick",
            Preset::A1 => "a1",
        })
    }
}

/// Durations and sizes a run uses, after defaults and overrides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SuiteParams {
    pub preset: Preset,
    pub runtime_seconds: f64,
    pub ramp_seconds: f64,
    /// The test file size asked for (before fitting it to the free space).
    pub file_size: u64,
}

impl SuiteParams {
    pub fn new(preset: Preset, runtime: Option<f64>, size: Option<u64>) -> SuiteParams {
        let (default_runtime, default_ramp, default_size): (f64, f64, u64) = match preset {
            Preset::Standard => (5.0, 1.0, GIB),
            // 64 MiB: laying out 256 MiB took an A1 card (10-20 MB/s of
            // writes) longer than the quick tests themselves, and wrote
            // four times as much to a card that is already worn.
            // The ramp is cut to a fifth of the runtime below: 0.3 s for
            // the default 1.5 s, what docs/benchmark.md quotes; a longer
            // --runtime keeps the full 0.5 s (the recommend scenario's 5 s
            // tests and their margins were measured with it).
            Preset::Quick => (1.5, 0.5, 64 * MIB),
            // agnostics uses no ramp.
            Preset::A1 => (10.0, 0.0, 256 * MIB),
        };
        let runtime_seconds = runtime.unwrap_or(default_runtime);
        // A short run gets a proportionally short ramp.
        let ramp_seconds = default_ramp.min(runtime_seconds / 5.0);
        SuiteParams {
            preset,
            runtime_seconds,
            ramp_seconds,
            file_size: size.unwrap_or(default_size),
        }
    }

    /// The jobs to run over `span` bytes; writes only when allowed.
    pub fn jobs(&self, span: u64, writes: bool) -> Vec<JobSpec> {
        let timed = Limit::Time {
            seconds: self.runtime_seconds,
        };
        let ramp = Duration::from_secs_f64(self.ramp_seconds);
        let job =
            |id: &str, direction, pattern, block_size: u64, queue_depth, limit, ramp| JobSpec {
                name: id.to_string(),
                direction,
                pattern,
                block_size: block_size as u32,
                queue_depth,
                ramp,
                limit,
                span: span / block_size * block_size,
            };
        use Direction::{Read, Write};
        use Pattern::{Random, Sequential};
        let all = match self.preset {
            Preset::Standard | Preset::Quick => vec![
                // Reads first, as CrystalDiskMark does: writes can leave the
                // drive busy with garbage collection.
                job("SEQ1M Q8 read", Read, Sequential, MIB, 8, timed, ramp),
                job("SEQ1M Q1 read", Read, Sequential, MIB, 1, timed, ramp),
                job("RND4K Q32 read", Read, Random, 4 * KIB, 32, timed, ramp),
                job("RND4K Q1 read", Read, Random, 4 * KIB, 1, timed, ramp),
                job("SEQ1M Q8 write", Write, Sequential, MIB, 8, timed, ramp),
                job("SEQ1M Q1 write", Write, Sequential, MIB, 1, timed, ramp),
                job("RND4K Q32 write", Write, Random, 4 * KIB, 32, timed, ramp),
                job("RND4K Q1 write", Write, Random, 4 * KIB, 1, timed, ramp),
            ],
            Preset::A1 => {
                let once = Limit::Bytes {
                    bytes: span / (4 * MIB) * (4 * MIB),
                };
                vec![
                    job(
                        "SEQ4M Q32 write",
                        Write,
                        Sequential,
                        4 * MIB,
                        32,
                        once,
                        Duration::ZERO,
                    ),
                    job(
                        "SEQ4M Q32 read",
                        Read,
                        Sequential,
                        4 * MIB,
                        32,
                        once,
                        Duration::ZERO,
                    ),
                    job("RND4K Q32 write", Write, Random, 4 * KIB, 32, timed, ramp),
                    job("RND4K Q32 read", Read, Random, 4 * KIB, 32, timed, ramp),
                ]
            }
        };
        all.into_iter()
            .filter(|j| writes || j.direction == Direction::Read)
            .filter(|j| j.span >= u64::from(j.block_size))
            .collect()
    }
}

/// Keeps the jobs named in `only` (all when empty). Names match ignoring
/// case, spaces, dashes and underscores: `rnd4k-q32-read`.
pub fn select(jobs: Vec<JobSpec>, only: &[String]) -> Result<Vec<JobSpec>> {
    if only.is_empty() {
        return Ok(jobs);
    }
    let key = |name: &str| -> String {
        name.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    for wanted in only {
        if !jobs.iter().any(|j| key(&j.name) == key(wanted)) {
            let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
            anyhow::bail!(
                "--test {wanted}: no such test in this run; the tests are: {}",
                names.join(", ")
            );
        }
    }
    Ok(jobs
        .into_iter()
        .filter(|j| only.iter().any(|w| key(w) == key(&j.name)))
        .collect())
}

/// Parses --runtime: seconds, fractions allowed, at most an hour.
pub fn parse_runtime(text: &str) -> anyhow::Result<f64> {
    let seconds: f64 = text
        .trim()
        .trim_end_matches('s')
        .parse()
        .map_err(|_| anyhow::anyhow!("'{text}' is not a number of seconds"))?;
    anyhow::ensure!(
        (0.1..=3600.0).contains(&seconds),
        "--runtime {text}: give 0.1 to 3600 seconds"
    );
    Ok(seconds)
}

/// Results so far, and whether the run was cut short.
pub struct SuiteOutcome {
    pub results: Vec<TestResult>,
    pub interrupted: bool,
}

pub fn run(
    engine: EngineKind,
    file: &File,
    alignment: DirectIoAlignment,
    interrupted: &AtomicBool,
    jobs: &[JobSpec],
    ui: &ProgressUi,
) -> Result<SuiteOutcome> {
    let mut results = Vec::new();
    for spec in jobs {
        let ctx = JobContext {
            file,
            spec,
            alignment,
            interrupted,
        };
        let bar = ui.job(spec);
        let measurement = run_job(engine, &ctx, &mut |p: Progress| bar.update(p))?;
        if measurement.interrupted {
            bar.abandon();
            return Ok(SuiteOutcome {
                results,
                interrupted: true,
            });
        }
        let result = TestResult::from_measurement(spec, &measurement);
        bar.finish(&result);
        results.push(result);
    }
    Ok(SuiteOutcome {
        results,
        interrupted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_suite_has_the_eight_tests() {
        let params = SuiteParams::new(Preset::Standard, None, None);
        let names: Vec<String> = params.jobs(GIB, true).into_iter().map(|j| j.name).collect();
        assert_eq!(names.len(), 8);
        assert_eq!(names[0], "SEQ1M Q8 read");
        assert_eq!(names[7], "RND4K Q1 write");
        let reads = params.jobs(GIB, false);
        assert_eq!(reads.len(), 4);
        assert!(reads.iter().all(|j| j.direction == Direction::Read));
    }

    #[test]
    fn default_runs_stay_within_their_budget() {
        let budget = |params: SuiteParams| -> f64 {
            params
                .jobs(GIB, true)
                .iter()
                .filter_map(|j| j.expected())
                .map(|d| d.as_secs_f64())
                .sum()
        };
        assert!(budget(SuiteParams::new(Preset::Standard, None, None)) <= 60.0);
        assert!(budget(SuiteParams::new(Preset::Quick, None, None)) <= 20.0);
    }

    #[test]
    fn quick_lays_out_a_small_file() {
        // An A1 card writes 10 MB/s at least: laid out in under 7 s.
        assert_eq!(
            SuiteParams::new(Preset::Quick, None, None).file_size,
            64 * MIB
        );
    }

    #[test]
    fn a1_preset_matches_agnostics() {
        let params = SuiteParams::new(Preset::A1, None, None);
        assert_eq!(params.file_size, 256 * MIB);
        let jobs = params.jobs(256 * MIB, true);
        assert!(jobs.iter().all(|j| j.queue_depth == 32));
        assert_eq!(jobs[0].limit, Limit::Bytes { bytes: 256 * MIB });
        assert_eq!(jobs[2].limit, Limit::Time { seconds: 10.0 });
        assert_eq!(jobs[2].block_size, 4096);
    }

    #[test]
    fn tests_are_selected_by_loose_names() {
        let params = SuiteParams::new(Preset::Standard, None, None);
        let picked = select(params.jobs(GIB, true), &["rnd4k-q32_READ".to_string()]).unwrap();
        assert_eq!(picked.len(), 1);
        assert_eq!(picked[0].name, "RND4K Q32 read");
        let err = select(params.jobs(GIB, false), &["RND4K Q1 write".to_string()]).unwrap_err();
        assert!(err.to_string().contains("SEQ1M Q8 read"), "{err}");
    }

    #[test]
    fn short_runtimes_get_short_ramps() {
        let params = SuiteParams::new(Preset::Standard, Some(1.0), None);
        assert!((params.ramp_seconds - 0.2).abs() < 1e-9);
    }
}
