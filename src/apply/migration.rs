//! The migration as a use case, for `migrate` and the wizard alike: what an
//! earlier journal means for this run, the executor driven with a progress
//! display and a log, and what the person does next.

use super::executor::{apply, ApplyContext};
use super::log::MigrationLog;
use super::standing;
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{BootloaderPlan, EepromTakesEffect, Handover, Layout, Plan, TrialRoute};
use crate::state::journal::{runs_from_target, Journal, Step};
use crate::system::kernel_events::{disk_events, uas_trouble, DiskNames, EventKind, KernelLog};
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
            if journal.is_complete() {
                Start::Finished(journal, Status::AlreadyComplete)
            } else {
                Start::Resume(journal)
            }
        }
        (false, Some(journal)) if !journal.is_complete() => bail!(
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

/// The journal of a migration whose new root is running, with its last
/// step recorded (under the state lock) if it was not.
fn complete(mut journal: Journal, state_dir: &Path) -> Result<Journal> {
    if !journal.is_complete() {
        let lock = super::state::StateLock::acquire(state_dir)?;
        lock.mark_step(&mut journal, Step::SourceBootEdited, state_dir)?;
    }
    Ok(journal)
}

/// Does the journal's target still carry the table the migration wrote
/// (the system just has not been rebooted into it)?
fn target_still_holds(system: &System, plan: &Plan) -> bool {
    system.disks.iter().any(|d| {
        d.devno == plan.target.devno
            && d.disk_id.as_deref() == Some(plan.disk.table.disk_id.as_str())
    })
}

/// `err`, which stopped a migration run (`migrate`, the wizard), ending
/// with where the Pi stands and what goes on. `about` is the journal of
/// the migration the run took up, if it got that far, and `saved` whether
/// the state directory held it then (a resume) or not yet (a new one).
pub fn stopped(
    err: anyhow::Error,
    state_dir: &Path,
    about: Option<&Journal>,
    saved: bool,
    purpose: Purpose,
) -> anyhow::Error {
    standing::attach(err, |writing| {
        let now = Journal::load(state_dir).ok().flatten();
        let journal = match about {
            // Before the run took one up: an earlier migration that
            // stopped is where the Pi stands; one that finished is not
            // this run's.
            None => now.filter(|j| !j.is_complete()),
            Some(ours) => match now.filter(|j| same_migration(j, ours)) {
                Some(now) => Some(now),
                None => saved.then(|| ours.clone()),
            },
        };
        let first = journal
            .as_ref()
            .and_then(|j| next_steps(&j.plan, purpose).into_iter().next());
        standing::migration(
            journal.as_ref(),
            writing,
            &standing::this_command(),
            first.as_deref(),
        )
    })
}

/// Whether two journals are of one migration (the same start, the same
/// new disk id).
fn same_migration(a: &Journal, b: &Journal) -> bool {
    a.started == b.started && a.plan.disk.table.disk_id == b.plan.disk.table.disk_id
}

/// How the executor's progress is shown.
#[derive(Debug, Clone, Copy)]
pub struct ProgressDisplay {
    /// A bar for the copy (bytes, entries, speed, ETA).
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
    // A terminal that goes away from here on leaves the migration running,
    // its output in this log (`crate::signals`).
    crate::signals::output_to(log.path())?;
    log_start(&log, &journal, purpose);
    let bar = display
        .copy_bar
        .then(|| copy_bar(journal.plan.copy.space.used_bytes));
    let step = |message: &str| {
        log.line(message);
        // After a hang-up stderr is this log, which has the line already.
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if display.step_lines && !crate::signals::hung_up() => {
                crate::signals::eprint_line(&format!("==> {message}"))
            }
            None => {}
        }
    };
    let progress = |bytes: u64, entries: u64| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
            bar.set_message(format!("{entries} entries"));
        }
    };
    let ctx = ApplyContext {
        cancel,
        step: &step,
        progress: &progress,
        log: Some(&log),
    };
    // The kernel log's last record before the copy: what the bridge does
    // under pimigrate's own load is looked at afterwards.
    let mark = KernelLog::read(&system.host).last_seq();
    let result = apply(system, journal, &ctx);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match &result {
        Ok(journal) => {
            log.line("done");
            if let Some(note) = mark.and_then(|mark| uas_trouble_since(system, &journal.plan, mark))
            {
                log.line(&note);
                if !crate::signals::hung_up() {
                    crate::signals::eprint_line(&format!("pimigrate: {note}"));
                }
            }
            log.line(&format!(
                "next:\n{}",
                next_steps(&journal.plan, purpose).join("\n")
            ));
            if display.step_lines && !crate::signals::hung_up() {
                crate::signals::eprint_line(&format!(
                    "==> the full log is in {}",
                    log.path().display()
                ));
            }
        }
        Err(err) => {
            log.line(&format!("error: {err:#}"));
            // Shown even with -q: it is what a bug report needs.
            crate::signals::eprint_line(&format!(
                "pimigrate: the full log is in {}",
                log.path().display()
            ));
        }
    }
    result
}

