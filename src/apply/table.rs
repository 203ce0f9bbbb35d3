//! Writes the planned partition table: MBR with mbrman, GPT with gpt.

use crate::plan::{PartitionRole, TablePlan};
use crate::system::probe::TableKind;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};

/// Writes `table` onto `disk` (the whole-disk node, or an image file),
/// replacing whatever table was there, and flushes it.
pub fn write_table<D>(disk: &mut D, table: &TablePlan, disk_bytes: u64) -> Result<()>
where
    D: Read + Write + Seek + std::fmt::Debug,
{
    match table.kind {
        TableKind::Mbr => write_mbr(disk, table),
        TableKind::Gpt => write_gpt(disk, table, disk_bytes),
    }?;
    disk.flush().context("flushing the new partition table")
}

fn write_mbr<D>(disk: &mut D, table: &TablePlan) -> Result<()>
where
    D: Read + Write + Seek + std::fmt::Debug,
{
    let signature = u32::from_str_radix(&table.disk_id, 16)
        .with_context(|| format!("the plan's disk signature '{}' is not hex", table.disk_id))?;
    let mut mbr = mbrman::MBR::new_from(disk, table.sector_size, signature.to_le_bytes())
        .context("preparing an MBR for the target")?;
    for part in &table.partitions {
        let sys = u8::from_str_radix(part.type_id.trim_start_matches("0x"), 16)
            .with_context(|| format!("MBR type '{}' is not a byte", part.type_id))?;
        let (Ok(start), Ok(sectors)) = (
            u32::try_from(part.start_sector),
            u32::try_from(part.end_sector - part.start_sector + 1),
        ) else {
            bail!(
                "partition {} does not fit in an MBR's 32-bit sector numbers",
                part.number
            );
        };
        let index = usize::try_from(part.number).context("partition number")?;
        mbr[index] = mbrman::MBRPartitionEntry {
            // The Pi firmware ignores the boot flag; Raspberry Pi OS leaves it clear.
            boot: mbrman::BOOT_INACTIVE,
            first_chs: mbrman::CHS::empty(),
            sys,
            last_chs: mbrman::CHS::empty(),
            starting_lba: start,
            sectors,
        };
    }
    mbr.write_into(disk).context("writing the MBR")
}

