//! `pimigrate recommend --reuse` on the Pi 4 fixture machine, from reports
//! saved beforehand: nothing is benchmarked, the ranking comes from them.
//!
//! The fixture is copied to a temporary directory, whose state directory
//! holds the reports: with --sysroot, --state-dir is a path inside it.

use crate::common;

use common::*;
use pimigrate::bench::report::{self, DeviceIdentity, Report};
use pimigrate::bench::sample::{SampleReport, Speeds, FLASH_STICK, SD_A1, USB_SSD};
use pimigrate::host::Host;
use pimigrate::system::System;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

const STATE_DIR: &str = "/var/lib/pimigrate-test";

/// Absurdly fast: a report that must never be used.
const ABSURD: Speeds = Speeds {
    q32: (1e9, 1e9),
    q1: (1e9, 1e9),
    seq: (1e9, 1e9),
};

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A test-file report of the standard suite, as `bench` saves it (the
/// shared test builder), measured on this fixture machine.
fn report(system: &System, disk: &str, s: Speeds, unix_time: u64) -> Report {
    let disk = system.disks.iter().find(|d| d.name == disk).unwrap();
    SampleReport::new(format!("{unix_time}-{}-4242", disk.name), unix_time)
        .device(DeviceIdentity::from_disk(disk))
        .with(|r| {
            r.machine.pi_model = system.pi.model.clone();
            r.target.partition = Some(1);
        })
        .speeds(s)
        .build()
}

/// The Pi 4 fixture copied to a temporary directory, so its state
/// directory can hold reports without touching the committed tree.
fn machine_copy() -> (tempfile::TempDir, PathBuf) {
    machine_copy_of("pi4")
}

fn machine_copy_of(machine: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(machine);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture(machine))
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
            report(&system, "sda", ABSURD, now - 40 * 86_400),
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

/// The Pi Zero fixture's sda is blank (no table, no filesystem): without
/// --bench-blank and without a terminal to ask on, nothing is written, and
/// one line says what to type.
#[test]
fn a_blank_drive_without_a_yes_gets_one_line_saying_what_to_type() {
    let (_dir, root) = machine_copy_of("pizero");
    let system = System::inspect(&Host::with_root(&root)).unwrap();
    save_reports(&root, &[report(&system, "mmcblk0", SD_A1, now() - 60)]);
    let output = recommend(&root, &[]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let text = stdout(&output);
    let hints: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("--bench-blank"))
        .collect();
    let typed: Vec<&&str> = hints.iter().filter(|l| l.contains("type: ")).collect();
    assert_eq!(typed.len(), 1, "{text}");
    assert!(typed[0].contains("/dev/sda"), "{text}");
    assert!(
        typed[0].ends_with("recommend --bench-blank"),
        "the user's own command, with the flag: {text}"
    );
    // --no-bench-blank: the same line, and that flag is not echoed back.
    let output = recommend(&root, &["--no-bench-blank"]);
    let text = stdout(&output);
    let line = text.lines().find(|l| l.contains("type: ")).expect(&text);
    assert!(!line.contains("--no-bench-blank"), "{line}");
    let value = json(&recommend(&root, &["--json"]));
    assert_eq!(value["blank_unmeasured"][0], "/dev/sda", "{value:#}");
}
