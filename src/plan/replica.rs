//! The middle `migrate` and `sync` share, planned: a bootable copy of this
//! system on another disk (ARCHITECTURE.md, "Two use cases, one replica
//! engine"). Its disk layout, the ids its own files name, and how the
//! running system's fstab, command line and raspi-firmware setting become
//! the copy's: one planner, one set of refusals. Each use case places the
//! results (`migrate`: the SD card's cmdline.txt, a trial's, the new boot
//! partition's; `sync`: the standby's own files).

use super::edits::new_spec;
use super::regenerated::{RASPI_FIRMWARE_DEFAULTS, ROOTPART};
use super::source_check::CheckedSource;
use super::{EditOperation, Layout, MkfsStep, PartitionRole, PlannedPartition, Reason, TablePlan};
use crate::bootcfg::defaults::Defaults;
use crate::bootcfg::DeviceSpec;
use crate::system::System;
use serde::{Deserialize, Serialize};

/// A disk laid out anew: the partition table written to it and the
/// filesystems made on its partitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskLayout {
    pub table: TablePlan,
    pub filesystems: Vec<MkfsStep>,
}

impl DiskLayout {
    /// The partition with `role`, and the filesystem made on it.
    pub fn part(&self, role: PartitionRole) -> Option<(&PlannedPartition, &MkfsStep)> {
        let part = self.table.partitions.iter().find(|p| p.role == role)?;
        let fs = self
            .filesystems
            .iter()
            .find(|f| f.partition == part.number)?;
        Some((part, fs))
    }

    /// The ids the copy's files will name.
    pub fn ids(&self) -> ReplicaIds {
        let ids = |role| {
            self.part(role).map(|(part, fs)| OwnIds {
                partuuid: part.partuuid.clone(),
                uuid: fs.uuid.clone(),
            })
        };
        ReplicaIds {
            root: ids(PartitionRole::Root).expect("every layout has a root partition"),
            boot: ids(PartitionRole::Boot),
        }
    }
}

/// A partition's ids as a boot file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnIds {
    pub partuuid: String,
    /// The filesystem's UUID (a FAT volume's serial as `XXXX-XXXX`).
    pub uuid: String,
}

impl OwnIds {
    /// How the copy names this partition where the running system named
    /// its own as `old`.
    pub fn spec_for(&self, old: &DeviceSpec) -> DeviceSpec {
        new_spec(old, &self.partuuid, &self.uuid)
    }
}

/// The ids of the copy's own partitions: its root, and with a full layout
/// its boot partition (a root-only copy starts from the running system's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaIds {
    pub root: OwnIds,
    pub boot: Option<OwnIds>,
}

/// The running system's boot files turned into the copy's, as operations
/// made again at apply time on the files as they are then.
#[derive(Debug, Clone, Default)]
pub struct Retargeted {
    /// `/etc/fstab`: `/` (when it has that line) and a full layout's boot
    /// line; empty when nothing there names the running system.
    pub fstab: Vec<EditOperation>,
    /// The command line that starts the copy: `root=`, `rootwait`, and the
    /// first-boot hooks the caller leaves out.
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
/// ([`super::boot_layout::demands`]), `comment` what a ROOTPART line
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
    super::edits::apply(&bytes, &operations).map_err(|e| refuse(e.to_string()))?;
    Ok(Some(RootPart {
        bytes,
        current,
        value,
        operations,
    }))
}
