//! Every `--json` document names its schema, and every schema it names is
//! the one docs/json.md documents. Runs on the fixture machines (the bench
//! on a small test file in /var/tmp), so nothing is written to a disk.

use crate::common;

use common::*;
use pimigrate::bench::report::{self, DeviceIdentity, Report};
use pimigrate::host::Host;
use pimigrate::plan::Plan;
use pimigrate::state::journal::{Journal, Step};
use pimigrate::system::System;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The schema of a document printed on stdout, checked against the docs.
fn schema_of(output: &Output, expected_code: i32) -> String {
    assert_eq!(
        exit_code(output),
        expected_code,
        "stdout: {}\nstderr: {}",
        stdout(output),
        stderr(output)
    );
    let value: Value = json(output);
    let schema = value["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("no schema field: {value:#}"))
        .to_string();
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
        .unwrap();
    assert!(
        docs.contains(&format!("## `{schema}`")),
        "docs/json.md has no section for {schema}"
    );
    schema
}

/// A copy of a fixture machine, for tests that keep state in it.
fn machine_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pi");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture(name))
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    (dir, root)
}

fn run_on(root: &Path, args: &[&str]) -> Output {
    pimigrate()
        .arg("--sysroot")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn devices_plan_and_refusals() {
    let devices = on_fixture("pi4", &["--json", "devices"]);
    assert_eq!(schema_of(&devices, 0), "pimigrate.devices/1");
    let plan = on_fixture("pi4", &["--json", "plan", "--target", "/dev/sda"]);
    assert_eq!(schema_of(&plan, 0), "pimigrate.plan/1");
    // /dev/sdb holds a mounted stick: refused, from plan and migrate alike.
    let refused = on_fixture("pi4", &["--json", "plan", "--target", "/dev/sdb"]);
    assert_eq!(schema_of(&refused, 3), "pimigrate.refusal/1");
    let refused = on_fixture(
        "pi4",
        &["--json", "migrate", "--target", "/dev/sdb", "--yes"],
    );
    assert_eq!(schema_of(&refused, 3), "pimigrate.refusal/1");
}

#[test]
fn migrate_verify_and_rollback() {
    let (_dir, root) = machine_copy("pi4");
    // Without a journal: nothing to verify, nothing to roll back.
    assert_eq!(
        schema_of(&run_on(&root, &["--json", "verify", "--no-bench"]), 4),
        "pimigrate.verify/1"
    );
    assert_eq!(
        schema_of(&run_on(&root, &["--json", "rollback", "--yes"]), 0),
        "pimigrate.rollback/1"
    );
    // A finished migration's journal: `migrate --resume` reports it without
    // writing anything.
    let plan: Plan = serde_json::from_slice(
        &on_fixture("pi4", &["--json", "plan", "--target", "/dev/sda"]).stdout,
    )
    .unwrap();
    let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
    journal.done = vec![
        Step::Partitioned,
        Step::Formatted,
        Step::Copied,
        Step::TargetEdited,
        Step::SourceBootEdited,
    ];
    save_journal(&root.join("var/lib/pimigrate"), &mut journal);
    let output = run_on(&root, &["--json", "migrate", "--resume"]);
    assert_eq!(schema_of(&output, 0), "pimigrate.migrate/1");
    assert_eq!(json(&output)["status"], "already-complete");
    // Where it stands: migrated, its trial next; `devices` embeds it.
    let output = run_on(&root, &["--json", "status"]);
    assert_eq!(schema_of(&output, 0), "pimigrate.status/1");
    assert_eq!(json(&output)["stage"], "trial-pending");
    let devices = json(&run_on(&root, &["--json", "devices"]));
    assert_eq!(devices["migration"]["schema"], "pimigrate.status/1");
}

#[test]
fn sync_plans_and_refusals() {
    // A disk that is not a standby yet: the first sync's plan, dry.
    let dry = on_fixture(
        "pi4",
        &[
            "--json",
            "sync",
            "--dry-run",
            "--target",
            "/dev/sda",
            "--seed",
            "1",
        ],
    );
    assert_eq!(schema_of(&dry, 0), "pimigrate.sync/2");
    let value = json(&dry);
    assert_eq!(value["result"], "dry-run");
    assert_eq!(value["plan"]["standby"]["layout"], "full");
    // The first sync's disk layout: the table and filesystems alone.
    assert!(value["plan"]["layout"]["table"]["partitions"].is_array());
    assert!(value["plan"]["layout"]["filesystems"].is_array());
    assert!(value["plan"]["layout"].get("schema").is_none());
    // No standby and no journal: refused, with the way out.
    let refused = on_fixture("pi4", &["--json", "sync", "--dry-run"]);
    assert_eq!(schema_of(&refused, 3), "pimigrate.refusal/1");
    assert_eq!(json(&refused)["reasons"][0]["code"], "no-standby");
}

#[test]
fn bench_and_recommend() {
    // A real (tiny) benchmark on this machine's disk: /var/tmp, not a tmpfs,
    // since the tests use O_DIRECT.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let output = pimigrate()
        .args([
            "--json",
            "bench",
            "--no-save",
            "--quick",
            "--runtime",
            "0.1",
            "--size",
            "16M",
            "--test",
            "rnd4k-q32-read",
            "--test",
            "rnd4k-q32-write",
            "--test",
            "rnd4k-q1-write",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(schema_of(&output, 0), "pimigrate.bench/1");

    // recommend --reuse on the Pi 4 fixture, with that report saved as the
    // SD card's: the SSD is listed as not measured.
    let mut report: Report = serde_json::from_slice(&output.stdout).unwrap();
    let (_machine, root) = machine_copy("pi4");
    let mut host = Host::with_root(&root);
    host.state_dir = "/var/lib/pimigrate".into();
    let system = System::inspect(&host).unwrap();
    let sd = system.disks.iter().find(|d| d.name == "mmcblk0").unwrap();
    report.target.device = Some(DeviceIdentity::from_disk(sd));
    report.machine.pi_model = system.pi.model.clone();
    report::save(&report, &report::reports_dir(&host)).unwrap();
    let output = run_on(&root, &["--json", "recommend", "--reuse", "--quick"]);
    assert_eq!(schema_of(&output, 0), "pimigrate.recommend/1");
}

/// `status --check`: nothing to check on a Pi without a migration (exit
/// 0); the findings of a committed one are in tests/after_move.rs.
#[test]
fn the_check_after_the_move() {
    let output = on_fixture("pi4-migrated", &["--json", "status", "--check"]);
    assert_eq!(schema_of(&output, 0), "pimigrate.check/1");
    assert_eq!(json(&output)["result"], "nothing-to-check");
}
