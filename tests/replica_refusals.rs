//! The replica's refusals are one set, whoever meets them: the same busy
//! disk, disk holding the running system, too-small disk or missing disk
//! refused by `plan` (what `migrate` does), by a first `sync --to` of it and
//! by a later `sync` onto a standby recorded there, with one code, one
//! wording and one hint. On copies of the Pi 4 fixture machine (an SD card
//! it runs from, a Samsung SSD, a mounted USB stick), the standby record
//! written into the copy's state directory.

use crate::common;

use common::*;
use pimigrate::plan::Layout;
use pimigrate::state::standby::{PartIds, StandbyRecord, SyncState, STANDBY_SCHEMA};
use serde_json::Value;
use std::path::Path;

/// A copy of the Pi 4 fixture to change.
fn pi4_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture("pi4").display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "copying the pi4 fixture");
    dir
}

/// The JSON document of a run on the machine at `root`, and its exit code.
fn run(root: &Path, args: &[&str], tools: Option<&Path>) -> (i32, Value) {
    let mut command = pimigrate();
    command.arg("--sysroot").arg(root).arg("--json").args(args);
    if let Some(tools) = tools {
        command.env(pimigrate::tools::TOOLS_PATH_VAR, tools);
    }
    let output = command.output().unwrap();
    (exit_code(&output), json(&output))
}

/// The reasons of a run that must be refused (exit code 3).
fn reasons(root: &Path, args: &[&str]) -> Vec<Value> {
    refused_with(root, args, None)
}

fn refused_with(root: &Path, args: &[&str], tools: Option<&Path>) -> Vec<Value> {
    let (code, value) = run(root, args, tools);
    assert_eq!(code, 3, "{args:?} was not refused: {value:#}");
    assert_eq!(value["schema"], "pimigrate.refusal/1");
    value["reasons"].as_array().unwrap().clone()
}

/// `migrate`'s planner on `disk`.
fn migrate(root: &Path, disk: &str) -> Vec<Value> {
    reasons(root, &["plan", "--target", disk])
}

/// A first sync of `disk`, laid out as `migrate` lays it out (root-only).
fn first_sync(root: &Path, disk: &str) -> Vec<Value> {
    reasons(
        root,
        &[
            "sync",
            "--dry-run",
            "--target",
            disk,
            "--layout",
            "root-only",
        ],
    )
}

/// A later sync onto the standby whose root is partition `number` with
/// `partuuid`, as the state directory's record says.
fn later_sync(root: &Path, number: u32, partuuid: &str) -> Vec<Value> {
    let record = StandbyRecord {
        schema: STANDBY_SCHEMA.into(),
        state: SyncState::Complete,
        disk: "/dev/sdx".into(),
        serial: None,
        model: None,
        layout: Layout::RootOnly,
        root: PartIds {
            number,
            partuuid: Some(partuuid.into()),
            uuid: None,
            label: None,
        },
        boot: None,
        started: 1_700_000_000,
        finished: Some(1_700_000_100),
        last_complete: None,
        stamp: None,
        complete_at: None,
        complete_at_nanos: None,
        own_mounts: 0,
        clock: None,
        bootable: Some(true),
        checks: Vec::new(),
        boot_steps: Vec::new(),
        error: None,
        laying_out: None,
    };
    let state = root.join("var/lib/pimigrate");
    let lock = pimigrate::apply::state::StateLock::acquire(&state).unwrap();
    lock.save_standby(&record, &state).unwrap();
    drop(lock);
    reasons(root, &["sync", "--dry-run"])
}

/// The one reason with `code` among `reasons`.
fn the<'a>(reasons: &'a [Value], code: &str) -> &'a Value {
    let found: Vec<&Value> = reasons.iter().filter(|r| r["code"] == code).collect();
    assert_eq!(found.len(), 1, "one {code} in {reasons:#?}");
    found[0]
}

/// Refused as `code` by all three, in the same words with the same hint.
fn same_everywhere(code: &str, migrate: &[Value], first: &[Value], later: &[Value]) {
    let (m, f, l) = (the(migrate, code), the(first, code), the(later, code));
    assert_eq!(m, f, "migrate and a first sync");
    assert_eq!(f, l, "a first and a later sync");
    assert!(!m["hint"].is_null(), "{m}");
}

#[test]
fn a_busy_disk_is_in_use_for_migrate_a_first_and_a_later_sync() {
    let machine = pi4_copy();
    let root = machine.path();
    let later = later_sync(root, 1, "00c0ffee-01");
    same_everywhere(
        "target-in-use",
        &migrate(root, "/dev/sdb"),
        &first_sync(root, "/dev/sdb"),
        &later,
    );
    assert_eq!(
        the(&later, "target-in-use")["message"],
        "/dev/sdb is in use: sdb1 is mounted at /media/pi/STICK"
    );
    // A standby has more to say of a FAT stick: it is no ext4 root.
    the(&later, "standby-filesystem");
}

