//! Disk images (or one partition of one) on loop devices, from the host:
//! its kernel has no partition devices, so a partition is attached at its
//! byte offset (`losetup -o --sizelimit`), and undone on drop.

use crate::cmd;
use crate::mbr::Partition;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device over an image or one partition of it.
pub struct Loop {
    pub device: String,
}

impl Loop {
    pub fn attach(image: &Path, part: Option<&Partition>, read_only: bool) -> Result<Loop> {
        let mut losetup = Command::new("losetup");
        losetup.args(["-f", "--show"]);
        if read_only {
            losetup.arg("-r");
        }
        if let Some(part) = part {
            losetup.args([
                "-o".to_string(),
                part.offset().to_string(),
                "--sizelimit".into(),
                part.size().to_string(),
            ]);
        }
        let device = cmd::stdout(losetup.arg(image))?.trim().to_string();
        Ok(Loop { device })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // Emptied by an `Attached` whose unmount failed: left attached.
        if self.device.is_empty() {
            return;
        }
        if let Err(err) = cmd::run(Command::new("losetup").args(["-d", &self.device])) {
            eprintln!("testbed: {err:#}");
        }
    }
}

/// An image (or a partition of one) on a loop device, mounted; undone on
/// drop, and the loop device is never detached under a mount.
pub struct Attached {
    // Dropped after the unmount in `drop`.
    device: Loop,
    pub mountpoint: PathBuf,
    mounted: bool,
}

impl Attached {
    /// `options` are mount's (`ro,noload`, `rw`); a read-only mount gets a
    /// read-only loop device.
    pub fn new(
        image: &Path,
        part: Option<&Partition>,
        mountpoint: &Path,
        options: &str,
    ) -> Result<Attached> {
        let read_only = options.split(',').any(|o| o == "ro");
        let mut attached = Attached {
            device: Loop::attach(image, part, read_only)?,
            mountpoint: mountpoint.to_path_buf(),
            mounted: false,
        };
        std::fs::create_dir_all(mountpoint)?;
        cmd::run(
            Command::new("mount")
                .args(["-o", options])
                .arg(&attached.device.device)
                .arg(mountpoint),
        )?;
        attached.mounted = true;
        Ok(attached)
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if self.mounted {
            if let Err(err) = cmd::run(Command::new("umount").arg(&self.mountpoint)) {
                eprintln!("testbed: {err:#}");
                // Keep the loop device rather than detach it under a mount.
                self.device.device.clear();
            }
        }
    }
}
