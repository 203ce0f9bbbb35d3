//! cmdline.txt that a package writes anew: Debian's raspi-firmware hooks
//! (`/etc/kernel/postinst.d/z50-raspi-firmware`, and the same script in
//! `/etc/initramfs/post-update.d/`) rebuild cmdline.txt on every kernel or
//! initramfs update, with `root=$ROOTPART` from `/etc/default/raspi-firmware`
//! (or, when that is unset, whatever `findmnt /` reports: a kernel name
//! like /dev/sda2, or the SD card's LABEL=RASPIROOT in Debian's images).
//! Editing cmdline.txt alone would be undone by the next upgrade, so the
//! new root's copy of the setting names the new root too.

use super::edits::{file_edit, new_spec, EditTarget};
use super::options::Layout;
use super::source_check::CheckedSource;
use super::{
    EditOperation, EditSite, FileEdit, MkfsStep, PartitionPath, PartitionRole, Reason, TablePlan,
};
use crate::bootcfg::defaults::Defaults;
use crate::bootcfg::DeviceSpec;
use crate::system::System;

/// The settings file the raspi-firmware hooks source.
pub const RASPI_FIRMWARE_DEFAULTS: &str = "/etc/default/raspi-firmware";
/// The setting they write into cmdline.txt as `root=`.
pub const ROOTPART: &str = "ROOTPART";

/// What the plan does about a regenerating package: the edit of its setting
/// on the new root, and what to tell the user.
pub(super) struct Regenerated {
    pub edit: FileEdit,
    pub note: String,
    pub warning: Option<String>,
}

/// The target root's `/etc/default/raspi-firmware` with `ROOTPART=` naming
/// the new root (the same kind of name the new cmdline.txt uses), when the
/// source has the file.
pub(super) fn raspi_firmware(
    system: &System,
    source: &CheckedSource,
    table: &TablePlan,
    filesystems: &[MkfsStep],
    layout: Layout,
    trial: bool,
) -> Result<Option<Regenerated>, Reason> {
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
    if let Some(value) = &current {
        DeviceSpec::parse(value)
            .map_err(|e| refuse(format!("{ROOTPART}={value} is not a device name: {e}")))?;
    }
    let (root_partition, value) = new_rootpart(source, table, filesystems, current.as_deref());
    let operations = vec![EditOperation::DefaultsSet {
        key: ROOTPART.into(),
        value: value.clone(),
        comment: "Set by pimigrate: the root filesystem moved here; raspi-firmware writes this into cmdline.txt as root=".into(),
    }];
    let backup = format!("{RASPI_FIRMWARE_DEFAULTS}.pimigrate-backup");
    let edit = file_edit(
        EditTarget {
            site: EditSite::TargetRoot,
            file: &PartitionPath::known(RASPI_FIRMWARE_DEFAULTS),
            output: &PartitionPath::known(RASPI_FIRMWARE_DEFAULTS),
            backup: Some(PartitionPath::known(&backup)),
            device: format!("the new root filesystem (partition {root_partition} of the target)"),
        },
        &bytes,
        operations,
    )
    .map_err(|e| refuse(e.to_string()))?;
    let was = match &current {
        Some(old) => format!("it says {ROOTPART}={old}"),
        None => format!("{ROOTPART} is unset, so it would take whatever `findmnt /` reports"),
    };
    let note = format!(
        "Debian's raspi-firmware rebuilds cmdline.txt from {RASPI_FIRMWARE_DEFAULTS} on every kernel or initramfs \
         update ({was}): the new root's copy says {ROOTPART}={value}, so the next upgrade keeps the new root. \
         The SD card's root keeps its own setting, which is right again after a rollback."
    );
    // Between the migration and the reboot the SD card's system still runs
    // and its hook would write its own ROOTPART into the edited cmdline.txt.
    let warning = (layout == Layout::RootOnly && !trial).then(|| {
        format!(
            "reboot soon after the migration: until then a kernel or initramfs update on this system rewrites \
             cmdline.txt from the SD card's {RASPI_FIRMWARE_DEFAULTS} and undoes the move"
        )
    });
    Ok(Some(Regenerated {
        edit,
        note,
        warning,
    }))
}

/// The new root's partition number, and its name for ROOTPART: the same
/// kind of name the new cmdline.txt gets from the old one's.
fn new_rootpart(
    source: &CheckedSource,
    table: &TablePlan,
    filesystems: &[MkfsStep],
    current: Option<&str>,
) -> (u32, String) {
    let root_part = table
        .partitions
        .iter()
        .find(|p| p.role == PartitionRole::Root)
        .expect("every layout has a root partition");
    let root_fs = filesystems
        .iter()
        .find(|f| f.partition == root_part.number)
        .expect("every partition gets a filesystem");
    let named_as = match current {
        Some(value) => DeviceSpec::parse(value).ok(),
        None => source.cmdline.root().ok(),
    }
    .unwrap_or(DeviceSpec::PartUuid(String::new()));
    let value = new_spec(&named_as, &root_part.partuuid, &root_fs.uuid).to_string();
    (root_part.number, value)
}
