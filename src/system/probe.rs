//! Reads partition tables and filesystem superblocks straight from a disk.
//!
//! Why not only sysfs: sysfs knows partitions but not their ids, and a kernel
//! without partition-table support (our CI machines) shows no partitions at
//! all. Why not only udev's database: it can be stale right after mkfs, and
//! udev does not run everywhere. Reading the whole-disk node answers both,
//! without needing partition nodes to exist. Tables are parsed with mbrman and
//! gpt, the same crates that later write them.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek};
use std::os::unix::fs::FileExt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    Mbr,
    Gpt,
}

impl std::fmt::Display for TableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TableKind::Mbr => "mbr",
            TableKind::Gpt => "gpt",
        })
    }
}

/// A partition table as read from sector 0 (and LBA 1 for GPT).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableInfo {
    pub kind: TableKind,
    /// MBR: the disk signature as 8 lowercase hex digits; GPT: the disk GUID.
    pub disk_id: String,
    pub partitions: Vec<TableEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableEntry {
    pub number: u32,
    /// First sector, in logical sectors of the disk.
    pub start: u64,
    /// Length in logical sectors.
    pub sectors: u64,
    pub partuuid: String,
    /// MBR: the type byte (`0x0c`); GPT: the type GUID.
    pub type_id: String,
    pub name: Option<String>,
}

/// Filesystem identity read from its superblock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FsInfo {
    pub fstype: String,
    pub uuid: Option<String>,
    pub label: Option<String>,
}

/// The PARTUUID Linux gives partition `number` of an MBR disk.
pub fn mbr_partuuid(disk_signature: u32, number: u32) -> String {
    format!("{disk_signature:08x}-{number:02x}")
}

/// Reads the partition table, if any. `None` for a blank disk, a filesystem
/// written on the whole disk, or an unreadable table.
pub fn probe_table<D>(disk: &mut D, logical_sector_size: u32) -> Option<TableInfo>
where
    D: Read + Seek + std::io::Write + std::fmt::Debug,
{
    let mut sector0 = [0u8; 512];
    disk.rewind().ok()?;
    disk.read_exact(&mut sector0).ok()?;
    if sector0[510..512] != [0x55, 0xAA] || looks_like_fat_boot_sector(&sector0) {
        return None;
    }
    disk.rewind().ok()?;
    let mbr = mbrman::MBR::read_from(disk, logical_sector_size).ok()?;
    let protective = mbr.iter().any(|(_, entry)| entry.sys == 0xEE);
    if protective {
        return probe_gpt(disk, logical_sector_size);
    }
    if mbr
        .iter()
        .any(|(_, e)| e.is_used() && e.boot != 0 && e.boot != 0x80)
    {
        return None;
    }
    let signature = u32::from_le_bytes(mbr.header.disk_signature);
    let partitions = mbr
        .iter()
        .filter(|(_, entry)| entry.is_used() && !entry.is_extended())
        .map(|(index, entry)| TableEntry {
            number: index as u32,
            start: u64::from(entry.starting_lba),
            sectors: u64::from(entry.sectors),
            partuuid: mbr_partuuid(signature, index as u32),
            type_id: format!("0x{:02x}", entry.sys),
            name: None,
        })
        .collect();
    Some(TableInfo {
        kind: TableKind::Mbr,
        disk_id: format!("{signature:08x}"),
        partitions,
    })
}

fn probe_gpt<D>(disk: &mut D, logical_sector_size: u32) -> Option<TableInfo>
where
    D: Read + Seek + std::io::Write + std::fmt::Debug,
{
    let block_size = gpt::disk::LogicalBlockSize::try_from(u64::from(logical_sector_size)).ok()?;
    disk.rewind().ok()?;
    let gpt = gpt::GptConfig::new()
        .writable(false)
        .logical_block_size(block_size)
        .open_from_device(disk)
        .ok()?;
    let partitions = gpt
        .partitions()
        .iter()
        .filter(|(_, part)| part.is_used())
        .map(|(number, part)| TableEntry {
            number: *number,
            start: part.first_lba,
            sectors: part.last_lba.saturating_sub(part.first_lba) + 1,
            partuuid: part.part_guid.hyphenated().to_string(),
            type_id: part.part_type_guid.guid.hyphenated().to_string(),
            name: Some(part.name.clone()).filter(|n| !n.is_empty()),
        })
        .collect();
    Some(TableInfo {
        kind: TableKind::Gpt,
        disk_id: gpt.guid().hyphenated().to_string(),
        partitions,
    })
}

