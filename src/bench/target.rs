//! What a TARGET names (a disk, a partition, or a directory on a mounted
//! filesystem), and whether it may be written to.
//!
//! Every refusal happens here, before any file is created or any byte read.

use crate::host::Host;
use crate::system::disks::{Disk, Role};
use crate::system::mounts::DevNo;
use crate::system::System;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// A test file in a directory of a mounted filesystem.
    File,
    /// A whole disk or a partition, read (and with --destructive written)
    /// directly.
    Device,
}

/// Why a benchmark will not run on a target; the command exits "refused".
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// Stable, for scripts: `bench-source-disk`, `bench-in-use`, ...
    pub code: &'static str,
    pub message: String,
}

impl Refused {
    pub fn new(code: &'static str, message: String) -> Refused {
        Refused { code, message }
    }
}

#[derive(Debug, Clone)]
pub struct Target {
    pub kind: TargetKind,
    /// As the user gave it (or `/` by default).
    pub given: PathBuf,
    /// The directory for the test file, or the device node, as opened.
    pub open_path: PathBuf,
    /// The disk the I/O reaches, when the system knows it.
    pub disk: Option<Disk>,
    /// The partition number, when the target is (or lives on) a partition.
    pub partition: Option<u32>,
    pub filesystem: Option<String>,
    pub mountpoint: Option<PathBuf>,
    /// Raw writes were asked for and are allowed.
    pub destructive: bool,
}

impl Target {
    pub fn writes_allowed(&self) -> bool {
        self.kind == TargetKind::File || self.destructive
    }
}

/// Resolves one TARGET; `None` means the running root (`host.source_root`).
pub fn resolve(
    system: &System,
    host: &Host,
    given: Option<&Path>,
    destructive: bool,
) -> Result<Target> {
    let given = given.map_or_else(|| host.source_root.clone(), Path::to_path_buf);
    let open_path = if given == host.source_root {
        host.path(&given)
    } else {
        given.clone()
    };
    let meta = std::fs::metadata(&open_path).with_context(|| {
        format!(
            "{}: no such disk, partition or directory; give a device like /dev/sda or a directory on a mounted filesystem",
            given.display()
        )
    })?;
    if meta.file_type().is_block_device() {
        return device_target(
            system,
            given,
            open_path,
            DevNo::from_raw(meta.rdev()),
            destructive,
        );
    }
    if !meta.is_dir() {
        return Err(Refused::new(
            "bench-not-a-directory",
            format!(
            "{}: not a directory or a block device; give the directory the test file should go in",
            given.display()
        ),
        )
        .into());
    }
    if destructive {
        return Err(Refused::new(
            "bench-destructive-directory",
            format!(
            "{}: --destructive is for raw disks and partitions; a directory is benchmarked with a test file, which needs no --destructive",
            given.display()
        ))
        .into());
    }
    let mount = system.mounts.containing(&given);
    let devno = mount.map_or_else(|| DevNo::from_raw(meta.dev()), |m| m.devno);
    let disk = system.disk_holding(devno).cloned();
    let partition = disk
        .as_ref()
        .and_then(|d| d.partitions.iter().find(|p| p.devno == Some(devno)))
        .map(|p| p.number);
    Ok(Target {
        kind: TargetKind::File,
        given,
        open_path,
        disk,
        partition,
        filesystem: mount.map(|m| m.fstype.clone()),
        mountpoint: mount.map(|m| m.mountpoint.clone()),
        destructive: false,
    })
}

fn device_target(
    system: &System,
    given: PathBuf,
    open_path: PathBuf,
    devno: DevNo,
    destructive: bool,
) -> Result<Target> {
    let disk = system.disk_holding(devno).cloned();
    let partition = disk
        .as_ref()
        .and_then(|d| d.partitions.iter().find(|p| p.devno == Some(devno)));
    let mounts: Vec<PathBuf> = system
        .mounts
        .of_device(devno)
        .map(|m| m.mountpoint.clone())
        .collect();
    if destructive {
        let Some(disk) = disk.as_ref() else {
            return Err(Refused::new(
            "bench-unknown-device",
            format!(
                "{}: not a disk pimigrate knows ({devno}); raw writes are only done to disks it can identify",
                given.display()
            ))
            .into());
        };
        refuse_destructive(disk, partition.map(|p| p.number), &given)?;
    }
    let filesystem = partition.and_then(|p| p.fstype.clone()).or_else(|| {
        system
            .mounts
            .of_device(devno)
            .next()
            .map(|m| m.fstype.clone())
    });
    Ok(Target {
        kind: TargetKind::Device,
        given,
        open_path,
        partition: partition.map(|p| p.number),
        disk,
        filesystem,
        mountpoint: mounts.first().cloned(),
        destructive,
    })
}

/// Raw writes destroy data: never on the disk the system runs or boots
/// from, never on anything mounted, used as swap or held by another device.
pub fn refuse_destructive(disk: &Disk, partition: Option<u32>, given: &Path) -> Result<()> {
    if matches!(disk.role, Role::SourceRoot | Role::SourceBoot) {
        return Err(Refused::new(
            "bench-source-disk",
            format!(
            "{}: refusing to write: {} is the source disk ({}); pimigrate never writes to it. Benchmark a directory on it instead (a test file is used and removed)",
            given.display(),
            disk.path.display(),
            disk.role_text()
        ))
        .into());
    }
    if disk.read_only {
        return Err(Refused::new(
            "bench-read-only",
            format!("{}: the disk is read-only", given.display()),
        )
        .into());
    }
    let uses: Vec<String> =
        match partition.and_then(|n| disk.partitions.iter().find(|p| p.number == n)) {
            Some(part) => {
                let mut uses: Vec<String> = part
                    .mountpoints
                    .iter()
                    .map(|mp| format!("mounted at {}", mp.display()))
                    .collect();
                if part.swap {
                    uses.push("active swap".into());
                }
                uses.extend(part.holders.iter().map(|h| format!("held by {h}")));
                uses
            }
            None => disk.uses(),
        };
    if !uses.is_empty() {
        return Err(Refused::new(
            "bench-in-use",
            format!(
            "{}: refusing to write while it is in use ({}); unmount it first, or benchmark a directory on it",
            given.display(),
            uses.join("; ")
        ))
        .into());
    }
    Ok(())
}
