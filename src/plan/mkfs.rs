//! The mkfs commands of a plan, fitted to the system that will mount the
//! result.

use super::ids::{fresh_label, vfat_uuid_text, KnownIds, NewIds};
use super::{MkfsStep, PartitionRole, TablePlan};
use crate::host::Host;
use crate::system::System;
use std::path::Path;

/// The argument of a planned mkfs command that stands for the partition's
/// device node (its name is known only once the kernel has read the table).
pub const PARTITION_ARG: &str = "{partition}";

impl MkfsStep {
    /// The command with `node` as the partition: the device node when it
    /// runs, a description of it when a person reads the plan.
    pub fn command_for(&self, node: &str) -> Vec<String> {
        self.command
            .iter()
            .map(|arg| {
                if arg == PARTITION_ARG {
                    node.to_string()
                } else {
                    arg.clone()
                }
            })
            .collect()
    }
}

/// `mke2fs 1.47.0 (5-Feb-2023)` → (1, 47).
pub fn parse_e2fsprogs_version(text: &str) -> Option<(u32, u32)> {
    let version = text
        .split_whitespace()
        .find(|word| word.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = version.split(['.', '-', '~', '+']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The version of the mkfs.ext4 that will run here.
pub fn host_mke2fs_version() -> Option<(u32, u32)> {
    let program = crate::tools::which("mkfs.ext4")?;
    let output = std::process::Command::new(program)
        .arg("-V")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    text.lines().find_map(parse_e2fsprogs_version)
}

/// The e2fsprogs the source system has installed, from dpkg's database:
/// its e2fsck is the one that will check the new root at boot.
pub fn source_e2fsprogs_version(host: &Host, source_root: &Path) -> Option<(u32, u32)> {
    let status =
        std::fs::read_to_string(host.path(source_root.join("var/lib/dpkg/status"))).ok()?;
    let stanza = status
        .split("\n\n")
        .find(|stanza| stanza.lines().any(|l| l == "Package: e2fsprogs"))?;
    let version = stanza.lines().find_map(|l| l.strip_prefix("Version: "))?;
    parse_e2fsprogs_version(&format!("e2fsprogs {version}"))
}

/// e2fsprogs 1.47 turns on `orphan_file`, which e2fsck before 1.47 refuses
/// to check: leave it off unless the source's e2fsck is known to be new.
pub fn needs_orphan_file_off(mkfs: Option<(u32, u32)>, source: Option<(u32, u32)>) -> bool {
    let new = |v: (u32, u32)| v >= (1, 47);
    mkfs.is_some_and(new) && !source.is_some_and(new)
}

/// One mkfs command a partition, with fresh labels and the planned ids,
/// fitted to the e2fsprogs of the system that will check the result.
pub fn mkfs_steps(
    system: &System,
    table: &TablePlan,
    ids: &NewIds,
    known: &KnownIds,
) -> Vec<MkfsStep> {
    let orphan_off = needs_orphan_file_off(
        host_mke2fs_version(),
        source_e2fsprogs_version(&system.host, &system.host.source_root),
    );
    table
        .partitions
        .iter()
        .map(|part| match part.role {
            PartitionRole::Root => {
                let label = fresh_label("rootfs", known);
                let mut command: Vec<String> =
                    ["mkfs.ext4", "-F", "-L", &label, "-U", &ids.root_fs_uuid]
                        .map(str::to_string)
                        .to_vec();
                if orphan_off {
                    command.extend(["-O".to_string(), "^orphan_file".to_string()]);
                }
                command.push(PARTITION_ARG.to_string());
                MkfsStep {
                    partition: part.number,
                    fstype: "ext4".into(),
                    label,
                    uuid: ids.root_fs_uuid.clone(),
                    command,
                }
            }
            PartitionRole::Boot => {
                let serial = ids.boot_fs_serial.unwrap_or_default();
                let label = fresh_label("BOOTFS", known);
                MkfsStep {
                    partition: part.number,
                    fstype: "vfat".into(),
                    command: [
                        "mkfs.vfat",
                        "-F",
                        "32",
                        "-n",
                        &label,
                        "-i",
                        &format!("{serial:08X}"),
                        PARTITION_ARG,
                    ]
                    .map(str::to_string)
                    .to_vec(),
                    label,
                    uuid: vfat_uuid_text(serial),
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(
            parse_e2fsprogs_version("mke2fs 1.47.0 (5-Feb-2023)"),
            Some((1, 47))
        );
        assert_eq!(parse_e2fsprogs_version("e2fsprogs 1.46.2-2"), Some((1, 46)));
        assert_eq!(
            parse_e2fsprogs_version("Using EXT2FS Library version 1.47.0"),
            Some((1, 47))
        );
        assert_eq!(parse_e2fsprogs_version("nothing here"), None);
    }

    #[test]
    fn orphan_file_is_left_off_for_older_or_unknown_systems() {
        assert!(needs_orphan_file_off(Some((1, 47)), Some((1, 46))));
        assert!(needs_orphan_file_off(Some((1, 47)), None));
        assert!(!needs_orphan_file_off(Some((1, 47)), Some((1, 47))));
        assert!(!needs_orphan_file_off(Some((1, 46)), Some((1, 46))));
    }
}
