//! From what is true about the machine and what the user asked, a plan or
//! every reason there cannot be one. Pure but for the read-only checks of
//! the target (is it busy?) and a metadata scan of the source.

use super::boot_layout::demands;
use super::edits::plan_edits;
use super::firmware::{
    boot_order_advice, check_full_move_bootable, choose_table, family_name, firmware_prerequisites,
};
use super::geometry::{self, Geometry};
use super::ids::{new_ids, KnownIds, NewIds};
use super::mkfs::mkfs_steps;
use super::regenerated::raspi_firmware;
use super::source_check::{check_source, CheckedSource};
use super::target::{check_target_is_free, identity, resolve_target};
use super::trial::{trial_boot, wants_trial};
use super::*;
use crate::space::SpaceCheck;
use crate::system::disks::Disk;
use crate::system::pi::{BootSupport, PiFamily};
use crate::system::usage::{self, Exclusion};
use crate::system::System;
use crate::units::binary;
use std::path::Path;

/// A plan, or a refusal listing every reason found.
pub fn plan(system: &System, options: &Options) -> Result<Plan, Refusal> {
    plan_with_progress(
        system,
        options,
        &mut |_| std::ops::ControlFlow::Continue(()),
    )
}

/// [`plan`], reporting the progress of the source scan (the one step that
/// can take more than a moment). `scan_progress` returning `Break` stops
/// the scan, and the plan is refused as `source-unreadable` with an
/// `Interrupted` cause: the caller that broke it knows why and says so.
pub fn plan_with_progress(
    system: &System,
    options: &Options,
    scan_progress: &mut dyn FnMut(&usage::Usage) -> std::ops::ControlFlow<()>,
) -> Result<Plan, Refusal> {
    let mut reasons = Vec::new();
    let source = check_source(system, &mut reasons);
    let trial = wants_trial(system, options);
    let demands = source
        .as_ref()
        .map(|source| demands(source, options.layout, trial, &mut reasons))
        .unwrap_or_default();
    let target = match resolve_target(system, &options.target) {
        Ok(disk) => disk,
        Err(reason) => {
            reasons.push(reason);
            return Err(Refusal { reasons });
        }
    };
    check_target_is_free(system, target, &mut reasons);
    check_tools(options.layout, &mut reasons);
    let (kind, table_reason) = match choose_table(system, target, options) {
        Ok(choice) => choice,
        Err(reason) => {
            reasons.push(reason);
            return Err(Refusal { reasons });
        }
    };
    let mut firmware_notes = Vec::new();
    let mut firmware_warnings = Vec::new();
    if options.layout == Layout::Full {
        if let Err(reason) = check_full_move_bootable(system, target) {
            reasons.push(reason);
        }
        let config_txt = system
            .source
            .config_txt
            .as_ref()
            .map(|c| c.bytes.as_slice());
        reasons.extend(firmware_prerequisites(
            system,
            config_txt,
            target,
            &mut firmware_notes,
            &mut firmware_warnings,
        ));
    }
    let geometry = geometry::compute(&geometry::Request {
        disk_bytes: target.size_bytes,
        sector_size: target.logical_sector_size,
        kind,
        layout: options.layout,
        boot_bytes: options.boot_size,
        root_bytes: options.root_size,
    });
    let geometry = match geometry {
        Ok(geometry) => Some(geometry),
        Err(reason) => {
            reasons.push(reason);
            None
        }
    };
    let exclusions = exclusions(system, options);
    // A refused plan still reports whether the source would fit, but from
    // the filesystem's own count: walking a whole root takes a while.
    let scan = if reasons.is_empty() {
        usage::scan_with_progress(&system.host, &system.mounts, &exclusions, scan_progress)
    } else {
        Ok(usage::Usage {
            bytes: system.source_used_bytes.unwrap_or(0),
            ..usage::Usage::default()
        })
    };
    let scan = match scan {
        Ok(scan) => Some(scan),
        Err(err) => {
            reasons.push(Reason::new(
                "source-unreadable",
                format!(
                    "could not scan the source root {}: {err}",
                    system.host.source_root.display()
                ),
            ));
            None
        }
    };
    let (Some(source), Some(geometry), Some(scan)) = (source, geometry, scan) else {
        return Err(Refusal { reasons });
    };
    let ss = u64::from(target.logical_sector_size);
    let root_extent = geometry
        .extents
        .iter()
        .find(|e| e.role == PartitionRole::Root);
    let root_bytes = root_extent.map(|e| e.sectors() * ss).unwrap_or(0);
    let space = SpaceCheck::new(scan.bytes, root_bytes);
    if !space.fits {
        reasons.push(
            Reason::new(
                "target-too-small",
                format!(
                    "the system uses {} and needs {} free on the new root, but a {} root partition on {} holds only {}",
                    binary(space.used_bytes),
                    binary(space.required_bytes),
                    binary(root_bytes),
                    target.path.display(),
                    binary(space.usable_bytes)
                ),
            )
            .hint("choose a larger disk, or leave out large directories with --exclude"),
        );
    }
    let boot_copy = match options.layout {
        Layout::Full => match boot_copy(system, &source, &geometry, ss) {
            Ok(copy) => Some(copy),
            Err(reason) => {
                reasons.push(reason);
                None
            }
        },
        Layout::RootOnly => None,
    };

    let mut known = KnownIds::from_disks(&system.disks);
    let ids = match new_ids(&mut known, kind, &geometry, options) {
        Ok(ids) => ids,
        Err(reason) => {
            reasons.push(reason);
            return Err(Refusal { reasons });
        }
    };
    if !reasons.is_empty() {
        return Err(Refusal { reasons });
    }
    let table = table_plan(kind, table_reason, &geometry, &ids, target);
    let filesystems = mkfs_steps(system, &table, &ids, &known);
    let edits = plan_edits(
        system,
        &source,
        &table,
        &filesystems,
        options.layout,
        trial,
        demands.cmdline_ops,
    );
    let trial_boot = if trial {
        Some(trial_boot(system, &source))
    } else {
        None
    };
    let regenerated = raspi_firmware(system, &source, &table, &filesystems, options.layout, trial);
    let (mut edits, trial_boot, regenerated) = match (edits, trial_boot.transpose(), regenerated) {
        (Ok(edits), Ok(trial_boot), Ok(regenerated)) => (edits, trial_boot, regenerated),
        (edits, trial_boot, regenerated) => {
            let reasons = [edits.err(), trial_boot.err(), regenerated.err()]
                .into_iter()
                .flatten()
                .collect();
            return Err(Refusal { reasons });
        }
    };
    let mut warnings = warnings(system, target, &geometry, options.layout);
    warnings.extend(firmware_warnings);
    let mut notes = demands.notes;
    notes.extend(firmware_notes);
    if let Some(regenerated) = regenerated {
        edits.push(regenerated.edit);
        notes.push(regenerated.note);
        warnings.extend(regenerated.warning);
    }
    let boot_order = (options.layout == Layout::Full)
        .then(|| boot_order_advice(system, target, &mut warnings))
        .flatten();
    Ok(Plan {
        schema: PLAN_SCHEMA.to_string(),
        layout: options.layout,
        pi: PiSummary {
            model: system.pi.model.clone(),
            family: system.pi.family,
            eeprom_bootloader: system.pi.eeprom_bootloader,
            tryboot_available: system.pi.tryboot_available,
        },
        source: source.summary,
        target: identity(target),
        table,
        filesystems,
        copy: CopyPlan {
            from: system.host.source_root.clone(),
            exclusions,
            other_filesystems: scan.other_filesystems,
            files: scan.files,
            directories: scan.directories,
            space,
            checksum: options.checksum,
        },
        boot_copy,
        edits,
        trial_boot,
        boot_order,
        warnings,
        notes,
    })
}

