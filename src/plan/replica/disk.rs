//! The disk a replica is written to: the one the user named (resolved
//! once, for `plan`, `migrate` and `sync --target` alike), whether it is free
//! to be written (it holds neither the running system's root nor its boot
//! partition, it is writable, nothing uses it) and whether the system fits
//! on its root partition. One code and one wording for each refusal,
//! whichever use case meets it. Read-only checks.

use super::super::{Reason, TargetIdentity};
use crate::space::SpaceCheck;
use crate::system::disks::{Disk, Partition};
use crate::system::mounts::DevNo;
use crate::system::System;
use crate::units::binary;
use std::path::Path;

/// What of a disk a replica writes.
#[derive(Debug, Clone, Copy)]
pub enum Writes<'a> {
    /// All of it, laid out anew (`migrate`'s target, a first sync's
    /// standby): everything on it is erased.
    WholeDisk,
    /// These partitions of it (a later sync's standby: its root and, with
    /// a boot partition of its own, that); the rest of the disk is left
    /// as it is.
    Partitions(&'a [u32]),
}

/// Finds the whole disk the user named, or says exactly what it is instead.
pub fn resolve_disk<'a>(system: &'a System, named: &Path) -> Result<&'a Disk, Reason> {
    let devno = named_devno(system, named)?;
    if let Some(disk) = system.disks.iter().find(|d| d.devno == devno) {
        return Ok(disk);
    }
    let shown = named.display();
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
            "name the whole disk, {} (a disk laid out anew is erased whole)",
            disk.path.display()
        )));
    }
    Err(Reason::new(
        "target-not-found",
        format!("{shown} ({devno}) is not a disk this machine lists"),
    ))
}

/// The device number of the block device at `named`.
fn named_devno(system: &System, named: &Path) -> Result<DevNo, Reason> {
    use std::os::unix::fs::FileTypeExt;
    let host = &system.host;
    let shown = named.display();
    let not_found = || {
        Reason::new("target-not-found", format!("{shown} does not exist"))
            .hint("`pimigrate devices` lists the disks attached to this machine")
    };
    let not_a_disk = |what: &str| {
        Reason::new(
            "target-not-block-device",
            format!("{shown} is {what}, not a disk"),
        )
        .hint("give the disk's device, such as /dev/sda or /dev/nvme0n1 (`pimigrate devices` lists them)")
    };
    let what = |dir: bool| if dir { "a directory" } else { "a file" };
    if !host.is_live() {
        let inspected = host.path(named);
        return match crate::system::disks::devno_of_node(host, named) {
            Some(devno) => Ok(devno),
            None if inspected.exists() => Err(not_a_disk(what(inspected.is_dir()))),
            None => Err(not_found()),
        };
    }
    let meta = std::fs::metadata(named).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => not_found(),
        _ => Reason::new("target-not-found", format!("cannot look at {shown}: {err}")),
    })?;
    if !meta.file_type().is_block_device() {
        return Err(not_a_disk(what(meta.is_dir())));
    }
    crate::system::disks::devno_of_node(host, named).ok_or_else(not_found)
}

/// Whether `disk` is free to be written as `writes` says: every reason it
/// is not. What the running system starts from is never written; nor is a
/// disk the kernel reports read-only, nor what is mounted, active swap,
/// held by device-mapper, md or LVM, or opened exclusively by anyone (a
/// mount point a killed pimigrate run left is not a use: the writer
/// unmounts it first).
pub fn check_disk(system: &System, disk: &Disk, writes: Writes) -> Vec<Reason> {
    let mut reasons = Vec::new();
    let written = written_partitions(disk, writes);
    let source = &system.source;
    let holds = |devno: Option<DevNo>| {
        devno.is_some_and(|d| match writes {
            Writes::WholeDisk => disk.contains(d),
            Writes::Partitions(_) => written.iter().any(|p| p.devno == Some(d)),
        })
    };
    let root = if holds(source.running_root_devno) {
        Some("the root filesystem this system runs from")
    } else if holds(source.root_devno) {
        Some("the root filesystem being copied")
    } else {
        None
    };
    let disk_name = disk.path.display();
    if let Some(what) = root {
        reasons.push(
            Reason::new("target-holds-root", format!("{disk_name} holds {what}"))
                .hint("the copy must go to another disk; `pimigrate devices` marks candidates"),
        );
    } else if holds(source.boot_devno) {
        reasons.push(
            Reason::new(
                "target-holds-boot",
                format!("{disk_name} holds the boot partition the Pi starts from"),
            )
            .hint("the copy must go to another disk; `pimigrate devices` marks candidates"),
        );
    }
    if disk.read_only {
        reasons.push(
            Reason::new("target-read-only", format!("{disk_name} is read-only"))
                .hint("check the write-protect switch of an SD adapter or USB stick"),
        );
    }
    // What the running system starts from is refused above, whatever uses it.
    if reasons.iter().any(|r| r.code.starts_with("target-holds")) {
        return reasons;
    }
    reasons.extend(in_use(system, disk, writes, &written));
    reasons
}

