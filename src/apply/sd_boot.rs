//! The SD card's boot partition, wherever the running system has it. While
//! the SD card's own system runs it is the journal's boot directory; once
//! a full move's new drive runs, /boot/firmware is the new drive's, and
//! the SD card's is mounted here for the moment: a full move's trial files
//! may be on it, and on a Pi 4 the boot ROM runs recovery.bin (a staged
//! bootloader update) from it alone.

use super::mount::{mount_device, Mounted};
use crate::state::journal::Journal;
use crate::system::disks::device_name;
use crate::system::source::resolve;
use crate::system::System;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The SD card's boot partition as a directory, mounted for as long as this
/// value lives when the running system had not mounted it.
pub struct SdBoot {
    /// A view path (the journal's boot directory, or a mount of our own).
    dir: PathBuf,
    _mount: Option<Mounted>,
}

impl SdBoot {
    /// Finds the SD card's boot partition of `journal`'s migration: the one
    /// at the journal's boot directory if that is it, else mounted now.
    pub fn open(system: &System, journal: &Journal) -> Result<SdBoot> {
        let spec = journal.plan.source.boot_spec.as_ref().with_context(|| {
            format!(
                "the migrated system kept its boot files in {} on its root filesystem, not on a boot partition",
                journal.boot_dir.display()
            )
        })?;
        let matches = resolve(spec, &system.disks);
        let device = match matches.as_slice() {
            [one] => PathBuf::from(one),
            [] => bail!(
                "the SD card's boot partition ({spec}) is not attached: put the SD card back in, then run this again"
            ),
            many => bail!(
                "the SD card's boot partition ({spec}) matches {}: detach the copies, then run this again",
                many.join(", ")
            ),
        };
        let at_boot_dir = system
            .mounts
            .at(&journal.boot_dir)
            .and_then(|m| device_name(&system.disks, m.devno));
        if at_boot_dir.as_deref() == Some(device.to_string_lossy().as_ref()) {
            return Ok(SdBoot {
                dir: journal.boot_dir.clone(),
                _mount: None,
            });
        }
        let mounted = mount_device(&device, "vfat", "sd-boot").with_context(|| {
            format!("mounting the SD card's boot partition {}", device.display())
        })?;
        Ok(SdBoot {
            dir: mounted.path().to_path_buf(),
            _mount: Some(mounted),
        })
    }

    /// The directory, as a view path (a [`super::boot_partition::BootWriter`]
    /// takes it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the running system has it at the journal's boot directory.
    pub fn is_the_boot_dir(&self, journal: &Journal) -> bool {
        self.dir == journal.boot_dir
    }
}
