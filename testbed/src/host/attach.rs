//! Disk images (or one partition of one) on loop devices, from the host:
//! its kernel has no partition devices, so a partition is attached at its
//! byte offset (`losetup -o --sizelimit`), and undone on drop.

use crate::host::cmd;
use crate::host::mbr::Partition;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device over an image or one partition of it.
pub struct Loop {
    pub device: String,
    // Dropped after the detach in `drop`.
    _host_ids: HostIdsShare,
}

/// While a testbed image is on a host loop device, the host carries its
/// ids (the SD card's disk signature, the migrated root's label): the
/// cargo tests whose checks want each id on one device (a standby's
/// `ids-unique`) take this lock exclusively (tests/common/mod.rs, the same
/// path), and CI runs the testbed's shared lane beside them.
const HOST_IDS_LOCK: &str = "/run/lock/pimigrate-host-ids.lock";

// Held, never read: the lock goes with the descriptor.
struct HostIdsShare(#[allow(dead_code)] std::fs::File);

impl HostIdsShare {
    fn take() -> Result<HostIdsShare> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(HOST_IDS_LOCK)
            .with_context(|| format!("opening {HOST_IDS_LOCK}"))?;
        // SAFETY: flock on a descriptor this File owns; the lock goes with
        // the descriptor when the File is dropped.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("locking {HOST_IDS_LOCK}"));
        }
        Ok(HostIdsShare(file))
    }
}

impl Loop {
    pub fn attach(image: &Path, part: Option<&Partition>, read_only: bool) -> Result<Loop> {
        let host_ids = HostIdsShare::take()?;
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
        Ok(Loop {
            device,
            _host_ids: host_ids,
        })
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
