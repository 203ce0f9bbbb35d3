//! The boot-file changes of a migration, as operations that can be applied
//! again at apply time, and as diffs to show now.

use super::options::Layout;
use super::refusal::Reason;
use super::replica::Retargeted;
use super::source_check::CheckedSource;
use super::trial::TRIAL_CMDLINE;
use super::trial_guard::{self, TrialGuard, TrialKernel};
use super::{EditOperation, EditSite, FileEdit, PartitionPath};
use crate::bootcfg::cmdline::CmdlineError;
use crate::bootcfg::defaults::{Defaults, DefaultsError};
use crate::bootcfg::fstab::FstabError;
use crate::bootcfg::usb_quirks::{add_ignore_uas, QuirksError, UsbId};
use crate::bootcfg::{unified_diff, Cmdline, DeviceSpec, Fstab};
use crate::system::System;
use std::path::Path;

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

/// An operation, in words, for an error.
fn what(op: &EditOperation) -> String {
    match op {
        EditOperation::FstabSetSpec { mountpoint, spec } => {
            format!("setting the device of {mountpoint} to {spec} (an fstab edit)")
        }
        EditOperation::FstabSetType { mountpoint, fstype } => {
            format!("setting the type of {mountpoint} to {fstype} (an fstab edit)")
        }
        EditOperation::CmdlineSetRoot { spec } => format!("root={spec} (a command line edit)"),
        EditOperation::CmdlineAdd { arg } => format!("adding {arg} (a command line edit)"),
        EditOperation::CmdlineRemove { arg } => format!("leaving out {arg} (a command line edit)"),
        EditOperation::CmdlineIgnoreUas { usb_id } => {
            format!("usb-storage.quirks={usb_id}:u (a command line edit)")
        }
        EditOperation::DefaultsSet { key, value, .. } => {
            format!("{key}={value} (an /etc/default edit)")
        }
    }
}

