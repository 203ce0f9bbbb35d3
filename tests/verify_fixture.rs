//! `pimigrate verify` on the "pi4-migrated" fixture machine: a Pi 4 after a
//! root-only move to /dev/sda, in its trial boot. Each test copies the
//! machine to a temporary directory, adds the journal the migration left
//! (its plan made by `pimigrate plan` on the "pi4" machine, with the seed
//! and disk signature the fixture's ids come from), and breaks one thing.
//! (The check after the move, `after_move`, starts from the same machine.)

use crate::common;
use pimigrate::plan::PartitionPath;

use common::*;
use pimigrate::plan::Plan;
use pimigrate::state::journal::{Journal, Step};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;

pub(crate) const STATE_DIR: &str = "/var/lib/pimigrate";
const ORIGINAL_CMDLINE: &str = "console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait quiet splash plymouth.ignore-serial-consoles\n";
pub(crate) const TRIAL_CMDLINE: &str = "console=serial0,115200 console=tty1 root=PARTUUID=2f4a9c17-01 rootfstype=ext4 fsck.repair=yes rootwait quiet splash plymouth.ignore-serial-consoles\n";

pub(crate) struct Machine {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Machine {
    /// The migrated Pi with the journal as the executor copies it to the
    /// new root (written before the SD card's boot files were changed).
    pub(crate) fn new() -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pi");
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(fixture("pi4-migrated"))
            .arg(&root)
            .status()
            .unwrap();
        assert!(status.success());
        let output = on_fixture(
            "pi4",
            &[
                "plan",
                "--target",
                "/dev/sda",
                "--seed",
                "7",
                "--disk-signature",
                "2f4a9c17",
                "--json",
            ],
        );
        assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
        let plan: Plan = serde_json::from_slice(&output.stdout).unwrap();
        // The TRIM rule the migration wrote onto the new root.
        let rule = plan
            .after_move
            .trim
            .rule
            .clone()
            .expect("the plan's TRIM rule");
        let path = root.join(rule.path.strip_prefix("/").unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, rule.text).unwrap();
        let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
        for step in [
            Step::Partitioned,
            Step::Formatted,
            Step::Copied,
            Step::TargetEdited,
        ] {
            journal.done.push(step);
        }
        save_journal(&root.join(STATE_DIR.trim_start_matches('/')), &mut journal);
        Machine { _dir: dir, root }
    }

    pub(crate) fn path(&self, view: &str) -> PathBuf {
        self.root.join(view.trim_start_matches('/'))
    }

    pub(crate) fn write(&self, view: &str, text: &str) {
        let path = self.path(view);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub(crate) fn append(&self, view: &str, text: &str) {
        self.write(view, &(self.read(view) + text));
    }

    pub(crate) fn read(&self, view: &str) -> String {
        std::fs::read_to_string(self.path(view)).unwrap()
    }

    pub(crate) fn edit(&self, view: &str, from: &str, to: &str) {
        let text = self.read(view);
        assert!(text.contains(from), "{view} has no {from:?}");
        self.write(view, &text.replacen(from, to, 1));
    }

    /// The firmware's trial flag, as the device tree holds it.
    pub(crate) fn set_tryboot_flag(&self, on: bool) {
        std::fs::write(
            self.path("/proc/device-tree/chosen/bootloader/tryboot"),
            u32::from(on).to_be_bytes(),
        )
        .unwrap();
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.run_failing(args, None)
    }

    /// [`Machine::run`] with a fail point (`PIMIGRATE_FAILPOINT`).
    fn run_failing(&self, args: &[&str], failpoint: Option<&str>) -> Output {
        let mut command = pimigrate();
        command
            .arg("--sysroot")
            .arg(&self.root)
            .args(["--state-dir", STATE_DIR])
            .args(args);
        if let Some(point) = failpoint {
            command.env(pimigrate::failpoint::ENV, point);
        }
        command.output().expect("running pimigrate")
    }

    fn verify(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["verify", "--json", "--no-bench"];
        args.extend_from_slice(extra);
        let output = self.run(&args);
        (exit_code(&output), json(&output))
    }

    pub(crate) fn journal(&self) -> Journal {
        Journal::load(&self.path(STATE_DIR)).unwrap().unwrap()
    }

    pub(crate) fn change_journal(&self, change: impl FnOnce(&mut Journal)) {
        let mut journal = self.journal();
        change(&mut journal);
        save_journal(&self.path(STATE_DIR), &mut journal);
    }

    /// This boot is a normal boot (no trial flag) of the SD card's root,
    /// as after a trial that did not come up.
    pub(crate) fn boot_the_sd_card_normally(&self) {
        self.set_tryboot_flag(false);
        self.mount_root_from_the_sd_card();
        self.edit(
            "/proc/cmdline",
            "root=PARTUUID=2f4a9c17-01",
            "root=PARTUUID=6c586e13-02",
        );
    }

    /// This boot mounted the SD card's old root as `/`.
    pub(crate) fn mount_root_from_the_sd_card(&self) {
        self.edit(
            "/proc/self/mountinfo",
            "8:1 / / rw,relatime shared:26 - ext4 /dev/sda1",
            "179:2 / / rw,relatime shared:26 - ext4 /dev/mmcblk0p2",
        );
    }
}

fn failed<'a>(report: &'a Value, code: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["code"] == code && c["pass"] == false)
        .collect()
}

/// Verifies, expecting exactly one failed check with `code`; its message.
fn the_one_failure(pi: &Machine, code: &str) -> (Value, String) {
    let (exit, report) = pi.verify(&[]);
    assert_eq!(exit, 5, "{report:#}");
    let failures = failed(&report, code);
    assert_eq!(failures.len(), 1, "{report:#}");
    let check = failures[0].clone();
    let message = check["message"].as_str().unwrap().to_string();
    (check, message)
}

/// The messages of the `old-root-referenced` warnings, in order.
fn old_root_warnings(report: &Value) -> Vec<String> {
    report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "old-root-referenced")
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect()
}

fn warning<'a>(report: &'a Value, code: &str) -> Option<&'a Value> {
    report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == code)
}

