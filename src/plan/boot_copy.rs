//! A full move's copy of the boot files: what it copies, and the refusal
//! when the new boot partition cannot hold them.

use super::geometry::Geometry;
use super::source_check::CheckedSource;
use super::{BootCopy, PartitionRole, Reason};
use crate::system::System;
use crate::units::binary;

pub(super) fn boot_copy(
    system: &System,
    source: &CheckedSource,
    geometry: &Geometry,
    ss: u64,
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
    let boot = geometry
        .extents
        .iter()
        .find(|e| e.role == PartitionRole::Boot);
    let partition_bytes = boot.map(|e| e.sectors() * ss).unwrap_or(0);
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
        .hint("give a larger --boot-size"));
    }
    Ok(BootCopy {
        from: source.boot_dir.to_path_buf(),
        to_partition: 1,
        bytes,
        files,
    })
}
