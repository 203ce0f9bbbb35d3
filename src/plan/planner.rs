//! From what is true about the machine and what the user asked, a plan or
//! every reason there cannot be one. Pure but for the read-only checks of
//! the target (is it busy?) and a metadata scan of the source.
//!
//! This file is the order of the steps; each step is its own module:
//! the request checked (source, target, tools, table, firmware), the
//! source scanned, the space checked, then the layout built (ids, table,
//! mkfs, edits, the trial boot) and its warnings and notes gathered.

use super::boot_copy::boot_copy;
use super::boot_layout::{demands, LayoutDemands};
use super::bootloader::{self, Decision};
use super::edits::{plan_edits, TrialRequest};
use super::exclusions::exclusions;
use super::firmware::{
    boot_order_advice, check_full_move_bootable, choose_table, firmware_prerequisites,
};
use super::geometry::{self, Geometry};
use super::ids::{new_ids, KnownIds};
use super::mkfs::mkfs_steps;
use super::regenerated::{raspi_firmware, Regenerated};
use super::source_check::{check_source, CheckedSource};
use super::table::table_plan;
use super::target::{check_target_is_free, identity, resolve_target};
use super::trial::{trial_boot, trial_site, wants_trial};
use super::trial_guard::TrialKernel;
use super::warnings::warnings;
use super::*;
use crate::space::SpaceCheck;
use crate::system::disks::Disk;
use crate::system::usage;
use crate::system::System;
use crate::units::binary;

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
    let Some(request) = check_request(system, options, &mut reasons) else {
        return Err(Refusal { reasons });
    };
    let exclusions = exclusions(system, options);
    // A refused plan still reports whether the source would fit, but from
    // the filesystem's own count: walking a whole root takes a while.
    let scan = scan_source(
        system,
        &exclusions,
        reasons.is_empty(),
        scan_progress,
        &mut reasons,
    );
    let Request {
        source,
        trial,
        bootloader,
        demands,
        target,
        kind,
        table_reason,
        firmware,
        geometry,
    } = request;
    let (Some(source), Some(geometry), Some(scan)) = (source, geometry, scan) else {
        return Err(Refusal { reasons });
    };
    let ss = u64::from(target.logical_sector_size);
    let space = check_space(target, &geometry, scan.bytes, &mut reasons);
    let boot_copy = match options.layout {
        Layout::Full => boot_copy(system, &source, &geometry, ss)
            .map_err(|reason| reasons.push(reason))
            .ok(),
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
    let disk = replica::DiskLayout { table, filesystems };
    let Changes {
        mut edits,
        trial_boot,
        regenerated,
    } = changes(
        system,
        options,
        &source,
        &disk,
        trial.then(|| trial_site(options.layout, bootloader.route)),
        &demands.cmdline_ops,
    )?;
    let mut warnings = warnings(system, target, &geometry, options.layout);
    warnings.extend(firmware.warnings);
    let mut notes = demands.notes;
    notes.extend(firmware.notes);
    notes.extend(bootloader.notes);
    if options.auto_commit && trial_boot.is_none() {
        notes.push(
            "--auto-commit: this plan has no trial boot (no tryboot here; --trial always asks for one), \
             so there is nothing to commit by itself"
                .to_string(),
        );
    }
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
        pi: pi_summary(system),
        source: source.summary,
        target: identity(target),
        disk,
        copy: copy_plan(system, options, exclusions, scan, space),
        boot_copy,
        edits,
        trial_boot,
        boot_order,
        bootloader: bootloader.plan,
        warnings,
        notes,
    })
}

/// What the plan says of the Pi it was made on.
fn pi_summary(system: &System) -> PiSummary {
    PiSummary {
        model: system.pi.model.clone(),
        family: system.pi.family,
        eeprom_bootloader: system.pi.eeprom_bootloader,
        tryboot_available: system.pi.tryboot_available,
    }
}

/// The root's copy: from where, without what, how much, and whether it
/// fits.
fn copy_plan(
    system: &System,
    options: &Options,
    exclusions: Vec<usage::Exclusion>,
    scan: usage::Usage,
    space: SpaceCheck,
) -> CopyPlan {
    CopyPlan {
        from: system.host.source_root.clone(),
        exclusions,
        other_filesystems: scan.other_filesystems,
        files: scan.files,
        directories: scan.directories,
        space,
        checksum: options.checksum,
    }
}

/// What the checks before the scan found, for the steps after it.
struct Request<'a> {
    source: Option<CheckedSource<'a>>,
    /// A trial boot first (a full move's: when the bootloader offers a
    /// route to it).
    trial: bool,
    bootloader: Decision,
    demands: LayoutDemands,
    target: &'a Disk,
    kind: TableKind,
    table_reason: String,
    firmware: FirmwareFindings,
    geometry: Option<Geometry>,
}

/// What a full move's firmware checks had to say beside their refusals.
#[derive(Default)]
struct FirmwareFindings {
    notes: Vec<String>,
    warnings: Vec<String>,
}

