//! Looking into a powered-off machine's disk images from the host, without
//! partition devices: debugfs opens an ext4 partition at its byte offset
//! (`image?offset=N`), mtools reads FAT (see [`crate::host::fat`]), and sfdisk
//! reads the table.

use crate::host::cmd;
use crate::host::mbr::partition_of;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// The text of `path` on the ext4 filesystem in partition `number`.
pub fn ext4_read(image: &Path, number: u32, path: &str) -> Result<String> {
    let part = partition_of(image, number)?;
    let target = format!("{}?offset={}", image.display(), part.offset());
    let out = cmd::run(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("cat {path}"))
            .arg(&target),
    )
    .with_context(|| {
        format!(
            "cannot read {path} from partition {number} of {}",
            image.display()
        )
    })?;
    let err = String::from_utf8_lossy(&out.stderr);
    // debugfs exits 0 even when the file is missing; it says so on stderr.
    if err.contains("File not found") {
        bail!(
            "{path} does not exist on partition {number} of {}",
            image.display()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sfdisk --dump` of the image: the partition table as a person reads it.
pub fn partition_table(image: &Path) -> Result<String> {
    cmd::stdout(Command::new("sfdisk").arg("--dump").arg(image))
}

/// The filesystem UUID and label of the ext4 in partition `number`.
pub fn ext4_ids(image: &Path, number: u32) -> Result<(String, String)> {
    let part = partition_of(image, number)?;
    let target = format!("{}?offset={}", image.display(), part.offset());
    let out = cmd::stdout(Command::new("dumpe2fs").arg("-h").arg(&target))?;
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_default()
    };
    Ok((field("Filesystem UUID:"), field("Filesystem volume name:")))
}

/// The byte offsets, in the image, of every copy of the superblock of the
/// ext4 in partition `number`: the primary 1024 bytes into the partition,
/// and the backups dumpe2fs lists (at the start of their blocks), which
/// e2fsck falls back on.
pub fn ext4_superblocks(image: &Path, number: u32) -> Result<Vec<u64>> {
    let part = partition_of(image, number)?;
    let target = format!("{}?offset={}", image.display(), part.offset());
    let out = cmd::stdout(Command::new("dumpe2fs").arg(&target)).with_context(|| {
        format!(
            "listing the superblocks of partition {number} of {}",
            image.display()
        )
    })?;
    let block_size: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .and_then(|v| v.trim().parse().ok())
        .context("dumpe2fs printed no block size")?;
    let mut offsets = vec![part.offset() + 1024];
    for line in out.lines() {
        if let Some(rest) = line.trim().strip_prefix("Backup superblock at ") {
            let block: u64 = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("dumpe2fs: {line}"))?;
            offsets.push(part.offset() + block * block_size);
        }
    }
    Ok(offsets)
}
