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

impl Drop for PartitionLoops {
    fn drop(&mut self) {
        for device in &self.devices {
            let _ = Command::new("losetup").arg("--detach").arg(device).status();
        }
    }
}