fn check_tools(layout: Layout, reasons: &mut Vec<Reason>) {
    let mut needed = vec!["mkfs.ext4"];
    if layout == Layout::Full {
        needed.push("mkfs.vfat");
    }
    for program in needed {
        if crate::tools::which(program).is_none() {
            let package = crate::tools::package_for(program);
            reasons.push(
                Reason::new("tool-missing", format!("{program} is not installed"))
                    .hint(format!("install it with: sudo apt install {package}")),
            );
        }
    }
}

fn exclusions(system: &System, options: &Options) -> Vec<Exclusion> {
    let mut list = usage::default_exclusions();
    let root = &system.host.source_root;
    for swap in system.swaps.iter().filter(|s| s.kind == "file") {
        if let Ok(relative) = swap.path.strip_prefix(root) {
            let path = Path::new("/").join(relative);
            if !list.iter().any(|e| e.path == path) {
                list.push(Exclusion::new(
                    &path.to_string_lossy(),
                    false,
                    "active swap file",
                ));
            }
        }
    }
    // Boot files sitting in a plain directory of the root filesystem (an
    // image whose boot partition is not mounted) are not part of root.
    if let Some(boot_dir) = &system.source.boot_dir {
        if !system.source.boot_is_mounted {
            if let Ok(relative) = boot_dir.strip_prefix(root) {
                let path = Path::new("/").join(relative);
                list.push(Exclusion::new(
                    &path.to_string_lossy(),
                    true,
                    "boot files (copied to the boot partition, if at all)",
                ));
            }
        }
    }
    for exclude in &options.excludes {
        let path = Path::new("/").join(exclude.strip_prefix("/").unwrap_or(exclude));
        list.push(Exclusion::new(&path.to_string_lossy(), false, "--exclude"));
    }
    list
}