fn write_gpt<D>(disk: &mut D, table: &TablePlan, disk_bytes: u64) -> Result<()>
where
    D: Read + Write + Seek + std::fmt::Debug,
{
    let block_size = gpt::disk::LogicalBlockSize::try_from(u64::from(table.sector_size))
        .context("GPT needs 512- or 4096-byte sectors")?;
    let last_lba = disk_bytes / u64::from(table.sector_size) - 1;
    let protective =
        gpt::mbr::ProtectiveMBR::with_lb_size(u32::try_from(last_lba).unwrap_or(u32::MAX));
    protective
        .overwrite_lba0(disk)
        .context("writing the protective MBR")?;
    let disk_guid = uuid::Uuid::parse_str(&table.disk_id).context("the plan's disk GUID")?;
    let mut gpt = gpt::GptConfig::new()
        .writable(true)
        .logical_block_size(block_size)
        .change_partition_count(true)
        .create_from_device(disk, Some(disk_guid))
        .context("creating the GPT")?;
    let mut partitions = BTreeMap::new();
    for part in &table.partitions {
        let type_guid: gpt::partition_types::Type = part
            .type_id
            .to_uppercase()
            .parse()
            .map_err(|e| anyhow::anyhow!("GPT type {}: {e}", part.type_id))?;
        partitions.insert(
            part.number,
            gpt::partition::Partition {
                part_type_guid: type_guid,
                part_guid: uuid::Uuid::parse_str(&part.partuuid)
                    .context("the plan's partition GUID")?,
                first_lba: part.start_sector,
                last_lba: part.end_sector,
                flags: 0,
                name: part.name.clone().unwrap_or_else(|| match part.role {
                    PartitionRole::Boot => "boot".into(),
                    PartitionRole::Root => "root".into(),
                }),
            },
        );
    }
    gpt.update_partitions(partitions)
        .context("laying out the GPT partitions")?;
    gpt.write()
        .context("writing the GPT (primary and backup)")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlannedPartition;
    use crate::system::probe::probe_table;

    fn planned(
        kind: TableKind,
        disk_id: &str,
        parts: &[(u32, PartitionRole, u64, u64, &str, &str)],
    ) -> TablePlan {
        TablePlan {
            kind,
            reason: String::new(),
            disk_id: disk_id.into(),
            sector_size: 512,
            alignment_bytes: 4 << 20,
            partitions: parts
                .iter()
                .map(
                    |&(number, role, start, end, type_id, partuuid)| PlannedPartition {
                        number,
                        role,
                        start_sector: start,
                        end_sector: end,
                        size_bytes: (end - start + 1) * 512,
                        type_id: type_id.into(),
                        type_name: String::new(),
                        partuuid: partuuid.into(),
                        name: (kind == TableKind::Gpt).then(|| "p".to_string()),
                    },
                )
                .collect(),
        }
    }

    #[test]
    fn an_mbr_reads_back_as_planned() {
        let mut file = tempfile::tempfile().unwrap();
        let size = 256u64 << 20;
        file.set_len(size).unwrap();
        let table = planned(
            TableKind::Mbr,
            "1a2b3c4d",
            &[
                (1, PartitionRole::Boot, 8192, 139263, "0x0c", "1a2b3c4d-01"),
                (
                    2,
                    PartitionRole::Root,
                    139264,
                    524287,
                    "0x83",
                    "1a2b3c4d-02",
                ),
            ],
        );
        write_table(&mut file, &table, size).unwrap();
        let read = probe_table(&mut file, 512).unwrap();
        assert_eq!(read.kind, TableKind::Mbr);
        assert_eq!(read.disk_id, "1a2b3c4d");
        let got: Vec<(u64, u64, String, String)> = read
            .partitions
            .iter()
            .map(|p| (p.start, p.sectors, p.type_id.clone(), p.partuuid.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (8192, 131072, "0x0c".into(), "1a2b3c4d-01".into()),
                (139264, 385024, "0x83".into(), "1a2b3c4d-02".into())
            ]
        );
    }

    #[test]
    fn a_gpt_reads_back_as_planned() {
        let mut file = tempfile::tempfile().unwrap();
        let size = 256u64 << 20;
        file.set_len(size).unwrap();
        let boot = "5b1f1f6e-3c47-4d8e-9a0b-1c2d3e4f5a6b";
        let root = "7c2e2e7f-4d58-4e9f-8b1c-2d3e4f5a6b7c";
        let table = planned(
            TableKind::Gpt,
            "0e9d8c7b-6a59-4837-a625-140312f0e1d2",
            &[
                (
                    1,
                    PartitionRole::Boot,
                    8192,
                    139263,
                    "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7",
                    boot,
                ),
                (
                    2,
                    PartitionRole::Root,
                    139264,
                    516095,
                    "0fc63daf-8483-4772-8e79-3d69d8477de4",
                    root,
                ),
            ],
        );
        write_table(&mut file, &table, size).unwrap();
        let read = probe_table(&mut file, 512).unwrap();
        assert_eq!(read.kind, TableKind::Gpt);
        assert_eq!(read.disk_id, "0e9d8c7b-6a59-4837-a625-140312f0e1d2");
        assert_eq!(read.partitions.len(), 2);
        assert_eq!(read.partitions[0].partuuid, boot);
        assert_eq!(read.partitions[1].partuuid, root);
        assert_eq!(read.partitions[1].start, 139264);
        assert_eq!(read.partitions[1].sectors, 516096 - 139264);
        assert_eq!(
            read.partitions[1].type_id,
            "0fc63daf-8483-4772-8e79-3d69d8477de4"
        );
    }

    #[test]
    fn an_mbr_replaces_an_old_gpt() {
        let mut file = tempfile::tempfile().unwrap();
        let size = 64u64 << 20;
        file.set_len(size).unwrap();
        let gpt_table = planned(
            TableKind::Gpt,
            "0e9d8c7b-6a59-4837-a625-140312f0e1d2",
            &[(
                1,
                PartitionRole::Root,
                8192,
                98303,
                "0fc63daf-8483-4772-8e79-3d69d8477de4",
                "7c2e2e7f-4d58-4e9f-8b1c-2d3e4f5a6b7c",
            )],
        );
        write_table(&mut file, &gpt_table, size).unwrap();
        let mbr_table = planned(
            TableKind::Mbr,
            "00c0ffee",
            &[(1, PartitionRole::Root, 8192, 131071, "0x83", "00c0ffee-01")],
        );
        write_table(&mut file, &mbr_table, size).unwrap();
        assert_eq!(probe_table(&mut file, 512).unwrap().kind, TableKind::Mbr);
    }
}
