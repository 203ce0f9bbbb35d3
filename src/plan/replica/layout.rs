//! A disk laid out anew for a replica, `migrate`'s target and a first
//! sync's standby alike: the tools that make it, the partition table (its
//! kind chosen for what reads it), where the partitions go, fresh ids drawn
//! outside every id another attached disk carries ([`super::own_ids`]),
//! and the mkfs commands with fresh labels.

use super::super::firmware::choose_table;
use super::super::geometry::{self, Geometry};
use super::super::ids::new_ids;
use super::super::mkfs::mkfs_steps;
use super::super::options::DEFAULT_BOOT_SIZE;
use super::super::table::table_plan;
use super::super::{Layout, Options, Reason, TableChoice};
use super::{identity, own_ids, DiskLayout};
use crate::system::disks::Disk;
use crate::system::System;

/// How the disk is to be laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutRequest {
    pub layout: Layout,
    pub table: TableChoice,
    pub boot_size: u64,
    /// `None`: the rest of the disk.
    pub root_size: Option<u64>,
    /// Makes the random ids reproducible.
    pub seed: Option<u64>,
    /// An MBR disk signature asked for instead of a random one.
    pub disk_signature: Option<u32>,
}

impl LayoutRequest {
    /// `layout` with the defaults: the table the firmware reads, a boot
    /// partition of the default size, the rest of the disk for the root.
    pub fn new(layout: Layout, table: TableChoice, seed: Option<u64>) -> LayoutRequest {
        LayoutRequest {
            layout,
            table,
            boot_size: DEFAULT_BOOT_SIZE,
            root_size: None,
            seed,
            disk_signature: None,
        }
    }

    /// What a migration's options ask of its target's layout.
    pub fn of(options: &Options) -> LayoutRequest {
        LayoutRequest {
            layout: options.layout,
            table: options.table,
            boot_size: options.boot_size,
            root_size: options.root_size,
            seed: options.seed,
            disk_signature: options.disk_signature,
        }
    }
}

/// A layout planned: what is written, and where on the disk.
#[derive(Debug, Clone)]
pub struct NewLayout {
    pub disk: DiskLayout,
    /// The partitions' extents, and what the table leaves unused.
    pub geometry: Geometry,
}

/// The table and filesystems of `disk` laid out as `request` says, or
/// every reason it cannot be: a tool missing, a table the firmware cannot
/// read, a disk with no room for the partitions, an id that cannot be new.
pub fn lay_out(
    system: &System,
    disk: &Disk,
    request: &LayoutRequest,
) -> Result<NewLayout, Vec<Reason>> {
    let mut reasons = check_tools(request.layout);
    let (kind, table_reason) = match choose_table(system, disk, request.layout, request.table) {
        Ok(choice) => choice,
        Err(reason) => {
            reasons.push(reason);
            return Err(reasons);
        }
    };
    let geometry = geometry::compute(&geometry::Request {
        disk_bytes: disk.size_bytes,
        sector_size: disk.logical_sector_size,
        kind,
        layout: request.layout,
        boot_bytes: request.boot_size,
        root_bytes: request.root_size,
    })
    .map_err(|reason| reasons.push(reason));
    let Ok(geometry) = geometry else {
        return Err(reasons);
    };
    let mut known = own_ids::elsewhere(system, &identity(disk));
    let ids = new_ids(
        &mut known,
        kind,
        &geometry,
        request.seed,
        request.disk_signature,
    )
    .map_err(|reason| reasons.push(reason));
    let Ok(ids) = ids else {
        return Err(reasons);
    };
    if !reasons.is_empty() {
        return Err(reasons);
    }
    let table = table_plan(kind, table_reason, &geometry, &ids, disk);
    let filesystems = mkfs_steps(system, &table, &ids, &known);
    Ok(NewLayout {
        disk: DiskLayout { table, filesystems },
        geometry,
    })
}

/// The mkfs programs the layout runs, each named with its package when
/// it is missing.
fn check_tools(layout: Layout) -> Vec<Reason> {
    let mut needed = vec!["mkfs.ext4"];
    if layout == Layout::Full {
        needed.push("mkfs.vfat");
    }
    needed
        .into_iter()
        .filter(|program| crate::tools::which(program).is_none())
        .map(|program| {
            let package = crate::tools::package_for(program);
            Reason::new("tool-missing", format!("{program} is not installed"))
                .hint(format!("install it with: sudo apt install {package}"))
        })
        .collect()
}
