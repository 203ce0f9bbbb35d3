//! `pimigrate devices` and `plan`, end to end, on fixture machines: real
//! sysfs/procfs/udev layouts of a Pi 4, Pi 5, Pi 3B, Pi Zero and a non-Pi.

use crate::common;

use common::*;
use serde_json::Value;

fn disk<'a>(devices: &'a Value, name: &str) -> &'a Value {
    devices["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no disk {name} in {devices:#}"))
}

fn devices(machine: &str, extra: &[&str]) -> Value {
    let mut args = vec!["devices", "--json"];
    args.extend_from_slice(extra);
    let output = on_fixture(machine, &args);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let value = json(&output);
    assert_eq!(value["schema"], "pimigrate.devices/1");
    value
}

fn plan(machine: &str, args: &[&str]) -> Value {
    let mut all = vec!["plan", "--json", "--seed", "42"];
    all.extend_from_slice(args);
    let output = on_fixture(machine, &all);
    assert_eq!(exit_code(&output), 0, "plan refused: {}", stdout(&output));
    let value = json(&output);
    assert_eq!(value["schema"], "pimigrate.plan/1");
    value
}

/// Runs a plan that must be refused; returns the reason codes.
fn refused(machine: &str, args: &[&str]) -> Vec<String> {
    let mut all = vec!["plan", "--json"];
    all.extend_from_slice(args);
    let output = on_fixture(machine, &all);
    assert_eq!(
        exit_code(&output),
        3,
        "expected a refusal: {}",
        stdout(&output)
    );
    let value = json(&output);
    assert_eq!(value["schema"], "pimigrate.refusal/1");
    value["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(!r["message"].as_str().unwrap().is_empty());
            r["code"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The changed lines of a unified diff: (removed, added).
fn changed_lines(diff: &str) -> (Vec<&str>, Vec<&str>) {
    let body = diff
        .lines()
        .filter(|l| !l.starts_with("---") && !l.starts_with("+++"));
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for line in body {
        if let Some(rest) = line.strip_prefix('-') {
            removed.push(rest);
        } else if let Some(rest) = line.strip_prefix('+') {
            added.push(rest);
        }
    }
    (removed, added)
}

fn edit<'a>(plan: &'a Value, site: &str) -> &'a Value {
    plan["edits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["site"] == site)
        .unwrap_or_else(|| panic!("no {site} edit in {:#}", plan["edits"]))
}

#[test]
fn pi4_devices_show_roles_transports_and_the_usb_bridge() {
    let d = devices("pi4", &[]);
    assert_eq!(d["pi"]["family"], "pi4");
    assert_eq!(d["pi"]["eeprom_bootloader"], true);
    assert_eq!(d["pi"]["tryboot_available"], true);
    let sd = disk(&d, "mmcblk0");
    assert_eq!(sd["role"], "source-root");
    assert_eq!(sd["transport"], "mmc");
    assert_eq!(sd["table"], "mbr");
    assert_eq!(sd["disk_id"], "6c586e13");
    assert_eq!(sd["partitions"][1]["partuuid"], "6c586e13-02");
    assert_eq!(sd["partitions"][1]["path"], "/dev/mmcblk0p2");
    assert_eq!(sd["partitions"][1]["mountpoints"][0], "/");
    let ssd = disk(&d, "sda");
    assert_eq!(ssd["role"], "candidate");
    assert_eq!(ssd["transport"], "usb");
    assert_eq!(ssd["usb"]["vendor_id"], "174c");
    assert_eq!(ssd["usb"]["product_id"], "55aa");
    assert_eq!(ssd["usb"]["driver"], "uas");
    assert_eq!(ssd["usb"]["speed_mbps"], 5000);
    assert_eq!(ssd["serial"], "S6PXNM0T812345K");
    assert_eq!(ssd["physical_sector_size"], 4096);
    let stick = disk(&d, "sdb");
    assert_eq!(stick["role"], "unsuitable");
    assert_eq!(stick["usb"]["driver"], "usb-storage");
    assert_eq!(stick["usb"]["speed_mbps"], 480);
    assert!(stick["role_reasons"][0]
        .as_str()
        .unwrap()
        .contains("mounted at /media/pi/STICK"));
    let reader = disk(&d, "sdc");
    assert_eq!(reader["read_only"], true);
    assert_eq!(reader["role_reasons"][0], "read-only");
    assert_eq!(d["source"]["boot_dir"], "/boot/firmware");
    assert_eq!(d["source"]["root_device"], "/dev/mmcblk0p2");
}

#[test]
fn pi4_devices_text_names_the_system_disk() {
    let output = on_fixture("pi4", &["devices"]);
    let text = stdout(&output);
    assert!(text.contains("Raspberry Pi 4 Model B Rev 1.4"), "{text}");
    assert!(text.contains("source-root"), "{text}");
    assert!(text.contains("USB bridge 174c:55aa"), "{text}");
    assert!(text.contains("driver uas"), "{text}");
}

#[test]
fn pi5_sees_its_nvme_drive_and_can_boot_it() {
    let d = devices("pi5", &[]);
    assert_eq!(d["pi"]["family"], "pi5");
    assert_eq!(d["pi"]["can_boot"]["nvme"], "yes");
    let nvme = disk(&d, "nvme0n1");
    assert_eq!(nvme["transport"], "nvme");
    assert_eq!(nvme["model"], "WD Blue SN580 500GB");
    assert_eq!(nvme["serial"], "23301A801234");
    assert_eq!(nvme["role"], "candidate");
}

#[test]
fn pi3b_uses_boot_and_needs_the_otp_bit_for_usb() {
    let d = devices("pi3b", &[]);
    assert_eq!(d["pi"]["family"], "pi3");
    assert_eq!(d["pi"]["can_boot"]["usb"], "needs-otp");
    assert_eq!(d["pi"]["tryboot_available"], false);
    assert_eq!(d["source"]["boot_dir"], "/boot");
    let hdd = disk(&d, "sda");
    assert_eq!(hdd["rotational"], true);
    assert_eq!(hdd["usb"]["vendor_id"], "152d");
}

#[test]
fn generic_machine_is_not_a_pi_and_hides_loop_devices_unless_asked() {
    let d = devices("generic", &[]);
    assert_eq!(d["pi"]["family"], "not-a-pi");
    let names: Vec<&str> = d["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mmcblk0", "nvme0n1", "sda"]);
    let all = devices("generic", &["--all"]);
    let looped = disk(&all, "loop0");
    assert_eq!(looped["transport"], "virtual");
    assert_eq!(looped["backing_file"], "/var/tmp/target.img");
    assert!(looped["role_reasons"][0]
        .as_str()
        .unwrap()
        .contains("held by dm-0"));
}

#[test]
fn duplicate_ids_across_disks_are_named() {
    let d = devices("generic", &[]);
    let refs = d["source"]["references"].as_array().unwrap();
    let root = refs
        .iter()
        .find(|r| r["place"] == "/etc/fstab (/)")
        .unwrap();
    let matches: Vec<&str> = root["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(matches, ["/dev/mmcblk0p2", "/dev/sda2"]);
    let text = stdout(&on_fixture("generic", &["devices"]));
    assert!(text.contains("matches 2 devices"), "{text}");
}

#[test]
fn root_only_plan_is_aligned_fresh_and_edits_only_the_root_spec() {
    let p = plan("pi4", &["--target", "/dev/sda", "--no-trial"]);
    assert_eq!(p["layout"], "root-only");
    assert!(p["trial_boot"].is_null());
    assert_eq!(p["table"]["kind"], "mbr");
    let sig = p["table"]["disk_id"].as_str().unwrap();
    assert_ne!(sig, "6c586e13");
    assert_ne!(sig, "00000000");
    let parts = p["table"]["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 1);
    let root = &parts[0];
    assert_eq!(root["role"], "root");
    assert_eq!(root["partuuid"], format!("{sig}-01"));
    assert_eq!(root["start_sector"], 8192);
    let end = root["end_sector"].as_u64().unwrap();
    assert_eq!((end + 1) % 8192, 0, "4 MiB aligned end");
    assert!(end < 976773168);

    let fstab = edit(&p, "target-root");
    let (removed, added) = changed_lines(fstab["diff"].as_str().unwrap());
    assert_eq!(
        removed,
        ["PARTUUID=6c586e13-02  /               ext4    defaults,noatime  0       1"]
    );
    assert_eq!(
        added,
        [
            format!("PARTUUID={sig}-01  /               ext4    defaults,noatime  0       1")
                .as_str()
        ]
    );

    let cmdline = edit(&p, "source-boot");
    assert_eq!(cmdline["file"], "/cmdline.txt");
    assert_eq!(cmdline["backup"], "/cmdline.txt.pimigrate-backup");
    assert_eq!(cmdline["output"], "/cmdline.txt");
    let (removed, added) = changed_lines(cmdline["diff"].as_str().unwrap());
    assert_eq!(removed.len(), 1);
    assert_eq!(added.len(), 1);
    assert_eq!(
        added[0],
        removed[0].replace(
            "root=PARTUUID=6c586e13-02",
            &format!("root=PARTUUID={sig}-01")
        )
    );

    let mkfs = &p["filesystems"][0];
    assert_eq!(mkfs["fstype"], "ext4");
    assert_eq!(mkfs["label"], "rootfs2", "the SD card already has 'rootfs'");
    assert_eq!(mkfs["command"][0], "mkfs.ext4");
    assert!(p["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("will be erased")));
    assert_eq!(p["target"]["serial"], "S6PXNM0T812345K");
    assert_eq!(p["copy"]["space"]["fits"], true);
    assert!(p["copy"]["files"].as_u64().unwrap() >= 4);
}

#[test]
fn full_plan_moves_boot_too_and_leaves_the_sd_card_alone() {
    let p = plan("pi4", &["--target", "/dev/sda", "--layout", "full"]);
    let sig = p["table"]["disk_id"].as_str().unwrap().to_string();
    let parts = p["table"]["partitions"].as_array().unwrap();
    assert_eq!(parts[0]["role"], "boot");
    assert_eq!(parts[0]["type_id"], "0x0c");
    assert_eq!(parts[0]["start_sector"], 8192);
    assert_eq!(parts[0]["size_bytes"], 512u64 << 20);
    assert_eq!(parts[1]["start_sector"], 8192 + 1048576);
    for part in parts {
        assert_eq!(part["start_sector"].as_u64().unwrap() % 8192, 0);
    }
    let fstab = edit(&p, "target-root");
    let (removed, added) = changed_lines(fstab["diff"].as_str().unwrap());
    assert_eq!(removed.len(), 2);
    assert!(added[0].starts_with(&format!("PARTUUID={sig}-01  /boot/firmware")));
    assert!(added[1].starts_with(&format!("PARTUUID={sig}-02  /    ")));
    // The SD card's cmdline.txt is never edited; its boot partition gets
    // only the trial's own files (the fixture's bootloader date is unknown,
    // so the trial starts the SD card's kernel with the new root).
    assert!(p["edits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["site"] == "source-boot")
        .all(|e| e["output"] == "/cmdline.pimigrate.txt"));
    assert_eq!(p["bootloader"]["trial"], "kernel-from-sd");
    assert_eq!(p["trial_boot"]["site"], "source-boot");
    let direct = plan(
        "pi4",
        &["--target", "/dev/sda", "--layout", "full", "--no-trial"],
    );
    assert!(direct["edits"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["site"] != "source-boot"));
    assert_eq!(edit(&p, "target-boot")["file"], "/cmdline.txt");
    assert_eq!(p["boot_copy"]["from"], "/boot/firmware");
    let vfat = p["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fstype"] == "vfat")
        .unwrap();
    assert_eq!(vfat["command"][0], "mkfs.vfat");
    assert_eq!(vfat["command"][2], "32");
    assert!(p["boot_order"]["message"]
        .as_str()
        .unwrap()
        .contains("BOOT_ORDER"));
}

#[test]
fn plans_are_reproducible_with_a_seed_and_fresh_without() {
    let a = plan("pi5", &["--target", "/dev/nvme0n1", "--layout", "full"]);
    let b = plan("pi5", &["--target", "/dev/nvme0n1", "--layout", "full"]);
    assert_eq!(a["table"], b["table"]);
    let output = on_fixture("pi5", &["plan", "--json", "--target", "/dev/nvme0n1"]);
    let c = json(&output);
    let output = on_fixture("pi5", &["plan", "--json", "--target", "/dev/nvme0n1"]);
    let d = json(&output);
    assert_ne!(c["table"]["disk_id"], d["table"]["disk_id"]);
    assert_ne!(c["filesystems"][0]["uuid"], d["filesystems"][0]["uuid"]);
}

#[test]
fn gpt_plan_has_fresh_guids() {
    let p = plan(
        "pi5",
        &[
            "--target",
            "/dev/nvme0n1",
            "--layout",
            "full",
            "--table",
            "gpt",
        ],
    );
    assert_eq!(p["table"]["kind"], "gpt");
    let parts = p["table"]["partitions"].as_array().unwrap();
    let guids: Vec<&str> = parts
        .iter()
        .map(|p| p["partuuid"].as_str().unwrap())
        .collect();
    assert_ne!(guids[0], guids[1]);
    for guid in &guids {
        let parsed = uuid::Uuid::parse_str(guid).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(*guid, guid.to_lowercase());
    }
    let fstab = edit(&p, "target-root");
    assert!(fstab["diff"]
        .as_str()
        .unwrap()
        .contains(&format!("+PARTUUID={}  /", guids[1])));
}

#[test]
fn old_systems_get_ext4_without_orphan_file() {
    let host_is_new = std::process::Command::new("mkfs.ext4")
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).contains("1.47"))
        .unwrap_or(false);
    let bullseye = plan("pi3b", &["--target", "/dev/sda"]);
    let command: Vec<&str> = bullseye["filesystems"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        command.contains(&"^orphan_file"),
        host_is_new,
        "{command:?}"
    );
    let bookworm = plan("pi5", &["--target", "/dev/nvme0n1"]);
    assert!(!bookworm["filesystems"][0]["command"]
        .to_string()
        .contains("orphan_file"));
}

#[test]
fn device_paths_in_boot_files_become_partuuids_and_rootwait_is_added() {
    let p = plan("pizero", &["--target", "/dev/sda"]);
    let sig = p["table"]["disk_id"].as_str().unwrap();
    let cmdline = edit(&p, "source-boot");
    let (removed, added) = changed_lines(cmdline["diff"].as_str().unwrap());
    let expected =
        removed[0].replace("root=/dev/mmcblk0p2", &format!("root=PARTUUID={sig}-01")) + " rootwait";
    assert_eq!(added, [expected.as_str()]);
    let fstab = edit(&p, "target-root");
    let (_, added) = changed_lines(fstab["diff"].as_str().unwrap());
    assert!(
        added[0].starts_with(&format!("PARTUUID={sig}-01  /  ")),
        "{added:?}"
    );
    assert!(p["warnings"].to_string().contains("USB 2 speed"));
}

#[test]
fn pi3b_full_move_over_usb_warns_about_the_otp_bit_and_refuses_gpt() {
    let p = plan("pi3b", &["--target", "/dev/sda", "--layout", "full"]);
    assert_eq!(p["table"]["kind"], "mbr");
    assert!(p["warnings"]
        .to_string()
        .contains("program_usb_boot_mode=1"));
    assert_eq!(
        refused(
            "pi3b",
            &["--target", "/dev/sda", "--layout", "full", "--table", "gpt"]
        ),
        ["table-not-bootable"]
    );
    // The kernel reads a root-only target, so GPT is fine there.
    let p = plan("pi3b", &["--target", "/dev/sda", "--table", "gpt"]);
    assert_eq!(p["table"]["kind"], "gpt");
}

#[test]
fn refuses_the_system_disk_partitions_and_missing_devices() {
    assert_eq!(
        refused("pi4", &["--target", "/dev/mmcblk0"]),
        ["target-holds-root"]
    );
    assert_eq!(
        refused("pi4", &["--target", "/dev/sda1"]),
        ["target-is-partition"]
    );
    assert_eq!(
        refused("pi4", &["--target", "/dev/sdz"]),
        ["target-not-found"]
    );
    assert_eq!(
        refused("pi4", &["--target", "/etc/hostname"]),
        ["target-not-block-device"]
    );
}

#[test]
fn refuses_busy_read_only_and_too_small_targets() {
    assert_eq!(refused("pi4", &["--target", "/dev/sdb"]), ["target-in-use"]);
    assert_eq!(
        refused("pi4", &["--target", "/dev/sdc"]),
        ["target-read-only"]
    );
    assert_eq!(
        refused("generic", &["--target", "/dev/loop0"]),
        ["target-in-use"]
    );
    assert_eq!(
        refused("pi4", &["--target", "/dev/sda", "--root-size", "8M"]),
        ["target-too-small"]
    );
    assert_eq!(
        refused("pi4", &["--target", "/dev/sda", "--root-size", "600G"]),
        ["target-too-small"]
    );
}

#[test]
fn refuses_a_full_move_the_firmware_cannot_boot_and_offers_root_only() {
    let output = on_fixture(
        "pizero",
        &["plan", "--target", "/dev/sda", "--layout", "full"],
    );
    assert_eq!(exit_code(&output), 3);
    let text = stderr(&output);
    assert!(text.contains("cannot boot from a usb disk"), "{text}");
    assert!(text.contains("--layout root-only"), "{text}");
    let p = plan("pizero", &["--target", "/dev/sda"]);
    assert_eq!(p["layout"], "root-only");
}

#[test]
fn refuses_a_new_id_that_an_attached_disk_has() {
    assert_eq!(
        refused(
            "pi5",
            &["--target", "/dev/nvme0n1", "--disk-signature", "4e639091"]
        ),
        ["id-collision"]
    );
}

#[test]
fn reports_every_reason_at_once() {
    let codes = refused(
        "pi4",
        &["--target", "/dev/sdb", "--disk-signature", "6c586e13"],
    );
    assert_eq!(codes, ["target-in-use", "id-collision"]);
}

#[test]
fn a_missing_mkfs_names_the_package() {
    let empty = tempfile::tempdir().unwrap();
    let output = pimigrate()
        .arg("--sysroot")
        .arg(fixture("pi4"))
        .args(["plan", "--target", "/dev/sda", "--layout", "full"])
        .env("PIMIGRATE_TOOLS_PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(exit_code(&output), 3);
    let text = stderr(&output);
    assert!(text.contains("mkfs.ext4 is not installed"), "{text}");
    assert!(text.contains("apt install e2fsprogs"), "{text}");
    assert!(text.contains("apt install dosfstools"), "{text}");
}

/// Copies a fixture so a test can break its boot files.
fn broken_copy(machine: &str, file: &str, contents: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture(machine).display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(dir.path().join(file), contents).unwrap();
    dir
}

fn refused_in(root: &std::path::Path, args: &[&str]) -> (Vec<String>, String) {
    let output = pimigrate()
        .arg("--sysroot")
        .arg(root)
        .args(["plan", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(exit_code(&output), 3, "{}", stdout(&output));
    let value = json(&output);
    let reasons = value["reasons"].as_array().unwrap();
    let codes = reasons
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_string())
        .collect();
    (codes, value["reasons"].to_string())
}

#[test]
fn broken_boot_files_are_refused_with_what_is_wrong() {
    let cases: [(&str, &[u8], &str, &str); 5] = [
        (
            "boot/firmware/cmdline.txt",
            b"console=tty1 quiet rootwait\n",
            "source-cmdline",
            "root=",
        ),
        ("boot/firmware/cmdline.txt", b"", "source-cmdline", "empty"),
        (
            "boot/firmware/cmdline.txt",
            b"root=/dev/a root=/dev/b\n",
            "source-cmdline",
            "root=",
        ),
        (
            "etc/fstab",
            b"/dev/mmcblk0p2 / ext4 defaults 0 1\n/dev/sda2 / ext4 defaults 0 1\n",
            "source-fstab",
            "/",
        ),
        (
            "etc/fstab",
            b"\x00\xff\xfe\x00junk",
            "source-fstab",
            "fstab",
        ),
    ];
    for (file, contents, code, mentions) in cases {
        let tree = broken_copy("pi4", file, contents);
        let (codes, text) = refused_in(tree.path(), &["--target", "/dev/sda"]);
        assert_eq!(codes, [code], "{file}: {text}");
        assert!(text.contains(mentions), "{file}: {text}");
    }
}

#[test]
fn a_dry_run_writes_nothing() {
    let tree = broken_copy("pi4", "etc/hostname", b"raspberrypi\n");
    let before = snapshot(tree.path());
    for layout in ["root-only", "full"] {
        let output = pimigrate()
            .arg("--sysroot")
            .arg(tree.path())
            .args(["plan", "--target", "/dev/sda", "--layout", layout])
            .output()
            .unwrap();
        assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    }
    assert_eq!(before, snapshot(tree.path()));
}

/// `migrate --dry-run` is `plan`: the same plan, the same output (text
/// and JSON, refusals too), the same exit code, and nothing written, not
/// even a journal.
#[test]
fn migrate_dry_run_is_plan() {
    let tree = broken_copy("pi4", "etc/hostname", b"raspberrypi\n");
    let state = tempfile::tempdir().unwrap();
    let before = snapshot(tree.path());
    let run = |command: &str, args: &[&str]| {
        let mut all = vec![command];
        if command == "migrate" {
            all.push("--dry-run");
        }
        all.extend_from_slice(args);
        pimigrate()
            .arg("--sysroot")
            .arg(tree.path())
            .arg("--state-dir")
            .arg(state.path())
            .args(&all)
            .output()
            .unwrap()
    };
    for args in [
        &["--target", "/dev/sda", "--seed", "5"][..],
        &["--target", "/dev/sda", "--seed", "5", "--json"],
        &[
            "--target",
            "/dev/sda",
            "--seed",
            "5",
            "--layout",
            "full",
            "--trial=never",
        ],
        &["--target", "/dev/sda", "--seed", "5", "-v"],
        // Refused: the system disk.
        &["--target", "/dev/mmcblk0", "--json"],
        &["--target", "/dev/mmcblk0"],
    ] {
        let plan = run("plan", args);
        let dry = run("migrate", args);
        assert_eq!(
            exit_code(&dry),
            exit_code(&plan),
            "{args:?}: {}",
            stderr(&dry)
        );
        assert_eq!(stdout(&dry), stdout(&plan), "{args:?}");
        assert_eq!(stderr(&dry), stderr(&plan), "{args:?}");
        assert!(!stdout(&plan).is_empty() || !stderr(&plan).is_empty());
    }
    assert_eq!(exit_code(&run("migrate", &["--target", "/dev/mmcblk0"])), 3);
    assert_eq!(before, snapshot(tree.path()));
    assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    // A dry run has nothing to resume and reboots nothing.
    for clash in ["--resume", "--reboot"] {
        assert_eq!(
            exit_code(&run("migrate", &["--target", "/dev/sda", clash])),
            2
        );
    }
}

fn snapshot(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn human_plan_shows_table_commands_and_diffs() {
    let output = on_fixture(
        "pi4",
        &["plan", "--target", "/dev/sda", "--seed", "7", "--no-trial"],
    );
    assert_eq!(exit_code(&output), 0);
    let text = stdout(&output);
    for expected in [
        "Dry run: nothing has been written.",
        "Partition table: MBR",
        "mkfs.ext4 -F -L rootfs2",
        "--- a/etc/fstab",
        "+++ b/cmdline.txt",
        "changed last, atomically",
        "will be erased",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let brief = stdout(&on_fixture("pi4", &["-q", "plan", "--target", "/dev/sda"]));
    assert!(brief.lines().count() <= 3, "{brief}");
}

/// What the new drive gets beyond the copy (issue 45), as the plan's text
/// and JSON say it: the Pi 4's SSD behind a uas bridge whose VPD pages
/// report UNMAP gets a udev rule, shown as an added file; `--no-trim`
/// leaves it out; `--usb-quirk` puts the quirk on the new command line;
/// the Pi 5's NVMe drive takes discards by itself; the Pi 3's usb-storage
/// disk could not be asked, and no rule is written.
#[test]
fn the_plan_says_what_the_new_drive_gets_after_the_move() {
    let args = ["plan", "--target", "/dev/sda", "--seed", "7"];
    let text = stdout(&on_fixture("pi4", &args));
    for expected in [
        "\nAfter the move\n  TRIM: the bridge 174c:55aa passes UNMAP; a udev rule for it on the new root",
        "  The rule, would be written onto the new root (--no-trim leaves it out):\n    --- /dev/null\n    +++ b/etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules\n",
        "    +ACTION==\"change\", SUBSYSTEM==\"scsi_disk\", ATTRS{idVendor}==\"174c\", ATTRS{idProduct}==\"55aa\", ATTR{provisioning_mode}=\"unmap\"",
        "  USB bridge 174c:55aa runs on uas.\n",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let value = plan("pi4", &["--target", "/dev/sda"]);
    let trim = &value["after_move"]["trim"];
    assert_eq!(trim["decision"]["verdict"], "switch-on", "{trim:#}");
    assert_eq!(trim["decision"]["rule"]["discard_max_bytes"], 1u64 << 30);
    assert_eq!(
        trim["rule"]["path"],
        "/etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules"
    );
    assert_eq!(trim["consent"], true);
    let quirk = &value["after_move"]["usb_quirk"];
    assert_eq!(quirk["bridge"], "174c:55aa");
    assert_eq!(quirk["offered"], false);
    assert_eq!(quirk["argument"], "usb-storage.quirks=174c:55aa:u");
    assert!(value["after_move"]["power"]["usb_boot_current"]["verdict"] == "not-applicable");

    let no_trim = plan("pi4", &["--target", "/dev/sda", "--no-trim"]);
    assert_eq!(no_trim["after_move"]["trim"]["rule"], Value::Null);
    let text = stdout(&on_fixture("pi4", &[&args[..], &["--no-trim"]].concat()));
    assert!(
        text.contains("--no-trim: no rule is written, and TRIM stays off"),
        "{text}"
    );
    assert!(!text.contains("+++ b/etc/udev"), "{text}");

    let quirk = plan(
        "pi4",
        &["--target", "/dev/sda", "--usb-quirk", "--no-trial"],
    );
    let (_, added) = changed_lines(edit(&quirk, "source-boot")["diff"].as_str().unwrap());
    assert!(
        added[0].ends_with(" usb-storage.quirks=174c:55aa:u"),
        "{added:?}"
    );

    let nvme = plan("pi5", &["--target", "/dev/nvme0n1", "--layout", "full"]);
    assert_eq!(
        nvme["after_move"]["trim"]["decision"]["verdict"],
        "already-on"
    );
    assert_eq!(nvme["after_move"]["trim"]["rule"], Value::Null);
    assert_eq!(nvme["after_move"]["usb_quirk"], Value::Null);
    assert_eq!(
        refused(
            "pi5",
            &[
                "--target",
                "/dev/nvme0n1",
                "--layout",
                "full",
                "--usb-quirk"
            ]
        ),
        ["usb-quirk-unavailable"]
    );

    let hdd = plan("pi3b", &["--target", "/dev/sda"]);
    let trim = &hdd["after_move"]["trim"];
    assert_eq!(trim["decision"]["verdict"], "cannot", "{trim:#}");
    assert_eq!(trim["decision"]["why"]["reason"], "vpd-not-read");
    assert_eq!(trim["rule"], Value::Null);
}

#[test]
fn quiet_and_verbose_change_how_much_is_said() {
    // -q: devices leaves out the system summary, keeps the disks.
    let normal = stdout(&on_fixture("pi4", &["devices"]));
    let quiet = stdout(&on_fixture("pi4", &["-q", "devices"]));
    assert!(normal.contains("System: / on /dev/mmcblk0p2"), "{normal}");
    assert!(!quiet.contains("System:"), "{quiet}");
    assert!(quiet.contains("/dev/sda"), "{quiet}");
    // -v: the plan says why each path is left out of the copy.
    let plan = ["plan", "--target", "/dev/sda", "--seed", "7", "--no-trial"];
    let normal = stdout(&on_fixture("pi4", &plan));
    let verbose = stdout(&on_fixture("pi4", &[&["-v"][..], &plan].concat()));
    assert!(
        normal.contains("leaves out /lost+found, /var/swap"),
        "{normal}"
    );
    assert!(
        verbose.contains("leaves out /lost+found (mkfs.ext4 creates a fresh one)"),
        "{verbose}"
    );
}

#[test]
fn usage_errors_exit_2_and_other_errors_exit_1() {
    let output = pimigrate().args(["plan"]).output().unwrap();
    assert_eq!(exit_code(&output), 2);
    let output = pimigrate()
        .args(["--sysroot", "/nonexistent/tree", "devices"])
        .output()
        .unwrap();
    assert_eq!(exit_code(&output), 1);
    assert!(stderr(&output).contains("--sysroot /nonexistent/tree"));
    let output = pimigrate().args(["--version"]).output().unwrap();
    assert!(stdout(&output).starts_with("pimigrate "));
}

#[test]
fn full_move_reads_boot_order_and_says_what_it_needs() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let tool = bin.path().join("rpi-eeprom-config");
    std::fs::write(
        &tool,
        "#!/bin/sh\nprintf '[all]\\nBOOT_UART=0\\nBOOT_ORDER=0xf41\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = pimigrate()
        .arg("--sysroot")
        .arg(fixture("pi4"))
        .args(["plan", "--json", "--target", "/dev/sda", "--layout", "full"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let advice = &json(&output)["boot_order"];
    assert_eq!(advice["current"], "0xf41");
    assert_eq!(advice["needed"], "0xf14");
    assert!(advice["message"]
        .as_str()
        .unwrap()
        .contains("tries the SD card first"));
}

#[test]
fn refuses_a_disk_that_holds_active_swap() {
    let d = devices("pi5", &[]);
    let stick = disk(&d, "sda");
    assert_eq!(stick["partitions"][0]["swap"], true);
    assert_eq!(stick["role"], "unsuitable");
    let output = on_fixture("pi5", &["plan", "--target", "/dev/sda"]);
    assert_eq!(exit_code(&output), 3);
    assert!(
        stderr(&output).contains("sda1 is active swap"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn root_only_on_a_pi4_boots_the_new_root_on_trial_first() {
    let p = plan("pi4", &["--target", "/dev/sda"]);
    let sig = p["table"]["disk_id"].as_str().unwrap();
    let cmdline = edit(&p, "source-boot");
    assert_eq!(cmdline["file"], "/cmdline.txt");
    assert_eq!(
        cmdline["output"], "/cmdline.pimigrate.txt",
        "cmdline.txt itself is left alone"
    );
    assert!(cmdline["backup"].is_null());
    assert!(cmdline["diff"]
        .as_str()
        .unwrap()
        .contains(&format!("root=PARTUUID={sig}-01")));
    let trial = &p["trial_boot"];
    assert_eq!(trial["tryboot_file"], "/tryboot.txt");
    let (removed, added) = changed_lines(trial["diff"].as_str().unwrap());
    assert!(removed.is_empty());
    assert_eq!(added, ["cmdline=cmdline.pimigrate.txt"]);
    // Models without tryboot, and --no-trial, take the direct way.
    assert!(plan("pi3b", &["--target", "/dev/sda"])["trial_boot"].is_null());
    assert!(plan("generic", &["--target", "/dev/nvme0n1"])["trial_boot"].is_null());
    // The emulated Pi's firmware stand-in has tryboot, which pimigrate cannot detect.
    let forced = plan(
        "generic",
        &["--target", "/dev/nvme0n1", "--trial", "always"],
    );
    assert_eq!(
        forced["trial_boot"]["cmdline_file"],
        "/cmdline.pimigrate.txt"
    );
    // A full move has its trial too (tests/full_move_fixture.rs); without
    // one it leaves the SD card alone.
    assert!(plan(
        "pi4",
        &["--target", "/dev/sda", "--layout", "full", "--no-trial"]
    )["trial_boot"]
        .is_null());
}