#[test]
fn the_trial_boot_of_a_good_migration_passes() {
    let pi = Machine::new();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["schema"], "pimigrate.verify/1");
    assert_eq!(report["result"], "pass");
    assert_eq!(report["trial_boot"]["active"], true);
    let codes: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    for expected in [
        "root-mounted",
        "kernel-root",
        "fstab",
        "ids-unique",
        "boot-partition",
        "trial-boot",
    ] {
        assert!(codes.contains(&expected), "{expected} missing: {codes:?}");
    }
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["pass"] == true));
    assert_eq!(report["warnings"], serde_json::json!([]));

    // The text form is a checklist with the devices named.
    let text = stdout(&pi.run(&["verify", "--no-bench"]));
    assert!(text.contains("✓ / is mounted from /dev/sda1"), "{text}");
    assert!(text.contains("cmdline.pimigrate.txt"), "{text}");
    assert!(text.contains("verify --commit"), "{text}");
}

#[test]
fn a_second_disk_with_the_same_partuuid_fails_naming_both() {
    let pi = Machine::new();
    // The USB stick (sdb1) turns out to carry the target's PARTUUID.
    pi.edit(
        "/run/udev/data/b8:17",
        "ID_PART_ENTRY_UUID=00c0ffee-01",
        "ID_PART_ENTRY_UUID=2f4a9c17-01",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "{report:#}");
    assert_eq!(report["result"], "fail");
    let ids = failed(&report, "ids-unique");
    assert_eq!(ids.len(), 1, "{report:#}");
    assert_eq!(
        ids[0]["devices"],
        serde_json::json!(["/dev/sda1", "/dev/sdb1"])
    );
    assert!(ids[0]["message"]
        .as_str()
        .unwrap()
        .contains("PARTUUID=2f4a9c17-01 on /dev/sda1 and /dev/sdb1"));
    assert!(
        !failed(&report, "fstab").is_empty(),
        "the / line is ambiguous too"
    );
    // A failure says how to go back.
    let text = stdout(&pi.run(&["verify", "--no-bench"]));
    assert!(text.contains("✗"), "{text}");
    assert!(text.contains("FAIL"), "{text}");
    assert!(text.contains("sudo reboot"), "{text}");
    assert!(text.contains("pimigrate rollback"), "{text}");
}

/// The one failed kernel-root check after `root=` became `root` in
/// `files`; the machine, and the check's message.
fn kernel_root_failure(root: &str, files: &[&str]) -> (Machine, String) {
    let pi = Machine::new();
    for file in files {
        pi.edit(file, "root=PARTUUID=2f4a9c17-01", &format!("root={root}"));
    }
    let (_, message) = the_one_failure(&pi, "kernel-root");
    assert!(message.contains(&format!("root={root}")), "{message}");
    (pi, message)
}

#[test]
fn a_kernel_started_with_another_root_fails() {
    let (pi, message) = kernel_root_failure("PARTUUID=6c586e13-02", &["/proc/cmdline"]);
    assert!(message.contains("cmdline.pimigrate.txt"), "{message}");
    // A failure says how to go back, in the text form too.
    let text = stdout(&pi.run(&["verify", "--no-bench"]));
    assert!(text.contains("To go back to the SD card:"), "{text}");
    assert!(text.contains("pimigrate rollback --yes"), "{text}");
}

#[test]
fn a_kernel_root_naming_no_attached_device_fails() {
    // The trial's command line and the kernel agree, on a partition that
    // is not there (a typo, or a disk that was swapped).
    let (_, message) = kernel_root_failure(
        "PARTUUID=0badf00d-01",
        &["/proc/cmdline", "/boot/firmware/cmdline.pimigrate.txt"],
    );
    assert!(
        message.ends_with("names no attached device, not the target's /dev/sda1"),
        "{message}"
    );
}

#[test]
fn a_boot_directory_mounted_from_another_partition_fails() {
    let pi = Machine::new();
    // /boot/firmware comes from the USB stick, not the SD card's boot
    // partition the firmware reads: updates would go to the wrong place.
    pi.edit(
        "/proc/self/mountinfo",
        "179:1 / /boot/firmware rw,relatime shared:41 - vfat /dev/mmcblk0p1",
        "8:17 / /boot/firmware rw,relatime shared:41 - vfat /dev/sdb1",
    );
    let (check, message) = the_one_failure(&pi, "boot-partition");
    assert!(
        message.contains("/boot/firmware is mounted from /dev/sdb1"),
        "{message}"
    );
    assert!(
        message.contains("/dev/mmcblk0p1 (PARTUUID=6c586e13-01)"),
        "{message}"
    );
    assert_eq!(
        check["devices"],
        serde_json::json!(["/dev/sdb1", "/dev/mmcblk0p1"])
    );
    assert!(check["hint"].as_str().unwrap().contains("/etc/fstab"));
}

#[test]
fn fstab_naming_the_old_root_fails_for_slash_and_warns_elsewhere() {
    let pi = Machine::new();
    pi.edit(
        "/etc/fstab",
        "PARTUUID=2f4a9c17-01  /",
        "PARTUUID=6c586e13-02  /",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "{report:#}");
    let fstab = failed(&report, "fstab");
    assert_eq!(fstab.len(), 1, "{report:#}");
    assert_eq!(fstab[0]["devices"], serde_json::json!(["/dev/mmcblk0p2"]));

    let pi = Machine::new();
    pi.append(
        "/etc/fstab",
        "/dev/mmcblk0p2  /mnt/sdroot  ext4  defaults,nofail  0  2\n",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "a warning, not a failure: {report:#}");
    let old = warning(&report, "old-root-referenced").expect("a warning");
    assert!(old["message"].as_str().unwrap().contains("/mnt/sdroot"));
}

