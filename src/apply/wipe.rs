//! Clears what would make the kernel, udev or blkid see something that is no
//! longer there: old partition tables (both GPT copies) and old filesystem
//! signatures at the starts of the new partitions (mkfs.vfat, for one, leaves
//! an old ext4 superblock at byte 1024 in place, and blkid then reports both).

use anyhow::{Context, Result};
use std::os::unix::fs::FileExt;

/// How much to zero at each place: covers MBR/GPT headers and arrays, and
/// the superblocks of ext4 (1 KiB in), FAT, swap (last bytes of the first
/// page, up to 64 KiB pages) and others.
pub const WIPE_BYTES: u64 = 1 << 20;

/// Zeroes the start and the end of the disk, and the start of each new
/// partition (byte offsets). Returns the ranges zeroed.
pub fn wipe_signatures(
    disk: &std::fs::File,
    disk_bytes: u64,
    partition_starts: &[u64],
) -> Result<Vec<(u64, u64)>> {
    let mut ranges = vec![(0, WIPE_BYTES.min(disk_bytes))];
    if disk_bytes > WIPE_BYTES {
        ranges.push((disk_bytes - WIPE_BYTES, disk_bytes));
    }
    for &start in partition_starts {
        ranges.push((start, (start + WIPE_BYTES).min(disk_bytes)));
    }
    let zeros = vec![0u8; WIPE_BYTES as usize];
    for &(from, to) in &ranges {
        let len = usize::try_from(to - from).context("wipe range")?;
        disk.write_all_at(&zeros[..len], from)
            .with_context(|| format!("zeroing bytes {from}..{to} of the target"))?;
    }
    disk.sync_data().context("flushing the zeroed signatures")?;
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroes_tables_and_old_superblocks_but_nothing_else() {
        let file = tempfile::tempfile().unwrap();
        let size = 64u64 << 20;
        file.set_len(size).unwrap();
        let marks = [
            0u64,
            1024,
            20 << 20,
            (20 << 20) + 1024,
            (30 << 20),
            size - 512,
        ];
        for &at in &marks {
            file.write_all_at(b"OLD!", at).unwrap();
        }
        wipe_signatures(&file, size, &[20 << 20]).unwrap();
        let read = |at: u64| {
            let mut buf = [0u8; 4];
            file.read_exact_at(&mut buf, at).unwrap();
            buf
        };
        for at in [0, 1024, 20 << 20, (20 << 20) + 1024, size - 512] {
            assert_eq!(read(at), [0; 4], "at {at}");
        }
        assert_eq!(
            &read(30 << 20),
            b"OLD!",
            "data outside the wiped ranges stays"
        );
    }
}
