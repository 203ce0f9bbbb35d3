//! `devices` and `plan` on this machine's real block devices: sparse image
//! files on loop devices, real ext4 from mkfs, real mounts. Needs root.

use crate::common;

use common::*;
use serde_json::Value;
use std::process::Command;

fn live(args: &[&str]) -> std::process::Output {
    pimigrate().args(args).output().unwrap()
}

fn find_disk<'a>(devices: &'a Value, path: &str) -> &'a Value {
    devices["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == path)
        .unwrap_or_else(|| panic!("{path} not listed: {devices:#}"))
}

fn mkfs_ext4(args: &[&str]) {
    let status = Command::new("mkfs.ext4")
        .arg("-q")
        .arg("-F")
        .args(args)
        .status()
        .expect("mkfs.ext4 (e2fsprogs) is required");
    assert!(status.success());
}

#[test]
fn the_system_disk_is_the_source_and_a_sparse_loop_disk_a_candidate() {
    if !require_root("live device listing") {
        return;
    }
    // Larger than this machine's used space, so it is big enough; sparse.
    let disk = LoopDisk::new(1 << 40);
    let output = live(&["devices", "--all", "--json"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    let devices = json(&output);
    let target = find_disk(&devices, disk.path());
    assert_eq!(target["role"], "candidate", "{target:#}");
    assert_eq!(target["transport"], "virtual");
    assert_eq!(target["size_bytes"], 1u64 << 40);
    assert_eq!(target["backing_file"], disk.image.to_str().unwrap());
    let root_device = devices["source"]["root_device"].as_str().unwrap();
    let system = devices["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| root_device.starts_with(d["path"].as_str().unwrap()))
        .unwrap();
    assert_eq!(system["role"], "source-root");
    // Without --all, loop devices are not listed.
    let plain = json(&live(&["devices", "--json"]));
    assert!(plain["disks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["transport"] != "virtual"));
}

#[test]
fn plan_against_a_loop_disk_for_a_pi_tree() {
    if !require_root("live planning") {
        return;
    }
    let disk = LoopDisk::new(8 << 30);
    let tree = pi_tree();
    let root = tree.path().to_str().unwrap();
    let boot = format!("{root}/boot/firmware");
    let args = [
        "plan",
        "--json",
        "--target",
        disk.path(),
        "--source-root",
        root,
        "--boot-dir",
        &boot,
    ];
    let output = live(&args);
    assert_eq!(exit_code(&output), 0, "{}", stdout(&output));
    let plan = json(&output);
    let sig = plan["table"]["disk_id"].as_str().unwrap();
    assert_eq!(
        plan["table"]["partitions"][0]["partuuid"],
        format!("{sig}-01")
    );
    assert_eq!(plan["table"]["partitions"][0]["start_sector"], 8192);
    assert_eq!(plan["target"]["path"], disk.path());
    let full = live(&[&args[..], &["--layout", "full"]].concat());
    assert_eq!(exit_code(&full), 0, "{}", stdout(&full));
    // Nothing was written to the target.
    assert_first_mib_blank(&disk.image);
}

#[test]
fn refuses_the_running_system_disk_and_non_disks() {
    if !require_root("live refusals") {
        return;
    }
    let devices = json(&live(&["devices", "--json"]));
    let system = devices["disks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["role"] == "source-root")
        .unwrap();
    let output = live(&[
        "plan",
        "--json",
        "--target",
        system["path"].as_str().unwrap(),
    ]);
    assert_eq!(exit_code(&output), 3);
    let codes = json(&output)["reasons"].to_string();
    assert!(codes.contains("target-holds-root"), "{codes}");

    let output = live(&["plan", "--target", "/etc/hostname"]);
    assert_eq!(exit_code(&output), 3);
    assert!(
        stderr(&output).contains("/etc/hostname is a file, not a disk"),
        "{}",
        stderr(&output)
    );
    let output = live(&["plan", "--target", "/dev/does-not-exist"]);
    assert_eq!(exit_code(&output), 3);
    assert!(stderr(&output).contains("does not exist"));
}

#[test]
fn refuses_a_mounted_or_read_only_loop_disk() {
    if !require_root("live busy checks") {
        return;
    }
    let disk = LoopDisk::new(256 << 20);
    mkfs_ext4(&["-L", "wholedisk", disk.path()]);
    let devices = json(&live(&["devices", "--all", "--json"]));
    let listed = find_disk(&devices, disk.path());
    assert_eq!(listed["filesystem"]["fstype"], "ext4");
    assert_eq!(listed["filesystem"]["label"], "wholedisk");
    let mnt = tempfile::tempdir().unwrap();
    let status = Command::new("mount")
        .arg(disk.path())
        .arg(mnt.path())
        .status()
        .unwrap();
    assert!(status.success());
    let output = live(&["plan", "--json", "--target", disk.path()]);
    let _ = Command::new("umount").arg(mnt.path()).status();
    assert_eq!(exit_code(&output), 3);
    let text = json(&output)["reasons"].to_string();
    assert!(text.contains("target-in-use"), "{text}");
    assert!(
        text.contains(&mnt.path().display().to_string()),
        "names the mount point: {text}"
    );

    let read_only = LoopDisk::with(256 << 20, |_| {}, true);
    let output = live(&["plan", "--json", "--target", read_only.path()]);
    assert_eq!(exit_code(&output), 3);
    assert!(json(&output)["reasons"]
        .to_string()
        .contains("target-read-only"));
}

#[test]
fn partitions_are_read_from_the_table_even_without_kernel_partition_devices() {
    if !require_root("live partition probing") {
        return;
    }
    let disk = LoopDisk::with(
        128 << 20,
        |image| {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(image)
                .unwrap();
            let mut mbr = mbrman::MBR::new_from(&mut file, 512, [0x78, 0x56, 0x34, 0x12]).unwrap();
            mbr[1] = mbrman::MBRPartitionEntry {
                boot: mbrman::BOOT_INACTIVE,
                first_chs: mbrman::CHS::empty(),
                sys: 0x83,
                last_chs: mbrman::CHS::empty(),
                starting_lba: 8192,
                sectors: 131072,
            };
            mbr.write_into(&mut file).unwrap();
            drop(file);
            mkfs_ext4(&[
                "-L",
                "probed",
                "-E",
                "offset=4194304",
                image.to_str().unwrap(),
                "64M",
            ]);
        },
        false,
    );
    let devices = json(&live(&["devices", "--all", "--json"]));
    let listed = find_disk(&devices, disk.path());
    assert_eq!(listed["table"], "mbr");
    assert_eq!(listed["disk_id"], "12345678");
    let part = &listed["partitions"][0];
    assert_eq!(part["number"], 1);
    assert_eq!(part["partuuid"], "12345678-01");
    assert_eq!(part["fstype"], "ext4");
    assert_eq!(part["label"], "probed");
    assert_eq!(part["start_bytes"], 4u64 << 20);
    assert_eq!(part["size_bytes"], 64u64 << 20);
}

/// The commit's last look at the new drive reads a real block device past
/// the page cache (O_DIRECT): a loop disk answers, and a loop device with
/// nothing behind it (detached, as a pulled drive's node reads) does not.
#[test]
fn a_loop_disk_answers_the_commits_last_look() {
    if !require_root("the commit's look at a real block device") {
        return;
    }
    let disk = LoopDisk::new(64 << 20);
    let name = disk.device.trim_start_matches("/dev/");
    let host = pimigrate::host::Host::with_root(std::path::Path::new("/"));
    pimigrate::verify::answers::partition_answers(&host, name)
        .unwrap_or_else(|e| panic!("{} should answer: {e:#}", disk.device));
    // An empty image: a loop device whose reads return nothing.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.img");
    std::fs::write(&empty, b"").unwrap();
    let nothing = Loop::attach(&empty, None, true);
    let err = pimigrate::verify::answers::partition_answers(
        &host,
        nothing.device.trim_start_matches("/dev/"),
    )
    .expect_err("a loop device with no data behind it does not answer");
    assert!(format!("{err:#}").contains("does not answer"), "{err:#}");
}