#[test]
fn uas_resets_in_the_kernel_log_offer_the_quirk() {
    let pi = Machine::new();
    let log = pi.read("/dev/kmsg")
        + "4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n \
           SUBSYSTEM=scsi\n\
           6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n\
           6,1203,81345000,-;usb 2-2: reset SuperSpeed USB device number 2 using xhci_hcd\n";
    pi.write("/dev/kmsg", &log);
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "advice, not a failure: {report:#}");
    let uas = warning(&report, "uas-resets").expect("a uas warning");
    let message = uas["message"].as_str().unwrap();
    assert!(
        message.contains("174c:55aa") && message.contains("3 uas"),
        "{message}"
    );
    let fix = uas["fix"].to_string();
    assert!(fix.contains("--apply-quirk"), "{fix}");
    assert!(fix.contains("usb-storage.quirks=174c:55aa:u"), "{fix}");

    // Applied during the trial, the quirk goes to the trial's command line,
    // which the commit turns into cmdline.txt.
    let (code, report) = pi.verify(&["--apply-quirk"]);
    assert_eq!(code, 0, "{report:#}");
    let trial = pi.read("/boot/firmware/cmdline.pimigrate.txt");
    assert!(
        trial.contains(" usb-storage.quirks=174c:55aa:u\n"),
        "{trial}"
    );
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    // A second time changes nothing.
    pi.verify(&["--apply-quirk"]);
    assert_eq!(pi.read("/boot/firmware/cmdline.pimigrate.txt"), trial);
}

/// A bridge that speaks UAS alone (QEMU's usb-uas): usb-storage could not
/// take it, so the quirk is neither offered as a fix nor set.
#[test]
fn the_quirk_is_refused_for_a_bridge_without_bulk_only() {
    let pi = Machine::new();
    pi.append(
        "/dev/kmsg",
        "6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n",
    );
    let bridge =
        "/sys/devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb2/2-2";
    // The device descriptor, a configuration, one interface: UAS (0x62).
    let mut descriptors = vec![
        18, 1, 0x20, 3, 0, 0, 0, 9, 0x4c, 0x17, 0xaa, 0x55, 0, 1, 1, 2, 3, 1,
    ];
    descriptors.extend([9, 2, 18, 0, 1, 1, 0, 0x80, 0]);
    descriptors.extend([9, 4, 0, 0, 4, 8, 6, 0x62, 0]);
    std::fs::write(pi.path(&format!("{bridge}/descriptors")), descriptors).unwrap();
    let (_, report) = pi.verify(&[]);
    let uas = warning(&report, "uas-resets").expect("a uas warning");
    let fix = uas["fix"].to_string();
    assert!(
        fix.contains("no Bulk-Only setting") && !fix.contains("--apply-quirk"),
        "{fix}"
    );
    let trial = pi.read("/boot/firmware/cmdline.pimigrate.txt");
    let output = pi.run(&["verify", "--no-bench", "--apply-quirk"]);
    assert_eq!(exit_code(&output), 1, "{}", stdout(&output));
    assert!(
        stderr(&output).contains("no Bulk-Only setting"),
        "{}",
        stderr(&output)
    );
    assert_eq!(pi.read("/boot/firmware/cmdline.pimigrate.txt"), trial);
}

/// `verify --commit` passes and commits: cmdline.txt is the trial's, its
/// backup the original, the trial's files are gone.
fn commits(pi: &Machine) {
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 0, "{report:#}");
    assert!(
        report["trial_boot"]["committed_at"].is_string(),
        "{report:#}"
    );
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), TRIAL_CMDLINE);
    assert_eq!(
        pi.read("/boot/firmware/cmdline.txt.pimigrate-backup"),
        ORIGINAL_CMDLINE
    );
    assert!(!pi.path("/boot/firmware/tryboot.txt").exists());
    assert!(!pi.path("/boot/firmware/cmdline.pimigrate.txt").exists());
}

/// The trial's command line carries what resets a failed trial (panic=,
/// systemd's crash_reboot, the marker for the new root's systemd): the commit leaves them out of
/// cmdline.txt, which later boots read.
#[test]
fn commit_leaves_the_trials_own_words_out_of_cmdline_txt() {
    let pi = Machine::new();
    let guard = pi.journal().plan.trial_boot.unwrap().guard.unwrap();
    let words: Vec<&str> = guard.words.iter().map(|w| w.arg.as_str()).collect();
    assert_eq!(
        words,
        ["panic=10", "systemd.crash_reboot=1", "pimigrate.trial=1"]
    );
    let guarded = format!("{} {}\n", TRIAL_CMDLINE.trim_end(), words.join(" "));
    pi.write("/boot/firmware/cmdline.pimigrate.txt", &guarded);
    pi.write("/proc/cmdline", &guarded);
    commits(&pi);
}

