//! The SCSI Vital Product Data pages that say whether a disk takes UNMAP,
//! parsed from their bytes: the list of supported pages (0x00, SPC-4
//! 7.8.16), Block Limits (0xB0, SBC-3 6.5.3) and Logical Block
//! Provisioning (0xB2, SBC-3 6.5.4). Offsets below count from the page's
//! first byte, header included, as the standards and the kernel's
//! `vpd->data[]` do (sysfs's `vpd_pg*` files hold the same whole page).

use serde::Serialize;

/// Why a page's bytes cannot be read as that page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VpdError {
    #[error("the VPD page is {len} bytes, shorter than its 4-byte header")]
    NoHeader { len: usize },
    #[error("asked for VPD page 0x{wanted:02x}, the device answered with page 0x{got:02x}")]
    WrongPage { wanted: u8, got: u8 },
    #[error("the device says no logical unit answers here (peripheral qualifier {qualifier})")]
    NoUnit { qualifier: u8 },
}

/// The page's payload (after the 4-byte header), checked: byte 0 bits 7-5
/// are the peripheral qualifier (0: a unit is connected), byte 1 the page
/// code, bytes 2-3 the page length (big-endian, bytes after the header).
/// A page shorter than it says is cut to what arrived; the field readers
/// treat a field past the end as absent.
pub fn payload(page: &[u8], code: u8) -> Result<&[u8], VpdError> {
    if page.len() < 4 {
        return Err(VpdError::NoHeader { len: page.len() });
    }
    let qualifier = page[0] >> 5;
    if qualifier != 0 {
        return Err(VpdError::NoUnit { qualifier });
    }
    if page[1] != code {
        return Err(VpdError::WrongPage {
            wanted: code,
            got: page[1],
        });
    }
    let declared = usize::from(u16::from_be_bytes([page[2], page[3]]));
    Ok(&page[4..page.len().min(4 + declared)])
}

fn be_u32(page: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(page.get(at..at + 4)?.try_into().ok()?))
}

/// Supported VPD Pages (0x00): bytes 4.. list the page codes, ascending.
pub fn supported_pages(page: &[u8]) -> Result<Vec<u8>, VpdError> {
    Ok(payload(page, 0x00)?.to_vec())
}

/// The Block Limits page (0xB0), as far as UNMAP goes. The short form of
/// SBC-2 (page length 0x0C) ends before the UNMAP fields: they are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BlockLimits {
    /// Bytes 8-11: MAXIMUM TRANSFER LENGTH, in logical blocks (0: no limit reported).
    pub max_transfer_blocks: Option<u32>,
    /// Bytes 20-23: MAXIMUM UNMAP LBA COUNT, blocks one UNMAP may name
    /// (0: UNMAP not supported; 0xFFFFFFFF: no limit).
    pub max_unmap_lba_count: Option<u32>,
    /// Bytes 24-27: MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT.
    pub max_unmap_descriptors: Option<u32>,
    /// Bytes 28-31: OPTIMAL UNMAP GRANULARITY, in logical blocks.
    pub optimal_unmap_granularity: Option<u32>,
    /// Bytes 32-35: UNMAP GRANULARITY ALIGNMENT, when bit 7 of byte 32
    /// (UGAVALID) is set.
    pub unmap_granularity_alignment: Option<u32>,
}

/// MAXIMUM UNMAP LBA COUNT's "no limit".
pub const UNMAP_UNLIMITED: u32 = 0xFFFF_FFFF;

pub fn block_limits(page: &[u8]) -> Result<BlockLimits, VpdError> {
    payload(page, 0xb0)?;
    // Fields are read from the whole page (header included), so the
    // offsets are the standard's; one past what arrived is absent.
    let declared = usize::from(u16::from_be_bytes([page[2], page[3]]));
    let page = &page[..page.len().min(4 + declared)];
    let alignment = be_u32(page, 32).filter(|v| v & 0x8000_0000 != 0);
    Ok(BlockLimits {
        max_transfer_blocks: be_u32(page, 8),
        max_unmap_lba_count: be_u32(page, 20),
        max_unmap_descriptors: be_u32(page, 24),
        optimal_unmap_granularity: be_u32(page, 28),
        unmap_granularity_alignment: alignment.map(|v| v & 0x7FFF_FFFF),
    })
}

/// PROVISIONING TYPE, byte 6 bits 2-0 of page 0xB2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProvisioningType {
    /// 000b: fully provisioned (SBC-4), or not reported (SBC-3).
    Full,
    /// 001b.
    Resource,
    /// 010b.
    Thin,
    Reserved(u8),
}

/// The Logical Block Provisioning page (0xB2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Provisioning {
    /// Byte 5 bit 7, LBPU: the UNMAP command is supported.
    pub lbpu: bool,
    /// Byte 5 bit 6, LBPWS: WRITE SAME(16) with the UNMAP bit.
    pub lbpws: bool,
    /// Byte 5 bit 5, LBPWS10: WRITE SAME(10) with the UNMAP bit.
    pub lbpws10: bool,
    /// Byte 5 bits 4-2, LBPRZ: what unmapped blocks read back as (SBC-4;
    /// SBC-3 has bit 2 alone).
    pub lbprz: u8,
    /// Byte 6 bits 2-0.
    pub provisioning_type: ProvisioningType,
}