/// The partitions `writes` names (all of them for a whole disk).
fn written_partitions<'a>(disk: &'a Disk, writes: Writes) -> Vec<&'a Partition> {
    disk.partitions
        .iter()
        .filter(|p| match writes {
            Writes::WholeDisk => true,
            Writes::Partitions(numbers) => numbers.contains(&p.number),
        })
        .collect()
}

/// The refusal of a disk whose written part something uses, in the words
/// `devices` uses ("sdb1 is mounted at /media/pi/STICK").
fn in_use(system: &System, disk: &Disk, writes: Writes, written: &[&Partition]) -> Option<Reason> {
    let mut uses = Vec::new();
    let mut note =
        |what: &str, mountpoints: &[std::path::PathBuf], swap: bool, holders: &[String]| {
            let live = mountpoints
                .iter()
                .filter(|m| !crate::system::mounts::is_stale(m));
            uses.extend(live.map(|m| format!("{what} is mounted at {}", m.display())));
            if swap {
                uses.push(format!("{what} is active swap"));
            }
            uses.extend(holders.iter().map(|h| format!("{what} is held by {h}")));
        };
    if matches!(writes, Writes::WholeDisk) {
        note(&disk.name, &disk.mountpoints, disk.swap, &disk.holders);
    }
    for part in written {
        let name = part
            .name
            .clone()
            .unwrap_or_else(|| format!("partition {}", part.number));
        note(&name, &part.mountpoints, part.swap, &part.holders);
    }
    let disk_name = disk.path.display();
    if !uses.is_empty() {
        return Some(
            Reason::new(
                "target-in-use",
                format!("{disk_name} is in use: {}", uses.join(", ")),
            )
            .hint("unmount it (and `swapoff` it) first; pimigrate never writes to a disk in use"),
        );
    }
    // A mount that a killed pimigrate left (its process gone) holds the
    // device too, so an exclusive open would fail on it; apply unmounts
    // those first, so a node with one is not asked.
    let stale =
        |points: &[std::path::PathBuf]| points.iter().any(|m| crate::system::mounts::is_stale(m));
    let nodes: Vec<&Path> = match writes {
        Writes::WholeDisk if stale(&disk.mountpoints) => vec![],
        Writes::WholeDisk if disk.partitions.iter().any(|p| stale(&p.mountpoints)) => vec![],
        Writes::WholeDisk => vec![disk.path.as_path()],
        Writes::Partitions(_) => written
            .iter()
            .filter(|p| !stale(&p.mountpoints))
            .filter_map(|p| p.path.as_deref())
            .collect(),
    };
    let busy = system.host.is_live() && nodes.iter().any(|node| kernel_says_busy(node));
    busy.then(|| {
        Reason::new(
            "target-in-use",
            format!(
                "the kernel reports {disk_name} busy (held by device-mapper, md, LVM or a mount)"
            ),
        )
        .hint("`lsblk` and `dmsetup ls` show what holds it")
    })
}

/// An exclusive open fails with EBUSY while anything in the kernel holds
/// the device (a disk: or one of its partitions). Opening read-only
/// changes nothing.
fn kernel_says_busy(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let result = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_EXCL)
        .open(path);
    matches!(result, Err(err) if err.raw_os_error() == Some(nix::libc::EBUSY))
}