#[test]
fn commit_makes_the_trial_permanent_and_rollback_still_restores() {
    let pi = Machine::new();
    commits(&pi);
    let journal = pi.journal();
    assert!(journal.committed.is_some());
    // On record for the SD card's system too, as every commit is (a
    // fixture's SD card cannot be mounted: this system's record only).
    let record: Value =
        serde_json::from_str(&pi.read("/var/lib/pimigrate/trial-outcome.json")).unwrap();
    assert_eq!(record["outcome"], "committed");
    let status = json(&pi.run(&["--json", "status"]));
    let headline = status["headline"].as_str().unwrap();
    assert!(
        headline.contains("came up and was committed") && !headline.contains("by itself"),
        "{headline}"
    );
    assert_eq!(
        journal.backups.get(&PartitionPath::known("/cmdline.txt")),
        Some(&PartitionPath::known("/cmdline.txt.pimigrate-backup"))
    );

    // The next (normal) boot reads cmdline.txt: still a pass, nothing to commit.
    pi.set_tryboot_flag(false);
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 0, "{report:#}");
    assert!(report["message"]
        .as_str()
        .unwrap()
        .contains("already made permanent"));
    let kernel = &failed(&report, "kernel-root");
    assert!(kernel.is_empty());
    assert!(report
        .to_string()
        .contains("/boot/firmware/cmdline.txt and names /dev/sda1"));

    // Rollback puts the pre-migration command line back.
    let output = pi.run(&["rollback", "--yes"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(!pi
        .path("/boot/firmware/cmdline.txt.pimigrate-backup")
        .exists());
}

/// A power cut right after `verify --commit` swapped cmdline.txt (the
/// testbed's power-cut-trial cuts there): the journal knows the commit
/// began, not that it ended, and the next, normal, boot runs the target.
/// `verify --commit` there finishes it: the trial's files go, the journal
/// records the commit, and the backup is still the original.
#[test]
fn a_commit_cut_short_after_its_swap_is_finished_by_the_next_normal_boot() {
    let pi = Machine::new();
    pi.change_journal(|j| {
        j.backups.insert(
            PartitionPath::known("/cmdline.txt"),
            PartitionPath::known("/cmdline.txt.pimigrate-backup"),
        );
    });
    pi.write(
        "/boot/firmware/cmdline.txt.pimigrate-backup",
        ORIGINAL_CMDLINE,
    );
    pi.write("/boot/firmware/cmdline.txt", TRIAL_CMDLINE);
    pi.set_tryboot_flag(false);
    commits(&pi);
    assert!(pi.journal().committed.is_some());
}

/// The new root's journal is the copy made before the SD card's boot files
/// changed, so it never says the last step is done, and a power cut can
/// also come between that change and the SD card's journal. Running from
/// the target, `migrate --resume` says the move is done and records it.
#[test]
fn resume_on_the_new_root_completes_its_journal() {
    let pi = Machine::new();
    assert!(!pi.journal().is_done(Step::SourceBootEdited));
    let output = pi.run(&["--json", "migrate", "--resume", "--yes"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert_eq!(json(&output)["status"], "already-migrated");
    assert!(pi.journal().is_done(Step::SourceBootEdited));
    // Nothing else was touched.
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
}

/// The new drive pulled out while the trial checks itself: every check
/// passes on what the system said as they began, but the commit asks the
/// drive itself (here the kernel has set its disk offline, as it does a
/// USB disk that stopped answering before it removes it) and changes
/// nothing.
#[test]
fn commit_is_refused_when_the_new_drive_stops_answering() {
    let pi = Machine::new();
    let scsi_device = "/sys/devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb2/2-2/2-2:1.0/host0/target0:0:0/0:0:0:0";
    pi.write(&format!("{scsi_device}/state"), "offline\n");
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 5, "{report:#}");
    let refused = report["refused"][0].as_str().unwrap();
    assert!(
        refused.contains("not committed") && refused.contains("/dev/sda1's disk is offline"),
        "{refused}"
    );
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(pi.path("/boot/firmware/cmdline.pimigrate.txt").exists());
    assert!(pi.journal().committed.is_none());

    // Running, it answers, and the same trial commits.
    pi.write(&format!("{scsi_device}/state"), "running\n");
    commits(&pi);
}

#[test]
fn commit_is_refused_outside_the_trial_boot_and_changes_nothing() {
    let pi = Machine::new();
    pi.set_tryboot_flag(false);
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 5, "{report:#}");
    assert_eq!(failed(&report, "trial-boot").len(), 1);
    assert!(report["refused"][0]
        .as_str()
        .unwrap()
        .contains("not committed"));
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(pi.path("/boot/firmware/tryboot.txt").exists());
    assert!(pi.journal().committed.is_none());

    // A failed check refuses it too, in the trial boot.
    let pi = Machine::new();
    pi.edit("/run/udev/data/b8:17", "00c0ffee-01", "2f4a9c17-01");
    let (code, _) = pi.verify(&["--commit"]);
    assert_eq!(code, 5);
    assert!(pi.path("/boot/firmware/cmdline.pimigrate.txt").exists());
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
}

/// An fstab line whose id two attached partitions carry fails, naming
/// both and the kind of id. The USB stick (sdb1) carries the filesystem
/// UUID and LABEL of the SD card's boot partition.
fn assert_duplicate_fstab_id(line: &str, kind: &str) {
    let pi = Machine::new();
    pi.edit(
        "/run/udev/data/b8:17",
        "ID_FS_UUID=1234-ABCD",
        "ID_FS_UUID=5DE4-665C",
    );
    pi.edit(
        "/run/udev/data/b8:17",
        "ID_FS_LABEL=STICK",
        "ID_FS_LABEL=bootfs",
    );
    pi.append("/etc/fstab", line);
    let (check, message) = the_one_failure(&pi, "fstab");
    assert!(
        message.contains(&format!("(duplicate {kind})")),
        "{message}"
    );
    assert!(message.contains("/dev/mmcblk0p1, /dev/sdb1"), "{message}");
    assert_eq!(
        check["devices"],
        serde_json::json!(["/dev/mmcblk0p1", "/dev/sdb1"])
    );
}

#[test]
fn fstab_entries_with_a_duplicate_uuid_or_label_fail_naming_both() {
    assert_duplicate_fstab_id("UUID=5DE4-665C  /mnt/boot  vfat  defaults  0  2\n", "UUID");
    assert_duplicate_fstab_id("LABEL=bootfs  /mnt/boot  vfat  defaults  0  2\n", "LABEL");
}

#[test]
fn still_on_the_sd_card_before_the_migration_finished_is_nothing_to_verify() {
    let pi = Machine::new();
    // The journal stops before the SD card's boot files were changed.
    pi.mount_root_from_the_sd_card();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(report["result"], "nothing-to-verify");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains("has not finished"), "{message}");
    assert!(message.contains("/dev/mmcblk0p2"), "{message}");
    assert!(message.contains("pimigrate migrate --resume"), "{message}");
    assert!(report["checks"].as_array().unwrap().is_empty());
}

#[test]
fn migrated_but_not_rebooted_is_nothing_to_verify() {
    let pi = Machine::new();
    pi.change_journal(|j| j.done.push(Step::SourceBootEdited));
    // This boot began long before the journal was last written.
    pi.write("/proc/stat", "cpu  1 2 3 4\nbtime 1000\nprocesses 42\n");
    pi.set_tryboot_flag(false);
    pi.mount_root_from_the_sd_card();
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 4, "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains("has not rebooted"), "{message}");
    assert!(
        message.contains(r#"`sudo reboot "0 tryboot"`"#),
        "{message}"
    );
    // Nothing was committed.
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(pi.journal().committed.is_none());
    let text = stdout(&pi.run(&["verify", "--no-bench"]));
    assert!(text.starts_with("Nothing to verify"), "{text}");
}

/// This machine's boot id, as `save_journal` records it in the journal.
fn live_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string()
}