#[test]
fn the_disk_the_system_runs_from_holds_its_root_for_all_three() {
    let machine = pi4_copy();
    let root = machine.path();
    let later = later_sync(root, 2, "6c586e13-02");
    same_everywhere(
        "target-holds-root",
        &migrate(root, "/dev/mmcblk0"),
        &first_sync(root, "/dev/mmcblk0"),
        &later,
    );
    assert_eq!(later.len(), 1, "{later:#?}");
}

#[test]
fn a_disk_named_wrong_is_refused_alike_by_plan_and_sync() {
    let machine = pi4_copy();
    let root = machine.path();
    for (disk, code) in [
        ("/dev/sdz", "target-not-found"),
        ("/dev/sda1", "target-is-partition"),
        ("/etc/hostname", "target-not-block-device"),
    ] {
        let (m, f) = (migrate(root, disk), first_sync(root, disk));
        assert_eq!(the(&m, code), the(&f, code), "{disk}");
    }
}

/// The copy's SSD shrunk to 64 MiB, its one partition (4 MiB in, to the
/// end: the root a root-only layout makes there) an ext4 filesystem of
/// 60 MiB: the fixture's system and 64 MiB to grow do not fit what ext4
/// leaves of it.
fn with_a_small_ext4_ssd(root: &Path) {
    let sys = root.join("sys/class/block");
    std::fs::write(sys.join("sda/size"), "131072\n").unwrap();
    std::fs::write(sys.join("sda1/start"), "8192\n").unwrap();
    std::fs::write(sys.join("sda1/size"), "122880\n").unwrap();
    with_an_ext4_ssd(root);
}

/// The copy's SSD partition an ext4 filesystem, as a standby's root is.
fn with_an_ext4_ssd(root: &Path) {
    let udev = root.join("run/udev/data/b8:1");
    let data = std::fs::read_to_string(&udev).unwrap();
    let data = data.replace("ID_FS_TYPE=exfat", "ID_FS_TYPE=ext4").replace(
        "ID_FS_UUID=64A5-F009",
        "ID_FS_UUID=5a1e0b9c-7c1d-4b8e-9d0a-2f3c4d5e6f70",
    );
    std::fs::write(udev, data).unwrap();
}

