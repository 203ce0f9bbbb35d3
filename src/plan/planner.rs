//! From what is true about the machine and what the user asked, a plan or
//! every reason there cannot be one. Pure but for the read-only checks of
//! the target (is it busy?) and a metadata scan of the source.
//!
//! This file is the order of the steps; each step is its own module:
//! the request checked (source, target, tools, table, firmware), the
//! source scanned, the space checked, then the layout built (ids, table,
//! mkfs, edits, the trial boot) and its warnings and notes gathered.

use super::boot_layout::{demands, LayoutDemands};
use super::bootloader::{self, Decision};
use super::edits::{plan_edits, TrialRequest};
use super::exclusions::exclusions;
use super::firmware::{boot_order_advice, check_full_move_bootable, firmware_prerequisites};
use super::regenerated::{raspi_firmware, Regenerated};
use super::replica::{
    boot_files, check_disk, check_fits, identity, lay_out, resolve_disk, LayoutRequest, NewLayout,
    Writes,
};
use super::source_check::{check_source, CheckedSource};
use super::trial::{trial_boot, trial_site, wants_trial};
use super::trial_guard::TrialKernel;
use super::warnings::warnings;
use super::*;
use crate::space::SpaceCheck;
use crate::system::disks::Disk;
use crate::system::usage;
use crate::system::System;

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
    let Some(mut request) = check_request(system, options, &mut reasons) else {
        return Err(Refusal { reasons });
    };
    let exclusions = exclusions(system, &options.excludes);
    // A refused plan still reports whether the source would fit, but from
    // the filesystem's own count: walking a whole root takes a while.
    let scan = scan_source(
        system,
        &exclusions,
        reasons.is_empty(),
        scan_progress,
        &mut reasons,
    );
    let (Some(source), Some(laid_out), Some(scan)) =
        (request.source.take(), request.laid_out.take(), scan)
    else {
        return Err(Refusal { reasons });
    };
    let space = check_space(request.target, &laid_out.disk, scan.bytes, &mut reasons);
    let boot_copy = match laid_out.disk.part(PartitionRole::Boot) {
        Some((boot, _)) => boot_files(system, &source, boot.number, boot.size_bytes)
            .map_err(|reason| reasons.push(reason))
            .ok(),
        None => None,
    };
    if !reasons.is_empty() {
        return Err(Refusal { reasons });
    }
    let copy = copy_plan(system, options, exclusions, scan, space);
    finish(system, options, request, source, laid_out, copy, boot_copy)
}

/// The plan of a request whose every check passed: the changes to files
/// and the trial boot, the warnings and notes, the boot order.
fn finish(
    system: &System,
    options: &Options,
    request: Request,
    source: CheckedSource,
    laid_out: NewLayout,
    copy: CopyPlan,
    boot_copy: Option<BootCopy>,
) -> Result<Plan, Refusal> {
    let Request {
        trial,
        bootloader,
        demands,
        target,
        firmware,
        after_move,
        ..
    } = request;
    let NewLayout { disk, geometry } = laid_out;
    let cmdline_ops: Vec<EditOperation> = demands
        .cmdline_ops
        .iter()
        .chain(&after_move.cmdline_ops)
        .cloned()
        .collect();
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
        &cmdline_ops,
    )?;
    let mut warnings = warnings(system, target, &geometry, options.layout);
    warnings.extend(firmware.warnings);
    warnings.extend(after_move.warnings);
    let mut notes = demands.notes;
    notes.extend(source.root_type.note());
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
        copy,
        boot_copy,
        edits,
        trial_boot,
        boot_order,
        bootloader: bootloader.plan,
        after_move: after_move.after_move,
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
    firmware: FirmwareFindings,
    /// The target's table and filesystems ([`lay_out`], the replica's).
    laid_out: Option<NewLayout>,
    /// TRIM, the bridge's driver and the power ([`after_move`]).
    after_move: after_move::Decided,
}

