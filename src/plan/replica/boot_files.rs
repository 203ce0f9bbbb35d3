//! The boot files a full replica copies onto its own boot partition (a
//! full move's new one, a full standby's): how many and how large, and the
//! refusal when that partition cannot hold them, laid out anew or not.

use super::super::source_check::CheckedSource;
use super::super::{BootCopy, Reason};
use crate::system::System;
use crate::units::binary;

/// The running system's boot files, when they fit a boot partition of
/// `partition_bytes` (partition `number` of the copy's disk).
pub(crate) fn boot_files(
    system: &System,
    source: &CheckedSource,
    number: u32,
    partition_bytes: u64,
) -> Result<BootCopy, Reason> {
    let boot_dir = system.host.path(source.boot_dir);
    let (mut bytes, mut files) = (0u64, 0u64);
    for entry in walkdir::WalkDir::new(&boot_dir).into_iter() {
        let entry = entry.map_err(|err| {
            Reason::new(
                "source-unreadable",
                format!(
                    "could not read the boot files in {}: {err}",
                    source.boot_dir.display()
                ),
            )
        })?;
        if entry.file_type().is_file() {
            files += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    // FAT32 keeps two FATs and rounds files up to clusters: ask for 10 % room.
    if bytes + bytes / 10 > partition_bytes {
        return Err(Reason::new(
            "boot-too-small",
            format!(
                "the boot files take {}, more than the {} boot partition holds",
                binary(bytes),
                binary(partition_bytes)
            ),
        )
        .hint("give the copy a larger boot partition (migrate: --boot-size)"));
    }
    Ok(BootCopy {
        from: source.boot_dir.to_path_buf(),
        to_partition: number,
        bytes,
        files,
    })
}
