//! `pimigrate recommend --reuse` on the Pi 4 fixture machine, from reports
//! saved beforehand: nothing is benchmarked, the ranking comes from them.
//!
//! The fixture is copied to a temporary directory, whose state directory
//! holds the reports: with --sysroot, --state-dir is a path inside it.

use crate::common;

use common::*;
use pimigrate::bench::dio::{AlignmentSource, DirectIoAlignment};
use pimigrate::bench::engine::{EngineChoice, EngineKind};
use pimigrate::bench::job::{Direction, Pattern};
use pimigrate::bench::machine::MachineInfo;
use pimigrate::bench::report::{self, DeviceIdentity, Parameters, Report, TargetInfo};
use pimigrate::bench::suite::{Preset, SuiteParams, TestResult};
use pimigrate::bench::target::TargetKind;
use pimigrate::host::Host;
use pimigrate::system::System;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const STATE_DIR: &str = "/var/lib/pimigrate-test";

/// RND4K Q32 read/write, Q1 read/write IOPS, SEQ1M read/write MB/s.
type Speeds = [f64; 6];
const SD_A1: Speeds = [2_600.0, 800.0, 1_900.0, 450.0, 44.0, 21.0];
const USB_SSD: Speeds = [36_000.0, 28_000.0, 4_200.0, 3_900.0, 340.0, 310.0];
const FLASH_STICK: Speeds = [2_000.0, 45.0, 1_500.0, 30.0, 38.0, 5.0];

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn result(name: &str, block_size: u32, queue_depth: u32, iops: f64) -> TestResult {
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
        flush_seconds: Some(0.01),
        mb_per_s,
        mib_per_s: mb_per_s / 1.048_576,
        iops,
        latency: None,
        cpu_seconds: 0.1,
        cpu_us_per_io: None,
    }
}

/// A test-file report of the standard suite, as `bench` saves it.
fn report(system: &System, disk: &str, s: Speeds, unix_time: u64) -> Report {
    let disk = system.disks.iter().find(|d| d.name == disk).unwrap();
    let seq = |mb_s: f64| mb_s * 1e6 / f64::from(1u32 << 20);
    let results = vec![
        result("SEQ1M Q8 read", 1 << 20, 8, seq(s[4])),
        result("SEQ1M Q1 read", 1 << 20, 1, seq(s[4])),
        result("RND4K Q32 read", 4096, 32, s[0]),
        result("RND4K Q1 read", 4096, 1, s[2]),
        result("SEQ1M Q8 write", 1 << 20, 8, seq(s[5])),
        result("SEQ1M Q1 write", 1 << 20, 1, seq(s[5])),
        result("RND4K Q32 write", 4096, 32, s[1]),
        result("RND4K Q1 write", 4096, 1, s[3]),
    ];
    Report {
        schema: report::SCHEMA.into(),
        id: format!("{unix_time}-{}-4242", disk.name),
        started_at: report::rfc3339_utc(unix_time),
        unix_time,
        duration_seconds: 60.0,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        machine: MachineInfo {
            kernel_release: "6.6.31+rpt-rpi-v8".into(),
            kernel_version: "#1 SMP PREEMPT Debian 1:6.6.31-1+rpt1".into(),
            arch: "aarch64".into(),
            pi_model: system.pi.model.clone(),
            throttled: None,
        },
        target: TargetInfo {
            kind: TargetKind::File,
            path: "/".into(),
            filesystem: Some("ext4".into()),
            mountpoint: Some("/".into()),
            partition: Some(1),
            device: Some(DeviceIdentity::from_disk(disk)),
        },
        engine: EngineChoice {
            kind: EngineKind::IoUring,
            fallback_reason: None,
        },
        parameters: Parameters {
            suite: SuiteParams::new(Preset::Standard, None, None),
            span_bytes: 1 << 30,
            size_note: None,
            layout_seconds: Some(9.0),
            direct_io: DirectIoAlignment {
                memory: 512,
                offset: 512,
                source: AlignmentSource::Statx,
            },
            writes: true,
            destructive: false,
        },
        grades: report::grade(Preset::Standard, &results),
        results,
    }
}

/// The Pi 4 fixture copied to a temporary directory, so its state
/// directory can hold reports without touching the committed tree.
fn machine_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pi4");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture("pi4"))
        .arg(&root)
        .status()
        .expect("running cp");
    assert!(status.success());
    (dir, root)
}

fn save_reports(root: &Path, reports: &[Report]) {
    let mut host = Host::with_root(root);
    host.state_dir = STATE_DIR.into();
    let dir = report::reports_dir(&host);
    for r in reports {
        report::save(r, &dir).unwrap();
    }
}

fn recommend(root: &Path, extra: &[&str]) -> std::process::Output {
    pimigrate()
        .arg("--sysroot")
        .arg(root)
        .args(["--state-dir", STATE_DIR, "recommend"])
        .args(extra)
        .output()
        .expect("running pimigrate")
}

