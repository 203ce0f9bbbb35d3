//! The check after the move (`pimigrate status --check`, the login
//! message, plain `status`) on the "pi4-migrated" fixture machine with its
//! root-only move committed: as it was left, then each drift owners
//! report broken in on purpose: a clone of the new drive, a bootloader
//! update that reset BOOT_ORDER (a stand-in `rpi-eeprom-config` prints the
//! release config), resets and under-voltage in the kernel log, the SD
//! card's old system booted again, a kernel without its modules, the
//! firmware reading another partition than the one mounted, and (root:
//! a real mount) a kernel update written under the boot partition's
//! mount point. Mutes through `--ignore` and /etc/pimigrate/check.conf.

use crate::common::*;
use crate::verify_fixture::{Machine, TRIAL_CMDLINE};
use pimigrate::bootcfg::eeprom::{BootOrder, EepromEdit};
use pimigrate::plan::{BootloaderPlan, EepromChange, EepromTakesEffect, Handover};
use pimigrate::state::journal::Step;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

const DAY: u64 = 86_400;

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The migrated Pi after `verify --commit` (a week and a day ago, so the
/// commit is no news at login) and a normal reboot.
fn committed() -> Machine {
    let pi = Machine::new();
    pi.change_journal(|j| {
        j.done.push(Step::SourceBootEdited);
        j.committed = Some(now() - 8 * DAY);
    });
    pi.write("/boot/firmware/cmdline.txt", TRIAL_CMDLINE);
    for file in ["tryboot.txt", "cmdline.pimigrate.txt"] {
        std::fs::remove_file(pi.path(&format!("/boot/firmware/{file}"))).unwrap();
    }
    pi.set_tryboot_flag(false);
    pi
}

/// `status --check --json` and its exit status.
fn check(pi: &Machine, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["--json", "status", "--check"];
    args.extend_from_slice(extra);
    let output = pi.run(&args);
    assert!(
        stderr(&output).is_empty(),
        "status --check said on stderr: {}",
        stderr(&output)
    );
    (exit_code(&output), json(&output))
}

fn finding<'a>(report: &'a Value, code: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["code"] == code)
        .unwrap_or_else(|| panic!("no {code} finding: {report:#}"))
}

/// The codes of the findings at `level`.
fn at(report: &Value, level: &str) -> Vec<String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["level"] == level)
        .map(|c| c["code"].as_str().unwrap().to_string())
        .collect()
}

fn login(pi: &Machine) -> String {
    let output = pi.run(&["status", "--login"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn a_committed_move_as_it_was_left_checks_ok_and_says_nothing_at_login() {
    let pi = committed();
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["schema"], "pimigrate.check/1");
    assert_eq!(report["result"], "ok");
    assert_eq!(report["target"], "/dev/sda");
    assert!(report["since"].is_u64());
    let codes: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "booted-from",
            "ids-unique",
            "boot-mount",
            "kernel-modules",
            "disk-errors"
        ]
    );
    assert!(at(&report, "warning").is_empty() && at(&report, "failure").is_empty());
    let text = stdout(&pi.run(&["status", "--check"]));
    assert!(
        text.starts_with("The check after the move to /dev/sda (in force since "),
        "{text}"
    );
    assert!(
        text.contains(
            "  ✓ boot-mount: /boot/firmware is mounted from /dev/mmcblk0p1, SD partition 1"
        ),
        "{text}"
    );
    assert!(text.ends_with("OK: nothing drifted\n"), "{text}");
    assert_eq!(login(&pi), "");
    let status = stdout(&pi.run(&["status"]));
    assert!(
        status.contains("after the move: nothing drifted (5 checks"),
        "{status}"
    );
}

#[test]
fn nothing_is_checked_before_the_commit() {
    let pi = Machine::new();
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["result"], "nothing-to-check");
    assert_eq!(report["checks"], serde_json::json!([]));
    assert!(report["message"]
        .as_str()
        .unwrap()
        .starts_with("the migration is not committed yet"));
    let text = stdout(&pi.run(&["status", "--check"]));
    assert!(text.starts_with("Nothing to check: "), "{text}");
}

