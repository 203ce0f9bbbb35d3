//! Reading an MBR partition table straight from an image file: the host
//! kernel has no partition support, so offsets are computed here and handed
//! to mtools, debugfs or `losetup -o`.

use anyhow::{ensure, Context, Result};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// One primary partition entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// 1-based, as in `mmcblk0p1`.
    pub number: u32,
    pub kind: u8,
    pub start_sector: u64,
    pub sectors: u64,
}

impl Partition {
    pub fn offset(&self) -> u64 {
        self.start_sector * 512
    }
    pub fn size(&self) -> u64 {
        self.sectors * 512
    }
    /// FAT12/16/32 type codes a Pi's firmware would look at.
    pub fn is_fat(&self) -> bool {
        matches!(self.kind, 0x01 | 0x04 | 0x06 | 0x0b | 0x0c | 0x0e)
    }
}

/// The disk signature (the `6c586e13` in `PARTUUID=6c586e13-02`) and the
/// used primary partitions of an MBR disk image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mbr {
    pub signature: u32,
    pub partitions: Vec<Partition>,
}

impl Mbr {
    pub fn read(image: &Path) -> Result<Option<Mbr>> {
        let mut sector = [0u8; 512];
        File::open(image)
            .and_then(|mut f| f.read_exact(&mut sector))
            .with_context(|| format!("cannot read the first sector of {}", image.display()))?;
        Ok(Mbr::parse(&sector))
    }

    /// `None` when the sector carries no MBR boot signature (a blank disk).
    pub fn parse(sector: &[u8; 512]) -> Option<Mbr> {
        if sector[510] != 0x55 || sector[511] != 0xaa {
            return None;
        }
        let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let signature = le32(&sector[440..444]);
        let partitions = (0..4)
            .filter_map(|i| {
                let e = &sector[446 + 16 * i..446 + 16 * (i + 1)];
                let (kind, start, sectors) = (e[4], le32(&e[8..12]), le32(&e[12..16]));
                (kind != 0 && sectors != 0).then(|| Partition {
                    number: i as u32 + 1,
                    kind,
                    start_sector: start.into(),
                    sectors: sectors.into(),
                })
            })
            .collect();
        Some(Mbr {
            signature,
            partitions,
        })
    }

    /// The PARTUUID Linux gives partition `number` of this disk.
    pub fn partuuid(&self, number: u32) -> String {
        format!("{:08x}-{:02x}", self.signature, number)
    }

    pub fn partition(&self, number: u32) -> Result<&Partition> {
        let p = self.partitions.iter().find(|p| p.number == number);
        p.with_context(|| format!("the MBR has no partition {number}"))
    }
}

/// The disk signature and partition `number` of an image, or an error that
/// says which image lacked what.
pub fn partition_of(image: &Path, number: u32) -> Result<Partition> {
    let mbr = Mbr::read(image)?
        .with_context(|| format!("{} has no MBR partition table", image.display()))?;
    let p = mbr
        .partition(number)
        .with_context(|| format!("in {}", image.display()))?;
    ensure!(
        p.sectors > 0,
        "partition {number} of {} is empty",
        image.display()
    );
    Ok(p.clone())
}

/// Gives `clone` the partition table of `image`: the MBR, disk id and all,
/// so its partitions carry the same PARTUUIDs (a clone of a disk, as
/// owners plug one in).
pub fn copy_table(image: &Path, clone: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut mbr = [0u8; 512];
    File::open(image)
        .and_then(|f| f.read_exact_at(&mut mbr, 0))
        .with_context(|| format!("reading the MBR of {}", image.display()))?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(clone)
        .and_then(|f| f.write_all_at(&mbr, 0))
        .with_context(|| format!("writing the MBR of {}", clone.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_pi_os_layout() {
        let mut s = [0u8; 512];
        s[440..444].copy_from_slice(&0x6c58_6e13u32.to_le_bytes());
        let mut entry = |i: usize, kind: u8, start: u32, len: u32| {
            let e = &mut s[446 + 16 * i..446 + 16 * (i + 1)];
            e[4] = kind;
            e[8..12].copy_from_slice(&start.to_le_bytes());
            e[12..16].copy_from_slice(&len.to_le_bytes());
        };
        entry(0, 0x0c, 8192, 1_048_576);
        entry(1, 0x83, 1_056_768, 7_331_840);
        s[510] = 0x55;
        s[511] = 0xaa;
        let mbr = Mbr::parse(&s).unwrap();
        assert_eq!(mbr.partuuid(2), "6c586e13-02");
        assert_eq!(mbr.partitions.len(), 2);
        assert!(mbr.partitions[0].is_fat());
        assert!(!mbr.partitions[1].is_fat());
        assert_eq!(mbr.partitions[1].offset(), 1_056_768 * 512);
    }

    #[test]
    fn blank_sector_is_no_mbr() {
        assert_eq!(Mbr::parse(&[0u8; 512]), None);
    }
}