fn ranked<'a>(value: &'a Value, name: &str) -> &'a Value {
    value["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not ranked: {value:#}"))
}

fn warning_codes(entry: &Value) -> Vec<&str> {
    entry["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect()
}

fn saved_machine() -> (tempfile::TempDir, PathBuf) {
    let (dir, root) = machine_copy();
    let system = System::inspect(&Host::with_root(&root)).unwrap();
    let now = now();
    save_reports(
        &root,
        &[
            report(&system, "mmcblk0", SD_A1, now - 3_600),
            report(&system, "sda", USB_SSD, now - 7_200),
            // Older than 30 days, and absurdly fast: must not be used.
            report(&system, "sda", [1e9; 6], now - 40 * 86_400),
            report(&system, "sdb", FLASH_STICK, now - 600),
            // The read-only card reader is never compared.
            report(&system, "sdc", USB_SSD, now - 600),
        ],
    );
    (dir, root)
}

#[test]
fn ranks_the_fixture_from_saved_reports() {
    let (_dir, root) = saved_machine();
    let output = recommend(&root, &["--json", "--reuse"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let value = json(&output);
    assert_eq!(value["schema"], "pimigrate.recommend/1");
    assert_eq!(value["current_root"]["name"], "mmcblk0");
    assert_eq!(value["current_root"]["report"]["origin"], "reused");

    // The USB SSD is picked, with the bridge warning and its quirk.
    assert_eq!(value["pick"]["path"], "/dev/sda", "{value:#}");
    assert_eq!(value["pick"]["ready_for_migrate"], true);
    let sda = ranked(&value, "sda");
    assert_eq!(sda["rank"], 1);
    assert_eq!(sda["worth_it"], true);
    assert_eq!(
        sda["figures"]["rnd4k_q32_write_iops"], 28_000.0,
        "the stale report was used"
    );
    let bridge = sda["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "uas-bridge-known-issues")
        .unwrap_or_else(|| panic!("no bridge warning: {sda:#}"));
    assert!(bridge["message"].as_str().unwrap().contains("174c:55aa"));
    assert!(bridge["hint"]
        .as_str()
        .unwrap()
        .contains("usb-storage.quirks=174c:55aa:u"));

    // The mounted stick is compared, warned, and not worth it.
    let sdb = ranked(&value, "sdb");
    assert_eq!(sdb["rank"], 2);
    assert_eq!(sdb["worth_it"], false);
    assert_eq!(sdb["ready_for_migrate"], false);
    let codes = warning_codes(sdb);
    for code in ["slower-random-writes", "below-a1", "usb2-link", "in-use"] {
        assert!(codes.contains(&code), "{code} missing: {codes:?}");
    }

    // The read-only reader is left out, with the reason.
    let excluded = value["excluded"].as_array().unwrap();
    let sdc = excluded.iter().find(|e| e["name"] == "sdc").unwrap();
    assert!(sdc["why"].as_str().unwrap().contains("read-only"));
    assert_eq!(value["ranking"].as_array().unwrap().len(), 2);
    assert_eq!(value["formula"]["write_weight"], 10.0);
}

#[test]
fn says_so_in_words_too() {
    let (_dir, root) = saved_machine();
    let output = recommend(&root, &["--reuse"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("Pick: /dev/sda"), "{text}");
    assert!(text.contains("faster than your SD card"), "{text}");
    assert!(text.contains("usb-storage.quirks=174c:55aa:u"), "{text}");
    assert!(text.contains("Not compared: /dev/sdc"), "{text}");
    assert!(
        text.contains("Next: pimigrate plan --target /dev/sda"),
        "{text}"
    );
}

#[test]
fn no_candidate_worth_it_is_still_an_answer() {
    let (_dir, root) = machine_copy();
    let system = System::inspect(&Host::with_root(&root)).unwrap();
    let now = now();
    save_reports(
        &root,
        &[
            report(&system, "mmcblk0", SD_A1, now - 60),
            report(&system, "sdb", FLASH_STICK, now - 60),
        ],
    );
    let output = recommend(&root, &["--json", "--reuse"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let value = json(&output);
    assert!(value["pick"].is_null(), "{value:#}");
    let first = value["reasons"][0].as_str().unwrap();
    assert!(
        first.starts_with("no candidate is worth migrating to"),
        "{first}"
    );
    // sda has no report: listed, not measured, never picked.
    let sda = ranked(&value, "sda");
    assert!(warning_codes(sda).contains(&"not-measured"));
    assert!(sda["figures"].is_null());
}

#[test]
fn without_a_report_of_the_current_root_nothing_is_compared() {
    let (_dir, root) = machine_copy();
    let output = recommend(&root, &["--json", "--reuse"]);
    assert_eq!(exit_code(&output), 1);
    assert!(
        stderr(&output).contains("no benchmark of the current root (/dev/mmcblk0)"),
        "{}",
        stderr(&output)
    );
}
