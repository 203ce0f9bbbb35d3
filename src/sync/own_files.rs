//! The standby's own files: the replica's retargeted edits
//! (`plan::replica::retarget` and `root_edits`, what `migrate` makes of
//! its new root, refusals and backups alike) placed on the standby: fstab and
//! raspi-firmware's ROOTPART on its root, and the command line that starts
//! it, on its own boot partition or, for a root-only standby, the line to
//! put into the shared one.

use super::standby::Standby;
use crate::plan::boot_layout::demands;
use crate::plan::edits::{boot_relative, file_edit, EditTarget};
use crate::plan::replica::{retarget, root_edits};
use crate::plan::source_check::CheckedSource;
use crate::plan::{EditSite, FileEdit, Layout, Reason};
use crate::system::System;

/// The standby's own versions of the running system's boot files.
#[derive(Debug, Default)]
pub struct OwnFiles {
    /// Its fstab and ROOTPART, then a full standby's cmdline.txt.
    pub edits: Vec<FileEdit>,
    /// A root-only standby: the command line that starts it from the
    /// shared boot partition.
    pub boot_command_line: Option<String>,
}

/// What ROOTPART= on a standby says of itself.
const STANDBY_ROOTPART: &str = "Set by pimigrate sync: this is a standby copy; raspi-firmware writes this into cmdline.txt as root=";

/// The standby's own files made from the running system's (`source`), or
/// every reason they cannot be.
pub(crate) fn own_files(
    system: &System,
    source: &CheckedSource,
    standby: &Standby,
) -> Result<OwnFiles, Vec<Reason>> {
    let Some(ids) = standby.ids() else {
        return Err(vec![Reason::new(
            "standby-unreadable",
            format!(
                "the ids of {} could not be read (its PARTUUID and filesystem UUID)",
                standby.root_name()
            ),
        )
        .hint("run as root, so pimigrate can read the disk")]);
    };
    let mut reasons = Vec::new();
    let hooks = demands(source, standby.layout, false, &mut reasons);
    let retargeted = match retarget(
        system,
        source,
        &ids,
        standby.layout,
        &hooks.cmdline_ops,
        STANDBY_ROOTPART,
    ) {
        Ok(retargeted) => retargeted,
        Err(found) => {
            reasons.extend(found);
            return Err(reasons);
        }
    };
    let device = format!("the standby's root filesystem {}", standby.root_name());
    let root = root_edits(source, &retargeted, &device).map_err(|found| reasons.extend(found));
    let cmdline =
        command_line(source, standby, retargeted.cmdline).map_err(|reason| reasons.push(reason));
    match (root, cmdline) {
        (Ok(root), Ok((boot_cmdline, boot_command_line))) if reasons.is_empty() => Ok(OwnFiles {
            edits: root.into_vec().into_iter().chain(boot_cmdline).collect(),
            boot_command_line,
        }),
        _ => Err(reasons),
    }
}

/// The command line that starts the standby: a full standby's own
/// cmdline.txt, or a root-only standby's line for the shared boot
/// partition.
fn command_line(
    source: &CheckedSource,
    standby: &Standby,
    operations: Vec<crate::plan::EditOperation>,
) -> Result<(Option<FileEdit>, Option<String>), Reason> {
    let fail =
        |err: &dyn std::fmt::Display| Reason::new("source-edit", format!("cmdline.txt: {err}"));
    if standby.layout == Layout::RootOnly {
        let bytes = crate::plan::edits::apply(source.cmdline_bytes, &operations)
            .map_err(|err| fail(&err))?;
        let line = String::from_utf8_lossy(&bytes).trim_end().to_string();
        return Ok((None, Some(line)));
    }
    let name = boot_relative(source, source.cmdline_path)?;
    let boot = standby.boot.as_ref().map(|b| b.name(&standby.disk.path));
    let edit = file_edit(
        EditTarget {
            site: EditSite::TargetBoot,
            file: &name,
            output: &name,
            backup: None,
            device: format!("the standby's boot partition {}", boot.unwrap_or_default()),
        },
        source.cmdline_bytes,
        operations,
    )
    .map_err(|err| fail(&err))?;
    Ok((Some(edit), None))
}