/// A Pi without an RTC or the network starts each boot at the time
/// fake-hwclock saved, so the clock can put this boot before the journal's
/// last write; the boot id says it came after. Back on the SD card, that
/// is a trial that did not come up (exit 5), not a migration waiting for
/// its reboot (exit 4).
#[test]
fn a_boot_the_clock_puts_before_the_trial_reboot_is_after_it_by_its_boot_id() {
    let pi = Machine::new();
    pi.change_journal(|j| j.done.push(Step::SourceBootEdited));
    pi.write("/proc/stat", "cpu  1 2 3 4\nbtime 1000\nprocesses 42\n");
    let other_boot = "0b0e1d2c-3b4a-4958-a6b7-c8d9e0f1a2b3";
    assert_ne!(live_boot_id(), other_boot);
    pi.write(
        "/proc/sys/kernel/random/boot_id",
        &format!("{other_boot}\n"),
    );
    pi.boot_the_sd_card_normally();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "{report:#}");
    assert_eq!(report["checks"][0]["code"], "trial-boot", "{report:#}");
    let login = stdout(&pi.run(&["status", "--login"]));
    assert!(login.contains("did not come up"), "{login}");
}

/// The other way round: the clock stepped forward in the boot that wrote
/// the journal (the network came up), so `btime` is after the write, yet
/// the boot id is the same: no reboot yet, nothing to verify.
#[test]
fn a_clock_stepped_forward_is_no_reboot_by_the_boot_id() {
    let pi = Machine::new();
    pi.change_journal(|j| j.done.push(Step::SourceBootEdited));
    let later = pi.journal().updated + 100_000;
    pi.write(
        "/proc/stat",
        &format!("cpu  1 2 3 4\nbtime {later}\nprocesses 42\n"),
    );
    pi.write(
        "/proc/sys/kernel/random/boot_id",
        &format!("{}\n", live_boot_id()),
    );
    pi.set_tryboot_flag(false);
    pi.mount_root_from_the_sd_card();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 4, "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains("has not rebooted"), "{message}");
}

#[test]
fn without_a_journal_there_is_nothing_to_verify() {
    let pi = Machine::new();
    std::fs::remove_file(pi.path("/var/lib/pimigrate/migration.json")).unwrap();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(report["result"], "nothing-to-verify");
    let text = stdout(&pi.run(&["verify"]));
    assert!(text.starts_with("Nothing to verify"), "{text}");
}

#[test]
fn trim_and_swap_advice() {
    let pi = Machine::new();
    let sda = "/sys/block/sda";
    pi.write(&format!("{sda}/queue/discard_max_bytes"), "0\n");
    pi.write(
        &format!("{sda}/device/scsi_disk/0:0:0:0/provisioning_mode"),
        "full\n",
    );
    // The SD card's old root, mounted, with a swap file on it.
    let mountinfo = pi.read("/proc/self/mountinfo")
        + "60 26 179:2 / /mnt/sdroot rw,relatime shared:60 - ext4 /dev/mmcblk0p2 rw\n";
    pi.write("/proc/self/mountinfo", &mountinfo);
    pi.write(
        "/proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n/mnt/sdroot/var/swap file 102396 0 -2\n/var/swap file 102396 0 -3\n",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "{report:#}");
    let trim = warning(&report, "trim-unavailable").expect("a TRIM warning");
    let message = trim["message"].as_str().unwrap();
    assert!(message.contains("provisioning_mode: full"), "{message}");
    assert!(
        message.contains("rule /etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules is in place but has not acted yet"),
        "{message}"
    );
    let fix = trim["fix"].to_string();
    assert!(fix.contains("udevadm trigger"), "{fix}");
    assert!(fix.contains("fstrim -v /"), "{fix}");
    // Without the rule, the fix is the rule: the plan's, for this bridge.
    std::fs::remove_file(pi.path("/etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules")).unwrap();
    let (_, report) = pi.verify(&[]);
    let trim = warning(&report, "trim-unavailable").expect("a TRIM warning");
    assert!(
        trim["message"].as_str().unwrap().contains("is missing"),
        "{trim:#}"
    );
    let fix = trim["fix"].to_string();
    assert!(fix.contains(r#"ATTRS{idVendor}==\"174c\""#), "{fix}");
    assert!(fix.contains("provisioning_mode"), "{fix}");
    let swaps: Vec<&Value> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "swap-on-sd")
        .collect();
    assert_eq!(
        swaps.len(),
        1,
        "only the swap file on the SD card: {report:#}"
    );
    assert!(swaps[0]["message"]
        .as_str()
        .unwrap()
        .contains("/mnt/sdroot/var/swap"));

    // TRIM works but the timer is off: on a root-only move the fix trims
    // the new root alone, as the timer would trim the SD card too.
    let pi = Machine::new();
    std::fs::remove_file(pi.path("/etc/systemd/system/timers.target.wants/fstrim.timer")).unwrap();
    let (_, report) = pi.verify(&[]);
    let off = warning(&report, "fstrim-timer-off").expect("{report:#}");
    assert!(
        off["fix"].to_string().contains("raspberrypi/linux#6349"),
        "{off:#}"
    );
}

/// What verify says of the new drive beyond its checks: the driver that
/// holds it, and TRIM (the rule the migration wrote, the timer); a trim
/// only on the running system, never here.
#[test]
fn the_driver_and_trim_are_reported() {
    let pi = Machine::new();
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "{report:#}");
    let driver = &report["after_move"]["driver"];
    assert_eq!(driver["driver"], "uas", "{report:#}");
    assert_eq!(driver["bridge"], "174c:55aa");
    assert_eq!(driver["quirk_in_effect"], false);
    let trim = &report["after_move"]["trim"];
    assert_eq!(trim["discard_max_bytes"], 2147450880u64, "{trim:#}");
    assert_eq!(trim["provisioning_mode"], "unmap");
    assert_eq!(trim["rule"]["present"], true);
    assert_eq!(trim["fstrim_timer"]["state"], "enabled");
    assert_eq!(trim["trimmed"], Value::Null);
    let text = stdout(&pi.run(&["verify", "--no-bench"]));
    assert!(
        text.contains("  · Driver: /dev/sda is held by uas (USB bridge 174c:55aa)"),
        "{text}"
    );
    assert!(
        text.contains(
            "  · TRIM reaches /dev/sda (discard_max_bytes 2147450880, provisioning_mode unmap)"
        ),
        "{text}"
    );
    // The commit trims once, on the running system alone.
    let (code, report) = pi.verify(&["--commit"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        report["after_move"]["trim"]["trimmed"]["outcome"], "not-trimmed",
        "{report:#}"
    );
    assert!(report["actions"]
        .to_string()
        .contains("the new root was not trimmed: this is not the running system"));
    // This boot's command line with the quirk: said so.
    let pi = Machine::new();
    pi.edit(
        "/proc/cmdline",
        "rootwait",
        "rootwait usb-storage.quirks=174c:55aa:u",
    );
    let (_, report) = pi.verify(&[]);
    assert_eq!(
        report["after_move"]["driver"]["quirk_in_effect"], true,
        "{report:#}"
    );
}

#[test]
fn back_on_the_sd_card_after_a_trial_says_the_trial_did_not_run_and_how_to_roll_back() {
    let pi = Machine::new();
    // The migration finished (the state dir is the SD card's, as after a
    // fallback boot), and this normal boot mounted the SD card's root.
    pi.change_journal(|j| j.done.push(Step::SourceBootEdited));
    pi.boot_the_sd_card_normally();

    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "{report:#}");
    // One failure that names the cause, not a list of its symptoms.
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{report:#}");
    assert_eq!(checks[0]["code"], "trial-boot");
    let message = checks[0]["message"].as_str().unwrap();
    assert!(message.contains("/dev/mmcblk0p2"), "{message}");
    assert!(message.contains("did not come up"), "{message}");
    let rollback = report["rollback"].as_array().unwrap();
    assert!(
        rollback[0]
            .as_str()
            .unwrap()
            .starts_with("sudo pimigrate rollback --yes"),
        "{report:#}"
    );
    // Nothing changed on the SD card.
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(pi.path("/boot/firmware/tryboot.txt").exists());

    // The human text leads with the same verdict.
    let text = String::from_utf8(pi.run(&["verify", "--no-bench"]).stdout).unwrap();
    assert!(text.contains("the trial boot did not come up"), "{text}");
    assert!(!text.contains("first field of the / line"), "{text}");
}

// Places that still name the SD card's old root partition
// (PARTUUID=6c586e13-02, UUID=3b614a3f-…, LABEL=rootfs, /dev/mmcblk0p2):
// advice, each naming the file and the line.

const OLD_ROOT_UUID: &str = "3b614a3f-4a65-4480-876a-8a998e01ac9b";

/// A verification that passes with exactly one old-root warning:
/// `message`, with a fix step that contains `fix`.
fn assert_one_old_root_finding(pi: &Machine, message: &str, fix: &str) {
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "advice, not a failure: {report:#}");
    assert_eq!(old_root_warnings(&report), [message], "{report:#}");
    let steps = warning(&report, "old-root-referenced").unwrap()["fix"].to_string();
    assert!(steps.contains(fix), "{fix:?} not in {steps}");
}

