//! How long the benchmark suites take, computed from their definitions in
//! [`super::suite`]: `--help`, the wizard and the generated parts of
//! README.md and docs/benchmark.md quote these and no figure of their own.
//!
//! A suite's time is its tests' (runtime plus ramp each) plus laying out
//! its test file, which is written once, in full, before the first test.
//! The layout is what takes long on an SD card, so it is stated for the
//! slowest card a Pi owner should have: one that writes just what the A1
//! class promises.

use super::grade::A1_SEQ_WRITE_KIB_S;
use super::suite::{Preset, SuiteParams};
use crate::units::{binary, GIB, KIB, MIB};

/// The sequential write an A1 card must sustain (agnostics' pass mark,
/// 10,000 KiB/s), in bytes per second: the rate the layout times assume.
pub const A1_WRITE_BYTES_PER_S: f64 = A1_SEQ_WRITE_KIB_S * KIB as f64;

/// What one run of a preset takes on one drive, with the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuiteTime {
    pub preset: Preset,
    /// The timed tests, read and write (ramps included).
    pub tests_seconds: f64,
    /// The timed tests a drive measured by reads only runs (a disk without
    /// --destructive, a blank drive nobody agreed to write).
    pub read_tests_seconds: f64,
    /// The test file laid out before the tests (also the part of a device
    /// tested).
    pub file_size: u64,
    /// Passes that run until their bytes are done (the a1 preset's
    /// sequential write and read), whose time is the drive's.
    pub byte_passes: usize,
}

impl SuiteTime {
    pub fn of(preset: Preset) -> SuiteTime {
        let params = SuiteParams::new(preset, None, None);
        let timed = |writes: bool| -> f64 {
            params
                .jobs(params.file_size, writes)
                .iter()
                .filter_map(|job| job.expected())
                .map(|d| d.as_secs_f64())
                .sum()
        };
        let byte_passes = params
            .jobs(params.file_size, true)
            .iter()
            .filter(|job| job.expected().is_none())
            .count();
        SuiteTime {
            preset,
            tests_seconds: timed(true),
            read_tests_seconds: timed(false),
            file_size: params.file_size,
            byte_passes,
        }
    }

    /// Laying out the test file at `bytes_per_s`.
    pub fn layout_seconds(&self, bytes_per_s: f64) -> f64 {
        self.file_size as f64 / bytes_per_s
    }

    /// Laying out the test file on a card that writes what A1 promises.
    pub fn a1_layout_seconds(&self) -> f64 {
        self.layout_seconds(A1_WRITE_BYTES_PER_S)
    }

    /// "14 s of tests, plus laying out a 64 MiB test file (7 s on an A1
    /// card)": what `--help` and the wizard say.
    pub fn summary(&self) -> String {
        format!(
            "{} of tests, plus laying out a {} test file ({} on an A1 card)",
            duration(self.tests_seconds),
            size(self.file_size),
            duration(self.a1_layout_seconds()),
        )
    }
}

/// A duration as the docs and the help print it: whole seconds under two
/// minutes ("14 s", "105 s"), whole minutes and seconds above ("3 min 20 s"),
/// whole minutes from an hour on.
pub fn duration(seconds: f64) -> String {
    let whole = seconds.round() as u64;
    if whole < 120 {
        format!("{whole} s")
    } else if whole < 3600 {
        match whole % 60 {
            0 => format!("{} min", whole / 60),
            rest => format!("{} min {rest} s", whole / 60),
        }
    } else {
        format!("{} min", (seconds / 60.0).round() as u64)
    }
}

/// A test file's size: "64 MiB", "1 GiB" (whole units, as the presets
/// define them).
pub fn size(bytes: u64) -> String {
    if bytes % GIB == 0 {
        format!("{} GiB", bytes / GIB)
    } else if bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else {
        binary(bytes)
    }
}

/// A rate in MB/s (10^6 bytes a second, as drives are sold), whole.
pub fn rate(bytes_per_s: f64) -> String {
    format!("{} MB/s", (bytes_per_s / 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suites_add_up_from_their_tests() {
        let standard = SuiteTime::of(Preset::Standard);
        // Eight tests of 5 s after a 1 s ramp; half of them read.
        assert_eq!(standard.tests_seconds, 48.0);
        assert_eq!(standard.read_tests_seconds, 24.0);
        assert_eq!(standard.file_size, GIB);
        let quick = SuiteTime::of(Preset::Quick);
        assert!((quick.tests_seconds - 14.4).abs() < 1e-9);
        assert_eq!(quick.file_size, 64 * MIB);
        let a1 = SuiteTime::of(Preset::A1);
        assert_eq!(a1.tests_seconds, 20.0);
        assert_eq!(a1.byte_passes, 2);
    }

    #[test]
    fn an_a1_card_lays_out_the_standard_file_in_over_a_minute_and_a_half() {
        let standard = SuiteTime::of(Preset::Standard);
        let seconds = standard.a1_layout_seconds();
        assert!((104.0..106.0).contains(&seconds), "{seconds}");
        assert_eq!(rate(A1_WRITE_BYTES_PER_S), "10 MB/s");
        assert_eq!(
            SuiteTime::of(Preset::Quick).summary(),
            "14 s of tests, plus laying out a 64 MiB test file (7 s on an A1 card)"
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(14.4), "14 s");
        assert_eq!(duration(104.9), "105 s");
        assert_eq!(duration(200.0), "3 min 20 s");
        assert_eq!(duration(240.0), "4 min");
        assert_eq!(duration(4000.0), "67 min");
    }
}
