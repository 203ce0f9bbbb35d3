//! A first `sync` killed (SIGKILL) at every point of [`pimigrate::failpoint::SYNC`]
//! a root-only standby reaches: whatever the standby holds then, its own
//! fstab and raspi-firmware `ROOTPART=` never name the running system's
//! root (they name its own, or are not there yet), the record says the
//! standby is incomplete, and the next sync completes it, rsync then
//! finding nothing left to do. (A full standby's boot partition is FAT,
//! which this machine's kernel cannot mount: the testbed cuts there.)

use crate::common;

use common::standby::{setup, SyncRig};
use common::*;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

/// The running system's root, as its fstab and ROOTPART name it.
const RUNNING_ROOT: &str = "PARTUUID=6c586e13-02";

/// The points a root-only first sync reaches (the boot tree's are a full
/// standby's).
fn points() -> Vec<&'static str> {
    pimigrate::failpoint::SYNC
        .iter()
        .copied()
        .filter(|p| !p.starts_with("boot-tree-"))
        .collect()
}

/// The first partition's start on the rig's disk, once it has a table.
fn root_start(image: &Path) -> Option<u64> {
    let output = Command::new("sfdisk")
        .arg("--json")
        .arg(image)
        .output()
        .expect("sfdisk (fdisk) is required");
    let table: Value = serde_json::from_slice(&output.stdout).ok()?;
    table["partitiontable"]["partitions"][0]["start"].as_u64()
}

/// Whether the image holds an ext4 filesystem at `start` (mkfs ran).
fn has_ext4(image: &Path, start: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(image).unwrap();
    let mut magic = [0u8; 2];
    file.seek(SeekFrom::Start(start * 512 + 1024 + 0x38))
        .unwrap();
    file.read_exact(&mut magic).is_ok() && magic == [0x53, 0xef]
}

#[test]
fn a_first_sync_killed_anywhere_never_names_the_running_root_and_the_next_completes_it() {
    if !require_root("fault injection on a loop-device standby") {
        return;
    }
    for point in points() {
        let SyncRig { rig, _sd, _turn } = setup();
        let cut = rig.run(
            &["--json", "sync", "--target", &rig.device, "--yes"],
            Some(point),
        );
        assert_eq!(
            cut.status.signal(),
            Some(9),
            "{point}: not reached ({:?})\n{}",
            cut.status,
            stderr(&cut)
        );
        if let Some(record) = std::fs::read(rig.state.path().join("standby.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            assert_ne!(record["state"], "complete", "{point}: not complete yet");
        }
        if let Some(start) = root_start(&rig.image).filter(|&s| has_ext4(&rig.image, s)) {
            rig.inspect_after_a_cut(start, |root| {
                for file in ["etc/fstab", "etc/default/raspi-firmware"] {
                    if let Ok(text) = std::fs::read_to_string(root.join(file)) {
                        assert!(
                            !text.contains(RUNNING_ROOT),
                            "{point}: the standby's /{file} names the running root:\n{text}"
                        );
                    }
                }
            });
        }
        let next = rig.run(&["--json", "sync", "--target", &rig.device, "--yes"], None);
        let value = succeeded(&next, "sync");
        assert_eq!(value["bootable"], true, "{point}: {value:#}");
        let start = root_start(&rig.image).unwrap();
        rig.inspect_partition(start, |root| {
            let fstab = std::fs::read_to_string(root.join("etc/fstab")).unwrap();
            assert!(!fstab.contains(RUNNING_ROOT), "{point}: {fstab}");
            let rootpart =
                std::fs::read_to_string(root.join("etc/default/raspi-firmware")).unwrap();
            assert!(!rootpart.contains(RUNNING_ROOT), "{point}: {rootpart}");
            let output = Command::new("rsync")
                .args(["-naHAXc", "--itemize-changes", "--numeric-ids", "--delete"])
                .arg(format!("{}/srv/", rig.tree.path().display()))
                .arg(format!("{}/srv/", root.display()))
                .output()
                .expect("rsync is needed to check the standby");
            assert_eq!(
                String::from_utf8_lossy(&output.stdout),
                "",
                "{point}: the completing sync left differences"
            );
        });
    }
}

/// A first sync failing with an error (`name:error`) at every point it
/// reaches: the owner reads the cause, then where the running system and
/// the standby stand, and the command that goes on, with no Debug text;
/// the running system's boot files are untouched, a standby said to be
/// untouched holds nothing yet, and the command named completes it.
#[test]
fn a_first_sync_failing_anywhere_says_where_things_stand_and_the_command_that_completes_it() {
    if !require_root("fault injection on a loop-device standby") {
        return;
    }
    for point in points() {
        let SyncRig { rig, _sd, _turn } = setup();
        let boot_before = boot_files(&rig.boot());
        let args = ["--json", "sync", "--target", &rig.device, "--yes"];
        let failed = rig.run(&args, Some(&format!("{point}:error")));
        let said = stderr(&failed);
        if point == "copy-file" {
            // A first sync copies in two passes: the second copies again
            // what the first could not.
            assert_eq!(exit_code(&failed), 0, "{point}: {said}");
            continue;
        }
        assert_eq!(exit_code(&failed), 1, "{point}: {said}");
        assert!(
            said.contains(&format!("fail point {point}")),
            "{point}: the cause is not said:\n{said}"
        );
        let (stands, _, command) = told(point, &said);
        assert!(
            stands.starts_with("the running system is untouched"),
            "{point}: {stands}"
        );
        assert_eq!(
            boot_files(&rig.boot()),
            boot_before,
            "{point}: the boot files changed"
        );
        if stands.contains("nothing was written") {
            assert_first_mib_blank(&rig.image);
        } else {
            assert!(stands.contains("is incomplete"), "{point}: {stands}");
            let record: Value = serde_json::from_slice(
                &std::fs::read(rig.state.path().join("standby.json")).unwrap(),
            )
            .unwrap();
            assert_ne!(record["state"], "complete", "{point}: said incomplete");
        }
        // The command it names is this one again, and it completes the standby.
        assert!(
            command.starts_with("sudo pimigrate ") && command.contains(" sync --target "),
            "{point}: goes on with {command}"
        );
        let next = rig.run(&args, None);
        let value = succeeded(&next, "sync");
        assert_eq!(value["bootable"], true, "{point}: {value:#}");
    }
}