/// Why an edit cannot be made to a boot file.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{0}")]
    Fstab(#[from] FstabError),
    #[error("{0}")]
    Cmdline(#[from] CmdlineError),
    #[error("{0}")]
    Defaults(#[from] DefaultsError),
    #[error("{0}")]
    Quirks(#[from] QuirksError),
    #[error("{0:?} is not a USB vendor and product id")]
    UsbId(String),
    /// An operation meant for another kind of file.
    #[error("{} cannot be applied to {file}", what(op))]
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
    if operations
        .iter()
        .any(|op| matches!(op, EditOperation::DefaultsSet { .. }))
    {
        let mut defaults = Defaults::parse(bytes)?;
        for op in operations {
            match op {
                EditOperation::DefaultsSet {
                    key,
                    value,
                    comment,
                } => defaults.set(key, value, comment)?,
                other => return Err(misplaced(other, "an /etc/default file")),
            }
        }
        return Ok(defaults.to_bytes());
    }
    let is_fstab = operations.iter().any(|op| {
        matches!(
            op,
            EditOperation::FstabSetSpec { .. } | EditOperation::FstabSetType { .. }
        )
    });
    if is_fstab {
        let mut fstab = Fstab::parse(bytes)?;
        for op in operations {
            match op {
                EditOperation::FstabSetSpec { mountpoint, spec } => {
                    fstab.set_spec(mountpoint, spec)?
                }
                EditOperation::FstabSetType { mountpoint, fstype } => {
                    fstab.set_type(mountpoint, fstype)?
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
            EditOperation::CmdlineRemove { arg } => {
                cmdline.remove_exact(arg);
            }
            EditOperation::CmdlineIgnoreUas { usb_id } => {
                let id = UsbId::parse(usb_id).ok_or_else(|| EditError::UsbId(usb_id.clone()))?;
                add_ignore_uas(&mut cmdline, id)?;
            }
            other => return Err(misplaced(other, "cmdline.txt")),
        }
    }
    Ok(cmdline.to_bytes())
}

/// Builds one edit and its diff against the file as it is now.
pub struct EditTarget<'a> {
    pub site: EditSite,
    pub file: &'a PartitionPath,
    pub output: &'a PartitionPath,
    pub backup: Option<PartitionPath>,
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
        file: target.file.clone(),
        output: target.output.clone(),
        backup: target.backup,
        device: target.device,
        operations,
    })
}

/// A git-style diff from `old` at `from` to `new` at `to`.
pub fn diff_files(from: &PartitionPath, to: &PartitionPath, old: &[u8], new: &[u8]) -> String {
    let label = |p: &PartitionPath| p.to_string().trim_start_matches('/').to_string();
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
pub fn backup_name(file: &PartitionPath, taken: impl Fn(&PartitionPath) -> bool) -> PartitionPath {
    let with_suffix = |suffix: &str| {
        let mut name = file.file_name().to_os_string();
        name.push(suffix);
        file.with_file_name(name)
    };
    let first = with_suffix(".pimigrate-backup");
    std::iter::once(first.clone())
        .chain((2..1000).map(|n| with_suffix(&format!(".pimigrate-backup.{n}"))))
        .find(|candidate| !taken(candidate))
        .unwrap_or(first)
}

/// A migration's edits of cmdline.txt, where the firmware will read it
/// (the SD card's, its trial copy, or the new boot partition's), from the
/// replica's retargeted operations (the new root's own files are the
/// replica's: [`super::replica::root_edits`]).
pub(super) fn plan_edits(
    system: &System,
    source: &CheckedSource,
    retargeted: &Retargeted,
    layout: Layout,
    trial: Option<TrialRequest>,
) -> Result<(Vec<FileEdit>, Option<TrialGuard>), Reason> {
    let (trial, guard) = match trial {
        Some(request) => (Some(request.site), Some(request)),
        None => (None, None),
    };
    let cmdline_ops = retargeted.cmdline.clone();
    let fail = |err: EditError| Reason::new("source-edit", err.to_string());
    // The trial's command line is the normal one plus what resets a trial
    // that does not come up (`trial_guard`), in both layouts.
    let normal = apply(source.cmdline_bytes, &cmdline_ops).map_err(fail)?;
    let normal = Cmdline::parse(&normal).map_err(|e| fail(e.into()))?;
    let guard =
        guard.map(|request| trial_guard::decide(&request.kernel, &normal, request.auto_commit));
    let trial_ops = |ops: &[EditOperation]| {
        let mut ops = ops.to_vec();
        ops.extend(guard.iter().flat_map(TrialGuard::operations));
        ops
    };
    let mut edits = Vec::new();
    let cmdline_name = boot_relative(source, source.cmdline_path)?;
    let trial_cmdline = PartitionPath::known(TRIAL_CMDLINE);
    let target = cmdline_target(
        system,
        source,
        layout,
        trial.is_some(),
        &cmdline_name,
        &trial_cmdline,
    )?;
    // A full move's trial starts its own command line beside the new
    // cmdline.txt, with the guard's words: a trial that cannot go on
    // resets the Pi, and the next boot is a normal one, from the SD card.
    let full_trial = match (layout, trial) {
        (Layout::Full, Some(site)) => Some(EditTarget {
            site,
            file: &cmdline_name,
            output: &trial_cmdline,
            backup: None,
            device: match site {
                EditSite::SourceBoot => sd_boot_description(source),
                _ => NEW_BOOT_PARTITION.into(),
            },
        }),
        _ => None,
    };
    match full_trial {
        Some(trial_target) => {
            let trial_ops = trial_ops(&cmdline_ops);
            edits.push(file_edit(target, source.cmdline_bytes, cmdline_ops).map_err(fail)?);
            edits.push(file_edit(trial_target, source.cmdline_bytes, trial_ops).map_err(fail)?);
        }
        // A root-only trial's command line is the one edit of cmdline.txt.
        None if layout == Layout::RootOnly && trial.is_some() => {
            let trial_ops = trial_ops(&cmdline_ops);
            edits.push(file_edit(target, source.cmdline_bytes, trial_ops).map_err(fail)?);
        }
        None => edits.push(file_edit(target, source.cmdline_bytes, cmdline_ops).map_err(fail)?),
    }
    Ok((edits, guard))
}

/// A plan's trial: where its files go, and what its guard is decided
/// from (the trial's kernel, and whether the trial commits itself).
pub struct TrialRequest {
    pub site: EditSite,
    pub kernel: TrialKernel,
    pub auto_commit: bool,
}

/// Where a full move's edits of boot files go, for a person.
const NEW_BOOT_PARTITION: &str =
    "the new boot partition (partition 1 of the target); the SD card is not changed";

/// Where the new cmdline.txt goes: the SD card's own file (a root-only
/// move), the trial's file beside it (a root-only trial), or the new boot
/// partition's copy (a full move).
fn cmdline_target<'a>(
    system: &System,
    source: &CheckedSource,
    layout: Layout,
    trial: bool,
    cmdline_name: &'a PartitionPath,
    trial_cmdline: &'a PartitionPath,
) -> Result<EditTarget<'a>, Reason> {
    Ok(match (layout, trial) {
        (Layout::RootOnly, false) => EditTarget {
            site: EditSite::SourceBoot,
            file: cmdline_name,
            output: cmdline_name,
            backup: Some(boot_backup(system, source, source.cmdline_path)?),
            device: sd_boot_description(source),
        },
        (Layout::RootOnly, true) => EditTarget {
            site: EditSite::SourceBoot,
            file: cmdline_name,
            output: trial_cmdline,
            backup: None,
            device: sd_boot_description(source),
        },
        (Layout::Full, _) => EditTarget {
            site: EditSite::TargetBoot,
            file: cmdline_name,
            output: cmdline_name,
            // The SD card's boot files are copied there, backups and all:
            // the name free on the SD card is free on the copy.
            backup: Some(boot_backup(system, source, source.cmdline_path)?),
            device: NEW_BOOT_PARTITION.into(),
        },
    })
}

/// A boot file's name inside the boot partition, from its view path; a
/// name that leaves the partition (a config.txt `cmdline=../x`) is refused.
pub(crate) fn boot_relative(source: &CheckedSource, path: &Path) -> Result<PartitionPath, Reason> {
    let inside = path.strip_prefix(source.boot_dir).unwrap_or(path);
    PartitionPath::new(inside).map_err(|err| {
        Reason::new(
            "source-cmdline",
            format!(
                "{} is not a file of the boot partition {}: {err}",
                path.display(),
                source.boot_dir.display()
            ),
        )
    })
}

/// Where a file of the boot partition is backed up, by the one rule,
/// beside any backup an earlier run left.
pub(super) fn boot_backup(
    system: &System,
    source: &CheckedSource,
    path: &Path,
) -> Result<PartitionPath, Reason> {
    Ok(backup_name(&boot_relative(source, path)?, |name| {
        system.host.path(name.under(source.boot_dir)).exists()
    }))
}

pub(super) fn sd_boot_description(source: &CheckedSource) -> String {
    match &source.summary.boot_device {
        Some(dev) => format!(
            "the SD card's boot partition {dev}, mounted at {}",
            source.boot_dir.display()
        ),
        None => format!("the boot directory {}", source.boot_dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one rule: the first free name, so the backup of the version that
    /// booted (an earlier run's) is never overwritten.
    #[test]
    fn backups_take_the_first_free_name() {
        let file = &PartitionPath::known("/cmdline.txt");
        assert_eq!(
            backup_name(file, |_| false),
            PartitionPath::known("/cmdline.txt.pimigrate-backup")
        );
        let taken = [
            PartitionPath::known("/cmdline.txt.pimigrate-backup"),
            PartitionPath::known("/cmdline.txt.pimigrate-backup.2"),
        ];
        assert_eq!(
            backup_name(file, |p| taken.iter().any(|t| t == p)),
            PartitionPath::known("/cmdline.txt.pimigrate-backup.3")
        );
    }

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
            file: &PartitionPath::known("/cmdline.txt"),
            output: &PartitionPath::known("/cmdline.txt"),
            backup: Some(PartitionPath::known("/x.bak")),
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