/// `message` with its figures left out: `migrate` counts the system by
/// walking the root it copies, a sync takes the filesystem's own count.
fn words(message: &Value) -> String {
    message
        .as_str()
        .unwrap()
        .split(' ')
        .filter(|w| !w.starts_with(|c: char| c.is_ascii_digit()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_disk_too_small_with_room_to_grow_is_refused_alike() {
    let machine = pi4_copy();
    let root = machine.path();
    with_a_small_ext4_ssd(root);
    let later = later_sync(root, 1, "0a1b2c3d-01");
    let first = first_sync(root, "/dev/sda");
    let migrate = migrate(root, "/dev/sda");
    // One layout, one partition, one count of the system: one message.
    assert_eq!(
        the(&first, "target-too-small"),
        the(&later, "target-too-small")
    );
    let m = the(&migrate, "target-too-small");
    assert_eq!(m["hint"], the(&later, "target-too-small")["hint"]);
    assert_eq!(
        words(&m["message"]),
        words(&the(&later, "target-too-small")["message"])
    );
    assert!(words(&m["message"]).starts_with("the system uses"), "{m}");
    assert_eq!(later.len(), 1, "{later:#?}");
}

/// Debian's raspi-firmware settings with `rootpart` as ROOTPART.
fn with_raspi_firmware(root: &Path, rootpart: &str) {
    let file = root.join("etc/default/raspi-firmware");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        file,
        format!("# Debian's raspi-firmware\nROOTPART={rootpart}\n"),
    )
    .unwrap();
}

#[test]
fn a_rootpart_that_names_no_device_is_refused_alike() {
    let machine = pi4_copy();
    let root = machine.path();
    with_an_ext4_ssd(root);
    with_raspi_firmware(root, "$(findmnt -n -o SOURCE /)");
    same_everywhere(
        "source-raspi-firmware",
        &migrate(root, "/dev/sda"),
        &first_sync(root, "/dev/sda"),
        &later_sync(root, 1, "0a1b2c3d-01"),
    );
}

#[test]
fn the_copys_rootpart_keeps_the_running_one_as_a_backup_in_a_migration_and_a_sync() {
    let machine = pi4_copy();
    let root = machine.path();
    with_raspi_firmware(root, "PARTUUID=6c586e13-02");
    let backup = |edits: &Value| {
        let edit = edits
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["file"] == "/etc/default/raspi-firmware")
            .unwrap_or_else(|| panic!("no ROOTPART edit in {edits:#}"))
            .clone();
        edit["backup"].clone()
    };
    let (code, plan) = run(root, &["plan", "--target", "/dev/sda", "--seed", "3"], None);
    assert_eq!(code, 0, "{plan:#}");
    let (code, sync) = run(
        root,
        &["sync", "--dry-run", "--target", "/dev/sda", "--seed", "3"],
        None,
    );
    assert_eq!(code, 0, "{sync:#}");
    assert_eq!(
        backup(&plan["edits"]),
        "/etc/default/raspi-firmware.pimigrate-backup"
    );
    assert_eq!(backup(&plan["edits"]), backup(&sync["plan"]["edits"]));
}

#[test]
fn a_missing_mkfs_is_said_alike_by_plan_and_a_first_sync() {
    let machine = pi4_copy();
    let root = machine.path();
    let empty = tempfile::tempdir().unwrap();
    let tools = Some(empty.path());
    let plan = refused_with(
        root,
        &["plan", "--target", "/dev/sda", "--layout", "full"],
        tools,
    );
    let sync = refused_with(
        root,
        &[
            "sync",
            "--dry-run",
            "--target",
            "/dev/sda",
            "--layout",
            "full",
        ],
        tools,
    );
    let missing = |reasons: &[Value]| -> Vec<Value> {
        reasons
            .iter()
            .filter(|r| r["code"] == "tool-missing")
            .cloned()
            .collect()
    };
    assert_eq!(
        missing(&plan).len(),
        2,
        "mkfs.ext4 and mkfs.vfat: {plan:#?}"
    );
    assert_eq!(missing(&plan), missing(&sync));
}

/// The copy's root as Fedora and openSUSE have it on a Pi: btrfs, its
/// subvolume `@` mounted at `/` and `@home` at `/home` (the mount table
/// shows btrfs's own device number, not the partition's), named so in
/// fstab and cmdline.txt.
fn with_a_btrfs_root(root: &Path) {
    let mountinfo = root.join("proc/self/mountinfo");
    let table = std::fs::read_to_string(&mountinfo).unwrap();
    let table = table.replace(
        "26 1 179:2 / / rw,relatime shared:26 - ext4 /dev/mmcblk0p2 rw\n",
        "26 1 0:31 /@ / rw,relatime shared:26 - btrfs /dev/mmcblk0p2 rw,ssd,space_cache=v2,subvolid=256,subvol=/@\n\
         27 26 0:31 /@home /home rw,relatime shared:27 - btrfs /dev/mmcblk0p2 rw,ssd,space_cache=v2,subvolid=257,subvol=/@home\n",
    );
    assert!(table.contains(" - btrfs "), "the fixture's / line changed");
    std::fs::write(mountinfo, table).unwrap();
    declare_root(
        root,
        "UUID=6e0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b  /      btrfs  subvol=@,compress=zstd:1      0  0\n\
         UUID=6e0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b  /home  btrfs  subvol=@home,compress=zstd:1  0  0\n",
        "rootfstype=btrfs rootflags=subvol=@",
    );
}

/// The copy's root on f2fs, as some owners put it on an SD card.
fn with_an_f2fs_root(root: &Path) {
    let mountinfo = root.join("proc/self/mountinfo");
    let table = std::fs::read_to_string(&mountinfo).unwrap();
    let table = table.replace(
        "- ext4 /dev/mmcblk0p2 rw\n",
        "- f2fs /dev/mmcblk0p2 rw,lazytime,background_gc=on,discard\n",
    );
    assert!(table.contains(" - f2fs "), "the fixture's / line changed");
    std::fs::write(mountinfo, table).unwrap();
    declare_root(
        root,
        "PARTUUID=6c586e13-02  /  f2fs  defaults,noatime  0  1\n",
        "rootfstype=f2fs",
    );
}

/// fstab's lines for the root (beside the boot partition's), and
/// cmdline.txt's `rootfstype=ext4` replaced by `cmdline_args`.
fn declare_root(root: &Path, fstab_lines: &str, cmdline_args: &str) {
    std::fs::write(
        root.join("etc/fstab"),
        format!(
            "proc  /proc  proc  defaults  0  0\n\
             PARTUUID=6c586e13-01  /boot/firmware  vfat  defaults  0  2\n{fstab_lines}"
        ),
    )
    .unwrap();
    let cmdline = root.join("boot/firmware/cmdline.txt");
    let line = std::fs::read_to_string(&cmdline).unwrap();
    assert!(line.contains("rootfstype=ext4"));
    std::fs::write(cmdline, line.replace("rootfstype=ext4", cmdline_args)).unwrap();
}

/// Regression (issue 44 item 7): a btrfs or f2fs root planned and
/// migrated with exit 0 into an ext4 copy whose fstab and cmdline.txt
/// still named the old type, a Pi that cannot mount its root. Refused
/// while planning, in one wording that names the filesystem, by `plan`,
/// a first sync and a later sync.
#[test]
fn a_root_that_is_not_ext4_is_refused_alike_by_plan_and_both_syncs() {
    for (fstype, with) in [
        ("btrfs", with_a_btrfs_root as fn(&Path)),
        ("f2fs", with_an_f2fs_root),
    ] {
        let machine = pi4_copy();
        let root = machine.path();
        with_an_ext4_ssd(root);
        with(root);
        let code = "source-root-filesystem";
        let later = later_sync(root, 1, "0a1b2c3d-01");
        same_everywhere(
            code,
            &migrate(root, "/dev/sda"),
            &first_sync(root, "/dev/sda"),
            &later,
        );
        let reason = the(&later, code);
        let message = reason["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("the root filesystem (/) is {fstype}: ")),
            "{message}"
        );
        assert!(message.contains("ext4"), "{message}");
        assert!(message.contains("rootfstype="), "{message}");
        assert_eq!(
            message.contains("subvolumes"),
            fstype == "btrfs",
            "{message}"
        );
        let hint = reason["hint"].as_str().unwrap();
        assert!(hint.contains("new drive"), "{hint}");
        // The text a person reads says the same, and the exit code is a
        // refusal's.
        let output = pimigrate()
            .arg("--sysroot")
            .arg(root)
            .args(["plan", "--target", "/dev/sda"])
            .output()
            .unwrap();
        assert_eq!(exit_code(&output), 3, "{}", stderr(&output));
        let text = stdout(&output) + &stderr(&output);
        assert!(text.contains(message), "{text}");
    }
}

/// An ext3 root planned from the fixture: the copy's fstab type and every
/// command line that starts it say ext4, the same for `plan` and a sync.
#[test]
fn an_ext3_roots_copy_says_ext4_in_a_plan_and_a_sync() {
    let machine = pi4_copy();
    let root = machine.path();
    let mountinfo = root.join("proc/self/mountinfo");
    let table = std::fs::read_to_string(&mountinfo).unwrap();
    std::fs::write(
        &mountinfo,
        table.replace("- ext4 /dev/mmcblk0p2", "- ext3 /dev/mmcblk0p2"),
    )
    .unwrap();
    declare_root(
        root,
        "PARTUUID=6c586e13-02  /  ext3  defaults,noatime  0  1\n",
        "rootfstype=ext3",
    );
    let diffs = |edits: &Value| -> String {
        edits
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["diff"].as_str().unwrap().to_string())
            .collect()
    };
    for layout in ["root-only", "full"] {
        let (code, plan) = run(
            root,
            &[
                "plan", "--target", "/dev/sda", "--layout", layout, "--seed", "3",
            ],
            None,
        );
        assert_eq!(code, 0, "{plan:#}");
        let (code, sync) = run(
            root,
            &[
                "sync",
                "--dry-run",
                "--to",
                "/dev/sda",
                "--layout",
                layout,
                "--seed",
                "3",
            ],
            None,
        );
        assert_eq!(code, 0, "{sync:#}");
        for diff in [diffs(&plan["edits"]), diffs(&sync["plan"]["edits"])] {
            assert!(diff.contains("+PARTUUID="), "{diff}");
            assert!(
                diff.lines()
                    .any(|l| l.starts_with('+') && l.contains("  /  ext4  defaults,noatime")),
                "{diff}"
            );
            assert!(
                !diff
                    .lines()
                    .any(|l| l.starts_with('+') && l.contains("ext3")),
                "{diff}"
            );
        }
        let cmdlines = diffs(&plan["edits"]);
        assert!(cmdlines.contains("rootfstype=ext4"), "{cmdlines}");
        let notes = plan["notes"].to_string();
        assert!(notes.contains("root filesystem is ext3"), "{notes}");
        if layout == "root-only" {
            let line = sync["plan"]["boot_command_line"].as_str().unwrap();
            assert!(line.contains(" rootfstype=ext4 "), "{line}");
            assert!(!line.contains("ext3"), "{line}");
        } else {
            assert!(
                diffs(&sync["plan"]["edits"]).contains("+console="),
                "the standby's cmdline.txt"
            );
            assert!(diffs(&sync["plan"]["edits"]).contains("rootfstype=ext4"));
        }
    }
}
