//! How the running system's fstab, command line and raspi-firmware
//! setting become the copy's: operations made again at apply time on the
//! files as they are then, with the refusals of what cannot be named; and
//! the copy's own files on its root ([`root_edits`]), the same for
//! `migrate`'s new root and a sync's standby: fstab and ROOTPART, each
//! with the running system's version kept beside it as a backup.

use super::super::edits::{file_edit, EditTarget};
use super::super::regenerated::{RASPI_FIRMWARE_DEFAULTS, ROOTPART};
use super::super::root_filesystem::COPY_TYPE;
use super::super::source_check::CheckedSource;
use super::super::{EditOperation, EditSite, FileEdit, Layout, PartitionPath, Reason};
use super::ReplicaIds;
use crate::bootcfg::defaults::Defaults;
use crate::bootcfg::DeviceSpec;
use crate::system::System;

/// The running system's boot files turned into the copy's, as operations
/// made again at apply time on the files as they are then.
#[derive(Debug, Clone, Default)]
pub struct Retargeted {
    /// `/etc/fstab`: `/` (when it has that line; its type too, when an
    /// ext2 or ext3 root's copy is ext4) and a full layout's boot line;
    /// empty when nothing there names the running system.
    pub fstab: Vec<EditOperation>,
    /// The command line that starts the copy: `root=`, `rootfstype=ext4`
    /// where it named ext2 or ext3, `rootwait`, and the first-boot hooks
    /// the caller leaves out.
    pub cmdline: Vec<EditOperation>,
    /// raspi-firmware's `ROOTPART=`, when the system has its settings file.
    pub rootpart: Option<RootPart>,
}

/// `/etc/default/raspi-firmware` on the copy: raspi-firmware rewrites
/// cmdline.txt from it on every kernel update, so it must name the copy.
#[derive(Debug, Clone)]
pub struct RootPart {
    /// The running system's file as it is now.
    pub bytes: Vec<u8>,
    /// What it says now (`None`: unset).
    pub current: Option<String>,
    /// What the copy's says.
    pub value: String,
    pub operations: Vec<EditOperation>,
}

/// How the copy's files name it, or every reason they cannot be made to:
/// `hook_ops` are the first-boot hooks to leave out of the command line
/// ([`crate::plan::boot_layout::demands`]), `comment` what a ROOTPART line
/// pimigrate adds says of itself.
pub(crate) fn retarget(
    system: &System,
    source: &CheckedSource,
    ids: &ReplicaIds,
    layout: Layout,
    hook_ops: &[EditOperation],
    comment: &str,
) -> Result<Retargeted, Vec<Reason>> {
    let mut reasons = Vec::new();
    let root_for = |old: &DeviceSpec| ids.root.spec_for(old);
    // Without a `/` line (Arch Linux ARM) the kernel's root= is the only
    // name of the root, and fstab keeps its other lines as they are.
    let mut fstab = Vec::new();
    if source.summary.fstab_names_root {
        fstab.push(EditOperation::FstabSetSpec {
            mountpoint: "/".into(),
            spec: root_for(&source.summary.root_spec),
        });
    }
    // An ext2 or ext3 root's copy is ext4: its files say so.
    if source.root_type.fstab_to_ext4 {
        fstab.push(EditOperation::FstabSetType {
            mountpoint: "/".into(),
            fstype: COPY_TYPE.into(),
        });
    }
    if layout == Layout::Full {
        if let (Some(entry), Some(boot)) = (source.fstab.boot(), &ids.boot) {
            if let Ok(old) = entry.device_spec() {
                fstab.push(EditOperation::FstabSetSpec {
                    mountpoint: entry.mountpoint.clone(),
                    spec: boot.spec_for(&old),
                });
            }
        }
    }
    let mut cmdline = Vec::new();
    match source.cmdline.root() {
        Ok(old) => cmdline.push(EditOperation::CmdlineSetRoot {
            spec: root_for(&old),
        }),
        Err(err) => reasons.push(Reason::new("source-cmdline", err.to_string())),
    }
    if source.root_type.rootfstype_to_ext4 {
        cmdline.push(EditOperation::CmdlineAdd {
            arg: format!("rootfstype={COPY_TYPE}"),
        });
    }
    // The kernel finds a USB or NVMe root only some time after it starts.
    if !source.cmdline.has("rootwait") {
        cmdline.push(EditOperation::CmdlineAdd {
            arg: "rootwait".into(),
        });
    }
    cmdline.extend(hook_ops.iter().cloned());
    let rootpart = rootpart(system, source, ids, comment)
        .map_err(|reason| reasons.push(reason))
        .ok()
        .flatten();
    if !reasons.is_empty() {
        return Err(reasons);
    }
    Ok(Retargeted {
        fstab,
        cmdline,
        rootpart,
    })
}