#[test]
fn a_clone_of_the_new_drive_fails_and_the_login_names_it_until_muted() {
    let pi = committed();
    pi.edit(
        "/run/udev/data/b8:17",
        "ID_PART_ENTRY_UUID=00c0ffee-01",
        "ID_PART_ENTRY_UUID=2f4a9c17-01",
    );
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["result"], "failure");
    assert_eq!(at(&report, "failure"), ["ids-unique"]);
    let ids = finding(&report, "ids-unique");
    assert_eq!(
        ids["devices"],
        serde_json::json!(["/dev/sda1", "/dev/sdb1"])
    );
    assert!(ids["fix"][0]
        .as_str()
        .unwrap()
        .contains("detach the other disk"));
    let said = login(&pi);
    assert!(
        said.starts_with("pimigrate: the move to /dev/sda has drifted: 1 failure\npimigrate: ✗ duplicate ids: PARTUUID=2f4a9c17-01 on /dev/sda1 and /dev/sdb1"),
        "{said}"
    );
    assert!(
        said.contains("\npimigrate:   fix: detach the other disk"),
        "{said}"
    );
    let text = stdout(&pi.run(&["status", "--check"]));
    assert!(text.ends_with("FAILURE: 1 failure\n"), "{text}");

    // Muted for one run: listed, counted for nothing.
    let (code, report) = check(&pi, &["--ignore", "ids-unique"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(finding(&report, "ids-unique")["muted"], true);
    // A code no check has is bad usage.
    let output = pi.run(&["status", "--check", "--ignore", "ids-uniq"]);
    assert_eq!(exit_code(&output), 2);
    assert!(
        stderr(&output).contains("invalid value 'ids-uniq'"),
        "{}",
        stderr(&output)
    );
    // Muted for good in check.conf: the login says nothing more.
    pi.write(
        "/etc/pimigrate/check.conf",
        "# the clone is a backup, kept on purpose\nignore ids-unique\n",
    );
    let (code, report) = check(&pi, &[]);
    assert_eq!(
        (code, report["result"].as_str()),
        (0, Some("ok")),
        "{report:#}"
    );
    assert_eq!(login(&pi), "");
    // A typo in it is a warning of its own.
    pi.write("/etc/pimigrate/check.conf", "ignore ids-uniqe\n");
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "warning"), ["check-conf"]);
}

#[test]
fn resets_and_under_voltage_in_the_kernel_log_warn() {
    let pi = committed();
    pi.append(
        "/dev/kmsg",
        "4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n\
         6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n\
         4,1300,91234600,-;hwmon hwmon1: Undervoltage detected!\n",
    );
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["result"], "warning");
    assert_eq!(at(&report, "warning"), ["disk-errors", "power"]);
    let disk = finding(&report, "disk-errors");
    assert!(disk["message"]
        .as_str()
        .unwrap()
        .starts_with("since boot, the kernel logged 1 uas abort, 1 uas reset for /dev/sda"));
    assert!(disk["fix"][0]
        .as_str()
        .unwrap()
        .starts_with("sudo pimigrate verify --apply-quirk (adds usb-storage.quirks=174c:55aa:u"));
    // An I/O error is a failure.
    pi.append(
        "/dev/kmsg",
        "3,1400,95000000,-;I/O error, dev sda, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2\n",
    );
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "failure"), ["disk-errors"]);
}

