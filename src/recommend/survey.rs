//! Which attached disks are compared: the one holding the running root,
//! and the ones the system could move to.

use super::Excluded;
use crate::system::disks::{Disk, Role, Transport};
use crate::system::System;
use anyhow::{bail, Result};

pub struct Survey {
    pub current_root: Disk,
    /// Candidates, and disks that would be candidates once unmounted.
    pub candidates: Vec<Disk>,
    pub excluded: Vec<Excluded>,
}

/// Sorts the disks. A disk whose only obstacle is a mounted filesystem
/// (a drive the desktop auto-mounted) is compared too, with a warning to
/// unmount it: it is often the very drive the user bought for this, and
/// its filesystem is where a test file can measure its writes.
pub fn survey(system: &System, include_virtual: bool) -> Result<Survey> {
    let Some(current_root) = system
        .disks
        .iter()
        .find(|d| d.role == Role::SourceRoot)
        .cloned()
    else {
        bail!("cannot tell which disk holds the running root filesystem; `pimigrate devices` shows what was found");
    };
    let minimum = system
        .source_used_bytes
        .map(crate::space::minimum_root_partition_bytes);
    let mut candidates = Vec::new();
    let mut excluded = Vec::new();
    for disk in &system.disks {
        if disk.role == Role::SourceRoot {
            continue;
        }
        let is_virtual = disk.transport == Transport::Virtual;
        if (is_virtual && !include_virtual) || disk.size_bytes == 0 {
            // loop, ram and zram devices are not drives a system moves to;
            // `devices` hides them too.
            continue;
        }
        match disk.role {
            Role::Candidate => candidates.push(disk.clone()),
            Role::Unsuitable if only_mounted(disk, minimum) => candidates.push(disk.clone()),
            _ => excluded.push(Excluded {
                name: disk.name.clone(),
                path: disk.path.clone(),
                why: disk.role_text(),
            }),
        }
    }
    Ok(Survey {
        current_root,
        candidates,
        excluded,
    })
}

/// Unsuitable only because filesystems of it are mounted: not read-only,
/// not too small, no swap, nothing stacked on it.
fn only_mounted(disk: &Disk, minimum_bytes: Option<u64>) -> bool {
    let stacked = disk.swap
        || !disk.holders.is_empty()
        || disk
            .partitions
            .iter()
            .any(|p| p.swap || !p.holders.is_empty());
    let too_small = minimum_bytes.is_some_and(|m| disk.size_bytes < m);
    !disk.read_only && !stacked && !too_small && !mounts(disk).is_empty()
}

/// Every mountpoint of the disk or its partitions, largest partition first:
/// the best place for a test file.
pub fn mounts(disk: &Disk) -> Vec<std::path::PathBuf> {
    let mut partitions: Vec<_> = disk.partitions.iter().collect();
    partitions.sort_by_key(|p| std::cmp::Reverse(p.size_bytes));
    disk.mountpoints
        .iter()
        .chain(partitions.iter().flat_map(|p| p.mountpoints.iter()))
        .cloned()
        .collect()
}
