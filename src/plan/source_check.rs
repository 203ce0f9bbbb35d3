//! The source's boot files, understood well enough to edit, and its root's
//! filesystem type, one the copy can be (`root_filesystem`), or the
//! reasons they are not.

use super::root_filesystem::{check_root_type, RootType};
use super::*;
use crate::bootcfg::noroot::{recognise, BootListing};
use crate::bootcfg::{Cmdline, Fstab, FstabEntry, FstabError};
use crate::system::source::{BootFile, BootFileError};
use crate::system::System;
use std::path::Path;

/// The source's boot files, understood.
pub(crate) struct CheckedSource<'a> {
    pub(crate) fstab: &'a Fstab,
    pub(crate) fstab_bytes: &'a [u8],
    pub(crate) cmdline: &'a Cmdline,
    pub(crate) cmdline_bytes: &'a [u8],
    pub(crate) cmdline_path: &'a Path,
    pub(crate) boot_dir: &'a Path,
    pub(crate) summary: SourceSummary,
    /// What the copy's files change so they name its ext4 root.
    pub(crate) root_type: RootType,
}

pub(crate) fn check_source<'a>(
    system: &'a System,
    reasons: &mut Vec<Reason>,
) -> Option<CheckedSource<'a>> {
    let source = &system.source;
    // Named first and alone: the fstab and root= complaints such a system
    // raises would point at a fix (add a root=) that breaks it.
    if let Some(reason) = not_on_a_partition(system) {
        reasons.push(reason);
        return None;
    }
    let fstab = parsed_fstab(&source.fstab, reasons);
    let cmdline = parsed_cmdline(&source.cmdline, reasons);
    let ((fstab, fstab_file), (cmdline, cmdline_file)) = (fstab?, cmdline?);
    // No `/` line (Arch Linux ARM): the kernel mounts root from root=, and
    // the plan edits cmdline.txt alone.
    let root_entry = match fstab.root() {
        Ok(entry) => Some(entry),
        Err(FstabError::NoRootEntry) => None,
        Err(_) => return None,
    };
    let root_spec = root_spec(root_entry.as_ref(), cmdline, reasons)?;
    // Refused beside whatever else is found: every reason at once.
    let root_type = check_root_type(system, root_entry.as_ref(), cmdline)
        .map_err(|reason| reasons.push(reason))
        .unwrap_or_default();
    let boot_dir = source.boot_dir.as_deref()?;
    let device_name = |devno| crate::system::disks::device_name(&system.disks, devno);
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
            fstab_names_root: root_entry.is_some(),
        },
        root_type,
    })
}

/// The source's fstab, parsed, or the reason it cannot be edited.
fn parsed_fstab<'a>(
    file: &'a Result<BootFile<Fstab>, BootFileError>,
    reasons: &mut Vec<Reason>,
) -> Option<(&'a Fstab, &'a BootFile<Fstab>)> {
    match file {
        Ok(file) => match &file.parsed {
            Ok(fstab) => Some((fstab, file)),
            Err(err) => {
                reasons.push(Reason::new("source-fstab", err.to_string()).hint(
                    "fix /etc/fstab on the source first; pimigrate edits it and will not guess",
                ));
                None
            }
        },
        Err(err) => {
            reasons.push(Reason::new("source-fstab", err.to_string()));
            None
        }
    }
}

/// The source's cmdline.txt, parsed, or the reason it cannot be edited.
fn parsed_cmdline<'a>(
    file: &'a Result<BootFile<Cmdline>, BootFileError>,
    reasons: &mut Vec<Reason>,
) -> Option<(&'a Cmdline, &'a BootFile<Cmdline>)> {
    match file {
        Ok(file) => match &file.parsed {
            Ok(cmdline) => Some((cmdline, file)),
            Err(err) => {
                reasons.push(
                    Reason::new("source-cmdline", err.to_string())
                        .hint("the firmware reads this file to boot; fix it (one line with root=...) before migrating"),
                );
                None
            }
        },
        Err(err) => {
            reasons.push(Reason::new("source-cmdline", err.to_string()));
            None
        }
    }
}

/// How the source names its root: fstab's `/` line, or root= when fstab
/// has none.
fn root_spec(
    root_entry: Option<&FstabEntry>,
    cmdline: &Cmdline,
    reasons: &mut Vec<Reason>,
) -> Option<DeviceSpec> {
    match root_entry.map(|e| (e, e.device_spec())) {
        None => match cmdline.root() {
            Ok(spec) => Some(spec),
            Err(err) => {
                reasons.push(Reason::new("source-cmdline", err.to_string()));
                None
            }
        },
        Some((_, Ok(spec))) => Some(spec),
        Some((root_entry, Err(err))) => {
            reasons.push(Reason::new(
                "source-fstab",
                format!(
                    "the / entry of /etc/fstab names '{}', which is not a device: {err}",
                    root_entry.spec
                ),
            ));
            None
        }
    }
}

/// A system whose root is not a filesystem on a partition (LibreELEC,
/// Volumio, Alpine diskless), recognised from a cmdline.txt without root=
/// and what its boot partition holds.
fn not_on_a_partition(system: &System) -> Option<Reason> {
    let file = system.source.cmdline.as_ref().ok()?;
    if file.parsed.is_ok() {
        return None;
    }
    let cmdline = Cmdline::parse(&file.bytes).ok()?;
    let boot_dir = system.host.path(system.source.boot_dir.as_deref()?);
    let names = boot_listing(&boot_dir);
    let found = recognise(&cmdline, &BootListing { names: &names })?;
    let files = if found.files.is_empty() {
        String::new()
    } else {
        format!(" and {} on the boot partition", found.files.join(", "))
    };
    Some(
        Reason::new(
            "not-on-a-partition",
            format!(
                "this is {}, recognised by {} in {}{files}: its root is not a filesystem on a partition, \
                 so there is no root= to point at a copy, and pimigrate moves only such systems",
                found.system,
                found.arguments.join(" "),
                file.path.display()
            ),
        )
        .hint(found.hint),
    )
}

/// The boot partition's top-level names, and those under `boot/`.
fn boot_listing(dir: &Path) -> Vec<String> {
    let names = |dir: &Path, prefix: &str| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| format!("{prefix}{}", e.file_name().to_string_lossy()))
            .collect()
    };
    let mut all = names(dir, "");
    all.extend(names(&dir.join("boot"), "boot/"));
    all.sort();
    all
}
