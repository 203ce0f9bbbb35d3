//! The partition table a plan writes: its partitions from the geometry,
//! with the new ids and the types the table kind gives them.

use super::geometry::{self, Geometry};
use super::ids::NewIds;
use super::{PartitionRole, PlannedPartition, TablePlan};
use crate::system::disks::Disk;
use crate::system::probe::TableKind;

pub(super) fn table_plan(
    kind: TableKind,
    reason: String,
    geometry: &Geometry,
    ids: &NewIds,
    target: &Disk,
) -> TablePlan {
    let ss = u64::from(target.logical_sector_size);
    let partitions = geometry
        .extents
        .iter()
        .enumerate()
        .map(|(index, extent)| {
            let (type_id, type_name) = match (kind, extent.role) {
                (TableKind::Mbr, PartitionRole::Boot) => {
                    ("0x0c".to_string(), "W95 FAT32 (LBA)".to_string())
                }
                (TableKind::Mbr, PartitionRole::Root) => ("0x83".to_string(), "Linux".to_string()),
                (TableKind::Gpt, _) => ids.gpt_types[index].clone(),
            };
            PlannedPartition {
                number: index as u32 + 1,
                role: extent.role,
                start_sector: extent.start,
                end_sector: extent.end,
                size_bytes: extent.sectors() * ss,
                type_id,
                type_name,
                partuuid: ids.partuuids[index].clone(),
                name: (kind == TableKind::Gpt).then(|| match extent.role {
                    PartitionRole::Boot => "boot".to_string(),
                    PartitionRole::Root => "root".to_string(),
                }),
            }
        })
        .collect();
    TablePlan {
        kind,
        reason,
        disk_id: ids.disk_id.clone(),
        sector_size: target.logical_sector_size,
        alignment_bytes: geometry::ALIGNMENT_BYTES,
        partitions,
    }
}
