//! Verdicts people already trust: Raspberry Pi's SD card test (agnostics)
//! and the PiBenchmarks score. docs/benchmark.md explains how each maps
//! onto our measurements.

use serde::{Deserialize, Serialize};

/// The SD Association's application performance classes, as agnostics
/// checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppClass {
    BelowA1,
    A1,
    A2,
}

impl std::fmt::Display for AppClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AppClass::BelowA1 => "below A1",
            AppClass::A1 => "A1",
            AppClass::A2 => "A2",
        })
    }
}

/// agnostics' pass marks (A1) and the A2 random-I/O marks.
pub const A1_SEQ_WRITE_KIB_S: f64 = 10_000.0;
pub const A1_RAND_WRITE_IOPS: f64 = 500.0;
pub const A1_RAND_READ_IOPS: f64 = 1_500.0;
pub const A2_RAND_WRITE_IOPS: f64 = 2_000.0;
pub const A2_RAND_READ_IOPS: f64 = 4_000.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub what: String,
    pub value: f64,
    pub target: f64,
    pub pass: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassVerdict {
    pub class: AppClass,
    /// Which of our tests the figures come from.
    pub basis: String,
    pub checks: Vec<Check>,
}

pub fn app_class(
    seq_write_kib_s: f64,
    rand_write_iops: f64,
    rand_read_iops: f64,
    basis: &str,
) -> ClassVerdict {
    let check = |what: &str, value: f64, target: f64| Check {
        what: what.to_string(),
        value,
        target,
        pass: value >= target,
    };
    let checks = vec![
        check(
            "sequential write KiB/s",
            seq_write_kib_s,
            A1_SEQ_WRITE_KIB_S,
        ),
        check("random 4K write IOPS", rand_write_iops, A1_RAND_WRITE_IOPS),
        check("random 4K read IOPS", rand_read_iops, A1_RAND_READ_IOPS),
    ];
    let a1 = checks.iter().all(|c| c.pass);
    let a2 = a1 && rand_write_iops >= A2_RAND_WRITE_IOPS && rand_read_iops >= A2_RAND_READ_IOPS;
    let class = match (a1, a2) {
        (_, true) => AppClass::A2,
        (true, false) => AppClass::A1,
        _ => AppClass::BelowA1,
    };
    ClassVerdict {
        class,
        basis: basis.to_string(),
        checks,
    }
}

/// The seven PiBenchmarks inputs, already mapped onto our tests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoreInputs {
    /// dd sequential write, MB/s (10^6).
    pub dd_write_mb_s: f64,
    /// fio 4K random read / write IOPS (deep queue).
    pub fio_rand_read_iops: f64,
    pub fio_rand_write_iops: f64,
    /// iozone 4K sequential read / write, KB/s (1024 bytes, queue depth 1).
    pub iozone_read_kib_s: f64,
    pub iozone_write_kib_s: f64,
    /// iozone 4K random read / write, KB/s (queue depth 1).
    pub iozone_rand_read_kib_s: f64,
    pub iozone_rand_write_kib_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub score: f64,
    pub inputs: ScoreInputs,
    /// How each input was taken from our tests.
    pub mapping: String,
}

/// PiBenchmarks: random writes weigh most, because they are what makes a
/// running system feel slow.
pub fn pibenchmarks_score(i: &ScoreInputs) -> f64 {
    (i.dd_write_mb_s * 1024.0
        + i.fio_rand_read_iops * 4.0
        + i.fio_rand_write_iops * 10.0
        + i.iozone_read_kib_s
        + i.iozone_write_kib_s
        + i.iozone_rand_read_kib_s * 4.0
        + i.iozone_rand_write_kib_s * 10.0)
        / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_sd_card_is_a1() {
        let v = app_class(20_000.0, 800.0, 2_500.0, "test");
        assert_eq!(v.class, AppClass::A1);
        assert!(v.checks.iter().all(|c| c.pass));
    }

    #[test]
    fn the_marks_themselves_pass() {
        let v = app_class(10_000.0, 500.0, 1_500.0, "test");
        assert_eq!(v.class, AppClass::A1);
        let v = app_class(10_000.0, 2_000.0, 4_000.0, "test");
        assert_eq!(v.class, AppClass::A2);
    }

    #[test]
    fn one_failed_mark_is_below_a1() {
        // The damaged card from Raspberry Pi's own example output.
        let v = app_class(2_944.0, 176.0, 1_861.0, "test");
        assert_eq!(v.class, AppClass::BelowA1);
        let failed: Vec<&str> = v
            .checks
            .iter()
            .filter(|c| !c.pass)
            .map(|c| c.what.as_str())
            .collect();
        assert_eq!(failed, ["sequential write KiB/s", "random 4K write IOPS"]);
    }

    #[test]
    fn fast_random_io_with_slow_writes_is_not_a2() {
        let v = app_class(9_000.0, 5_000.0, 9_000.0, "test");
        assert_eq!(v.class, AppClass::BelowA1);
    }

    #[test]
    fn score_follows_the_published_formula() {
        let inputs = ScoreInputs {
            dd_write_mb_s: 20.0,
            fio_rand_read_iops: 2_000.0,
            fio_rand_write_iops: 600.0,
            iozone_read_kib_s: 8_000.0,
            iozone_write_kib_s: 2_000.0,
            iozone_rand_read_kib_s: 7_000.0,
            iozone_rand_write_kib_s: 1_500.0,
        };
        // (20480 + 8000 + 6000 + 8000 + 2000 + 28000 + 15000) / 100
        assert!((pibenchmarks_score(&inputs) - 874.8).abs() < 1e-9);
    }
}