#[test]
fn the_sd_cards_old_system_booted_again_after_the_commit_says_so() {
    let pi = Machine::new();
    // The SD card's own journal never saw the commit; the record the
    // commit left on its root did.
    pi.change_journal(|j| {
        j.done.push(Step::SourceBootEdited);
        j.trial_requested = Some(now() - 3 * DAY);
    });
    let asked = pi.journal().trial_requested.unwrap();
    pi.write(
        "/var/lib/pimigrate/trial-outcome.json",
        &serde_json::json!({
            "schema": "pimigrate.trial-outcome/1",
            "outcome": "committed",
            "at": asked + 120,
            "target": "/dev/sda",
            "reason": "every check passed, and the trial was made permanent",
            "details": [],
            "for_trial": asked,
        })
        .to_string(),
    );
    pi.set_tryboot_flag(false);
    pi.mount_root_from_the_sd_card();
    pi.write("/proc/cmdline", &pi.read("/boot/firmware/cmdline.txt"));
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["since"], asked + 120);
    assert_eq!(at(&report, "failure"), ["booted-from"]);
    let booted = finding(&report, "booted-from");
    assert!(
        booted["message"].as_str().unwrap().starts_with(
            "this boot runs / from /dev/mmcblk0p2, the SD card's root, the system the move left behind"
        ),
        "{booted:#}"
    );
    let status = stdout(&pi.run(&["status"]));
    assert!(
        status.starts_with("the trial of /dev/sda came up and was committed at ")
            && status.contains("this boot runs the SD card's system again"),
        "{status}"
    );
    assert!(
        status.contains("after the move: 1 failure\n  ✗ this boot runs / from /dev/mmcblk0p2"),
        "{status}"
    );
    assert!(login(&pi).contains("pimigrate: ✗ this boot runs / from /dev/mmcblk0p2"));
}

/// What the commit of a full move that kept the SD card as the fallback
/// set: BOOT_ORDER=0xf14.
fn with_the_boot_order_set(pi: &Machine) {
    let change = |edits: Vec<EepromEdit>| EepromChange {
        edits,
        config: String::new(),
        diff: String::new(),
        purpose: "the new drive first".into(),
    };
    pi.change_journal(|j| {
        j.plan.bootloader = Some(BootloaderPlan {
            trial: None,
            reason: String::new(),
            target_mode: 4,
            reboot_order: None,
            current: None,
            current_from: Default::default(),
            base: None,
            at_migrate: None,
            handover: Handover::BootOrder,
            power: None,
            at_commit: Some(change(vec![EepromEdit::BootOrder(BootOrder::parse(
                "0xf14",
            ))])),
            consent: true,
            takes_effect: EepromTakesEffect::NextReboot,
        })
    });
}

/// `status --check --json` with a stand-in `rpi-eeprom-config` printing
/// `config` as the config the bootloader started with.
fn check_with_eeprom(pi: &Machine, config: &str) -> (i32, Value) {
    let tools = tempfile::tempdir().unwrap();
    let script = tools.path().join("rpi-eeprom-config");
    std::fs::write(&script, format!("#!/bin/sh\ncat <<'EOF'\n{config}EOF\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let output: Output = pimigrate()
        .arg("--sysroot")
        .arg(pi.path("/"))
        .args(["--json", "status", "--check"])
        .env("PIMIGRATE_TOOLS_PATH", tools.path())
        .output()
        .unwrap();
    (exit_code(&output), json(&output))
}

#[test]
fn a_bootloader_update_that_reset_boot_order_fails_naming_the_order_to_set() {
    let pi = committed();
    with_the_boot_order_set(&pi);
    let (code, report) = check_with_eeprom(&pi, "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf14\n");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(finding(&report, "boot-order")["level"], "ok");
    // The release config of the Pi 4 bootloader: no BOOT_ORDER, so SD first.
    let (code, report) = check_with_eeprom(&pi, crate::full_move_fixture::PI4_CONFIG);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "failure"), ["boot-order"]);
    let order = finding(&report, "boot-order");
    assert!(
        order["message"].as_str().unwrap().starts_with(
            "BOOT_ORDER is 0xf41 (SD, USB, restart): it no longer tries the new drive (USB) first"
        ),
        "{order:#}"
    );
    assert!(order["fix"][0]
        .as_str()
        .unwrap()
        .starts_with("sudo rpi-eeprom-config --edit: set BOOT_ORDER=0xf14 under [all]"));
}