/// A FAT filesystem on a whole "superfloppy" disk also ends sector 0 with
/// 55 AA; its BIOS parameter block must not be read as partition entries.
fn looks_like_fat_boot_sector(sector0: &[u8; 512]) -> bool {
    let jump = sector0[0] == 0xEB || sector0[0] == 0xE9;
    jump && (&sector0[82..87] == b"FAT32" || &sector0[54..57] == b"FAT")
}

/// Reads the superblock of the filesystem that starts `offset` bytes into
/// `disk`. Knows the filesystems a Pi migration meets: ext2/3/4, FAT, swap.
pub fn probe_filesystem(disk: &File, offset: u64) -> std::io::Result<Option<FsInfo>> {
    let mut head = vec![0u8; 4096];
    let read = disk.read_at(&mut head, offset)?;
    head.truncate(read);
    if let Some(fs) = parse_ext(&head).or_else(|| parse_fat(&head)) {
        return Ok(Some(fs));
    }
    // Swap puts its magic at the end of the first page; Pi kernels use 4 KiB
    // or 16 KiB pages.
    for page in [4096u64, 16384, 65536] {
        let mut magic = [0u8; 10];
        if disk.read_at(&mut magic, offset + page - 10)? == 10 && &magic == b"SWAPSPACE2" {
            return Ok(Some(parse_swap_header(&head)));
        }
    }
    Ok(None)
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn text_field(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end])
        .trim_end()
        .to_string();
    (!text.is_empty()).then_some(text)
}

fn uuid_field(bytes: &[u8]) -> Option<String> {
    let uuid = uuid::Uuid::from_slice(bytes).ok()?;
    (!uuid.is_nil()).then(|| uuid.hyphenated().to_string())
}

fn parse_ext(head: &[u8]) -> Option<FsInfo> {
    const SB: usize = 1024;
    if head.len() < SB + 136 || le16(head, SB + 56) != 0xEF53 {
        return None;
    }
    const COMPAT_HAS_JOURNAL: u32 = 0x4;
    const INCOMPAT_EXT4_ONLY: u32 = 0x40 | 0x80 | 0x200; // extents, 64bit, flex_bg
    let compat = le32(head, SB + 92);
    let incompat = le32(head, SB + 96);
    let fstype = if incompat & INCOMPAT_EXT4_ONLY != 0 {
        "ext4"
    } else if compat & COMPAT_HAS_JOURNAL != 0 {
        "ext3"
    } else {
        "ext2"
    };
    Some(FsInfo {
        fstype: fstype.to_string(),
        uuid: uuid_field(&head[SB + 104..SB + 120]),
        label: text_field(&head[SB + 120..SB + 136]),
    })
}

fn parse_fat(head: &[u8]) -> Option<FsInfo> {
    if head.len() < 512 || head[510..512] != [0x55, 0xAA] || !(head[0] == 0xEB || head[0] == 0xE9) {
        return None;
    }
    // FAT32 keeps its extended BIOS parameter block further in than FAT12/16.
    let (serial_at, label_at) = if &head[82..87] == b"FAT32" {
        (67, 71)
    } else if &head[54..57] == b"FAT" {
        (39, 43)
    } else {
        return None;
    };
    let serial = le32(head, serial_at);
    let label = text_field(&head[label_at..label_at + 11]).filter(|l| l != "NO NAME");
    Some(FsInfo {
        fstype: "vfat".to_string(),
        uuid: Some(format!("{:04X}-{:04X}", serial >> 16, serial & 0xFFFF)),
        label,
    })
}

