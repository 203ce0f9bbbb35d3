//! A disk laid out anew (the replica engine's first step, for `migrate`'s
//! target and a first `sync`'s standby alike): old signatures cleared, the
//! planned table written, the kernel told, the filesystems made, each step
//! recorded as it is done; and [`PartitionDevices`], the one type for the
//! devices of a disk's partitions, whoever laid them out.

use super::executor::ApplyContext;
use super::loopparts::PartitionLoops;
use super::replica::Record;
use super::reread::{reread_partition_table, wait_for_partitions, ReReadOutcome};
use super::{table, wipe};
use crate::plan::replica::DiskLayout;
use crate::plan::TargetIdentity;
use crate::state::journal::Step;
use crate::system::disks::Transport;
use crate::system::System;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the kernel and udev get to create partition devices.
const PARTITION_TIMEOUT: Duration = Duration::from_secs(30);

/// The devices of a disk's partitions: the kernel's nodes, or where the
/// kernel reads no partition table (a loop disk on a kernel without
/// partition support) a loop device over each partition's bytes, detached
/// again when this is dropped.
pub struct PartitionDevices {
    devices: Vec<(u32, PathBuf)>,
    _loops: Option<PartitionLoops>,
}

impl PartitionDevices {
    /// The device of partition `number`.
    pub fn of(&self, number: u32) -> Result<&Path> {
        self.devices
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, path)| path.as_path())
            .with_context(|| format!("partition {number} has no device"))
    }

    /// Partitions that exist already (a standby's), as the disks are now.
    pub fn existing(system: &System, disk: &TargetIdentity, numbers: &[u32]) -> Result<Self> {
        let found = system
            .disks
            .iter()
            .find(|d| d.devno == disk.devno)
            .with_context(|| format!("{} is gone", disk.path.display()))?;
        let parts = numbers
            .iter()
            .map(|&number| {
                found
                    .partitions
                    .iter()
                    .find(|p| p.number == number)
                    .with_context(|| format!("{} has no partition {number}", disk.path.display()))
            })
            .collect::<Result<Vec<_>>>()?;
        if let Some(paths) = parts
            .iter()
            .map(|p| p.path.clone())
            .collect::<Option<Vec<_>>>()
        {
            return Ok(PartitionDevices {
                devices: numbers.iter().copied().zip(paths).collect(),
                _loops: None,
            });
        }
        let ranges: Vec<(u64, u64)> = parts
            .iter()
            .map(|p| (p.start_bytes, p.size_bytes))
            .collect();
        Self::loops(disk, numbers, &ranges)
    }

    /// The partitions of a table just written: the kernel's nodes once
    /// they appear, or loop devices where it reads no table.
    fn after_layout(
        target: &TargetIdentity,
        disk: &DiskLayout,
        reread: ReReadOutcome,
    ) -> Result<Self> {
        let numbers: Vec<u32> = disk.table.partitions.iter().map(|p| p.number).collect();
        match reread {
            ReReadOutcome::Done => {
                let sys_disk = Path::new("/sys/class/block").join(&target.name);
                let paths = wait_for_partitions(&sys_disk, &numbers, PARTITION_TIMEOUT)?;
                Ok(PartitionDevices {
                    devices: numbers.into_iter().zip(paths).collect(),
                    _loops: None,
                })
            }
            ReReadOutcome::NotSupported => {
                let ss = u64::from(disk.table.sector_size);
                let ranges: Vec<(u64, u64)> = disk
                    .table
                    .partitions
                    .iter()
                    .map(|p| (p.start_sector * ss, p.size_bytes))
                    .collect();
                Self::loops(target, &numbers, &ranges)
            }
        }
    }

    fn loops(disk: &TargetIdentity, numbers: &[u32], ranges: &[(u64, u64)]) -> Result<Self> {
        if disk.transport != Transport::Virtual {
            bail!(
                "the kernel shows no device for the partitions of {} (it does not read its partition table)",
                disk.path.display()
            );
        }
        let loops = PartitionLoops::attach(&disk.path, ranges)?;
        Ok(PartitionDevices {
            devices: numbers
                .iter()
                .copied()
                .zip(loops.devices().to_vec())
                .collect(),
            _loops: Some(loops),
        })
    }
}

/// The table and the filesystems of `disk` on `target`, each step recorded
/// in `record` once done; the partitions' devices.
pub fn lay_out(
    target: &TargetIdentity,
    disk: &DiskLayout,
    record: &mut dyn Record,
    ctx: &ApplyContext,
) -> Result<PartitionDevices> {
    let mut whole = open_exclusive(&target.path)?;
    let ss = u64::from(disk.table.sector_size);
    if !record.is_done(Step::Partitioned) {
        (ctx.step)(&format!(
            "writing a new {} partition table to {}",
            disk.table.kind,
            target.path.display()
        ));
        let starts: Vec<u64> = disk
            .table
            .partitions
            .iter()
            .map(|p| p.start_sector * ss)
            .collect();
        crate::failpoint::hit("before-wipe")?;
        wipe::wipe_signatures(&whole, target.size_bytes, &starts)?;
        crate::failpoint::hit("after-wipe")?;
        table::write_table(&mut *whole, &disk.table, target.size_bytes)?;
        crate::failpoint::hit("after-table")?;
        whole
            .sync_all()
            .with_context(|| format!("flushing {}", target.path.display()))?;
        record.mark(Step::Partitioned)?;
    }
    let reread = reread_partition_table(&whole, &target.path)?;
    // Let go of the disk before udev and mkfs need it: while the whole disk
    // is held with O_EXCL the kernel refuses an exclusive open of any of its
    // partitions (mke2fs: "apparently in use by the system"), and while it
    // is flock'ed udev does not probe the new partitions (settle times out).
    drop(whole);
    crate::failpoint::hit("after-reread")?;
    let devices = PartitionDevices::after_layout(target, disk, reread)?;
    if !record.is_done(Step::Formatted) {
        for mkfs in &disk.filesystems {
            let device = devices.of(mkfs.partition)?;
            (ctx.step)(&format!("creating {} on {}", mkfs.fstype, device.display()));
            run_mkfs(&mkfs.command_for(&device.to_string_lossy()))?;
            flush_device(device)?;
            crate::failpoint::hit("after-mkfs")?;
        }
        record.mark(Step::Formatted)?;
    }
    Ok(devices)
}

/// The target disk opened for writing with O_EXCL (the kernel refuses if
/// anything mounted or holds it) and flock'ed (udev keeps away from a
/// disk while its node is).
fn open_exclusive(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let disk = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_EXCL)
        .open(path)
        .with_context(|| {
            format!(
                "opening {} for writing (is something using it?)",
                path.display()
            )
        })?;
    nix::fcntl::Flock::lock(disk, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, err)| err)
        .with_context(|| format!("locking {}", path.display()))
}

/// Flushes what mkfs wrote to `device` before the record says it ran
/// (mkfs.vfat does not flush by itself).
fn flush_device(device: &Path) -> Result<()> {
    std::fs::File::open(device)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("flushing {}", device.display()))
}

/// Runs a planned mkfs command (the partition's device already put in).
fn run_mkfs(command: &[String]) -> Result<()> {
    let (program, args) = command.split_first().context("an empty mkfs command")?;
    let Some(path) = crate::tools::which(program) else {
        bail!(
            "{program} is not installed: sudo apt install {}",
            crate::tools::package_for(program)
        );
    };
    let output = crate::signals::shield(&mut std::process::Command::new(&path))
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
