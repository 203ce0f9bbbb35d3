//! Benchmark reports: versioned JSON kept under `<state_dir>/reports/`, so
//! `recommend` and `verify` can compare a disk before and after.
//!
//! Load them with [`list`], [`for_device`] or [`load`].

use super::dio::DirectIoAlignment;
use super::engine::EngineChoice;
use super::grade::{app_class, pibenchmarks_score, ClassVerdict, Score, ScoreInputs};
use super::job::TestResult;
use super::machine::MachineInfo;
use super::suite::{Preset, SuiteParams};
use super::target::TargetKind;
use crate::system::disks::Disk;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "pimigrate.bench/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`]; a reader refuses other versions.
    pub schema: String,
    /// Unique per report, also the file name.
    pub id: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub unix_time: u64,
    pub duration_seconds: f64,
    pub tool_version: String,
    pub machine: MachineInfo,
    pub target: TargetInfo,
    pub engine: EngineChoice,
    pub parameters: Parameters,
    pub results: Vec<TestResult>,
    pub grades: Grades,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    pub kind: TargetKind,
    /// As given on the command line.
    pub path: PathBuf,
    pub filesystem: Option<String>,
    pub mountpoint: Option<PathBuf>,
    pub partition: Option<u32>,
    pub device: Option<DeviceIdentity>,
}

/// What identifies a drive across reboots and ports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    pub name: String,
    pub path: PathBuf,
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    /// `usb`, `mmc`, `nvme`, ... as `pimigrate devices` shows it.
    pub transport: String,
    pub size_bytes: u64,
    pub logical_sector_size: u32,
    pub rotational: bool,
    pub removable: bool,
    pub usb: Option<UsbIdentity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsbIdentity {
    /// `VID:PID`, e.g. `174c:55aa`.
    pub id: String,
    pub driver: Option<String>,
    pub speed_mbps: Option<u32>,
    pub manufacturer: Option<String>,
    pub product: Option<String>,
}

impl DeviceIdentity {
    pub fn from_disk(disk: &Disk) -> DeviceIdentity {
        DeviceIdentity {
            name: disk.name.clone(),
            path: disk.path.clone(),
            vendor: disk.vendor.clone(),
            model: disk.model.clone(),
            serial: disk.serial.clone(),
            transport: disk.transport.to_string(),
            size_bytes: disk.size_bytes,
            logical_sector_size: disk.logical_sector_size,
            rotational: disk.rotational,
            removable: disk.removable,
            usb: disk.usb.as_ref().map(|u| UsbIdentity {
                id: u.id(),
                driver: u.driver.clone(),
                speed_mbps: u.speed_mbps,
                manufacturer: u.manufacturer.clone(),
                product: u.product.clone(),
            }),
        }
    }

