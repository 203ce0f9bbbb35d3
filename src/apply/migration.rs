//! The migration as a use case, for `migrate` and the wizard alike: what an
//! earlier journal means for this run, the executor driven with a progress
//! display and a log, and what the person does next.

use super::executor::{apply, ApplyContext};
use super::journal::{Journal, Step};
use super::log::MigrationLog;
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{Layout, PartitionRole, Plan};
use crate::system::System;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// How a `migrate` run ended (`status` in its JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// This run migrated (or carried an interrupted migration to its end).
    Migrated,
    /// `--resume`, but the journal says every step is done.
    AlreadyComplete,
    /// The running root already is the target's.
    AlreadyMigrated,
    /// The target holds the migration; the system has not been rebooted.
    PendingReboot,
}

/// What an earlier journal (or none) means for this run.
#[derive(Debug)]
pub enum Start {
    /// Nothing in the way: plan and migrate.
    Fresh,
    /// Carry on with the interrupted migration.
    Resume(Journal),
    /// Nothing to do: the journal's migration already went this far.
    Finished(Journal, Status),
}

/// Decides from the state directory's journal whether this run starts
/// afresh, resumes, or has nothing to do; refuses what would be unsafe
/// (a second migration over an interrupted one, a resume to another disk).
pub fn start(
    system: &System,
    previous: Option<Journal>,
    resume: bool,
    target: Option<&Path>,
    state_dir: &Path,
) -> Result<Start> {
    Ok(match (resume, previous) {
        (true, None) => bail!(
            "there is no migration to resume (no journal in {})",
            state_dir.display()
        ),
        // Running from the target's root: the move got this far, whatever
        // the journal could still record (its copy on the new root is made
        // before the SD card's boot files change, and a power cut can come
        // between that change and the journal's last save).
        (_, Some(journal)) if runs_from_target(system, &journal.plan) => {
            Start::Finished(complete(journal, state_dir)?, Status::AlreadyMigrated)
        }
        (true, Some(journal)) => {
            if let Some(target) = target {
                if target != journal.plan.target.path {
                    bail!(
                        "the interrupted migration was to {}, not {}",
                        journal.plan.target.path.display(),
                        target.display()
                    );
                }
            }
            if is_complete(&journal) {
                Start::Finished(journal, Status::AlreadyComplete)
            } else {
                Start::Resume(journal)
            }
        }
        (false, Some(journal)) if !is_complete(&journal) => bail!(
            "an earlier migration to {} stopped before it finished: `pimigrate migrate --resume` carries \
             on, `pimigrate rollback` undoes it",
            journal.plan.target.path.display()
        ),
        (false, Some(journal)) if target_still_holds(system, &journal.plan) => {
            Start::Finished(journal, Status::PendingReboot)
        }
        (false, _) => Start::Fresh,
    })
}

/// The journal of a new migration of `plan` on this system.
pub fn new_journal(system: &System, plan: Plan) -> Result<Journal> {
    let boot_dir = system
        .source
        .boot_dir
        .clone()
        .context("no boot directory (the plan would have refused)")?;
    Ok(Journal::new(
        plan,
        system.host.source_root.clone(),
        boot_dir,
    ))
}

/// Whether `journal`'s migration reached its end: its last step recorded,
/// or this system running from the target's root.
pub fn landed(system: &System, journal: &Journal) -> bool {
    is_complete(journal) || runs_from_target(system, &journal.plan)
}

fn is_complete(journal: &Journal) -> bool {
    journal.is_done(Step::SourceBootEdited)
}

/// The journal of a migration whose new root is running, with its last
/// step recorded (under the state lock) if it was not.
fn complete(mut journal: Journal, state_dir: &Path) -> Result<Journal> {
    if !is_complete(&journal) {
        let _lock = super::boot_partition::StateLock::acquire(state_dir)?;
        journal.mark(Step::SourceBootEdited, state_dir)?;
    }
    Ok(journal)
}

/// Is the running root the planned root partition on the target?
fn runs_from_target(system: &System, plan: &Plan) -> bool {
    let Some(root) = plan
        .table
        .partitions
        .iter()
        .find(|p| p.role == PartitionRole::Root)
    else {
        return false;
    };
    let Some(devno) = system.source.running_root_devno else {
        return false;
    };
    system
        .disks
        .iter()
        .flat_map(|d| &d.partitions)
        .any(|p| p.devno == Some(devno) && p.partuuid.as_deref() == Some(root.partuuid.as_str()))
}

/// Does the journal's target still carry the table the migration wrote
/// (the system just has not been rebooted into it)?
fn target_still_holds(system: &System, plan: &Plan) -> bool {
    system.disks.iter().any(|d| {
        d.devno == plan.target.devno && d.disk_id.as_deref() == Some(plan.table.disk_id.as_str())
    })
}