/// What the kernel logged of the target's bridge on uas since the record
/// `mark` (the migration's own copy), when it aborted or reset and the
/// plan does not already move it to usb-storage: the quirk, to set in the
/// new system.
fn uas_trouble_since(system: &System, plan: &Plan, mark: u64) -> Option<String> {
    let quirk = plan.after_move.usb_quirk.as_ref()?;
    if quirk.driver.as_deref() != Some("uas") || quirk.sets() || quirk.already {
        return None;
    }
    let log = KernelLog::read(&system.host);
    let names = DiskNames::of_disk(&system.host, &plan.target.name);
    let events = disk_events(log.after(mark), &names);
    if !uas_trouble(&events) {
        return None;
    }
    let trouble: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::UasAbort | EventKind::UasReset | EventKind::UsbReset
            )
        })
        .collect();
    let first = trouble
        .first()
        .map(|e| e.message.as_str())
        .unwrap_or_default();
    let fix = match &quirk.refused {
        None => format!(
            "in the new system, `sudo pimigrate verify --apply-quirk` sets {} (usb-storage instead; \
             it costs speed and usually TRIM)",
            quirk.argument.as_deref().unwrap_or("usb-storage.quirks")
        ),
        Some(why) => format!("it cannot be moved to usb-storage: {why}"),
    };
    Some(format!(
        "the kernel logged {} uas abort or reset message(s) of {} during the migration (first: \"{first}\"): \
         the bridge {} misbehaves on uas; {fix}",
        trouble.len(),
        plan.target.path.display(),
        quirk.bridge
    ))
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
        let done: Vec<&str> = journal.done.iter().map(|s| s.name()).collect();
        log.line(&format!(
            "resuming; steps already done: {}",
            done.join(", ")
        ));
    }
    log.line("the plan:");
    log.block(&plan_text(&journal.plan, Detail::Full, purpose));
}