    /// The same drive: same model and serial when it has a serial (it may
    /// move between ports and names), else the same model at the same path.
    pub fn same_drive(&self, other: &DeviceIdentity) -> bool {
        match (&self.serial, &other.serial) {
            (Some(a), Some(b)) => a == b && self.model == other.model,
            _ => self.path == other.path && self.model == other.model,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parameters {
    #[serde(flatten)]
    pub suite: SuiteParams,
    /// Bytes the tests ran over: the test file, or the part of the device.
    pub span_bytes: u64,
    /// Why the test file is smaller than asked, when it is.
    pub size_note: Option<String>,
    /// Seconds spent writing the test file before the tests.
    pub layout_seconds: Option<f64>,
    pub direct_io: DirectIoAlignment,
    /// Write tests ran (always on a test file; on a device only with
    /// --destructive).
    pub writes: bool,
    pub destructive: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grades {
    pub app_class: Option<ClassVerdict>,
    pub pibenchmarks: Option<Score>,
    /// Why a grade is missing.
    pub notes: Vec<String>,
}

impl Report {
    pub fn result(&self, name: &str) -> Option<&TestResult> {
        self.results.iter().find(|r| r.name == name)
    }
}

/// Grades from whichever tests ran; missing inputs leave a grade out with
/// a note rather than guessing.
pub fn grade(preset: Preset, results: &[TestResult]) -> Grades {
    let get = |name: &str| results.iter().find(|r| r.name == name);
    let mut notes = Vec::new();
    let (seq_write, basis) = match preset {
        Preset::A1 => (get("SEQ4M Q32 write"), "a1 preset (agnostics' parameters)"),
        _ => (
            get("SEQ1M Q8 write"),
            "SEQ1M Q8 write, RND4K Q32 write and read (agnostics uses 4 MiB blocks at queue depth 32)",
        ),
    };
    let app = match (seq_write, get("RND4K Q32 write"), get("RND4K Q32 read")) {
        (Some(sw), Some(rw), Some(rr)) => Some(app_class(sw.kib_per_s(), rw.iops, rr.iops, basis)),
        _ => {
            notes.push(
                "A1/A2 class needs the write tests (a test file, or --destructive on a device)"
                    .into(),
            );
            None
        }
    };
    let score = match (
        get("SEQ1M Q1 write"),
        get("RND4K Q32 read"),
        get("RND4K Q32 write"),
        get("RND4K Q1 read"),
        get("RND4K Q1 write"),
    ) {
        (Some(dd), Some(rr32), Some(rw32), Some(rr1), Some(rw1)) => {
            let inputs = ScoreInputs {
                dd_write_mb_s: dd.mb_per_s,
                fio_rand_read_iops: rr32.iops,
                fio_rand_write_iops: rw32.iops,
                iozone_read_kib_s: rr1.kib_per_s(),
                iozone_write_kib_s: rw1.kib_per_s(),
                iozone_rand_read_kib_s: rr1.kib_per_s(),
                iozone_rand_write_kib_s: rw1.kib_per_s(),
            };
            Some(Score {
                score: pibenchmarks_score(&inputs),
                inputs,
                mapping: "dd write = SEQ1M Q1 write; fio 4K random (QD64) = RND4K Q32; iozone 4K sequential and random (QD1) = RND4K Q1 (see docs/benchmark.md)".into(),
            })
        }
        _ => {
            if preset != Preset::A1 {
                notes.push("PiBenchmarks score needs the write tests".into());
            } else {
                notes.push("PiBenchmarks score needs the standard suite, not the a1 preset".into());
            }
            None
        }
    };
    Grades {
        app_class: app,
        pibenchmarks: score,
        notes,
    }
}

/// `<state_dir>/reports`, as a path to open.
pub fn reports_dir(host: &crate::host::Host) -> PathBuf {
    host.path(&host.state_dir).join("reports")
}

pub fn save(report: &Report, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating {} for the report (use --state-dir to keep reports elsewhere)",
            dir.display()
        )
    })?;
    let path = dir.join(format!("{}.json", report.id));
    let text = serde_json::to_string_pretty(report).context("encoding the report")?;
    // Write then rename, so a reader never sees half a report.
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text + "\n")
        .with_context(|| format!("writing the report {}", partial.display()))?;
    std::fs::rename(&partial, &path)
        .with_context(|| format!("saving the report {}", path.display()))?;
    Ok(path)
}

pub fn load(path: &Path) -> Result<Report> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the report {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a JSON report", path.display()))?;
    let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    if schema != SCHEMA {
        anyhow::bail!(
            "{}: report schema '{schema}' is not {SCHEMA}; run the benchmark again with this version",
            path.display()
        );
    }
    serde_json::from_value(value).with_context(|| format!("{}: malformed report", path.display()))
}

#[derive(Debug, Clone)]
pub struct StoredReport {
    pub path: PathBuf,
    pub report: Report,
}

/// Every readable report in `dir`, oldest first; unreadable files are
/// skipped (a missing directory is simply no reports).
pub fn list(dir: &Path) -> Result<Vec<StoredReport>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing reports in {}", dir.display())),
    };
    let mut reports: Vec<StoredReport> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .filter_map(|path| load(&path).ok().map(|report| StoredReport { path, report }))
        .collect();
    reports.sort_by(|a, b| {
        (a.report.unix_time, &a.report.id).cmp(&(b.report.unix_time, &b.report.id))
    });
    Ok(reports)
}

