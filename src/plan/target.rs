//! The target disk: which disk the user named, and whether it is free to be
//! written. Read-only checks.

use super::*;
use crate::system::disks::{Disk, Role};
use crate::system::System;
use std::path::Path;

/// Finds the whole disk the user named, or says exactly what it is instead.
pub(super) fn resolve_target<'a>(system: &'a System, target: &Path) -> Result<&'a Disk, Reason> {
    use std::os::unix::fs::FileTypeExt;
    let host = &system.host;
    let shown = target.display();
    let not_found = || {
        Reason::new("target-not-found", format!("{shown} does not exist"))
            .hint("`pimigrate devices` lists the disks attached to this machine")
    };
    let devno = if host.is_live() {
        let meta = std::fs::metadata(target).map_err(|err| match err.kind() {
            std::io::ErrorKind::NotFound => not_found(),
            _ => Reason::new("target-not-found", format!("cannot look at {shown}: {err}")),
        })?;
        if !meta.file_type().is_block_device() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "a file"
            };
            return Err(Reason::new(
                "target-not-block-device",
                format!("{shown} is {what}, not a disk"),
            )
            .hint("give the disk's device, such as /dev/sda or /dev/nvme0n1 (`pimigrate devices` lists them)"));
        }
        crate::system::disks::devno_of_node(host, target).ok_or_else(not_found)?
    } else {
        match crate::system::disks::devno_of_node(host, target) {
            Some(devno) => devno,
            None if host.path(target).exists() => {
                return Err(Reason::new(
                    "target-not-block-device",
                    format!("{shown} is not a block device"),
                ))
            }
            None => return Err(not_found()),
        }
    };
    if let Some(disk) = system.disks.iter().find(|d| d.devno == devno) {
        return Ok(disk);
    }
    if let Some((disk, part)) = system.disks.iter().find_map(|d| {
        d.partitions
            .iter()
            .find(|p| p.devno == Some(devno))
            .map(|p| (d, p))
    }) {
        return Err(Reason::new(
            "target-is-partition",
            format!(
                "{shown} is partition {} of {}, not a whole disk",
                part.number,
                disk.path.display()
            ),
        )
        .hint(format!(
            "pimigrate partitions the whole disk: give {} (everything on it will be replaced)",
            disk.path.display()
        )));
    }
    Err(Reason::new(
        "target-not-found",
        format!("{shown} ({devno}) is not a disk this machine lists"),
    ))
}

pub(super) fn check_target_is_free(system: &System, target: &Disk, reasons: &mut Vec<Reason>) {
    let source = &system.source;
    let holds =
        |devno: Option<crate::system::mounts::DevNo>| devno.is_some_and(|d| target.contains(d));
    let what = if holds(source.running_root_devno) {
        Some("the root filesystem this system runs from")
    } else if holds(source.root_devno) {
        Some("the root filesystem being moved")
    } else {
        None
    };
    if let Some(what) = what {
        reasons.push(
            Reason::new(
                "target-holds-root",
                format!("{} holds {what}", target.path.display()),
            )
            .hint("the target must be another disk; `pimigrate devices` marks candidates"),
        );
    } else if holds(source.boot_devno) {
        reasons.push(Reason::new(
            "target-holds-boot",
            format!(
                "{} holds the boot partition the Pi starts from",
                target.path.display()
            ),
        ));
    }
    if target.read_only {
        reasons.push(
            Reason::new(
                "target-read-only",
                format!("{} is read-only", target.path.display()),
            )
            .hint("check the write-protect switch of an SD adapter or USB stick"),
        );
    }
    if matches!(target.role, Role::SourceRoot | Role::SourceBoot) {
        return;
    }
    let uses = target.uses();
    if !uses.is_empty() {
        reasons.push(
            Reason::new(
                "target-in-use",
                format!("{} is in use: {}", target.path.display(), uses.join(", ")),
            )
            .hint("unmount it (and `swapoff` it) first; pimigrate never writes to a disk in use"),
        );
    } else if system.host.is_live() && kernel_says_busy(&target.path) {
        reasons.push(
            Reason::new(
                "target-in-use",
                format!(
                    "the kernel reports {} busy (held by device-mapper, md, LVM or a mount)",
                    target.path.display()
                ),
            )
            .hint("`lsblk` and `dmsetup ls` show what holds it"),
        );
    }
}

/// An exclusive open fails with EBUSY while anything in the kernel holds
/// the disk or one of its partitions. Opening read-only changes nothing.
pub(super) fn kernel_says_busy(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let result = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_EXCL)
        .open(path);
    matches!(result, Err(err) if err.raw_os_error() == Some(nix::libc::EBUSY))
}

/// The disk as a plan names it, so the writer can check, right before the
/// first write, that it is still the same (also a sync's standby).
pub fn identity(disk: &Disk) -> TargetIdentity {
    TargetIdentity {
        path: disk.path.clone(),
        name: disk.name.clone(),
        devno: disk.devno,
        vendor: disk.vendor.clone(),
        model: disk.model.clone(),
        serial: disk.serial.clone(),
        size_bytes: disk.size_bytes,
        logical_sector_size: disk.logical_sector_size,
        transport: disk.transport,
    }
}
