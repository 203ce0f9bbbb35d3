//! Partition devices for a loop-device target whose kernel shows none (a
//! loop device attached without partition scanning, or a kernel without
//! partition-table support): each partition is attached as a loop device of
//! its own at its offset, which is what the kernel's partition device would
//! be. Detached again on drop.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct PartitionLoops {
    devices: Vec<PathBuf>,
}

impl PartitionLoops {
    /// Attaches `(offset, size)` byte ranges of `disk`, in order.
    pub fn attach(disk: &Path, ranges: &[(u64, u64)]) -> Result<PartitionLoops> {
        detach_stale(disk)?;
        let mut loops = PartitionLoops {
            devices: Vec::new(),
        };
        for &(offset, size) in ranges {
            let output = Command::new("losetup")
                .args([
                    "--find",
                    "--show",
                    "--offset",
                    &offset.to_string(),
                    "--sizelimit",
                    &size.to_string(),
                ])
                .arg(disk)
                .output()
                .context("running losetup (util-linux) to reach a partition of the target")?;
            if !output.status.success() {
                bail!(
                    "losetup could not attach bytes {offset}+{size} of {}: {}",
                    disk.display(),
                    String::from_utf8_lossy(&output.stderr).trim()
                );
            }
            let device = String::from_utf8_lossy(&output.stdout).trim().to_string();
            loops.devices.push(PathBuf::from(device));
        }
        Ok(loops)
    }

    pub fn devices(&self) -> &[PathBuf] {
        &self.devices
    }
}

/// Loop devices over `disk` that an interrupted run left attached (their
/// mounts are gone by now: the executor unmounts stale ones first).
fn detach_stale(disk: &Path) -> Result<()> {
    for device in backed_by(disk)? {
        let _ = Command::new("losetup").arg("--detach").arg(device).status();
    }
    Ok(())
}

/// The loop devices whose backing file is `file` (`losetup --list`).
pub fn backed_by(file: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("losetup")
        .args([
            "--list",
            "--noheadings",
            "--raw",
            "--output",
            "NAME,BACK-FILE",
        ])
        .output()
        .context("listing loop devices with losetup")?;
    Ok(backed_by_in(&String::from_utf8_lossy(&output.stdout), file))
}

/// The devices of `listing` (`NAME BACK-FILE` lines) backed by `file`.
fn backed_by_in(listing: &str, file: &Path) -> Vec<PathBuf> {
    listing
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(_, backing)| Path::new(backing.trim()) == file)
        .map(|(name, _)| PathBuf::from(name))
        .collect()
}

impl Drop for PartitionLoops {
    fn drop(&mut self) {
        for device in &self.devices {
            let _ = Command::new("losetup").arg("--detach").arg(device).status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_loop_devices_of_one_backing_file() {
        let listing = "/dev/loop0 /var/tmp/a/disk.img\n/dev/loop1 /dev/loop0\n\
                       /dev/loop2 /var/tmp/a/disk.img\n/dev/loop3 \n";
        assert_eq!(
            backed_by_in(listing, Path::new("/var/tmp/a/disk.img")),
            [PathBuf::from("/dev/loop0"), PathBuf::from("/dev/loop2")]
        );
        assert_eq!(
            backed_by_in(listing, Path::new("/dev/loop0")),
            [PathBuf::from("/dev/loop1")]
        );
    }
}
