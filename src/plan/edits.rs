//! The boot-file changes of a migration, as operations that can be applied
//! again at apply time, and as diffs to show now.

use super::{EditOperation, EditSite, FileEdit};
use crate::bootcfg::cmdline::CmdlineError;
use crate::bootcfg::fstab::FstabError;
use crate::bootcfg::{unified_diff, Cmdline, DeviceSpec, Fstab};
use std::path::{Path, PathBuf};

/// How the target's root (or boot) partition is named in a boot file that
/// named the source's as `old`. UUID stays UUID (the new filesystem's);
/// everything else becomes PARTUUID: labels would collide with the SD card
/// that stays attached, and `/dev/sdX` names change from boot to boot.
pub fn new_spec(old: &DeviceSpec, partuuid: &str, fs_uuid: &str) -> DeviceSpec {
    match old {
        DeviceSpec::Uuid(_) => DeviceSpec::Uuid(fs_uuid.to_string()),
        _ => DeviceSpec::PartUuid(partuuid.to_string()),
    }
}

/// Why an edit cannot be made to a boot file.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{0}")]
    Fstab(#[from] FstabError),
    #[error("{0}")]
    Cmdline(#[from] CmdlineError),
    /// An operation meant for another kind of file.
    #[error("{op:?} cannot be applied to {file}")]
    Misplaced {
        op: EditOperation,
        file: &'static str,
    },
}

/// Applies operations to a boot file's bytes, keeping every other byte.
pub fn apply(bytes: &[u8], operations: &[EditOperation]) -> Result<Vec<u8>, EditError> {
    let misplaced = |op: &EditOperation, file| EditError::Misplaced {
        op: op.clone(),
        file,
    };
    let is_fstab = operations
        .iter()
        .any(|op| matches!(op, EditOperation::FstabSetSpec { .. }));
    if is_fstab {
        let mut fstab = Fstab::parse(bytes)?;
        for op in operations {
            match op {
                EditOperation::FstabSetSpec { mountpoint, spec } => {
                    fstab.set_spec(mountpoint, spec)?
                }
                other => return Err(misplaced(other, "an fstab")),
            }
        }
        return Ok(fstab.to_bytes());
    }
    let mut cmdline = Cmdline::parse(bytes)?;
    for op in operations {
        match op {
            EditOperation::CmdlineSetRoot { spec } => cmdline.set_root(spec)?,
            EditOperation::CmdlineAdd { arg } => {
                cmdline.try_add(arg)?;
            }
            other => return Err(misplaced(other, "cmdline.txt")),
        }
    }
    Ok(cmdline.to_bytes())
}

/// Builds one edit and its diff against the file as it is now.
pub struct EditTarget<'a> {
    pub site: EditSite,
    pub file: &'a Path,
    pub output: &'a Path,
    pub backup: Option<PathBuf>,
    pub device: String,
}

pub fn file_edit(
    target: EditTarget,
    current: &[u8],
    operations: Vec<EditOperation>,
) -> Result<FileEdit, EditError> {
    let edited = apply(current, &operations)?;
    Ok(FileEdit {
        site: target.site,
        diff: diff_files(target.file, target.output, current, &edited),
        file: target.file.to_path_buf(),
        output: target.output.to_path_buf(),
        backup: target.backup,
        device: target.device,
        operations,
    })
}

/// A git-style diff from `old` at `from` to `new` at `to`.
pub fn diff_files(from: &Path, to: &Path, old: &[u8], new: &[u8]) -> String {
    let label = |p: &Path| p.display().to_string().trim_start_matches('/').to_string();
    unified_diff(
        &format!("a/{}", label(from)),
        &format!("b/{}", label(to)),
        old,
        new,
    )
}

/// The one backup-naming rule, for every file on a boot partition:
/// `cmdline.txt.pimigrate-backup`, or `.2`, `.3`... when an earlier run's
/// backup is there (`taken`): the oldest backup is the one that booted,
/// and it is never overwritten.
pub fn backup_name(file: &Path, taken: impl Fn(&Path) -> bool) -> PathBuf {
    let with_suffix = |suffix: &str| {
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        file.with_file_name(name)
    };
    let first = with_suffix(".pimigrate-backup");
    std::iter::once(first.clone())
        .chain((2..1000).map(|n| with_suffix(&format!(".pimigrate-backup.{n}"))))
        .find(|candidate| !taken(candidate))
        .unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_stays_uuid_and_everything_else_becomes_partuuid() {
        let partuuid = "1a2b3c4d-02";
        let uuid = "0b4c8c5e-5a0f-4d8d-9c1e-3f4b6c7d8e9f";
        let cases = [
            (DeviceSpec::Uuid("x".into()), DeviceSpec::Uuid(uuid.into())),
            (
                DeviceSpec::PartUuid("x".into()),
                DeviceSpec::PartUuid(partuuid.into()),
            ),
            (
                DeviceSpec::Label("writable".into()),
                DeviceSpec::PartUuid(partuuid.into()),
            ),
            (
                DeviceSpec::Path("/dev/mmcblk0p2".into()),
                DeviceSpec::PartUuid(partuuid.into()),
            ),
        ];
        for (old, expected) in cases {
            assert_eq!(new_spec(&old, partuuid, uuid), expected);
        }
    }

    #[test]
    fn cmdline_edit_changes_root_and_adds_rootwait_only() {
        let current =
            b"console=serial0,115200 console=tty1 root=/dev/mmcblk0p2 rootfstype=ext4 quiet\n";
        let ops = vec![
            EditOperation::CmdlineSetRoot {
                spec: DeviceSpec::PartUuid("1a2b3c4d-01".into()),
            },
            EditOperation::CmdlineAdd {
                arg: "rootwait".into(),
            },
        ];
        let edited = apply(current, &ops).unwrap();
        assert_eq!(
            String::from_utf8(edited).unwrap(),
            "console=serial0,115200 console=tty1 root=PARTUUID=1a2b3c4d-01 rootfstype=ext4 quiet rootwait\n"
        );
        let target = EditTarget {
            site: EditSite::SourceBoot,
            file: Path::new("/cmdline.txt"),
            output: Path::new("/cmdline.txt"),
            backup: Some("/x.bak".into()),
            device: "SD".into(),
        };
        let edit = file_edit(target, current, ops).unwrap();
        assert!(edit
            .diff
            .contains("-console=serial0,115200 console=tty1 root=/dev/mmcblk0p2"));
        assert!(edit
            .diff
            .contains("+console=serial0,115200 console=tty1 root=PARTUUID=1a2b3c4d-01"));
    }

    #[test]
    fn fstab_edit_keeps_comments_and_alignment() {
        let current = b"# root\nproc  /proc  proc  defaults  0  0\nPARTUUID=6c586e13-02\t/\text4\tdefaults,noatime\t0\t1\n";
        let ops = vec![EditOperation::FstabSetSpec {
            mountpoint: "/".into(),
            spec: DeviceSpec::PartUuid("1a2b3c4d-01".into()),
        }];
        let edited = String::from_utf8(apply(current, &ops).unwrap()).unwrap();
        assert_eq!(
            edited,
            "# root\nproc  /proc  proc  defaults  0  0\nPARTUUID=1a2b3c4d-01\t/\text4\tdefaults,noatime\t0\t1\n"
        );
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_panic() {
        let ops = vec![EditOperation::CmdlineSetRoot {
            spec: DeviceSpec::PartUuid("1a2b3c4d-01".into()),
        }];
        assert!(apply(b"console=tty1 quiet\n", &ops).is_err());
        assert!(apply(b"\0\xff\xfe", &ops).is_err());
    }
}
