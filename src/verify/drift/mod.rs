//! The check after the move: once a migration is committed, what verify
//! proved is read again later and each drift is named with its fix. One
//! list of checks ([`checks`]), three callers: `pimigrate status` (and
//! `status --check`, which the daily timer runs) and the login message.
//!
//! What drifts, as owners report it: a bootloader update rewrote
//! BOOT_ORDER and a stale SD card booted silently; a kernel update landed
//! on a boot partition that was not mounted, so kernel and modules no
//! longer matched; a clone of the new drive plugged in; a bridge that
//! starts resetting; a supply too weak for the SSD; a standby nobody
//! synced. verify's own checks are reused where they ask the same
//! question (`ids-unique`); what verify does not ask is here, one module
//! a subject. Everything is decided from [`Facts`], read once.

pub mod boot_files;
pub mod booted;
pub mod disk;
pub mod mute;
pub mod power;
pub mod standby;

use super::expected::Expected;
use crate::check::Finding;
use crate::state::journal::Journal;
use crate::state::standby::StandbyRecord;
use crate::system::disks::Disk;
use crate::system::kernel_events::{DiskNames, KernelLog};
use crate::system::power::{SupplyFacts, Throttled};
use crate::system::shadowed::Hidden;
use crate::system::System;
use anyhow::Result;
use std::path::Path;

/// Every code a finding of the check after the move can have, in the
/// order they are said.
pub const CODES: [&str; 11] = [
    "booted-from",
    "boot-order",
    "ids-unique",
    "boot-mount",
    "boot-shadowed",
    "kernel-modules",
    "disk-errors",
    "power",
    "usb-current",
    "standby-age",
    "check-conf",
];

/// Everything the checks decide from, read once.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub system: &'a System,
    /// What the move built, committed at `expected.committed`.
    pub expected: Expected,
    /// The committed drive: the disk with the new root's PARTUUID (the one
    /// with the plan's serial first, when a clone carries the ids too).
    pub disk: Option<&'a Disk>,
    /// How the kernel names the committed drive in its log.
    pub disk_names: Option<DiskNames>,
    /// The kernel log since boot.
    pub kernel_log: KernelLog,
    /// `vcgencmd get_throttled` (none without the tool).
    pub throttled: Option<Throttled>,
    pub supply: SupplyFacts,
    /// `/chosen/bootloader/partition`: the partition the firmware read.
    pub firmware_partition: Option<u32>,
    /// What the boot directory's mount point hides.
    pub hidden: Hidden,
    /// The running kernel's release (`/proc/sys/kernel/osrelease`).
    pub kernel_release: Option<String>,
    /// Its modules' directory exists (`/lib/modules/RELEASE`).
    pub modules_present: bool,
    /// The standby's record, when there is one.
    pub standby: Option<StandbyRecord>,
    /// The sync timer's `OnCalendar=`, when the timer is enabled.
    pub sync_schedule: Option<String>,
    pub now: u64,
}

impl<'a> Facts<'a> {
    /// Reads what the checks need about `system`, whose migration
    /// `journal` was committed at `committed_at` (the journal's own
    /// time, or the SD card's record of the commit).
    pub fn read(system: &'a System, journal: &Journal, committed_at: u64) -> Result<Facts<'a>> {
        let host = &system.host;
        let mut expected = Expected::from_journal(journal)?;
        expected.committed = Some(committed_at);
        let disk = committed_disk(system, &expected, journal.plan.target.serial.as_deref());
        let release = host
            .read_attr(&host.proc("sys/kernel/osrelease"))
            .filter(|r| !r.contains('/'));
        let modules_present = release.as_ref().is_some_and(|release| {
            ["/lib/modules", "/usr/lib/modules"]
                .iter()
                .any(|dir| host.path(Path::new(dir).join(release)).is_dir())
        });
        Ok(Facts {
            disk_names: disk.map(|d| DiskNames::of_disk(host, &d.name)),
            disk,
            kernel_log: KernelLog::read(host),
            throttled: host
                .is_live()
                .then(crate::system::power::read_throttled)
                .flatten(),
            supply: SupplyFacts::read(host),
            firmware_partition: crate::system::pi::read_dt_u32(host, "chosen/bootloader/partition"),
            hidden: match expected.boot_spec {
                Some(_) => crate::system::shadowed::under_mount_point(host, &expected.boot_dir),
                None => Hidden::NotAMountPoint,
            },
            kernel_release: release,
            modules_present,
            standby: StandbyRecord::load(&host.path(&host.state_dir))
                .ok()
                .flatten(),
            sync_schedule: standby::schedule(host),
            now: crate::clock::now(),
            expected,
            system,
        })
    }
}

/// The disk holding the new root's partition; with a clone attached, the
/// one whose serial the plan names.
fn committed_disk<'a>(
    system: &'a System,
    expected: &Expected,
    serial: Option<&str>,
) -> Option<&'a Disk> {
    let holders: Vec<&Disk> = system
        .disks
        .iter()
        .filter(|d| {
            d.partitions
                .iter()
                .any(|p| p.partuuid.as_deref() == Some(expected.root_partuuid.as_str()))
        })
        .collect();
    holders
        .iter()
        .find(|d| serial.is_some() && d.serial.as_deref() == serial)
        .or(holders.first())
        .copied()
}

/// Every check, in the order they are said: where this boot came from
/// first, then what the next boots will find, then the health of the
/// drive, the power and the standby.
pub fn checks(facts: &Facts) -> Vec<Finding> {
    let mut out = vec![booted::booted_from(facts)];
    out.extend(booted::boot_order(facts));
    out.push(super::checks::ids_unique(facts.system, &facts.expected).into());
    out.extend(boot_files::boot_mount(facts));
    out.extend(boot_files::hidden(facts));
    out.extend(boot_files::modules(facts));
    out.extend(disk::errors(facts));
    out.extend(power::power(facts));
    out.extend(power::usb_current(facts));
    out.extend(standby::age(facts));
    out
}

/// The checks of `system` after the commit, with the owner's mutes
/// (/etc/pimigrate/check.conf, then `ignore`) applied.
pub fn run(
    system: &System,
    journal: &Journal,
    committed_at: u64,
    ignore: &[String],
) -> Result<Vec<Finding>> {
    let facts = Facts::read(system, journal, committed_at)?;
    let mut findings = checks(&facts);
    mute::apply(&system.host, ignore, &mut findings);
    Ok(findings)
}

#[cfg(test)]
mod tests;
