//! The source's boot files, understood well enough to edit, or the reasons
//! they are not.

use super::*;
use crate::bootcfg::{Cmdline, Fstab};
use crate::system::System;
use std::path::Path;

/// The source's boot files, understood.
pub(super) struct CheckedSource<'a> {
    pub(super) fstab: &'a Fstab,
    pub(super) fstab_bytes: &'a [u8],
    pub(super) cmdline: &'a Cmdline,
    pub(super) cmdline_bytes: &'a [u8],
    pub(super) cmdline_path: &'a Path,
    pub(super) boot_dir: &'a Path,
    pub(super) summary: SourceSummary,
}

pub(super) fn check_source<'a>(
    system: &'a System,
    reasons: &mut Vec<Reason>,
) -> Option<CheckedSource<'a>> {
    let source = &system.source;
    let fstab = match &source.fstab {
        Ok(file) => match &file.parsed {
            Ok(fstab) => Some((fstab, file)),
            Err(err) => {
                reasons.push(Reason::new("source-fstab", err.clone()).hint(
                    "fix /etc/fstab on the source first; pimigrate edits it and will not guess",
                ));
                None
            }
        },
        Err(err) => {
            reasons.push(Reason::new("source-fstab", err.clone()));
            None
        }
    };
    let cmdline = match &source.cmdline {
        Ok(file) => match &file.parsed {
            Ok(cmdline) => Some((cmdline, file)),
            Err(err) => {
                reasons.push(
                    Reason::new("source-cmdline", err.clone())
                        .hint("the firmware reads this file to boot; fix it (one line with root=...) before migrating"),
                );
                None
            }
        },
        Err(err) => {
            reasons.push(Reason::new("source-cmdline", err.clone()));
            None
        }
    };
    let ((fstab, fstab_file), (cmdline, cmdline_file)) = (fstab?, cmdline?);
    let root_entry = fstab.root().ok()?;
    let root_spec = match root_entry.device_spec() {
        Ok(spec) => spec,
        Err(err) => {
            reasons.push(Reason::new(
                "source-fstab",
                format!(
                    "the / entry of /etc/fstab names '{}', which is not a device: {err}",
                    root_entry.spec
                ),
            ));
            return None;
        }
    };
    let boot_dir = source.boot_dir.as_deref()?;
    let device_name = |devno| {
        system
            .disks
            .iter()
            .flat_map(|d| &d.partitions)
            .find(|p| p.devno == Some(devno))
            .and_then(|p| p.path.as_ref())
            .map(|p| p.display().to_string())
            .or_else(|| {
                system
                    .disk_holding(devno)
                    .map(|d| d.path.display().to_string())
            })
    };
    Some(CheckedSource {
        fstab,
        fstab_bytes: &fstab_file.bytes,
        cmdline,
        cmdline_bytes: &cmdline_file.bytes,
        cmdline_path: &cmdline_file.path,
        boot_dir,
        summary: SourceSummary {
            root_dir: source.root_dir.clone(),
            root_device: source.root_devno.and_then(device_name),
            boot_dir: boot_dir.to_path_buf(),
            boot_device: source.boot_devno.and_then(device_name),
            root_spec,
            boot_spec: fstab.boot().and_then(|e| e.device_spec().ok()),
        },
    })
}