fn copy_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        crate::ui::stderr_term::draw_target(),
    );
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
    let rerun = if wizard {
        ""
    } else {
        " (or rerun with --reboot)"
    };
    let mut steps = Vec::new();
    let mut checked = false;
    let device_trial = plan
        .bootloader
        .as_ref()
        .filter(|b| b.trial == Some(TrialRoute::Device));
    match (plan.layout, &plan.trial_boot, device_trial) {
        (Layout::Full, Some(_), Some(bootloader)) => {
            checked = true;
            steps.extend(device_trial_steps(bootloader, rerun));
            steps.push(match auto_commits(plan) {
                true => AUTO_COMMIT_STEP.into(),
                false => handover_step(bootloader),
            });
        }
        (_, Some(_), _) => {
            checked = true;
            let what = match plan.layout {
                Layout::RootOnly => "the new root",
                Layout::Full => "the SD card's kernel with the new drive's root",
            };
            steps.push(format!(
                "reboot once into {what} on trial: sudo reboot \"0 tryboot\"{rerun}"
            ));
            steps.push(TRIAL_RESETS.into());
            match (&plan.bootloader, auto_commits(plan)) {
                (_, true) => steps.push(AUTO_COMMIT_STEP.into()),
                (Some(bootloader), false) => steps.push(handover_step(bootloader)),
                (None, false) => steps.push(
                    "once it runs from the new disk, make it permanent: sudo pimigrate verify --commit"
                        .into(),
                ),
            }
        }
        (Layout::RootOnly, None, _) => {
            steps.push("reboot: the SD card's boot partition now starts the new root (the SD card stays in)".into());
        }
        (Layout::Full, None, _) => match plan.bootloader.as_ref().filter(|b| b.consent) {
            Some(bootloader) if bootloader.at_migrate.is_some() => steps.push(format!(
                "reboot: {}; the SD card stays the fallback",
                applied_at_reboot(bootloader, "the new drive")
            )),
            _ => {
                if let Some(order) = &plan.boot_order {
                    steps.push(order.message.clone());
                }
                steps.push(
                    "shut down, take the SD card out (or keep it as a fallback), and power on"
                        .into(),
                );
            }
        },
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

/// How a change the migration made to the bootloader's config takes
/// effect, then starts `then`.
fn applied_at_reboot(bootloader: &BootloaderPlan, then: &str) -> String {
    match bootloader.takes_effect {
        EepromTakesEffect::NextReboot => format!(
            "the bootloader writes its new config at this reboot (recovery.bin, from the SD card) and then starts {then}"
        ),
        EepromTakesEffect::AtOnce => format!("the bootloader already has its new config and starts {then}"),
    }
}

/// A full move's one-shot boot of the new drive, step by step.
fn device_trial_steps(bootloader: &BootloaderPlan, rerun: &str) -> Vec<String> {
    let mut steps = Vec::new();
    let staged = bootloader.takes_effect == EepromTakesEffect::NextReboot
        && bootloader.consent
        && bootloader.at_migrate.is_some();
    if staged {
        steps.push(
            "reboot once: the bootloader writes its new config (recovery.bin, from the SD card) and starts \
             the SD card as before: sudo reboot"
                .into(),
        );
        steps.push(format!(
            "then boot the new drive once, on trial: sudo pimigrate migrate --resume --reboot{}",
            if rerun.is_empty() {
                ""
            } else {
                " (--reboot does this first reboot for you)"
            }
        ));
    } else {
        steps.push(format!(
            "boot the new drive once, on trial: sudo pimigrate migrate --resume --reboot{rerun}"
        ));
    }
    steps.push(TRIAL_RESETS.into());
    steps
}

/// What happens when a trial does not come up (`plan::trial_guard`).
const TRIAL_RESETS: &str =
    "if it does not come up, it resets by itself within minutes (or power-cycle it): \
                            the SD card boots as before";

/// What follows the trial reboot with --auto-commit.
const AUTO_COMMIT_STEP: &str = "nothing more by hand: once up, the trial checks itself and commits, or goes back \
                                to the SD card; after the next login `pimigrate status` says which, and why";

/// Whether the plan's trial checks and commits itself.
fn auto_commits(plan: &Plan) -> bool {
    plan.trial_boot
        .as_ref()
        .and_then(|t| t.guard.as_ref())
        .is_some_and(|g| g.auto_commit)
}

/// What `verify --commit` hands over.
fn handover_step(bootloader: &BootloaderPlan) -> String {
    match (bootloader.handover, bootloader.at_commit.as_ref()) {
        (Handover::BootOrder, Some(change)) => format!(
            "once it runs from the new drive: sudo pimigrate verify --commit, which sets {}",
            change.purpose
        ),
        (Handover::BootOrder, None) => {
            "once it runs from the new drive: sudo pimigrate verify --commit \
             (the boot order already starts it first)"
                .into()
        }
        (Handover::RemoveCard, Some(_))
            if bootloader.consent && bootloader.takes_effect == EepromTakesEffect::NextReboot =>
        {
            "once it runs from the new drive: sudo pimigrate verify --commit, which stages the bootloader's \
             config without the trial's order; reboot once with the SD card still in (the bootloader writes it), \
             then shut down, take the SD card out and power on"
                .into()
        }
        (Handover::RemoveCard, _) => {
            "once it runs from the new drive: sudo pimigrate verify --commit, \
             then shut down, take the SD card out and power on"
                .into()
        }
    }
}

/// How `--reboot` restarts the Pi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebootInto {
    /// `reboot "0 tryboot"` (after the Pi 5's one-shot boot order): the trial.
    Trial,
    /// A plain reboot: no trial pending, or a Pi 4 bootloader that must
    /// first write the config the trial needs.
    Normal,
}