/// What a full move's firmware checks had to say beside their refusals.
#[derive(Default)]
struct FirmwareFindings {
    notes: Vec<String>,
    warnings: Vec<String>,
}

/// The source, the target (the replica's one resolution and check of a
/// disk), the bootloader, (for a full move) the firmware, and the target's
/// layout, every refusal added to `reasons`; `None` when the plan cannot
/// go on to the scan at all (no target).
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
    let target = resolve_disk(system, &options.target)
        .map_err(|reason| reasons.push(reason))
        .ok()?;
    reasons.extend(check_disk(system, target, Writes::WholeDisk));
    let mut bootloader = bootloader::decide(system, options, target, trial, reasons);
    let after_move = after_move::decide(
        system,
        options,
        target,
        source.as_ref().map(|s| s.cmdline),
        bootloader.plan.as_mut(),
        reasons,
    );
    // A change for the power alone must be possible here too: the image
    // it is built on, a Compute Module's, an A/B EEPROM's.
    if let Some(plan) = bootloader.plan.as_mut() {
        if plan.power.is_some() && plan.base.is_none() {
            plan.base = bootloader::can_change(&system.pi, reasons);
        }
    }
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
    let firmware = check_firmware(system, options, target, reasons);
    let laid_out = lay_out(system, target, &LayoutRequest::of(options))
        .map_err(|found| reasons.extend(found))
        .ok();
    Some(Request {
        source,
        trial,
        bootloader,
        demands,
        target,
        firmware,
        laid_out,
        after_move,
    })
}

/// A full move's firmware checks: can the Pi boot the target at all, and
/// what it needs there.
fn check_firmware(
    system: &System,
    options: &Options,
    target: &Disk,
    reasons: &mut Vec<Reason>,
) -> FirmwareFindings {
    let mut firmware = FirmwareFindings::default();
    if options.layout != Layout::Full {
        return firmware;
    }
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
    firmware
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

/// Whether `used_bytes` fit on the planned root partition (the replica's
/// one rule); a refusal with the figures when not.
fn check_space(
    target: &Disk,
    disk: &replica::DiskLayout,
    used_bytes: u64,
    reasons: &mut Vec<Reason>,
) -> SpaceCheck {
    let root_bytes = disk
        .part(PartitionRole::Root)
        .map(|(p, _)| p.size_bytes)
        .unwrap_or(0);
    let (space, refusal) = check_fits(&target.path, root_bytes, used_bytes);
    reasons.extend(refusal);
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
    let device = format!("the new root filesystem (partition {root_partition} of the target)");
    let root = replica::root_edits(source, &retargeted, &device);
    let request = trial.map(|site| TrialRequest {
        site,
        kernel: TrialKernel::of(system, source.boot_dir),
        auto_commit: options.auto_commit,
    });
    let (cmdlines, guard) = match plan_edits(system, source, &retargeted, options.layout, request) {
        Ok((edits, guard)) => (Ok(edits), guard),
        Err(reason) => (Err(reason), None),
    };
    let trial_boot = trial
        .map(|site| trial_boot(system, source, site))
        .transpose()
        .map(|trial| trial.map(|trial| TrialBoot { guard, ..trial }));
    match (root, cmdlines, trial_boot) {
        (Ok(root), Ok(cmdlines), Ok(trial_boot)) => {
            let regenerated =
                retargeted
                    .rootpart
                    .as_ref()
                    .zip(root.rootpart)
                    .map(|(rootpart, edit)| {
                        raspi_firmware(rootpart, edit, options.layout, trial.is_some())
                    });
            Ok(Changes {
                edits: root.fstab.into_iter().chain(cmdlines).collect(),
                trial_boot,
                regenerated,
            })
        }
        (root, cmdlines, trial_boot) => Err(Refusal {
            reasons: root
                .err()
                .unwrap_or_default()
                .into_iter()
                .chain(cmdlines.err())
                .chain(trial_boot.err())
                .collect(),
        }),
    }
}