#[test]
fn a_kernel_without_modules_or_a_boot_partition_the_firmware_did_not_read_fails() {
    let pi = committed();
    std::fs::remove_dir_all(pi.path("/lib/modules/6.6.51+rpt-rpi-v8")).unwrap();
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "failure"), ["kernel-modules"]);

    let pi = committed();
    std::fs::write(
        pi.path("/proc/device-tree/chosen/bootloader/partition"),
        2u32.to_be_bytes(),
    )
    .unwrap();
    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "failure"), ["boot-mount"]);
    assert!(finding(&report, "boot-mount")["message"]
        .as_str()
        .unwrap()
        .starts_with("/boot/firmware is mounted from /dev/mmcblk0p1, not from SD partition 2"));
}

/// Unmounts a test's mount when the test ends, however it ends.
struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = nix::mount::umount(self.0);
    }
}

/// A kernel update written while /boot/firmware was not mounted: its
/// files in the directory underneath, which a real mount hides (a tmpfs
/// holding the boot partition's files, on this machine).
#[test]
fn a_kernel_update_hidden_under_the_boot_partitions_mount_point_fails() {
    if !require_root("a tmpfs mounted over the fixture's boot directory") {
        return;
    }
    let pi = committed();
    let boot = pi.path("/boot/firmware");
    let aside = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", boot.display()))
        .arg(aside.path())
        .status()
        .unwrap();
    assert!(status.success());
    for entry in std::fs::read_dir(&boot).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    std::fs::write(boot.join("kernel8.img"), b"the update's kernel").unwrap();
    std::fs::write(boot.join("initramfs8"), b"the update's initramfs").unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &boot,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    let _unmount = Unmount(&boot);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", aside.path().display()))
        .arg(&boot)
        .status()
        .unwrap();
    assert!(status.success());

    let (code, report) = check(&pi, &[]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(at(&report, "failure"), ["boot-shadowed"]);
    let hidden = finding(&report, "boot-shadowed");
    assert!(
        hidden["message"].as_str().unwrap().starts_with(
            "2 files hide under /boot/firmware's mount point, on the root filesystem, where the firmware never reads: initramfs8, kernel8.img"
        ),
        "{hidden:#}"
    );
    assert!(login(&pi).contains("pimigrate:   fix: with /boot/firmware mounted"));
}

/// The package's check units as systemd reads them (`systemd-analyze
/// verify`, the program looked up in the tree), and systemd's own rating
/// of the service's hardening.
#[test]
fn the_check_timers_units_as_systemd_reads_them() {
    use pimigrate::status::timer;
    let Some(analyze) = pimigrate::tools::which("systemd-analyze") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "systemd-analyze (systemd) is needed in CI"
        );
        eprintln!("skipping the check by systemd-analyze: not installed");
        return;
    };
    let tree = tempfile::Builder::new()
        .prefix("pimigrate-check-units")
        .tempdir()
        .unwrap();
    let root = tree.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let units = root.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_pimigrate"),
        root.join("usr/bin/pimigrate"),
    )
    .unwrap();
    let program = Path::new("/usr/bin/pimigrate");
    std::fs::write(
        units.join(timer::SERVICE),
        timer::service_unit(program).unwrap(),
    )
    .unwrap();
    std::fs::write(units.join(timer::TIMER), timer::timer_unit()).unwrap();
    let verified = std::process::Command::new(&analyze)
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        .args([
            "--man=no",
            "--recursive-errors=no",
            timer::SERVICE,
            timer::TIMER,
        ])
        .output()
        .unwrap();
    assert!(
        verified.status.success() && verified.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        stdout(&verified),
        stderr(&verified)
    );
    let security = std::process::Command::new(&analyze)
        .arg("security")
        .arg(format!("--root={}", root.display()))
        .args(["--offline=true", timer::SERVICE])
        .output()
        .unwrap();
    let rating = stdout(&security);
    let level: f64 = rating
        .lines()
        .find_map(|l| {
            l.split("exposure level for pimigrate-check.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{rating}{}", stderr(&security)));
    assert!(
        level <= 2.5,
        "the service's exposure rose to {level}:\n{rating}"
    );
}
