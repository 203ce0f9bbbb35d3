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
    let listing = String::from_utf8_lossy(&output.stdout);
    for line in listing.lines() {
        let Some((name, backing)) = line.split_once(' ') else {
            continue;
        };
        if Path::new(backing.trim()) == disk {
            let _ = Command::new("losetup").arg("--detach").arg(name).status();
        }
    }
    Ok(())
}

impl Drop for PartitionLoops {
    fn drop(&mut self) {
        for device in &self.devices {
            let _ = Command::new("losetup").arg("--detach").arg(device).status();
        }
    }
}
