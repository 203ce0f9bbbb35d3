//! What is true about this machine: read-only.

pub mod bootloader;
pub mod disks;
pub mod kernel;
pub mod kernel_events;
pub mod listing;
pub mod mounts;
pub mod pi;
pub mod power;
pub mod probe;
pub mod render;
pub mod shadowed;
pub mod source;
pub mod superblock;
pub mod trim;
pub mod udev;
pub mod usage;
pub mod usb_modes;

use crate::host::Host;
use anyhow::Result;
use disks::{Disk, Role};
use mounts::{DevNo, MountTable, Swap};
use pi::PiInfo;
use source::Source;

/// Everything the planner and `devices` need, read once.
#[derive(Debug, Clone)]
pub struct System {
    pub host: Host,
    pub mounts: MountTable,
    pub swaps: Vec<Swap>,
    /// Every disk, virtual ones included; `devices` hides those by default.
    pub disks: Vec<Disk>,
    pub pi: PiInfo,
    pub source: Source,
    /// Used bytes of the source root (statfs, or a scan on fixtures).
    pub source_used_bytes: Option<u64>,
}

impl System {
    pub fn inspect(host: &Host) -> Result<System> {
        let mounts = MountTable::read(host)?;
        let swaps = mounts::read_swaps(host)?;
        let options = disks::ListOptions {
            include_virtual: true,
        };
        let mut disks = disks::list_disks(host, &mounts, &swaps, options)?;
        let mut pi = pi::detect(host);
        let source = Source::inspect(host, &mounts, &pi);
        if pi.eeprom_bootloader {
            pi.eeprom = bootloader::read(
                host,
                source.boot_dir.as_deref(),
                pi.family == pi::PiFamily::Pi5,
            );
        }
        let source_used_bytes = usage::used_bytes(host, &mounts);
        let minimum = source_used_bytes.map(crate::space::minimum_root_partition_bytes);
        assign_roles(&mut disks, &source, minimum);
        Ok(System {
            host: host.clone(),
            mounts,
            swaps,
            disks,
            pi,
            source,
            source_used_bytes,
        })
    }

    pub fn disk_holding(&self, devno: DevNo) -> Option<&Disk> {
        self.disks.iter().find(|d| d.contains(devno))
    }
}

/// Marks the disks the system runs from, and why others cannot take it.
fn assign_roles(disks: &mut [Disk], source: &Source, minimum_bytes: Option<u64>) {
    let holds = |disk: &Disk, devno: Option<DevNo>| devno.is_some_and(|d| disk.contains(d));
    for disk in disks.iter_mut() {
        let mut reasons = Vec::new();
        let role = if holds(disk, source.running_root_devno) || holds(disk, source.root_devno) {
            if holds(disk, source.boot_devno) {
                reasons.push("also holds the boot partition".to_string());
            }
            Role::SourceRoot
        } else if holds(disk, source.boot_devno) {
            Role::SourceBoot
        } else {
            if disk.read_only {
                reasons.push("read-only".to_string());
            }
            reasons.extend(disk.uses().into_iter().map(|u| format!("in use: {u}")));
            if let Some(minimum) = minimum_bytes.filter(|&m| disk.size_bytes < m) {
                reasons.push(format!(
                    "too small: {} is less than the {} the system needs",
                    crate::units::binary(disk.size_bytes),
                    crate::units::binary(minimum)
                ));
            }
            if reasons.is_empty() {
                Role::Candidate
            } else {
                Role::Unsuitable
            }
        };
        disk.role = role;
        disk.role_reasons = reasons;
    }
}

/// A fixture machine from tests/fixtures, inspected: for unit tests.
#[cfg(test)]
pub(crate) fn inspect_fixture(name: &str) -> (Host, System) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let host = Host::with_root(root);
    let system = System::inspect(&host).expect("inspecting the fixture");
    (host, system)
}
