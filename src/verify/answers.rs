//! Whether the new drive still answers, asked of the disk itself at the
//! moment a commit is about to make it, or has just made it, the drive
//! the Pi boots. A drive pulled out, or dropped by its bridge, while the
//! trial checks itself leaves the mount table, the page cache and the
//! inspection the checks read all saying it is there: the kernel only
//! learns otherwise at its next read. Seen in the testbed: the drive gone
//! 0.2 s into the check, every check passed from what was read before,
//! and cmdline.txt was swapped to a root that no longer existed.

use crate::bench::buffer::AlignedBuf;
use crate::host::Host;
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};

/// What one look reads: the partition's first block, the size and
/// alignment O_DIRECT takes on every disk.
const BLOCK: usize = 4096;

/// Ok when partition `device` (`/dev/sda2`, `nvme0n1p2`) is still
/// attached, not offline, and its first block reads from the disk itself,
/// past the page cache; otherwise why not.
pub fn partition_answers(host: &Host, device: &str) -> Result<()> {
    let name = device.trim_start_matches("/dev/");
    let sys = host.sys(&format!("class/block/{name}"));
    if !sys.exists() {
        bail!("/dev/{name} is no longer attached (the kernel removed it)");
    }
    // The disk's device as the kernel sees it: a SCSI disk (USB, SATA) is
    // `running`, an NVMe drive's controller `live`; one the kernel gave up
    // on (`offline`, before it is removed) or is resetting is neither. The
    // partition's disk is its sysfs parent; an SD card has no such state.
    for state in [sys.join("device/state"), sys.join("../device/state")] {
        if let Ok(state) = std::fs::read_to_string(&state) {
            let state = state.trim();
            if !matches!(state, "running" | "live") {
                bail!("/dev/{name}'s disk is {state}, no longer running");
            }
            break;
        }
    }
    let node = host.path(format!("/dev/{name}"));
    // Only a block device has a disk behind it to ask (a fixture machine's
    // /dev has none: its sysfs is all there is to read).
    let is_block = std::fs::metadata(&node).is_ok_and(|m| m.file_type().is_block_device());
    if !is_block {
        return Ok(());
    }
    read_first_block(&node).with_context(|| format!("/dev/{name} does not answer"))
}

fn read_first_block(node: &std::path::Path) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(node)
        .with_context(|| format!("opening {}", node.display()))?;
    let mut buf = AlignedBuf::new(BLOCK, BLOCK);
    let read = file
        .read(buf.as_mut_slice())
        .with_context(|| format!("reading {}", node.display()))?;
    if read == 0 {
        bail!("reading {}: it has no data", node.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine_with(parts: &[(&str, Option<&str>)]) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        for (name, state) in parts {
            let disk = dir.path().join(format!("sys/devices/x/block/{name}"));
            std::fs::create_dir_all(disk.join("device")).unwrap();
            if let Some(state) = state {
                std::fs::write(disk.join("device/state"), format!("{state}\n")).unwrap();
            }
            std::fs::create_dir_all(dir.path().join("sys/class/block")).unwrap();
            std::os::unix::fs::symlink(
                format!("../../devices/x/block/{name}"),
                dir.path().join(format!("sys/class/block/{name}")),
            )
            .unwrap();
        }
        let host = Host::with_root(dir.path());
        (dir, host)
    }

    #[test]
    fn a_partition_the_kernel_removed_does_not_answer() {
        let (_dir, host) = machine_with(&[("mmcblk0p2", None)]);
        let err = partition_answers(&host, "sda2").unwrap_err();
        assert!(
            format!("{err:#}").contains("/dev/sda2 is no longer attached"),
            "{err:#}"
        );
    }

    #[test]
    fn a_disk_the_kernel_set_offline_does_not_answer() {
        let (_dir, host) = machine_with(&[("sda", Some("offline"))]);
        let err = partition_answers(&host, "sda").unwrap_err();
        assert!(format!("{err:#}").contains("is offline"), "{err:#}");
    }

    #[test]
    fn an_attached_running_disk_answers() {
        let (_dir, host) = machine_with(&[
            ("sda", Some("running")),
            ("nvme0n1", Some("live")),
            ("mmcblk0", None),
        ]);
        partition_answers(&host, "/dev/sda").unwrap();
        partition_answers(&host, "nvme0n1").unwrap();
        partition_answers(&host, "mmcblk0").unwrap();
    }

    #[test]
    fn an_nvme_drive_being_reset_does_not_answer() {
        let (_dir, host) = machine_with(&[("nvme0n1", Some("resetting"))]);
        let err = partition_answers(&host, "nvme0n1").unwrap_err();
        assert!(format!("{err:#}").contains("is resetting"), "{err:#}");
    }
}