/// Which reboot `--reboot` makes now, for a migration in `journal`.
pub fn reboot_into(journal: &Journal) -> Result<RebootInto> {
    let plan = &journal.plan;
    if plan.trial_boot.is_none() || journal.committed.is_some() {
        return Ok(RebootInto::Normal);
    }
    let Some(bootloader) = plan
        .bootloader
        .as_ref()
        .filter(|b| b.trial == Some(TrialRoute::Device))
    else {
        return Ok(RebootInto::Trial);
    };
    if bootloader.takes_effect == EepromTakesEffect::AtOnce || bootloader.at_migrate.is_none() {
        return Ok(RebootInto::Trial);
    }
    // The Pi 4's [tryboot] order is in the running config once recovery.bin
    // wrote it; until then a trial reboot would not reach the new drive.
    let board = plan
        .pi
        .model
        .as_deref()
        .and_then(crate::system::pi::config_filter);
    Ok(
        match super::bootloader::migrate_change_running(bootloader, board)? {
            true => RebootInto::Trial,
            false => RebootInto::Normal,
        },
    )
}

/// `--reboot`, as [`reboot_into`] decided: into the trial boot (a Pi 5's
/// one-shot boot order set first), or a plain reboot. A trial reboot is recorded in the journal, so a normal boot
/// after it tells `verify` the trial did not come up.
pub fn reboot(journal: &mut Journal, state_dir: &Path, into: RebootInto) -> Result<()> {
    let mut command = std::process::Command::new("systemctl");
    command.arg("reboot");
    if into == RebootInto::Trial {
        if let Some(order) = journal
            .plan
            .bootloader
            .as_ref()
            .and_then(|b| b.reboot_order)
        {
            super::bootloader::set_reboot_order(order)?;
        }
        let lock = super::state::StateLock::acquire(state_dir)?;
        journal.trial_requested = Some(crate::clock::now());
        lock.save_journal(journal, state_dir)?;
        command.arg("0 tryboot");
    }
    let status = command.status().context("running systemctl reboot")?;
    if !status.success() {
        bail!("systemctl reboot failed ({status}); reboot by hand");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Pi 4 fixture, copied so its kernel log can grow.
    fn pi4() -> (tempfile::TempDir, System) {
        let dir = tempfile::tempdir().unwrap();
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4");
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", from.display()))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let system = System::inspect(&crate::host::Host::with_root(dir.path())).unwrap();
        (dir, system)
    }

    /// What the bridge did during pimigrate's own copy is looked at after
    /// it: resets logged after the mark name the quirk to set in the new
    /// system; what came before the mark, or nothing, says nothing.
    #[test]
    fn uas_resets_during_the_copy_are_named_with_the_quirk() {
        let (dir, system) = pi4();
        let mut options = crate::plan::Options::new("/dev/sda");
        options.seed = Some(7);
        let plan = crate::plan::plan(&system, &options).unwrap();
        let mark = KernelLog::read(&system.host).last_seq().unwrap();
        assert_eq!(uas_trouble_since(&system, &plan, mark), None);
        let kmsg = dir.path().join("dev/kmsg");
        let mut log = std::fs::read_to_string(&kmsg).unwrap();
        log.push_str("4,1300,99000000,-;sd 0:0:0:0: [sda] tag#3 uas_eh_abort_handler 0 uas-tag 1 inflight: CMD OUT\n");
        log.push_str("6,1301,99000100,-;scsi host0: uas_eh_device_reset_handler start\n");
        std::fs::write(&kmsg, log).unwrap();
        let note = uas_trouble_since(&system, &plan, mark).expect("a note");
        assert!(
            note.starts_with("the kernel logged 2 uas abort or reset message(s) of /dev/sda during the migration"),
            "{note}"
        );
        assert!(
            note.contains(
                "sudo pimigrate verify --apply-quirk` sets usb-storage.quirks=174c:55aa:u"
            ),
            "{note}"
        );
        assert_eq!(uas_trouble_since(&system, &plan, 1301), None);
        // A plan that sets the quirk already has nothing to add.
        options.usb_quirk = true;
        let quirked = crate::plan::plan(&system, &options).unwrap();
        assert_eq!(uas_trouble_since(&system, &quirked, mark), None);
    }
}