#[test]
fn the_next_boots_command_line_naming_the_old_root() {
    // During the trial, cmdline.txt naming the SD card is the fallback by
    // design; the trial's own file is what counts.
    let pi = Machine::new();
    pi.edit(
        "/boot/firmware/cmdline.pimigrate.txt",
        "root=PARTUUID=2f4a9c17-01",
        "root=/dev/mmcblk0p2",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "the kernel-root check fails too: {report:#}");
    assert_eq!(
        old_root_warnings(&report),
        ["/boot/firmware/cmdline.pimigrate.txt line 1 boots the SD card's old root (root=/dev/mmcblk0p2)"]
    );

    // After the commit, cmdline.txt and the file config.txt's cmdline=
    // names are what the next boot reads.
    let pi = Machine::new();
    pi.change_journal(|j| j.committed = Some(j.updated));
    pi.append("/boot/firmware/config.txt", "cmdline=custom.txt\n");
    pi.write(
        "/boot/firmware/custom.txt",
        &ORIGINAL_CMDLINE.replace("PARTUUID=6c586e13-02", "LABEL=rootfs"),
    );
    let (_, report) = pi.verify(&[]);
    assert_eq!(
        old_root_warnings(&report),
        [
            "/boot/firmware/cmdline.txt line 1 boots the SD card's old root (root=PARTUUID=6c586e13-02)",
            "/boot/firmware/custom.txt line 1 boots the SD card's old root (root=LABEL=rootfs)",
        ]
    );
    let fix = warning(&report, "old-root-referenced").unwrap()["fix"].to_string();
    assert!(
        fix.contains("set root=PARTUUID=2f4a9c17-01 in /boot/firmware/cmdline.txt"),
        "{fix}"
    );
}

#[test]
fn fstab_by_uuid_links_count_as_the_uuid() {
    let pi = Machine::new();
    let link = format!("/dev/disk/by-uuid/{OLD_ROOT_UUID}");
    pi.append(
        "/etc/fstab",
        &format!("{link}  /mnt/old  ext4  nofail  0  2\n"),
    );
    assert_one_old_root_finding(
        &pi,
        &format!("/etc/fstab line 6 mounts the SD card's old root partition ({link}) at /mnt/old"),
        "remove the line",
    );
}

#[test]
fn crypttab_lines_naming_the_old_root() {
    let pi = Machine::new();
    pi.write(
        "/etc/crypttab",
        &format!(
            "# UUID={OLD_ROOT_UUID} in a comment\n\
             olddata  UUID={OLD_ROOT_UUID}  none  luks\n\
             stick    /dev/sdb1  /dev/urandom  swap\n"
        ),
    );
    assert_one_old_root_finding(
        &pi,
        &format!(
            "/etc/crypttab line 2 unlocks the SD card's old root partition (UUID={OLD_ROOT_UUID})"
        ),
        "update-initramfs -u",
    );
}

#[test]
fn mount_and_swap_units_naming_the_old_root() {
    let pi = Machine::new();
    let dir = "/etc/systemd/system";
    pi.write(
        &format!("{dir}/mnt-old.mount"),
        "[Unit]\nDescription=old root\n\n[Mount]\nWhat=/dev/disk/by-partuuid/6c586e13-02\nWhere=/mnt/old\n",
    );
    pi.write(
        &format!("{dir}/dev-sdb1.swap"),
        "[Swap]\nWhat=/dev/disk/by-uuid/1234-ABCD\n",
    );
    // Not a mount or swap unit: What= means nothing there.
    pi.write(
        &format!("{dir}/backup.service"),
        "[Service]\nWhat=/dev/mmcblk0p2\n",
    );
    assert_one_old_root_finding(
        &pi,
        "/etc/systemd/system/mnt-old.mount line 5: What=/dev/disk/by-partuuid/6c586e13-02 is the SD card's old root partition",
        "systemctl disable --now mnt-old.mount",
    );
}

