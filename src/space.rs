//! Will the source fit? A conservative estimate of what a fresh ext4 keeps
//! for itself, so a plan never promises room the filesystem will not give.
//! Shared arithmetic, not a plan decision: `system/` marks disks too small
//! with it, `plan/` checks the planned root partition.

use crate::units::MIB;
use serde::{Deserialize, Serialize};

/// Extra room on top of what the source uses: packages grow, logs rotate,
/// and a root filesystem filled to the brim fails its first apt upgrade.
pub const GROWTH_PERCENT: u64 = 10;
/// A fixed floor for that margin, for very small systems.
pub const MIN_MARGIN: u64 = 64 * MIB;

/// What mkfs.ext4 takes for itself: inode tables (256 bytes per 16 KiB,
/// 1.6 %), bitmaps and descriptors (well under 1 %), and the journal (up to
/// 1 GiB on large filesystems; bounded here by 1/32 of the size).
pub fn ext4_overhead_bytes(partition_bytes: u64) -> u64 {
    partition_bytes / 50 + (partition_bytes / 32).min(1024 * MIB)
}

pub fn ext4_usable_bytes(partition_bytes: u64) -> u64 {
    partition_bytes.saturating_sub(ext4_overhead_bytes(partition_bytes))
}

/// Bytes the new root filesystem must have free for the copy.
pub fn required_bytes(used_bytes: u64) -> u64 {
    used_bytes + (used_bytes * GROWTH_PERCENT / 100).max(MIN_MARGIN)
}

/// The smallest root partition that passes [`SpaceCheck`] for a source of
/// `used_bytes` (plus the 4 MiB the layout leaves before it).
pub fn minimum_root_partition_bytes(used_bytes: u64) -> u64 {
    let required = required_bytes(used_bytes);
    // usable = size - size/50 - size/32 (when below the journal cap), so
    // size = required * 1.0540...; round up generously.
    let mut size = required + required / 18 + 4 * MIB;
    while ext4_usable_bytes(size) < required {
        size += 4 * MIB;
    }
    size + 4 * MIB
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpaceCheck {
    pub used_bytes: u64,
    pub required_bytes: u64,
    pub root_partition_bytes: u64,
    pub usable_bytes: u64,
    pub fits: bool,
}

impl SpaceCheck {
    pub fn new(used_bytes: u64, root_partition_bytes: u64) -> SpaceCheck {
        let required = required_bytes(used_bytes);
        let usable = ext4_usable_bytes(root_partition_bytes);
        SpaceCheck {
            used_bytes,
            required_bytes: required,
            root_partition_bytes,
            usable_bytes: usable,
            fits: usable >= required,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::GIB;

    #[test]
    fn a_typical_system_fits_an_ssd_but_not_a_tiny_stick() {
        let used = 5 * GIB;
        assert!(SpaceCheck::new(used, 100 * GIB).fits);
        assert!(!SpaceCheck::new(used, 5 * GIB).fits);
    }

    #[test]
    fn the_minimum_partition_is_just_enough() {
        for used in [0, 100 * MIB, 3 * GIB, 40 * GIB] {
            let minimum = minimum_root_partition_bytes(used);
            assert!(SpaceCheck::new(used, minimum - 4 * MIB).fits, "{used}");
            assert!(!SpaceCheck::new(used, minimum / 2).fits, "{used}");
        }
    }
}
