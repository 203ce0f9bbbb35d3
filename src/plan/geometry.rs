//! Where the partitions go: 4 MiB aligned, as Raspberry Pi OS lays out its
//! images (p1 at sector 8192), within what each table can describe.

use super::refusal::Reason;
use super::{Layout, PartitionRole};
use crate::system::probe::TableKind;
use crate::units::{binary, MIB};

pub const ALIGNMENT_BYTES: u64 = 4 * MIB;
/// MBR stores sectors as 32-bit numbers.
pub const MBR_MAX_SECTORS: u64 = 1 << 32;
/// A GPT partition array: 128 entries of 128 bytes.
const GPT_ARRAY_BYTES: u64 = 128 * 128;

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub disk_bytes: u64,
    pub sector_size: u32,
    pub kind: TableKind,
    pub layout: Layout,
    pub boot_bytes: u64,
    pub root_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Extent {
    pub role: PartitionRole,
    pub start: u64,
    /// Inclusive.
    pub end: u64,
}

impl Extent {
    pub fn sectors(&self) -> u64 {
        self.end - self.start + 1
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Geometry {
    pub extents: Vec<Extent>,
    /// Bytes past the last partition that the table cannot use (MBR on a
    /// disk over 2 TiB) or that the user left free with --root-size.
    pub unused_bytes: u64,
    pub limited_by_mbr: bool,
}

fn round_up(value: u64, step: u64) -> u64 {
    value.div_ceil(step) * step
}

pub fn compute(req: &Request) -> Result<Geometry, Reason> {
    let ss = u64::from(req.sector_size);
    let align = ALIGNMENT_BYTES / ss;
    let total = req.disk_bytes / ss;
    // The last sector a partition may use.
    let last_usable = match req.kind {
        TableKind::Mbr => total.min(MBR_MAX_SECTORS) - 1,
        TableKind::Gpt => total.saturating_sub(2 + GPT_ARRAY_BYTES / ss),
    };
    let aligned_limit = ((last_usable + 1) / align) * align; // exclusive
    let mut next = align;
    let mut extents = Vec::new();
    if req.layout == Layout::Full {
        let sectors = round_up(req.boot_bytes, ALIGNMENT_BYTES) / ss;
        extents.push(Extent {
            role: PartitionRole::Boot,
            start: next,
            end: next + sectors - 1,
        });
        next += sectors;
    }
    let root_end_exclusive = match req.root_bytes {
        Some(bytes) => next + round_up(bytes, ALIGNMENT_BYTES) / ss,
        None => aligned_limit,
    };
    if root_end_exclusive > aligned_limit || root_end_exclusive <= next {
        let wanted = req
            .root_bytes
            .map(binary)
            .unwrap_or_else(|| "any root partition".into());
        return Err(Reason::new(
            "target-too-small",
            format!(
                "the disk ({}) has no room for {wanted} after the first {}",
                binary(req.disk_bytes),
                binary(next * ss)
            ),
        )
        .hint("choose a larger disk, or smaller partitions: --layout root-only has no boot partition (a migration also takes --root-size and --boot-size)"));
    }
    extents.push(Extent {
        role: PartitionRole::Root,
        start: next,
        end: root_end_exclusive - 1,
    });
    let limited_by_mbr = req.kind == TableKind::Mbr && total > MBR_MAX_SECTORS;
    Ok(Geometry {
        unused_bytes: (total - root_end_exclusive) * ss,
        extents,
        limited_by_mbr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{GIB, TIB};

    fn request(disk_bytes: u64, kind: TableKind, layout: Layout) -> Request {
        Request {
            disk_bytes,
            sector_size: 512,
            kind,
            layout,
            boot_bytes: 512 * MIB,
            root_bytes: None,
        }
    }

    #[test]
    fn full_layout_matches_raspberry_pi_os() {
        let geo = compute(&request(64 * GIB, TableKind::Mbr, Layout::Full)).unwrap();
        assert_eq!(geo.extents[0].start, 8192);
        assert_eq!(geo.extents[0].sectors(), 512 * MIB / 512);
        assert_eq!(geo.extents[1].start, 8192 + 1_048_576);
        for extent in &geo.extents {
            assert_eq!(extent.start % 8192, 0);
            assert_eq!((extent.end + 1) % 8192, 0);
        }
    }

    #[test]
    fn gpt_leaves_room_for_the_backup_table() {
        let disk = 64 * GIB;
        let geo = compute(&request(disk, TableKind::Gpt, Layout::RootOnly)).unwrap();
        let total = disk / 512;
        assert!(geo.extents[0].end < total - 33);
        assert_eq!(geo.unused_bytes, (total - geo.extents[0].end - 1) * 512);
    }

    #[test]
    fn mbr_stops_at_2_tib() {
        let geo = compute(&request(4 * TIB, TableKind::Mbr, Layout::RootOnly)).unwrap();
        assert!(geo.limited_by_mbr);
        assert!(geo.extents[0].end < MBR_MAX_SECTORS);
        assert!(geo.unused_bytes >= 2 * TIB);
    }

    #[test]
    fn four_k_sectors_align_to_the_same_bytes() {
        let mut req = request(64 * GIB, TableKind::Gpt, Layout::Full);
        req.sector_size = 4096;
        let geo = compute(&req).unwrap();
        assert_eq!(geo.extents[0].start, 1024);
        assert_eq!(geo.extents[1].start * 4096, 516 * MIB);
    }

    #[test]
    fn root_size_is_honoured_and_checked() {
        let mut req = request(64 * GIB, TableKind::Mbr, Layout::RootOnly);
        req.root_bytes = Some(10 * GIB);
        let geo = compute(&req).unwrap();
        assert_eq!(geo.extents[0].sectors() * 512, 10 * GIB);
        req.root_bytes = Some(100 * GIB);
        assert_eq!(compute(&req).unwrap_err().code, "target-too-small");
    }

    #[test]
    fn a_tiny_disk_is_refused() {
        let err = compute(&request(256 * MIB, TableKind::Mbr, Layout::Full)).unwrap_err();
        assert_eq!(err.code, "target-too-small");
    }
}