fn boot_copy(
    system: &System,
    source: &CheckedSource,
    geometry: &Geometry,
    ss: u64,
) -> Result<BootCopy, Reason> {
    let boot_dir = system.host.path(source.boot_dir);
    let (mut bytes, mut files) = (0u64, 0u64);
    for entry in walkdir::WalkDir::new(&boot_dir).into_iter() {
        let entry = entry.map_err(|err| {
            Reason::new(
                "source-unreadable",
                format!(
                    "could not read the boot files in {}: {err}",
                    source.boot_dir.display()
                ),
            )
        })?;
        if entry.file_type().is_file() {
            files += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    let boot = geometry
        .extents
        .iter()
        .find(|e| e.role == PartitionRole::Boot);
    let partition_bytes = boot.map(|e| e.sectors() * ss).unwrap_or(0);
    // FAT32 keeps two FATs and rounds files up to clusters: ask for 10 % room.
    if bytes + bytes / 10 > partition_bytes {
        return Err(Reason::new(
            "boot-too-small",
            format!(
                "the boot files take {}, more than the {} boot partition holds",
                binary(bytes),
                binary(partition_bytes)
            ),
        )
        .hint("give a larger --boot-size"));
    }
    Ok(BootCopy {
        from: source.boot_dir.to_path_buf(),
        to_partition: 1,
        bytes,
        files,
    })
}

fn table_plan(
    kind: TableKind,
    reason: String,
    geometry: &Geometry,
    ids: &NewIds,
    target: &Disk,
) -> TablePlan {
    let ss = u64::from(target.logical_sector_size);
    let partitions = geometry
        .extents
        .iter()
        .enumerate()
        .map(|(index, extent)| {
            let (type_id, type_name) = match (kind, extent.role) {
                (TableKind::Mbr, PartitionRole::Boot) => {
                    ("0x0c".to_string(), "W95 FAT32 (LBA)".to_string())
                }
                (TableKind::Mbr, PartitionRole::Root) => ("0x83".to_string(), "Linux".to_string()),
                (TableKind::Gpt, _) => ids.gpt_types[index].clone(),
            };
            PlannedPartition {
                number: index as u32 + 1,
                role: extent.role,
                start_sector: extent.start,
                end_sector: extent.end,
                size_bytes: extent.sectors() * ss,
                type_id,
                type_name,
                partuuid: ids.partuuids[index].clone(),
                name: (kind == TableKind::Gpt).then(|| match extent.role {
                    PartitionRole::Boot => "boot".to_string(),
                    PartitionRole::Root => "root".to_string(),
                }),
            }
        })
        .collect();
    TablePlan {
        kind,
        reason,
        disk_id: ids.disk_id.clone(),
        sector_size: target.logical_sector_size,
        alignment_bytes: geometry::ALIGNMENT_BYTES,
        partitions,
    }
}

fn warnings(system: &System, target: &Disk, geometry: &Geometry, layout: Layout) -> Vec<String> {
    let mut warnings = Vec::new();
    let existing: Vec<String> = target
        .partitions
        .iter()
        .map(|p| {
            let name = p
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or(format!("partition {}", p.number));
            let what = crate::units::join_present([p.fstype.as_deref(), p.label.as_deref()]);
            format!(
                "{name} ({}{}{})",
                binary(p.size_bytes),
                if what.is_empty() { "" } else { ", " },
                what
            )
        })
        .collect();
    if !existing.is_empty() {
        warnings.push(format!(
            "everything on {} will be erased: {}",
            target.path.display(),
            existing.join(", ")
        ));
    }
    if geometry.limited_by_mbr {
        warnings.push(format!(
            "MBR describes only the first 2 TiB: {} of {} stays unused",
            binary(geometry.unused_bytes),
            target.path.display()
        ));
    }
    if layout == Layout::RootOnly {
        warnings.push(
            "root-only move: the SD card keeps the boot partition and must stay in the Pi".into(),
        );
    }
    match system.pi.family {
        PiFamily::NotAPi => warnings.push(
            "this is not a Raspberry Pi (no Pi model in the device tree): what the firmware can boot from is not checked".into(),
        ),
        PiFamily::UnknownPi => warnings.push(format!(
            "{} is a model this version does not know: boot support is not checked",
            family_name(system)
        )),
        _ => {}
    }
    if layout == Layout::Full
        && target.transport == crate::system::disks::Transport::Usb
        && system.pi.can_boot.usb == BootSupport::NeedsOtp
    {
        warnings.push(
            "this Pi boots from USB only after the one-time, irreversible OTP setting program_usb_boot_mode=1; \
             `vcgencmd otp_dump | grep 17:` shows 3020000a once it is set"
                .into(),
        );
    }
    if let Some(usb) = &target.usb {
        if let Some((generation, best)) = usb.slow_link() {
            warnings.push(format!(
                "{} runs at {generation} speed ({} Mbit/s): expect {best} at best; use a blue USB 3 port if the Pi has one",
                target.path.display(),
                usb.speed_mbps.unwrap_or(0)
            ));
        }
    }
    for reference in system.source.references(&system.disks) {
        match reference.matches.len() {
            1 => {}
            0 => warnings.push(format!(
                "{} names {}, which no attached disk has",
                reference.place, reference.spec
            )),
            _ => warnings.push(format!(
                "{} names {}, which several attached devices have ({}): the kernel may pick either",
                reference.place,
                reference.spec,
                reference.matches.join(", ")
            )),
        }
    }
    if !system.source.boot_is_mounted && system.host.boot_dir.is_none() {
        warnings.push("the boot partition is not mounted; the boot files were read from a directory of the root filesystem".into());
    }
    warnings
}