/// The source, the target, the tools, the partition table and (for a full
/// move) the firmware, every refusal added to `reasons`; `None` when the
/// plan cannot go on to the scan at all (no target, no possible table).
fn check_request<'a>(
    system: &'a System,
    options: &Options,
    reasons: &mut Vec<Reason>,
) -> Option<Request<'a>> {
    let source = check_source(system, reasons);
    let trial = wants_trial(system, options);
    let demands = source
        .as_ref()
        .map(|source| demands(source, options.layout, trial, reasons))
        .unwrap_or_default();
    let target = resolve_target(system, &options.target)
        .map_err(|reason| reasons.push(reason))
        .ok()?;
    check_target_is_free(system, target, reasons);
    check_tools(options.layout, reasons);
    let (kind, table_reason) = choose_table(system, target, options)
        .map_err(|reason| reasons.push(reason))
        .ok()?;
    let bootloader = bootloader::decide(system, options, target, trial, reasons);
    let trial = match options.layout {
        Layout::Full => bootloader.route.is_some(),
        Layout::RootOnly => trial,
    };
    // Asked for with no trial at all: a contradiction. With `--trial auto`
    // on a Pi without tryboot it has nothing to act on, which the plan's
    // notes say (a fleet can pass it to every Pi).
    if options.auto_commit && options.trial == TrialChoice::Never {
        reasons.push(
            Reason::new(
                "auto-commit-without-trial",
                "--auto-commit commits a trial boot once it checked itself, and --trial never asks for none",
            )
            .hint("leave out --trial never (or --no-trial), or leave out --auto-commit"),
        );
    }
    let mut firmware = FirmwareFindings::default();
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
            &mut firmware.notes,
            &mut firmware.warnings,
        ));
    }
    let geometry = geometry::compute(&geometry::Request {
        disk_bytes: target.size_bytes,
        sector_size: target.logical_sector_size,
        kind,
        layout: options.layout,
        boot_bytes: options.boot_size,
        root_bytes: options.root_size,
    })
    .map_err(|reason| reasons.push(reason))
    .ok();
    Some(Request {
        source,
        trial,
        bootloader,
        demands,
        target,
        kind,
        table_reason,
        firmware,
        geometry,
    })
}

/// The source root's files and bytes: walked when nothing is refused yet,
/// else the filesystem's own count.
fn scan_source(
    system: &System,
    exclusions: &[usage::Exclusion],
    walk: bool,
    scan_progress: &mut dyn FnMut(&usage::Usage) -> std::ops::ControlFlow<()>,
    reasons: &mut Vec<Reason>,
) -> Option<usage::Usage> {
    let scan = if walk {
        usage::scan_with_progress(&system.host, &system.mounts, exclusions, scan_progress)
    } else {
        Ok(usage::Usage {
            bytes: system.source_used_bytes.unwrap_or(0),
            ..usage::Usage::default()
        })
    };
    scan.map_err(|err| {
        reasons.push(Reason::new(
            "source-unreadable",
            format!(
                "could not scan the source root {}: {err}",
                system.host.source_root.display()
            ),
        ))
    })
    .ok()
}

/// Whether `used_bytes` fit on the planned root partition; a refusal
/// with the figures when not.
fn check_space(
    target: &Disk,
    geometry: &Geometry,
    used_bytes: u64,
    reasons: &mut Vec<Reason>,
) -> SpaceCheck {
    let ss = u64::from(target.logical_sector_size);
    let root_extent = geometry
        .extents
        .iter()
        .find(|e| e.role == PartitionRole::Root);
    let root_bytes = root_extent.map(|e| e.sectors() * ss).unwrap_or(0);
    let space = SpaceCheck::new(used_bytes, root_bytes);
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
    space
}

/// The plan's changes to files: the boot files' and fstab's edits, the
/// trial boot, and the edit of a config file that regenerates cmdline.txt.
struct Changes {
    edits: Vec<FileEdit>,
    trial_boot: Option<TrialBoot>,
    regenerated: Option<Regenerated>,
}

/// [`Changes`] for the planned disk, or the refusal of every part that
/// cannot be made: the replica's retargeted boot files placed where this
/// migration puts them, and the trial boot.
fn changes(
    system: &System,
    options: &Options,
    source: &CheckedSource,
    disk: &replica::DiskLayout,
    trial: Option<EditSite>,
    hook_ops: &[EditOperation],
) -> Result<Changes, Refusal> {
    let retargeted = replica::retarget(
        system,
        source,
        &disk.ids(),
        options.layout,
        hook_ops,
        super::regenerated::MOVED_HERE,
    )
    .map_err(|reasons| Refusal { reasons })?;
    let root_partition = disk
        .part(PartitionRole::Root)
        .map(|(p, _)| p.number)
        .unwrap_or(1);
    let request = trial.map(|site| TrialRequest {
        site,
        kernel: TrialKernel::of(system, source.boot_dir),
        auto_commit: options.auto_commit,
    });
    let edits = plan_edits(
        system,
        source,
        &retargeted,
        root_partition,
        options.layout,
        request,
    );
    let (edits, guard) = match edits {
        Ok((edits, guard)) => (Ok(edits), guard),
        Err(reason) => (Err(reason), None),
    };
    let trial_boot = trial
        .map(|site| trial_boot(system, source, site))
        .transpose()
        .map(|trial| trial.map(|trial| TrialBoot { guard, ..trial }));
    let regenerated = retargeted
        .rootpart
        .as_ref()
        .map(|rootpart| raspi_firmware(rootpart, root_partition, options.layout, trial.is_some()))
        .transpose();
    match (edits, trial_boot, regenerated) {
        (Ok(edits), Ok(trial_boot), Ok(regenerated)) => Ok(Changes {
            edits,
            trial_boot,
            regenerated,
        }),
        (edits, trial_boot, regenerated) => Err(Refusal {
            reasons: [edits.err(), trial_boot.err(), regenerated.err()]
                .into_iter()
                .flatten()
                .collect(),
        }),
    }
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
