//! After a new partition table: make the kernel read it and find the
//! partition devices it creates, by their sysfs entries (never by gluing a
//! number to the disk's name: `sda1`, but `mmcblk0p1` and `nvme0n1p1`).

use anyhow::{bail, Context, Result};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

nix::ioctl_none!(blkrrpart, 0x12, 95);

/// Asks the kernel to re-read the partition table of an open whole disk.
/// EBUSY means a partition of it is still in use; EINVAL that the device
/// does not do partitions (a loop device without partition scanning).
pub fn reread_partition_table(disk: &std::fs::File, path: &Path) -> Result<ReReadOutcome> {
    // SAFETY: BLKRRPART takes no argument; the descriptor is a whole-disk node.
    match unsafe { blkrrpart(disk.as_raw_fd()) } {
        Ok(_) => Ok(ReReadOutcome::Done),
        Err(nix::errno::Errno::EINVAL) => Ok(ReReadOutcome::NotSupported),
        Err(nix::errno::Errno::EBUSY) => bail!(
            "the kernel cannot re-read the partition table of {}: a partition of it is in use \
             (mounted, swap, or held by device-mapper); nothing on the disk was in use when the \
             plan was made, so something took it since: check `lsblk {}`",
            path.display(),
            path.display()
        ),
        Err(err) => Err(err)
            .with_context(|| format!("re-reading the partition table of {}", path.display())),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReReadOutcome {
    Done,
    /// The device cannot have partition devices (e.g. `losetup` without -P).
    NotSupported,
}

/// The `/dev` paths of partitions `numbers` of the disk whose sysfs entry is
/// `sys_disk` (e.g. `/sys/class/block/sda`), waiting up to `timeout` for the
/// kernel (and udev, where it runs) to create them.
pub fn wait_for_partitions(
    sys_disk: &Path,
    numbers: &[u32],
    timeout: Duration,
) -> Result<Vec<PathBuf>> {
    let deadline = Instant::now() + timeout;
    if let Some(udevadm) = crate::tools::which("udevadm") {
        let _ = crate::signals::shield(&mut std::process::Command::new(udevadm))
            .args(["settle", &format!("--timeout={}", timeout.as_secs().max(1))])
            .status();
    }
    loop {
        let found: Vec<Option<PathBuf>> = numbers
            .iter()
            .map(|&n| partition_node(sys_disk, n))
            .collect();
        if found.iter().all(|f| f.as_ref().is_some_and(|p| p.exists())) {
            return Ok(found.into_iter().flatten().collect());
        }
        if Instant::now() >= deadline {
            let missing: Vec<String> = numbers
                .iter()
                .zip(&found)
                .filter(|(_, f)| !f.as_ref().is_some_and(|p| p.exists()))
                .map(|(n, _)| n.to_string())
                .collect();
            bail!(
                "the kernel created no device for partition(s) {} of {} within {} s after the table \
                 was written; unplug and replug the disk, then run `pimigrate migrate --resume`",
                missing.join(", "),
                sys_disk.display(),
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The device node of partition `number`, from its sysfs entry's uevent.
fn partition_node(sys_disk: &Path, number: u32) -> Option<PathBuf> {
    for entry in std::fs::read_dir(sys_disk).ok()?.flatten() {
        let dir = entry.path();
        let Ok(text) = std::fs::read_to_string(dir.join("partition")) else {
            continue;
        };
        if text.trim() != number.to_string() {
            continue;
        }
        let uevent = std::fs::read_to_string(dir.join("uevent")).ok()?;
        let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
        return Some(Path::new("/dev").join(name));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_partition_nodes_by_sysfs_number_not_by_name() {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("mmcblk0");
        for (dir, number) in [("mmcblk0p1", 1), ("mmcblk0p2", 2)] {
            std::fs::create_dir_all(disk.join(dir)).unwrap();
            std::fs::write(disk.join(dir).join("partition"), format!("{number}\n")).unwrap();
            std::fs::write(
                disk.join(dir).join("uevent"),
                format!("MAJOR=179\nDEVNAME={dir}\n"),
            )
            .unwrap();
        }
        assert_eq!(
            partition_node(&disk, 2),
            Some(PathBuf::from("/dev/mmcblk0p2"))
        );
        assert_eq!(partition_node(&disk, 3), None);
    }

    #[test]
    fn waiting_for_partitions_that_never_come_names_them() {
        let sys = tempfile::tempdir().unwrap();
        let err = wait_for_partitions(sys.path(), &[1, 2], Duration::from_millis(200)).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("partition(s) 1, 2"), "{text}");
        assert!(text.contains("--resume"), "{text}");
    }
}
