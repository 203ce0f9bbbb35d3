//! One builder of benchmark reports for tests (the unit tests and the
//! integration tests in tests/ alike): a standard-suite report as `bench`
//! saves it, every field filled, the grades computed by the bench module
//! itself. Not used by pimigrate itself.

use super::dio::{AlignmentSource, DirectIoAlignment};
use super::engine::{EngineChoice, EngineKind};
use super::job::TestResult;
use super::job::{Direction, Pattern};
use super::machine::MachineInfo;
use super::report::{self, DeviceIdentity, Parameters, Report, TargetInfo};
use super::suite::{Preset, SuiteParams};
use super::target::TargetKind;

/// The Pi the sample reports were measured on, unless told otherwise.
pub const PI4: &str = "Raspberry Pi 4 Model B Rev 1.4";

/// RND4K Q32 and Q1 IOPS and SEQ1M MB/s (decimal), each (read, write).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speeds {
    pub q32: (f64, f64),
    pub q1: (f64, f64),
    pub seq: (f64, f64),
}

/// An A1 card on a Pi 4, near what Raspberry Pi's test shows.
pub const SD_A1: Speeds = Speeds {
    q32: (2_600.0, 800.0),
    q1: (1_900.0, 450.0),
    seq: (44.0, 21.0),
};
/// A cheap stick: reads fine, random writes "a disaster".
pub const FLASH_STICK: Speeds = Speeds {
    q32: (2_000.0, 45.0),
    q1: (1_500.0, 30.0),
    seq: (38.0, 5.0),
};
/// A USB SSD behind a good bridge.
pub const USB_SSD: Speeds = Speeds {
    q32: (36_000.0, 28_000.0),
    q1: (4_200.0, 3_900.0),
    seq: (340.0, 310.0),
};

/// A report under construction; [`SampleReport::build`] grades it.
#[derive(Debug, Clone)]
pub struct SampleReport {
    report: Report,
}

impl SampleReport {
    /// A standard-suite file test on `/` of a Pi 4 at `unix_time`, on no
    /// particular drive, with no results yet.
    pub fn new(id: impl Into<String>, unix_time: u64) -> SampleReport {
        SampleReport {
            report: Report {
                schema: report::SCHEMA.into(),
                id: id.into(),
                started_at: crate::clock::rfc3339_utc(unix_time),
                unix_time,
                duration_seconds: 60.0,
                tool_version: "0.1.0".into(),
                machine: MachineInfo {
                    kernel_release: "6.6.31+rpt-rpi-v8".into(),
                    kernel_version: "#1 SMP PREEMPT".into(),
                    arch: "aarch64".into(),
                    pi_model: Some(PI4.into()),
                    throttled: None,
                },
                target: TargetInfo {
                    kind: TargetKind::File,
                    path: "/".into(),
                    filesystem: Some("ext4".into()),
                    mountpoint: Some("/".into()),
                    partition: None,
                    device: None,
                },
                engine: EngineChoice {
                    kind: EngineKind::IoUring,
                    fallback_reason: None,
                },
                parameters: Parameters {
                    suite: SuiteParams::new(Preset::Standard, None, None),
                    span_bytes: 1 << 30,
                    size_note: None,
                    layout_seconds: None,
                    direct_io: DirectIoAlignment {
                        memory: 512,
                        offset: 512,
                        source: AlignmentSource::Statx,
                    },
                    writes: true,
                    destructive: false,
                },
                grades: report::grade(Preset::Standard, &[]),
                results: Vec::new(),
            },
        }
    }

    /// The drive the test file was on (or the raw device read).
    pub fn device(mut self, device: DeviceIdentity) -> SampleReport {
        self.report.target.device = Some(device);
        self
    }

    /// Read tests only, on the raw device (a drive without a filesystem).
    pub fn raw_device_reads(mut self) -> SampleReport {
        let target = &mut self.report.target;
        target.kind = TargetKind::Device;
        if let Some(device) = &target.device {
            target.path = device.path.clone();
        }
        target.filesystem = None;
        target.mountpoint = None;
        target.partition = None;
        self.report.parameters.writes = false;
        self.report
            .results
            .retain(|r| r.direction == Direction::Read);
        self
    }

    /// The eight standard tests at `speeds` (the read tests only once
    /// [`SampleReport::raw_device_reads`] was asked for).
    pub fn speeds(mut self, speeds: Speeds) -> SampleReport {
        self.report.results = standard_results(speeds, self.report.parameters.writes);
        self
    }

    /// Anything else a test needs different.
    pub fn with(mut self, change: impl FnOnce(&mut Report)) -> SampleReport {
        change(&mut self.report);
        self
    }

    pub fn build(mut self) -> Report {
        self.report.grades = report::grade(Preset::Standard, &self.report.results);
        self.report
    }
}

/// The standard suite's tests at `speeds`: SEQ1M Q8 and Q1, RND4K Q32 and
/// Q1, reads then (with `writes`) writes.
pub fn standard_results(speeds: Speeds, writes: bool) -> Vec<TestResult> {
    let seq_iops = |mb_s: f64| mb_s * 1e6 / f64::from(1u32 << 20);
    let mut results = vec![
        result("SEQ1M Q8 read", 1 << 20, 8, seq_iops(speeds.seq.0)),
        result("SEQ1M Q1 read", 1 << 20, 1, seq_iops(speeds.seq.0)),
        result("RND4K Q32 read", 4096, 32, speeds.q32.0),
        result("RND4K Q1 read", 4096, 1, speeds.q1.0),
    ];
    if writes {
        results.extend([
            result("SEQ1M Q8 write", 1 << 20, 8, seq_iops(speeds.seq.1)),
            result("SEQ1M Q1 write", 1 << 20, 1, seq_iops(speeds.seq.1)),
            result("RND4K Q32 write", 4096, 32, speeds.q32.1),
            result("RND4K Q1 write", 4096, 1, speeds.q1.1),
        ]);
    }
    results
}

/// One timed test of five seconds at `iops`.
pub fn result(name: &str, block_size: u32, queue_depth: u32, iops: f64) -> TestResult {
    let mb_per_s = iops * f64::from(block_size) / 1e6;
    TestResult {
        name: name.into(),
        direction: if name.ends_with("write") {
            Direction::Write
        } else {
            Direction::Read
        },
        pattern: if name.starts_with("SEQ") {
            Pattern::Sequential
        } else {
            Pattern::Random
        },
        block_size,
        queue_depth,
        ios: (iops * 5.0) as u64,
        bytes: (iops * 5.0) as u64 * u64::from(block_size),
        seconds: 5.0,
        flush_seconds: None,
        mb_per_s,
        mib_per_s: mb_per_s / 1.048_576,
        iops,
        latency: None,
        cpu_seconds: 0.1,
        cpu_us_per_io: None,
    }
}