#[test]
fn an_initramfs_resume_device_naming_the_old_root() {
    let pi = Machine::new();
    let file = "/etc/initramfs-tools/conf.d/resume";
    pi.write(file, "RESUME=none\n");
    let (code, report) = pi.verify(&[]);
    assert_eq!((code, old_root_warnings(&report)), (0, Vec::new()));
    pi.write(file, "# hibernation\nRESUME=LABEL=rootfs\n");
    assert_one_old_root_finding(
        &pi,
        "/etc/initramfs-tools/conf.d/resume line 2: RESUME=LABEL=rootfs is the SD card's old root partition",
        "set RESUME=none",
    );
}

/// Arch Linux ARM's fstab has no `/` line (issue #15): the kernel's root=
/// is what mounted the target, and verify passes on that alone.
#[test]
fn fstab_without_a_root_line_passes_on_the_kernels_root() {
    let pi = Machine::new();
    pi.edit(
        "/etc/fstab",
        "PARTUUID=2f4a9c17-01  /               ext4    defaults,noatime  0       1\n",
        "",
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 0, "{report:#}");
    assert!(report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["pass"] == true));
}

/// Debian's raspi-firmware rewrites cmdline.txt from ROOTPART= on every
/// kernel update (issue #15): after the commit, a ROOTPART naming the SD
/// card's root is a warning with the fix; one naming the target is quiet.
#[test]
fn a_raspi_firmware_rootpart_that_disagrees_with_cmdline_txt_warns() {
    let pi = Machine::new();
    pi.write("/boot/firmware/cmdline.txt", TRIAL_CMDLINE);
    pi.change_journal(|journal| journal.committed = Some(1_700_000_000));
    pi.write(
        "/etc/default/raspi-firmware",
        "#ROOTPART=/dev/mmcblk0p2\nROOTPART=LABEL=RASPIROOT\n",
    );
    let (_, report) = pi.verify(&[]);
    let found = warning(&report, "regenerated-cmdline-differs").expect("a warning");
    let message = found["message"].as_str().unwrap();
    assert!(message.contains("ROOTPART=LABEL=RASPIROOT"), "{message}");
    assert!(found["fix"][0]
        .as_str()
        .unwrap()
        .contains("ROOTPART=PARTUUID=2f4a9c17-01"));

    pi.write(
        "/etc/default/raspi-firmware",
        "ROOTPART=PARTUUID=2f4a9c17-01\n",
    );
    let (_, report) = pi.verify(&[]);
    assert!(
        warning(&report, "regenerated-cmdline-differs").is_none(),
        "{report:#}"
    );
}

/// A journal written by an older pimigrate (`pimigrate.journal/1`) named
/// the files it created as the system saw them
/// (`/boot/firmware/tryboot.txt`); it still reads, and `rollback` from it
/// removes them from the boot partition and restores the backups.
#[test]
fn a_version_1_journal_still_reads_and_rolls_back() {
    let pi = Machine::new();
    let path = pi.path(STATE_DIR).join("migration.json");
    let mut old: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    old["schema"] = "pimigrate.journal/1".into();
    old["created"] = serde_json::json!([
        "/boot/firmware/cmdline.pimigrate.txt",
        "/boot/firmware/tryboot.txt"
    ]);
    old["backups"] = serde_json::json!({"/cmdline.txt": "/cmdline.txt.pimigrate-backup"});
    std::fs::write(&path, serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    pi.write(
        "/boot/firmware/tryboot.txt",
        "[all]\ncmdline=cmdline.pimigrate.txt\n",
    );
    pi.write("/boot/firmware/cmdline.pimigrate.txt", "root=/dev/sda1\n");
    let migrated = pi.read("/boot/firmware/cmdline.txt");
    pi.write(
        "/boot/firmware/cmdline.txt.pimigrate-backup",
        ORIGINAL_CMDLINE,
    );
    pi.write(
        "/boot/firmware/cmdline.txt",
        &migrated.replace("root=", "root=X"),
    );

    let journal = pi.journal();
    assert_eq!(
        journal.created,
        [
            PartitionPath::known("/cmdline.pimigrate.txt"),
            PartitionPath::known("/tryboot.txt")
        ]
    );
    let output = pi.run(&["rollback", "--yes"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert!(!pi.path("/boot/firmware/tryboot.txt").exists());
    assert!(!pi.path("/boot/firmware/cmdline.pimigrate.txt").exists());
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);

    // One that names a file outside its boot directory is refused, not
    // followed.
    let pi = Machine::new();
    let mut bad: Value = serde_json::from_slice(&std::fs::read(path_of(&pi)).unwrap()).unwrap();
    bad["schema"] = "pimigrate.journal/1".into();
    bad["created"] = serde_json::json!(["/etc/fstab"]);
    std::fs::write(path_of(&pi), serde_json::to_vec(&bad).unwrap()).unwrap();
    let output = pi.run(&["rollback", "--yes"]);
    assert_ne!(exit_code(&output), 0);
    assert!(
        stderr(&output).contains("is not in the boot directory /boot/firmware"),
        "{}",
        stderr(&output)
    );
    assert!(pi.path("/etc/fstab").exists());
}

fn path_of(pi: &Machine) -> PathBuf {
    pi.path(STATE_DIR).join("migration.json")
}

/// What a trial boot runs by itself with --auto-commit: `pimigrate trial
/// check` commits when the checks pass and records it; `status` then says
/// so. (The SD card's root cannot be mounted on a fixture: the record says
/// it stayed on this system.)
#[test]
fn the_trial_checks_itself_commits_and_records_it() {
    let pi = Machine::new();
    // The units that run it are the trial's only with --auto-commit.
    pi.change_journal(|j| {
        let trial = j.plan.trial_boot.as_mut().unwrap();
        trial.guard.as_mut().unwrap().auto_commit = true;
    });
    let output = pi.run(&["trial", "check"]);
    let said = stdout(&output);
    assert_eq!(exit_code(&output), 0, "{said}{}", stderr(&output));
    assert!(
        said.contains("the trial of /dev/sda came up and was committed"),
        "{said}"
    );
    assert!(said.contains("not recorded on the SD card"), "{said}");
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), TRIAL_CMDLINE);
    let record: Value =
        serde_json::from_str(&pi.read("/var/lib/pimigrate/trial-outcome.json")).unwrap();
    assert_eq!(record["outcome"], "committed");
    let status = json(&pi.run(&["--json", "status"]));
    assert_eq!(status["stage"], "committed", "{status:#}");
    assert!(status["headline"]
        .as_str()
        .unwrap()
        .contains("by itself (--auto-commit: every check passed)"));
}

