//! The filesystem checks a power cut is judged by, run from the host on a
//! powered-off machine's images: `fsck.fat -n` on a FAT partition and
//! `e2fsck -fn` on an ext4 one, neither repairing anything.

use crate::host::attach::Loop;
use crate::host::cmd;
use crate::host::mbr::Partition;
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

/// What a check found.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Nothing to repair.
    pub clean: bool,
    /// The checker's whole output, for the scenario's log.
    pub output: String,
}

/// The lines of `fsck.fat -n` that are no damage: the checker's banner
/// and the dirty bit, which the kernel sets on every read-write mount and
/// clears at unmount, so every power cut of a running Pi leaves it, also
/// as the one byte (offset 65, 0x41) in which the boot sector then differs
/// from its backup.
fn harmless_fat_line(line: &str) -> bool {
    let line = line.trim();
    line.is_empty()
        || line == "There are differences between boot sector and its backup."
        || line.starts_with("This is mostly harmless. Differences: (offset:original/backup)")
        || line == "65:01/00"
        || line == "Not automatically fixing this."
        || line.starts_with("fsck.fat ")
        || line.starts_with("/dev/loop")
        || line.contains("Dirty bit is set")
        || line.contains("Automatically removing dirty bit")
        || line.contains("Leaving filesystem unchanged")
        || line == "1) Remove dirty bit"
        || line == "2) No action"
        || line.starts_with("files, ")
        || (line.contains(" files, ") && line.contains(" clusters"))
}

/// A checker's stdout and stderr, as one text.
fn text_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `fsck.fat -n` of partition `part` of `image`: clean when it reports
/// nothing but the dirty bit.
pub fn fat(image: &Path, part: &Partition) -> Result<Finding> {
    let device = Loop::attach(image, Some(part), true)?;
    let out = Command::new("fsck.fat")
        .args(["-n", &device.device])
        .output()
        .context("cannot run fsck.fat: install dosfstools (testbed/run.sh does)")?;
    let output = text_of(&out);
    let clean = output.lines().all(harmless_fat_line);
    Ok(Finding { clean, output })
}

/// `e2fsck -fn` of partition `part` of `image`, after replaying its
/// journal (`e2fsck -E journal_only`): a filesystem cut off while mounted
/// has a journal to replay, which is what the kernel does at the next
/// mount, and until then `-n` would count the unreplayed blocks as damage.
pub fn ext4(image: &Path, part: &Partition) -> Result<Finding> {
    let device = Loop::attach(image, Some(part), false)?;
    let mut replay = Command::new("e2fsck");
    replay.args(["-E", "journal_only", "-p", &device.device]);
    let out = replay
        .output()
        .context("cannot run e2fsck: install e2fsprogs (testbed/run.sh does)")?;
    // 1: the journal was replayed, which is what it is for.
    anyhow::ensure!(
        matches!(out.status.code(), Some(0 | 1)),
        "`{}` failed ({}): {}",
        cmd::describe(&replay),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let out = Command::new("e2fsck")
        .args(["-fn", &device.device])
        .output()
        .context("cannot run e2fsck: install e2fsprogs (testbed/run.sh does)")?;
    let output = text_of(&out);
    Ok(Finding {
        clean: out.status.success(),
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dirty_bit_alone_is_no_damage() {
        let mounted = "fsck.fat 4.2 (2021-01-31)\n\
            There are differences between boot sector and its backup.\n\
            This is mostly harmless. Differences: (offset:original/backup)\n\
              65:01/00\n\
              Not automatically fixing this.\n";
        assert!(mounted.lines().all(harmless_fat_line));
        let other_byte = mounted.replace("65:01/00", "3:4d/00");
        assert!(!other_byte.lines().all(harmless_fat_line));
        let free_count =
            "Free cluster summary wrong (126921 vs. really 126919)\n  Auto-correcting.\n";
        assert!(!free_count.lines().all(harmless_fat_line));
        let only_dirty = "fsck.fat 4.2 (2021-01-31)\n\
            0x41: Dirty bit is set. Fs was not properly unmounted and some data may be corrupt.\n\
             Automatically removing dirty bit.\n\
            Leaving filesystem unchanged.\n\
            /dev/loop3: 310 files, 25633/130812 clusters\n";
        assert!(only_dirty.lines().all(harmless_fat_line));
        let lost =
            "fsck.fat 4.2 (2021-01-31)\nReclaimed 1 unused cluster (2048 bytes) in 1 chain.\n";
        assert!(!lost.lines().all(harmless_fat_line));
    }
}