/// Reports taken on `device`, oldest first.
pub fn for_device(dir: &Path, device: &DeviceIdentity) -> Result<Vec<StoredReport>> {
    Ok(list(dir)?
        .into_iter()
        .filter(|r| {
            r.report
                .target
                .device
                .as_ref()
                .is_some_and(|d| d.same_drive(device))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::job::Direction;
    use crate::bench::sample::{SampleReport, Speeds};

    /// A Samsung T5 behind a uas bridge, with the shared test builder.
    fn sample(id: &str, unix_time: u64, serial: Option<&str>, path: &str) -> Report {
        let device = DeviceIdentity {
            name: "sda".into(),
            path: path.into(),
            vendor: Some("Samsung".into()),
            model: Some("Portable SSD T5".into()),
            serial: serial.map(str::to_string),
            transport: "usb".into(),
            size_bytes: 500_107_862_016,
            logical_sector_size: 512,
            rotational: false,
            removable: false,
            usb: Some(UsbIdentity {
                id: "04e8:61f5".into(),
                driver: Some("uas".into()),
                speed_mbps: Some(5000),
                manufacturer: None,
                product: None,
            }),
        };
        // SEQ1M writes of 30 MiB/s; RND4K Q1 writes of 512 IOPS = 2 MiB/s.
        let speeds = Speeds {
            q32: (3000.0, 1000.0),
            q1: (2000.0, 512.0),
            seq: (30.0 * 1.048_576, 30.0 * 1.048_576),
        };
        SampleReport::new(id, unix_time)
            .device(device)
            .with(|r| r.target.partition = Some(2))
            .speeds(speeds)
            .build()
    }

    #[test]
    fn reports_round_trip_and_are_found_per_drive() {
        let dir = tempfile::tempdir().unwrap();
        let first = sample("1", 100, Some("S1"), "/dev/sda");
        let moved = sample("2", 200, Some("S1"), "/dev/sdb");
        let other = sample("3", 150, Some("S2"), "/dev/sda");
        for report in [&moved, &first, &other] {
            save(report, dir.path()).unwrap();
        }
        std::fs::write(dir.path().join("junk.json"), "{}").unwrap();
        let all = list(dir.path()).unwrap();
        let ids: Vec<&str> = all.iter().map(|r| r.report.id.as_str()).collect();
        assert_eq!(ids, ["1", "3", "2"]);
        // Floats may differ in the last digit after JSON; identity may not.
        assert_eq!(all[0].report.target, first.target);
        assert_eq!(all[0].report.grades.app_class, first.grades.app_class);
        let drive = first.target.device.as_ref().unwrap();
        let mine: Vec<String> = for_device(dir.path(), drive)
            .unwrap()
            .into_iter()
            .map(|r| r.report.id)
            .collect();
        assert_eq!(mine, ["1", "2"]);
        assert!(list(&dir.path().join("none")).unwrap().is_empty());
    }

    #[test]
    fn other_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, r#"{"schema": "pimigrate.bench/0"}"#).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("pimigrate.bench/0"), "{err}");
    }

    #[test]
    fn grades_come_from_the_mapped_tests() {
        let report = sample("1", 100, None, "/dev/sda");
        let class = report.grades.app_class.as_ref().unwrap();
        // 30 MiB/s = 30720 KiB/s, 1000 write IOPS, 3000 read IOPS.
        assert_eq!(class.class, crate::bench::grade::AppClass::A1);
        let score = report.grades.pibenchmarks.as_ref().unwrap();
        assert!((score.inputs.dd_write_mb_s - 30.0 * 1.048_576).abs() < 1e-9);
        assert_eq!(score.inputs.fio_rand_write_iops, 1000.0);
        assert_eq!(score.inputs.iozone_rand_write_kib_s, 2048.0);
        let reads_only: Vec<TestResult> = report
            .results
            .iter()
            .filter(|r| r.direction == Direction::Read)
            .cloned()
            .collect();
        let grades = grade(Preset::Standard, &reads_only);
        assert!(grades.app_class.is_none() && grades.pibenchmarks.is_none());
        assert_eq!(grades.notes.len(), 2);
    }
}