/// How the executor's progress is shown.
#[derive(Debug, Clone, Copy)]
pub struct ProgressDisplay {
    /// A bar for the copy (bytes, files, speed, ETA).
    pub copy_bar: bool,
    /// A `==> step` line as each step begins.
    pub step_lines: bool,
}

/// Runs the executor with the progress display `migrate` and the wizard
/// use: step lines on stderr, printed above the copy bar while it runs,
/// and the full log in the host's log directory. `purpose` says who
/// drives it (the next steps in the log are theirs).
pub fn apply_with_progress(
    system: &System,
    journal: Journal,
    cancel: &AtomicBool,
    display: ProgressDisplay,
    purpose: Purpose,
) -> Result<Journal> {
    // Created before the first write, so a migration that cannot keep a
    // log does not start.
    let log = MigrationLog::create(&system.host.path(&system.host.log_dir))?;
    log_start(&log, &journal, purpose);
    let bar = display
        .copy_bar
        .then(|| copy_bar(journal.plan.copy.space.used_bytes));
    let step = |message: &str| {
        log.line(message);
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if display.step_lines => eprintln!("==> {message}"),
            None => {}
        }
    };
    let copy_progress = |bytes: u64, files: u64| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
            bar.set_message(format!("{files} files"));
        }
    };
    let ctx = ApplyContext {
        cancel,
        step: &step,
        copy_progress: &copy_progress,
        log: Some(&log),
    };
    let result = apply(system, journal, &ctx);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match &result {
        Ok(journal) => {
            log.line("done");
            log.line(&format!(
                "next:\n{}",
                next_steps(&journal.plan, purpose).join("\n")
            ));
            if display.step_lines {
                eprintln!("==> the full log is in {}", log.path().display());
            }
        }
        Err(err) => {
            log.line(&format!("error: {err:#}"));
            // Shown even with -q: it is what a bug report needs.
            eprintln!("pimigrate: the full log is in {}", log.path().display());
        }
    }
    result
}

/// The log's head: which build, what is moved where, and the whole plan.
fn log_start(log: &MigrationLog, journal: &Journal, purpose: Purpose) {
    log.line(&format!(
        "pimigrate {} migrating {} to {}",
        env!("PIMIGRATE_VERSION"),
        journal.source_root.display(),
        journal.plan.target.path.display()
    ));
    if !journal.done.is_empty() {
        let done: Vec<String> = journal.done.iter().map(|s| format!("{s:?}")).collect();
        log.line(&format!(
            "resuming; steps already done: {}",
            done.join(", ")
        ));
    }
    log.line("the plan:");
    log.block(&plan_text(&journal.plan, Detail::Full, purpose));
}

fn copy_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg} ETA {eta}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// What the person does next, in order. `migrate` offers to rerun with
/// `--reboot`; the wizard has no such flag, and a move without a trial
/// boot gets the check after the reboot too (with a trial, `verify
/// --commit` is already a step), so the person knows how to tell that it
/// worked.
pub fn next_steps(plan: &Plan, purpose: Purpose) -> Vec<String> {
    let wizard = purpose == Purpose::Wizard;
    let mut steps = Vec::new();
    let mut checked = false;
    match (plan.layout, &plan.trial_boot) {
        (Layout::RootOnly, Some(_)) => {
            checked = true;
            steps.push(format!(
                "reboot once into the new root on trial: sudo reboot \"0 tryboot\"{}",
                if wizard {
                    ""
                } else {
                    " (or rerun with --reboot)"
                }
            ));
            steps.push("if it does not come up, power-cycle: the SD card boots as before".into());
            steps.push(
                "once it runs from the new disk, make it permanent: sudo pimigrate verify --commit"
                    .into(),
            );
        }
        (Layout::RootOnly, None) => {
            steps.push("reboot: the SD card's boot partition now starts the new root (the SD card stays in)".into());
        }
        (Layout::Full, _) => {
            if let Some(order) = &plan.boot_order {
                steps.push(order.message.clone());
            }
            steps.push(
                "shut down, take the SD card out (or keep it as a fallback), and power on".into(),
            );
        }
    }
    if wizard && !checked {
        steps.push(
            "once it is up, check that it runs from the new disk and see the speed-up: \
             sudo pimigrate verify"
                .into(),
        );
    }
    // Last, the way back, which is for when it failed.
    steps.push("to undo the boot-file changes: sudo pimigrate rollback".into());
    steps
}

/// `--reboot`: into the trial boot when there is one.
pub fn reboot(plan: &Plan) -> Result<()> {
    let mut command = std::process::Command::new("systemctl");
    command.arg("reboot");
    if plan.trial_boot.is_some() {
        command.arg("0 tryboot");
    }
    let status = command.status().context("running systemctl reboot")?;
    if !status.success() {
        bail!("systemctl reboot failed ({status}); reboot by hand");
    }
    Ok(())
}
