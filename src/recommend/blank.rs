//! Blank drives: new disks with nothing on them, whose writes may be
//! measured on the raw device because there is nothing to destroy.
//!
//! A new USB SSD comes without a partition table or a filesystem. Without
//! a filesystem there is nowhere for a test file, so recommend alone would
//! measure only its reads, and the drive the person bought for this could
//! never be recommended. When the person (or `--yes --target` naming that
//! very disk in the wizard) allows it, `recommend` and the wizard measure
//! such a drive's writes on the raw device; this module decides which
//! drives qualify, and asks the one question both of them ask.

use crate::system::disks::{Disk, Role, Transport};
use crate::ui::Ui;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What pimigrate's own probe shows: no partition table, no filesystem,
/// no partitions, nothing mounted, no swap, nothing stacked on it, not
/// read-only, and not a disk the system runs or boots from.
pub fn looks_blank(disk: &Disk) -> bool {
    !matches!(disk.role, Role::SourceRoot | Role::SourceBoot)
        && !disk.read_only
        && disk.table.is_none()
        && disk.filesystem.is_none()
        && disk.partitions.is_empty()
        && disk.uses().is_empty()
}

/// What `blkid -p` found on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signatures {
    /// Exit 2: no filesystem, RAID, LVM, LUKS or partition-table signature.
    None,
    /// Exit 0: something is there.
    Found,
    /// No blkid on this system: only our own probe was asked.
    NotChecked,
}

/// Asks blkid's low-level probe, which knows signatures ours does not read
/// (LVM, LUKS, md RAID, ZFS...): a disk that looks empty to us may still
/// hold someone's data.
pub fn blkid_signatures(device: &Path) -> Result<Signatures> {
    let Some(blkid) = crate::tools::which("blkid") else {
        return Ok(Signatures::NotChecked);
    };
    let output = std::process::Command::new(&blkid)
        .arg("-p")
        .arg(device)
        .output()
        .with_context(|| format!("running blkid -p {}", device.display()))?;
    signatures_from_exit(output.status.code()).with_context(|| {
        format!(
            "blkid -p {} failed ({}); the drive is treated as not blank, so nothing is written to it",
            device.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}

/// blkid's exit codes: 0 found, 2 nothing found; anything else (4 usage,
/// 8 ambivalent probe, a signal) is an error.
fn signatures_from_exit(code: Option<i32>) -> Result<Signatures> {
    match code {
        Some(0) => Ok(Signatures::Found),
        Some(2) => Ok(Signatures::None),
        Some(code) => anyhow::bail!("exit status {code}"),
        None => anyhow::bail!("killed by a signal"),
    }
}

/// A blank drive: [`looks_blank`], and blkid (when there is one) finds no
/// signature either. `check_signatures` is false for an inspected tree
/// (`--sysroot`), whose device nodes are not this machine's. A blkid that
/// fails counts as "not blank": when in doubt, nothing is written.
pub fn is_blank(disk: &Disk, check_signatures: bool) -> bool {
    if !looks_blank(disk) {
        return false;
    }
    if !check_signatures {
        return true;
    }
    // A device this process cannot read (a normal user) shows no table
    // to our probe whatever it holds, and blkid cannot look either.
    if std::fs::File::open(&disk.path).is_err() {
        return false;
    }
    matches!(
        blkid_signatures(&disk.path),
        Ok(Signatures::None | Signatures::NotChecked)
    )
}

/// The blank candidates among `disks`: what the question is about. With
/// `include_virtual` (recommend --all, for tests) loop devices count too.
/// blkid is asked only on the running system (`live`): an inspected tree's
/// device nodes are not this machine's.
pub fn blank_candidates<'a>(
    disks: impl IntoIterator<Item = &'a Disk>,
    include_virtual: bool,
    live: bool,
) -> Vec<&'a Disk> {
    disks
        .into_iter()
        .filter(|d| (include_virtual || d.transport != Transport::Virtual) && d.size_bytes > 0)
        .filter(|d| d.role == Role::Candidate && is_blank(d, live))
        .collect()
}

/// The one question about blank drives, as `recommend` and the wizard ask
/// it: an explanation, then yes or no, unless `flag` (`--bench-blank`,
/// `--no-bench-blank`) answered it already. The drives that may be written.
pub fn consent(ui: &dyn Ui, blank: &[&Disk], flag: Option<bool>) -> Result<Vec<PathBuf>> {
    if blank.is_empty() || flag == Some(false) {
        return Ok(Vec::new());
    }
    let names = names(blank);
    ui.say(&format!(
        "Blank drive(s): {}: no partition table, no filesystem, nothing on them. A test file \
         needs a filesystem, so their writes (what makes a Pi feel slow) can only be measured \
         by writing test data onto the drive itself; measured by reads alone, a drive cannot \
         be recommended.",
        describe(blank)
    ));
    let measure = if flag == Some(true) {
        ui.say(&format!(
            "Measuring the writes of {names} (from --bench-blank)."
        ));
        true
    } else {
        ui.confirm(
            &format!(
                "Measure the writes of the blank drive(s) {names} too? Test data is written over \
                 them; they hold no partition or filesystem"
            ),
            true,
        )?
    };
    Ok(if measure {
        blank.iter().map(|d| d.path.clone()).collect()
    } else {
        Vec::new()
    })
}

/// What became of the blank drives: measured with writes, or only read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlankDecision {
    pub allowed: Vec<PathBuf>,
    /// Blank, but nobody said yes: read tests only, and the output says
    /// how to measure the writes.
    pub declined: Vec<PathBuf>,
}