/// The copy's `ROOTPART=`: the same kind of name the new command line
/// gets from the old one's. A setting that is not a device name is
/// refused, since raspi-firmware would write it into cmdline.txt as is.
fn rootpart(
    system: &System,
    source: &CheckedSource,
    ids: &ReplicaIds,
    comment: &str,
) -> Result<Option<RootPart>, Reason> {
    let view = source
        .summary
        .root_dir
        .join(RASPI_FIRMWARE_DEFAULTS.trim_start_matches('/'));
    let Ok(bytes) = std::fs::read(system.host.path(&view)) else {
        return Ok(None);
    };
    let refuse = |why: String| {
        Reason::new(
            "source-raspi-firmware",
            format!("{RASPI_FIRMWARE_DEFAULTS}: {why}; raspi-firmware rewrites cmdline.txt from it on every kernel update"),
        )
        .hint(format!("set {ROOTPART}= to a plain device name (such as {ROOTPART}=PARTUUID=...) or comment it out, then plan again"))
    };
    let defaults = Defaults::parse(&bytes).map_err(|e| refuse(e.to_string()))?;
    let current = defaults.get(ROOTPART).map_err(|e| refuse(e.to_string()))?;
    let named_as = match &current {
        Some(value) => DeviceSpec::parse(value)
            .map_err(|e| refuse(format!("{ROOTPART}={value} is not a device name: {e}")))?,
        None => source
            .cmdline
            .root()
            .unwrap_or(DeviceSpec::PartUuid(String::new())),
    };
    let value = ids.root.spec_for(&named_as).to_string();
    let operations = vec![EditOperation::DefaultsSet {
        key: ROOTPART.into(),
        value: value.clone(),
        comment: comment.into(),
    }];
    // The edit must apply to the file as it is, or be refused now.
    super::super::edits::apply(&bytes, &operations).map_err(|e| refuse(e.to_string()))?;
    Ok(Some(RootPart {
        bytes,
        current,
        value,
        operations,
    }))
}

/// The copy's own files on its root, edited from the running system's:
/// `/etc/fstab` and raspi-firmware's `ROOTPART=`.
#[derive(Debug, Clone, Default)]
pub struct RootEdits {
    pub fstab: Option<FileEdit>,
    pub rootpart: Option<FileEdit>,
}

impl RootEdits {
    pub fn into_vec(self) -> Vec<FileEdit> {
        self.fstab.into_iter().chain(self.rootpart).collect()
    }
}

