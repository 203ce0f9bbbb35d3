//! The middle `migrate` and `sync` share, planned: a bootable copy of this
//! system on another disk (ARCHITECTURE.md, "Two use cases, one replica
//! engine"). One planner, one set of refusals, whichever use case meets
//! them: the disk named ([`resolve_disk`]), whether it may be written
//! ([`check_disk`]) and holds the system ([`check_fits`]), its layout
//! ([`lay_out`]), the ids its files name ([`own_ids`]), the boot files its
//! boot partition takes (`boot_files`), and how the running system's fstab,
//! command line and raspi-firmware setting become the copy's (`retarget`,
//! `root_edits` for the copy's own root files). Each use case
//! calls these and adds only its own part: `migrate` places the command
//! line where the firmware reads it (the SD card's cmdline.txt, a trial's,
//! the new boot partition's) and plans the bootloader; `sync` places the
//! standby's own files and compares.

mod boot_files;
mod disk;
mod layout;
pub mod own_ids;
mod retarget;

pub(crate) use boot_files::boot_files;
pub use disk::{check_disk, check_fits, identity, resolve_disk, Writes};
pub use layout::{lay_out, LayoutRequest, NewLayout};
pub(crate) use retarget::{retarget, root_edits};
pub use retarget::{Retargeted, RootEdits, RootPart};

use super::edits::new_spec;
use super::{MkfsStep, PartitionRole, PlannedPartition, TablePlan};
use crate::bootcfg::DeviceSpec;
use serde::{Deserialize, Serialize};

/// A disk laid out anew: the partition table written to it and the
/// filesystems made on its partitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskLayout {
    pub table: TablePlan,
    pub filesystems: Vec<MkfsStep>,
}

impl DiskLayout {
    /// The partition with `role`, and the filesystem made on it.
    pub fn part(&self, role: PartitionRole) -> Option<(&PlannedPartition, &MkfsStep)> {
        let part = self.table.partitions.iter().find(|p| p.role == role)?;
        let fs = self
            .filesystems
            .iter()
            .find(|f| f.partition == part.number)?;
        Some((part, fs))
    }

    /// The ids the copy's files will name.
    pub fn ids(&self) -> ReplicaIds {
        let ids = |role| {
            self.part(role).map(|(part, fs)| OwnIds {
                partuuid: part.partuuid.clone(),
                uuid: fs.uuid.clone(),
            })
        };
        ReplicaIds {
            root: ids(PartitionRole::Root).expect("every layout has a root partition"),
            boot: ids(PartitionRole::Boot),
        }
    }
}

/// A partition's ids as a boot file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnIds {
    pub partuuid: String,
    /// The filesystem's UUID (a FAT volume's serial as `XXXX-XXXX`).
    pub uuid: String,
}

impl OwnIds {
    /// How the copy names this partition where the running system named
    /// its own as `old`.
    pub fn spec_for(&self, old: &DeviceSpec) -> DeviceSpec {
        new_spec(old, &self.partuuid, &self.uuid)
    }
}

/// The ids of the copy's own partitions: its root, and with a full layout
/// its boot partition (a root-only copy starts from the running system's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaIds {
    pub root: OwnIds,
    pub boot: Option<OwnIds>,
}