/// `recommend`'s way with blank drives: the flag answers the question;
/// without one, `asker` (a person at a terminal, as root: nobody else can
/// answer, or write) is asked; otherwise nothing is written.
pub fn decide(
    blank: &[&Disk],
    flag: Option<bool>,
    asker: Option<&dyn Ui>,
) -> Result<BlankDecision> {
    let allowed = match asker {
        Some(ui) => consent(ui, blank, flag)?,
        None => Vec::new(),
    };
    Ok(BlankDecision::of(blank, allowed))
}

impl BlankDecision {
    /// `allowed` of the `blank` drives; the rest are declined.
    pub fn of(blank: &[&Disk], allowed: Vec<PathBuf>) -> BlankDecision {
        let declined = blank
            .iter()
            .map(|d| d.path.clone())
            .filter(|p| !allowed.contains(p))
            .collect();
        BlankDecision { allowed, declined }
    }
}

/// "/dev/sda, /dev/sdb".
pub fn names(disks: &[&Disk]) -> String {
    let paths: Vec<String> = disks.iter().map(|d| d.path.display().to_string()).collect();
    paths.join(", ")
}

fn describe(disks: &[&Disk]) -> String {
    let each: Vec<String> = disks
        .iter()
        .map(|d| {
            let name = crate::units::join_present([d.vendor.as_deref(), d.model.as_deref()]);
            let name = if name.is_empty() {
                "(no name)".into()
            } else {
                name
            };
            format!("{} ({name}, {})", d.path.display(), d.size_human)
        })
        .collect();
    each.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn disks(machine: &str) -> Vec<Disk> {
        crate::system::inspect_fixture(machine).1.disks
    }

    fn disk<'a>(disks: &'a [Disk], name: &str) -> &'a Disk {
        disks.iter().find(|d| d.name == name).expect("no such disk")
    }

    #[test]
    fn a_disk_without_table_or_filesystem_looks_blank() {
        let disks = disks("pizero");
        assert!(looks_blank(disk(&disks, "sda")));
        assert!(
            !looks_blank(disk(&disks, "mmcblk0")),
            "the SD card is never blank"
        );
    }

    #[test]
    fn anything_on_a_disk_makes_it_not_blank() {
        let pi4 = disks("pi4");
        // A partition table with a partition on it.
        assert!(!looks_blank(disk(&pi4, "sda")));
        let mut blank = disk(&disks("pizero"), "sda").clone();
        assert!(looks_blank(&blank));
        let spoilers: [fn(&mut Disk); 5] = [
            |d| d.read_only = true,
            |d| d.swap = true,
            |d| d.holders.push("dm-0".into()),
            |d| d.mountpoints.push(PathBuf::from("/mnt")),
            |d| d.role = Role::SourceBoot,
        ];
        for (n, spoil) in spoilers.iter().enumerate() {
            let mut d = blank.clone();
            spoil(&mut d);
            assert!(!looks_blank(&d), "spoiler {n} still looks blank");
        }
        blank.disk_id = Some("0x1234".into());
        blank.table = Some(crate::system::probe::TableKind::Mbr);
        assert!(!looks_blank(&blank), "a table without partitions");
    }

    #[test]
    fn only_blkid_saying_nothing_found_counts_as_no_signature() {
        assert_eq!(signatures_from_exit(Some(2)).unwrap(), Signatures::None);
        assert_eq!(signatures_from_exit(Some(0)).unwrap(), Signatures::Found);
        assert!(signatures_from_exit(Some(4)).is_err());
        assert!(signatures_from_exit(Some(8)).is_err());
        assert!(signatures_from_exit(None).is_err());
    }
}
