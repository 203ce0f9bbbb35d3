//! Whether anything but pimigrate mounted the standby since its last
//! complete sync: the ext4 superblock counts mounts (`s_mnt_count`) and
//! keeps the time of its last write (`s_wtime`). Both are read after each
//! sync unmounts the standby; if they differ at the next one, the standby
//! was booted or mounted elsewhere and may have changed, so that sync
//! compares every entry instead of trusting the source's ctimes.

use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The superblock's counters, as a sync left them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub mount_count: u16,
    pub write_time: u32,
}

const SUPERBLOCK_OFFSET: u64 = 1024;
const EXT_MAGIC: u16 = 0xef53;

/// The stamp of the ext2/3/4 filesystem at byte `offset` of `device` (0
/// for a partition's own device node); `None` when it is not one.
pub fn read(device: &Path, offset: u64) -> std::io::Result<Option<Stamp>> {
    Ok(read_block(device, offset)?.as_ref().and_then(parse))
}

/// When the filesystem was last mounted (`s_mtime`, Unix seconds, by the
/// clock of the machine that mounted it).
pub fn last_mounted(device: &Path, offset: u64) -> std::io::Result<Option<u32>> {
    Ok(read_block(device, offset)?
        .filter(|block| parse(block).is_some())
        .map(|block| u32::from_le_bytes([block[0x2c], block[0x2d], block[0x2e], block[0x2f]])))
}

fn read_block(device: &Path, offset: u64) -> std::io::Result<Option<[u8; 0x40]>> {
    let mut file = std::fs::File::open(device)?;
    file.seek(SeekFrom::Start(offset + SUPERBLOCK_OFFSET))?;
    let mut block = [0u8; 0x40];
    file.read_exact(&mut block)?;
    Ok(Some(block))
}

impl Stamp {
    /// Read-write mounts since `earlier` (a filesystem checked by e2fsck,
    /// which resets the count, shows as many).
    pub fn mounts_since(&self, earlier: &Stamp) -> u16 {
        self.mount_count.wrapping_sub(earlier.mount_count)
    }
}

/// The stamp from the superblock's first 64 bytes.
pub fn parse(block: &[u8; 0x40]) -> Option<Stamp> {
    let u16_at = |at: usize| u16::from_le_bytes([block[at], block[at + 1]]);
    if u16_at(0x38) != EXT_MAGIC {
        return None;
    }
    Some(Stamp {
        write_time: u32::from_le_bytes([block[0x30], block[0x31], block[0x32], block[0x33]]),
        mount_count: u16_at(0x34),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_counters_of_an_ext_superblock_and_nothing_else() {
        let mut block = [0u8; 0x40];
        assert_eq!(parse(&block), None);
        block[0x38..0x3a].copy_from_slice(&EXT_MAGIC.to_le_bytes());
        block[0x30..0x34].copy_from_slice(&1_700_000_000u32.to_le_bytes());
        block[0x34..0x36].copy_from_slice(&7u16.to_le_bytes());
        assert_eq!(
            parse(&block),
            Some(Stamp {
                mount_count: 7,
                write_time: 1_700_000_000
            })
        );
    }
}