fn parse_swap_header(head: &[u8]) -> FsInfo {
    let (uuid, label) = if head.len() >= 1024 + 44 {
        (
            uuid_field(&head[1024 + 12..1024 + 28]),
            text_field(&head[1024 + 28..1024 + 44]),
        )
    } else {
        (None, None)
    };
    FsInfo {
        fstype: "swap".to_string(),
        uuid,
        label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mbr_image(signature: [u8; 4]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.as_file().set_len(64 << 20).unwrap();
        let mut mbr = mbrman::MBR::new_from(file.as_file_mut(), 512, signature).unwrap();
        mbr[1] = mbrman::MBRPartitionEntry {
            boot: mbrman::BOOT_INACTIVE,
            first_chs: mbrman::CHS::empty(),
            sys: 0x0c,
            last_chs: mbrman::CHS::empty(),
            starting_lba: 8192,
            sectors: 16384,
        };
        mbr[2] = mbrman::MBRPartitionEntry {
            sys: 0x83,
            starting_lba: 24576,
            sectors: 40960,
            ..mbr[1]
        };
        mbr.write_into(file.as_file_mut()).unwrap();
        file
    }

    #[test]
    fn reads_an_mbr_table_and_its_partuuids() {
        let mut image = mbr_image([0x13, 0x6e, 0x58, 0x6c]);
        let table = probe_table(image.as_file_mut(), 512).unwrap();
        assert_eq!(table.kind, TableKind::Mbr);
        assert_eq!(table.disk_id, "6c586e13");
        assert_eq!(table.partitions.len(), 2);
        assert_eq!(table.partitions[1].partuuid, "6c586e13-02");
        assert_eq!(table.partitions[1].start, 24576);
        assert_eq!(table.partitions[0].type_id, "0x0c");
    }

    #[test]
    fn reads_a_gpt_table() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.as_file().set_len(64 << 20).unwrap();
        let protective = gpt::mbr::ProtectiveMBR::with_lb_size(((64u64 << 20) / 512 - 1) as u32);
        protective.overwrite_lba0(file.as_file_mut()).unwrap();
        let mut disk = gpt::GptConfig::new()
            .writable(true)
            .logical_block_size(gpt::disk::LogicalBlockSize::Lb512)
            .create_from_device(file.as_file_mut(), None)
            .unwrap();
        disk.update_partitions(std::collections::BTreeMap::new())
            .unwrap();
        disk.add_partition("rootfs", 16 << 20, gpt::partition_types::LINUX_FS, 0, None)
            .unwrap();
        let guid = *disk.guid();
        disk.write().unwrap();
        let table = probe_table(file.as_file_mut(), 512).unwrap();
        assert_eq!(table.kind, TableKind::Gpt);
        assert_eq!(table.disk_id, guid.hyphenated().to_string());
        assert_eq!(table.partitions.len(), 1);
        assert_eq!(table.partitions[0].name.as_deref(), Some("rootfs"));
        assert_eq!(
            table.partitions[0].type_id,
            "0fc63daf-8483-4772-8e79-3d69d8477de4"
        );
    }

    #[test]
    fn a_blank_disk_has_no_table() {
        let mut file = tempfile::tempfile().unwrap();
        file.set_len(1 << 20).unwrap();
        assert!(probe_table(&mut file, 512).is_none());
    }

    #[test]
    fn a_whole_disk_fat_filesystem_is_not_a_table() {
        let mut file = tempfile::tempfile().unwrap();
        let mut sector = [0u8; 512];
        sector[0] = 0xEB;
        sector[82..90].copy_from_slice(b"FAT32   ");
        sector[67..71].copy_from_slice(&0x1234_abcdu32.to_le_bytes());
        sector[71..82].copy_from_slice(b"BOOTFS     ");
        sector[510] = 0x55;
        sector[511] = 0xAA;
        file.write_all(&sector).unwrap();
        file.set_len(1 << 20).unwrap();
        assert!(probe_table(&mut file, 512).is_none());
        let fs = probe_filesystem(&file, 0).unwrap().unwrap();
        assert_eq!(fs.fstype, "vfat");
        assert_eq!(fs.uuid.as_deref(), Some("1234-ABCD"));
        assert_eq!(fs.label.as_deref(), Some("BOOTFS"));
    }

    #[test]
    fn reads_an_ext4_superblock_made_by_mkfs() {
        let Some(mkfs) = which("mkfs.ext4") else {
            assert!(
                std::env::var("CI").is_err(),
                "mkfs.ext4 is required in CI (package e2fsprogs)"
            );
            return;
        };
        let file = tempfile::NamedTempFile::new().unwrap();
        file.as_file().set_len(16 << 20).unwrap();
        let status = std::process::Command::new(mkfs)
            .args([
                "-q",
                "-F",
                "-L",
                "rootfs",
                "-U",
                "0b4c8c5e-5a0f-4d8d-9c1e-3f4b6c7d8e9f",
            ])
            .arg(file.path())
            .status()
            .unwrap();
        assert!(status.success());
        let fs = probe_filesystem(file.as_file(), 0).unwrap().unwrap();
        assert_eq!(fs.fstype, "ext4");
        assert_eq!(fs.label.as_deref(), Some("rootfs"));
        assert_eq!(
            fs.uuid.as_deref(),
            Some("0b4c8c5e-5a0f-4d8d-9c1e-3f4b6c7d8e9f")
        );
    }

    #[test]
    fn finds_swap_on_a_16k_page_kernel() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(1 << 20).unwrap();
        file.write_all_at(b"SWAPSPACE2", 16384 - 10).unwrap();
        file.write_all_at(b"swap0", 1024 + 28).unwrap();
        let fs = probe_filesystem(&file, 0).unwrap().unwrap();
        assert_eq!(fs.fstype, "swap");
        assert_eq!(fs.label.as_deref(), Some("swap0"));
    }

    fn which(name: &str) -> Option<std::path::PathBuf> {
        ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .map(|dir| std::path::Path::new(dir).join(name))
            .find(|p| p.exists())
    }
}