/// The edits of the copy's root (`device` says which filesystem that is,
/// for a person), or every reason one cannot be made: the same files, the
/// same backups and the same refusals for `migrate` and `sync`.
pub(crate) fn root_edits(
    source: &CheckedSource,
    retargeted: &Retargeted,
    device: &str,
) -> Result<RootEdits, Vec<Reason>> {
    let mut reasons = Vec::new();
    let on_root = |file: &str, bytes: &[u8], operations: Vec<EditOperation>| {
        file_edit(
            EditTarget {
                site: EditSite::TargetRoot,
                file: &PartitionPath::known(file),
                output: &PartitionPath::known(file),
                backup: Some(PartitionPath::known(&format!("{file}.pimigrate-backup"))),
                device: device.to_string(),
            },
            bytes,
            operations,
        )
        .map_err(|err| format!("{file}: {err}"))
    };
    let fstab = (!retargeted.fstab.is_empty())
        .then(|| on_root("/etc/fstab", source.fstab_bytes, retargeted.fstab.clone()))
        .transpose()
        .map_err(|why| reasons.push(Reason::new("source-edit", why)))
        .ok()
        .flatten();
    let rootpart = retargeted
        .rootpart
        .as_ref()
        .map(|r| on_root(RASPI_FIRMWARE_DEFAULTS, &r.bytes, r.operations.clone()))
        .transpose()
        .map_err(|why| reasons.push(Reason::new("source-raspi-firmware", why)))
        .ok()
        .flatten();
    match reasons.is_empty() {
        true => Ok(RootEdits { fstab, rootpart }),
        false => Err(reasons),
    }
}

#[cfg(test)]
mod tests {
    //! The copy's root edits on the Pi 4 fixture machine's files: one code
    //! each, for `migrate` and `sync` alike.
    use super::*;
    use crate::plan::source_check::check_source;

    fn pi4() -> System {
        crate::system::inspect_fixture("pi4").1
    }

    #[test]
    fn the_copys_fstab_and_rootpart_keep_the_running_versions_as_backups() {
        let system = pi4();
        let source = check_source(&system, &mut Vec::new()).unwrap();
        let retargeted = Retargeted {
            fstab: vec![EditOperation::FstabSetSpec {
                mountpoint: "/".into(),
                spec: DeviceSpec::PartUuid("2f4a9c17-01".into()),
            }],
            rootpart: Some(RootPart {
                bytes: b"ROOTPART=PARTUUID=6c586e13-02\n".to_vec(),
                current: Some("PARTUUID=6c586e13-02".into()),
                value: "PARTUUID=2f4a9c17-01".into(),
                operations: vec![EditOperation::DefaultsSet {
                    key: ROOTPART.into(),
                    value: "PARTUUID=2f4a9c17-01".into(),
                    comment: "test".into(),
                }],
            }),
            ..Retargeted::default()
        };
        let edits = root_edits(&source, &retargeted, "the copy")
            .unwrap()
            .into_vec();
        let backups: Vec<String> = edits
            .iter()
            .map(|e| e.backup.as_ref().unwrap().to_string())
            .collect();
        assert_eq!(
            backups,
            [
                "/etc/fstab.pimigrate-backup",
                "/etc/default/raspi-firmware.pimigrate-backup"
            ]
        );
    }

    #[test]
    fn an_edit_that_cannot_be_made_is_refused_with_its_files_code() {
        let system = pi4();
        let source = check_source(&system, &mut Vec::new()).unwrap();
        let broken = Retargeted {
            // No fstab line is mounted at /srv.
            fstab: vec![EditOperation::FstabSetSpec {
                mountpoint: "/srv".into(),
                spec: DeviceSpec::PartUuid("2f4a9c17-01".into()),
            }],
            // Not a settings file raspi-firmware could source.
            rootpart: Some(RootPart {
                bytes: b"ROOTPART=\"unterminated\n".to_vec(),
                current: None,
                value: "PARTUUID=2f4a9c17-01".into(),
                operations: vec![EditOperation::DefaultsSet {
                    key: ROOTPART.into(),
                    value: "PARTUUID=2f4a9c17-01".into(),
                    comment: "test".into(),
                }],
            }),
            ..Retargeted::default()
        };
        let refused = root_edits(&source, &broken, "the copy").unwrap_err();
        let codes: Vec<&str> = refused.iter().map(|r| r.code).collect();
        assert_eq!(codes, ["source-edit", "source-raspi-firmware"]);
        assert!(
            refused[0].message.starts_with("/etc/fstab: "),
            "{}",
            refused[0].message
        );
        assert!(
            refused[1]
                .message
                .starts_with("/etc/default/raspi-firmware: "),
            "{}",
            refused[1].message
        );
    }
}