/// A clone of the new drive plugged in: the trial's check fails (exit 5,
/// so its unit reboots), records which check and why, and commits nothing.
#[test]
fn a_trial_whose_checks_fail_records_why_and_commits_nothing() {
    let pi = Machine::new();
    pi.edit(
        "/run/udev/data/b8:17",
        "ID_PART_ENTRY_UUID=00c0ffee-01",
        "ID_PART_ENTRY_UUID=2f4a9c17-01",
    );
    let output = pi.run(&["trial", "check"]);
    let said = stdout(&output);
    assert_eq!(exit_code(&output), 5, "{said}{}", stderr(&output));
    assert!(said.contains("is not committed"), "{said}");
    assert_eq!(pi.read("/boot/firmware/cmdline.txt"), ORIGINAL_CMDLINE);
    assert!(pi.journal().committed.is_none());
    let record: Value =
        serde_json::from_str(&pi.read("/var/lib/pimigrate/trial-outcome.json")).unwrap();
    assert_eq!(record["outcome"], "checks-failed");
    assert!(
        record["reason"].as_str().unwrap().contains("ids-unique"),
        "{record:#}"
    );
    assert!(
        record["details"]
            .to_string()
            .contains("PARTUUID=2f4a9c17-01 on /dev/sda1 and /dev/sdb1"),
        "{record:#}"
    );
    // Outside a trial boot it refuses to act.
    pi.set_tryboot_flag(false);
    let output = pi.run(&["trial", "check"]);
    assert_eq!(exit_code(&output), 1);
    assert!(stderr(&output).contains("not a trial boot"));
}

/// Back on the SD card after a trial that came up and failed its own
/// check: verify and status name the trial's recorded reason, not a guess.
#[test]
fn back_on_the_sd_card_after_a_trial_that_failed_its_checks_names_why() {
    let pi = Machine::new();
    pi.change_journal(|j| {
        j.done.push(Step::SourceBootEdited);
        j.trial_requested = Some(j.updated + 1);
    });
    let asked = pi.journal().trial_requested.unwrap();
    pi.boot_the_sd_card_normally();
    pi.write(
        "/var/lib/pimigrate/trial-outcome.json",
        &serde_json::json!({
            "schema": "pimigrate.trial-outcome/1",
            "outcome": "checks-failed",
            "at": asked + 90,
            "target": "/dev/sda",
            "reason": "a check failed (ids-unique)",
            "details": ["ids-unique: PARTUUID=2f4a9c17-01 on /dev/sda1 and /dev/sdb1"],
            // The trial it is about: the SD card journal's trial reboot.
            "for_trial": asked,
        })
        .to_string(),
    );
    let (code, report) = pi.verify(&[]);
    assert_eq!(code, 5, "{report:#}");
    let message = report["checks"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("came up at") && message.contains("but a check failed (ids-unique)"),
        "{message}"
    );
    assert!(message.contains("on /dev/sda1 and /dev/sdb1"), "{message}");
    let status = json(&pi.run(&["--json", "status"]));
    assert_eq!(status["stage"], "trial-failed", "{status:#}");
    let login = stdout(&pi.run(&["status", "--login"]));
    assert!(
        login.starts_with("pimigrate: the trial of /dev/sda came up at"),
        "{login}"
    );
    assert!(login.contains("the Pi is back on the SD card"), "{login}");
}

/// `verify --commit` failing with an error at every point a root-only
/// commit reaches (`failpoint::COMMIT`'s own and the atomic writes' of the
/// journal and the SD card's boot files): the owner reads the cause, then
/// where the Pi stands and the command that goes on, with no Debug text;
/// cmdline.txt is the original or the trial's, as said, and the command
/// named commits. (`commit-after-bootloader` is a full move's hand-over
/// through the bootloader's tools, which this fixture has not: the
/// testbed cuts there, and the words for it are `apply::standing`'s unit
/// tests'.)
#[test]
fn a_commit_failing_anywhere_says_where_the_pi_stands_and_the_command_that_goes_on() {
    let own: Vec<&str> = pimigrate::failpoint::COMMIT
        .iter()
        .copied()
        .filter(|p| *p != "commit-after-bootloader")
        .collect();
    assert_eq!(own, [pimigrate::failpoint::COMMIT_AFTER_SWAP]);
    let atomic = [
        "atomic-after-temp",
        "atomic-after-rename",
        "boot-backup-after-temp",
        "boot-backup-after-rename",
        "boot-after-temp",
        "boot-after-rename",
        "atomic-after-temp@2",
        "atomic-after-rename@2",
    ];
    for point in own.into_iter().chain(atomic) {
        let pi = Machine::new();
        let failed = pi.run_failing(
            &["verify", "--commit", "--no-bench"],
            Some(&format!("{point}:error")),
        );
        let said = stderr(&failed);
        assert_eq!(exit_code(&failed), 1, "{point}: {said}");
        let name = point.split('@').next().unwrap();
        assert!(
            said.contains(&format!("fail point {name}")),
            "{point}: the cause is not said:\n{said}"
        );
        let (stands, _, command) = told(point, &said);
        let cmdline = pi.read("/boot/firmware/cmdline.txt");
        if stands.contains("not committed and nothing was changed") {
            assert_eq!(cmdline, ORIGINAL_CMDLINE, "{point}: said unchanged");
        } else if stands.starts_with("the trial is committed") {
            assert_eq!(cmdline, TRIAL_CMDLINE, "{point}: said committed");
        } else {
            assert!(
                stands.contains("the original or the trial's"),
                "{point}: {stands}"
            );
            assert!(
                [ORIGINAL_CMDLINE, TRIAL_CMDLINE].contains(&cmdline.as_str()),
                "{point}: {cmdline}"
            );
        }
        assert_eq!(command, "sudo pimigrate verify --commit", "{point}");
        commits(&pi);
    }
}