pub fn provisioning(page: &[u8]) -> Result<Provisioning, VpdError> {
    let payload = payload(page, 0xb2)?;
    // Payload byte 1 is page byte 5, payload byte 2 page byte 6.
    let flags = payload.get(1).copied().unwrap_or(0);
    let kind = payload.get(2).copied().unwrap_or(0) & 0x07;
    Ok(Provisioning {
        lbpu: flags & 0x80 != 0,
        lbpws: flags & 0x40 != 0,
        lbpws10: flags & 0x20 != 0,
        lbprz: (flags >> 2) & 0x07,
        provisioning_type: match kind {
            0 => ProvisioningType::Full,
            1 => ProvisioningType::Resource,
            2 => ProvisioningType::Thin,
            other => ProvisioningType::Reserved(other),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Block Limits page QEMU 7.2's scsi-hd answers for a 512-byte
    /// disk (hw/scsi/scsi-disk.c, hw/scsi/emulation.c): max unmap 1 GiB =
    /// 2097152 blocks, 255 descriptors, granularity 4 KiB = 8 blocks.
    fn qemu_block_limits() -> Vec<u8> {
        let mut page = vec![0u8; 64];
        page[1] = 0xb0;
        page[3] = 0x3c;
        page[4] = 0x01; // WSNZ
        page[8..12].copy_from_slice(&0x003f_ffffu32.to_be_bytes());
        page[20..24].copy_from_slice(&2_097_152u32.to_be_bytes());
        page[24..28].copy_from_slice(&255u32.to_be_bytes());
        page[28..32].copy_from_slice(&8u32.to_be_bytes());
        page
    }

    #[test]
    fn supported_pages_are_listed_after_the_header() {
        let page = [0x00, 0x00, 0x00, 0x06, 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];
        assert_eq!(
            supported_pages(&page).unwrap(),
            vec![0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]
        );
        // A page longer than it says is cut where it says.
        let padded = [0x00, 0x00, 0x00, 0x02, 0x00, 0x80, 0xb2, 0x00];
        assert_eq!(supported_pages(&padded).unwrap(), vec![0x00, 0x80]);
    }

    #[test]
    fn block_limits_read_the_unmap_fields_at_sbc_offsets() {
        let limits = block_limits(&qemu_block_limits()).unwrap();
        assert_eq!(
            limits,
            BlockLimits {
                max_transfer_blocks: Some(0x003f_ffff),
                max_unmap_lba_count: Some(2_097_152),
                max_unmap_descriptors: Some(255),
                optimal_unmap_granularity: Some(8),
                unmap_granularity_alignment: None,
            }
        );
        // UGAVALID set: the alignment counts, without its flag bit.
        let mut aligned = qemu_block_limits();
        aligned[32..36].copy_from_slice(&0x8000_0010u32.to_be_bytes());
        assert_eq!(
            block_limits(&aligned).unwrap().unmap_granularity_alignment,
            Some(16)
        );
    }

    #[test]
    fn the_short_block_limits_page_has_no_unmap_fields() {
        // SBC-2's page: length 0x0C, 16 bytes in all.
        let mut page = vec![0u8; 16];
        page[1] = 0xb0;
        page[3] = 0x0c;
        page[8..12].copy_from_slice(&65535u32.to_be_bytes());
        let limits = block_limits(&page).unwrap();
        assert_eq!(limits.max_transfer_blocks, Some(65535));
        assert_eq!(limits.max_unmap_lba_count, None);
        assert_eq!(limits.max_unmap_descriptors, None);
        // A device that sends 64 bytes but declares 12 is read as 12.
        let mut declared_short = qemu_block_limits();
        declared_short[3] = 0x0c;
        assert_eq!(
            block_limits(&declared_short).unwrap().max_unmap_lba_count,
            None
        );
    }

    #[test]
    fn provisioning_flags_and_type() {
        // QEMU 7.2: byte 5 0xe0 (UNMAP, WRITE SAME 16 and 10), thin.
        let qemu = [0x00, 0xb2, 0x00, 0x04, 0x00, 0xe0, 0x02, 0x00];
        assert_eq!(
            provisioning(&qemu).unwrap(),
            Provisioning {
                lbpu: true,
                lbpws: true,
                lbpws10: true,
                lbprz: 0,
                provisioning_type: ProvisioningType::Thin,
            }
        );
        // As sg_vpd -p lbpv printed it for a Pi 4's bridge in
        // muhkuh-sys/raspberry_enable_trim#1: LBPU 1, WRITE SAME 0, LBPRZ 0.
        let bridge = [0x00, 0xb2, 0x00, 0x04, 0x00, 0x80, 0x00, 0x00];
        let read = provisioning(&bridge).unwrap();
        assert!(read.lbpu && !read.lbpws && !read.lbpws10);
        assert_eq!(read.provisioning_type, ProvisioningType::Full);
        // No UNMAP, LBPRZ 001b (unmapped blocks read zero), resource.
        let none = [0x00, 0xb2, 0x00, 0x04, 0x00, 0x04, 0x01, 0x00];
        let read = provisioning(&none).unwrap();
        assert!(!read.lbpu);
        assert_eq!(read.lbprz, 1);
        assert_eq!(read.provisioning_type, ProvisioningType::Resource);
    }

    #[test]
    fn pages_that_are_not_what_was_asked_are_errors() {
        assert_eq!(
            provisioning(&[0x00, 0xb2]),
            Err(VpdError::NoHeader { len: 2 })
        );
        assert_eq!(
            block_limits(&[0x00, 0xb2, 0x00, 0x04, 0, 0, 0, 0]),
            Err(VpdError::WrongPage {
                wanted: 0xb0,
                got: 0xb2
            })
        );
        // Peripheral qualifier 011b: no unit here.
        assert_eq!(
            supported_pages(&[0x7f, 0x00, 0x00, 0x00]),
            Err(VpdError::NoUnit { qualifier: 3 })
        );
        // A provisioning page cut after its header reads as nothing offered.
        let cut = provisioning(&[0x00, 0xb2, 0x00, 0x04]).unwrap();
        assert!(!cut.lbpu);
    }
}