/// Whether the system's `used_bytes` fit a root partition of
/// `partition_bytes` on `disk`: the one headroom rule of
/// [`crate::space`] (what ext4 keeps for itself taken off, then room to
/// grow: 10 % of the used bytes, at least 64 MiB), for a root laid out
/// anew and an existing standby's alike; a refusal with the figures when
/// not.
pub fn check_fits(
    disk: &Path,
    partition_bytes: u64,
    used_bytes: u64,
) -> (SpaceCheck, Option<Reason>) {
    let space = SpaceCheck::new(used_bytes, partition_bytes);
    let refusal = (!space.fits).then(|| {
        Reason::new(
            "target-too-small",
            format!(
                "the system uses {} and needs {} on its root with room to grow, but a {} root partition on {} holds only {}",
                binary(space.used_bytes),
                binary(space.required_bytes),
                binary(partition_bytes),
                disk.display(),
                binary(space.usable_bytes)
            ),
        )
        .hint("choose a larger disk, or leave out large directories with --exclude")
    });
    (space, refusal)
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

#[cfg(test)]
mod tests {
    //! The Pi 4 fixture machine: the SD card it runs from (mmcblk0), a
    //! Samsung SSD (sda), a mounted USB stick (sdb1), a write-protected
    //! card reader (sdc).
    use super::*;

    fn pi4() -> System {
        crate::system::inspect_fixture("pi4").1
    }

    fn disk<'a>(system: &'a System, name: &str) -> &'a Disk {
        system.disks.iter().find(|d| d.name == name).unwrap()
    }

    fn codes(reasons: &[Reason]) -> Vec<&str> {
        reasons.iter().map(|r| r.code).collect()
    }

    #[test]
    fn a_disk_holding_the_system_is_refused_whole_and_by_its_partitions() {
        let system = pi4();
        let card = disk(&system, "mmcblk0");
        let whole = check_disk(&system, card, Writes::WholeDisk);
        assert_eq!(codes(&whole), ["target-holds-root"]);
        let root = check_disk(&system, card, Writes::Partitions(&[2]));
        assert_eq!(root[0].message, whole[0].message);
        let boot = check_disk(&system, card, Writes::Partitions(&[1]));
        assert_eq!(codes(&boot), ["target-holds-boot"]);
    }

    #[test]
    fn after_a_root_only_move_the_old_root_is_free_beside_the_boot_partition() {
        let mut system = pi4();
        let sda1 = disk(&system, "sda").partitions[0].devno;
        system.source.root_devno = sda1;
        system.source.running_root_devno = sda1;
        let card = system
            .disks
            .iter_mut()
            .find(|d| d.name == "mmcblk0")
            .unwrap();
        card.partitions[1].mountpoints.clear();
        let card = disk(&system, "mmcblk0");
        assert!(check_disk(&system, card, Writes::Partitions(&[2])).is_empty());
        assert_eq!(
            codes(&check_disk(&system, card, Writes::WholeDisk)),
            ["target-holds-boot"]
        );
    }

    #[test]
    fn a_use_is_said_in_the_same_words_for_the_disk_and_its_partition() {
        let system = pi4();
        let stick = disk(&system, "sdb");
        let whole = check_disk(&system, stick, Writes::WholeDisk);
        let part = check_disk(&system, stick, Writes::Partitions(&[1]));
        assert_eq!(codes(&whole), ["target-in-use"]);
        assert_eq!(whole[0].message, part[0].message);
        assert_eq!(
            whole[0].message,
            "/dev/sdb is in use: sdb1 is mounted at /media/pi/STICK"
        );
        assert_eq!(
            codes(&check_disk(
                &system,
                disk(&system, "sdc"),
                Writes::WholeDisk
            )),
            ["target-read-only"]
        );
    }

    #[test]
    fn a_mount_a_killed_run_left_is_no_use() {
        let mut system = pi4();
        let stick = system.disks.iter_mut().find(|d| d.name == "sdb").unwrap();
        // pid 0 never runs a pimigrate.
        stick.partitions[0].mountpoints =
            vec![Path::new(crate::system::mounts::RUN_DIR).join("standby-root-0")];
        let stick = disk(&system, "sdb");
        assert!(check_disk(&system, stick, Writes::WholeDisk).is_empty());
    }

    #[test]
    fn the_headroom_rule_is_one_with_its_figures() {
        let used = 1 << 30;
        let size = crate::space::minimum_root_partition_bytes(used);
        assert!(check_fits(Path::new("/dev/sda"), size, used).1.is_none());
        let (space, refusal) = check_fits(Path::new("/dev/sda"), used + used / 20, used);
        assert!(!space.fits);
        let refusal = refusal.unwrap();
        assert_eq!(refusal.code, "target-too-small");
        assert!(
            refusal
                .message
                .starts_with("the system uses 1.0 GiB and needs 1.1 GiB"),
            "{}",
            refusal.message
        );
    }
}
