//! Where a migration stands and how it ended, for somebody who was not
//! watching: `pimigrate status`, the login message (`status --login`, run
//! by the package's update-motd.d snippet), and a line in `devices`.
//!
//! Read-only: the state directory (the journal, the trial's own record,
//! the lock a running pimigrate holds), the newest migration log, and this
//! boot. What a trial that never reached its system could not record is
//! said as what it is: it came back without a record, this long after the
//! trial reboot.

use crate::apply::journal::{Journal, Step};
use crate::apply::log::{self, LogEnd};
use crate::apply::trial_outcome::TrialOutcome;
use crate::host::Host;
use crate::plan::trial_guard::TRIAL_BOOT_DEADLINE_SECONDS;
use crate::system::System;
use crate::verify::expected::Expected;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub const STATUS_SCHEMA: &str = "pimigrate.status/1";

/// How long a committed trial is news at login.
const NEWS_FOR_SECONDS: u64 = 7 * 86_400;

/// Where things stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// No migration journal.
    None,
    /// A pimigrate command holds the state lock right now.
    Running,
    /// A migration stopped before its end, and nothing runs it.
    Stopped,
    /// Migrated without a trial boot.
    Migrated,
    /// Migrated; the trial boot has not run yet.
    TrialPending,
    /// This boot is the trial.
    InTrial,
    /// The trial came up, then failed its checks (or stopped in emergency
    /// mode) and rebooted: nothing committed.
    TrialFailed,
    /// The Pi came back on the SD card after the trial reboot, and the
    /// trial left no record.
    TrialDidNotComeUp,
    /// The trial was committed.
    Committed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub schema: &'static str,
    pub stage: Stage,
    /// What matters most, in a line (none: nothing to say).
    pub headline: Option<String>,
    /// What else to know or do, line by line.
    pub lines: Vec<String>,
    /// Worth saying at login.
    pub news: bool,
    /// The migration's target, as its plan names it.
    pub target: Option<String>,
    /// The trial's own record, when it is about the latest trial.
    pub trial: Option<TrialOutcome>,
    /// The newest migration log.
    pub log: Option<PathBuf>,
}

/// What [`assess`] decides from, gathered by [`gather`] (and made by hand
/// in tests).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub journal: Option<Journal>,
    /// Another pimigrate holds the state lock.
    pub running: bool,
    pub outcome: Option<TrialOutcome>,
    pub log: Option<PathBuf>,
    pub log_end: Option<LogEnd>,
    pub now: u64,
    /// When this boot began.
    pub booted: Option<u64>,
    pub in_trial_boot: bool,
    /// This boot runs the migration's target root.
    pub runs_target: bool,
    /// The device of the SD card's root, when this boot runs it.
    pub on_old_root: Option<String>,
    /// The target disk is attached now.
    pub target_attached: bool,
}

/// Reads the facts of `host` (a live system, or a tree with --sysroot).
pub fn gather(host: &Host) -> Facts {
    let system = System::inspect(host).ok();
    gather_on(host, system.as_ref())
}

/// [`gather`], with the system already inspected (`devices` has it).
pub fn gather_on(host: &Host, system: Option<&System>) -> Facts {
    let state_dir = host.path(&host.state_dir);
    let journal = Journal::load(&state_dir).ok().flatten();
    let log = log::newest(&host.path(&host.log_dir), "migrate");
    let mut facts = Facts {
        running: lock_held(&state_dir),
        outcome: TrialOutcome::load(&state_dir).ok().flatten(),
        log_end: log.as_deref().map(log::end_of),
        log,
        now: crate::clock::now(),
        booted: crate::verify::state::boot_time(host),
        ..Facts::default()
    };
    if let (Some(journal), Some(system)) = (&journal, system) {
        facts.in_trial_boot = system.pi.in_trial_boot;
        facts.runs_target = crate::apply::migration::runs_from_target(system, &journal.plan);
        facts.on_old_root = Expected::from_journal(journal)
            .ok()
            .and_then(|e| crate::verify::state::running_from_old_root(system, &e));
        facts.target_attached = system
            .disks
            .iter()
            .any(|d| d.serial.is_some() && d.serial == journal.plan.target.serial)
            || system
                .disks
                .iter()
                .any(|d| d.disk_id.as_deref() == Some(journal.plan.disk.table.disk_id.as_str()));
    }
    facts.journal = journal;
    facts
}

/// Whether another process holds the state directory's lock (a running
/// migrate, sync or verify --commit).
fn lock_held(state_dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(state_dir.join("lock")) else {
        return false;
    };
    matches!(
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock),
        Err((_, nix::errno::Errno::EWOULDBLOCK))
    )
}

fn when(unix: u64) -> String {
    let text = crate::clock::rfc3339_utc(unix);
    // 2026-12-06T14:02:11Z -> 2026-12-06 14:02 UTC
    match (text.get(..10), text.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => text,
    }
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::Partitioned => "partitioned",
        Step::Formatted => "formatted",
        Step::Copied => "the root filesystem copied",
        Step::BootFilesCopied => "the boot files copied",
        Step::TargetEdited => "fstab edited on the target",
        Step::BootloaderConfigured => "the bootloader's config changed",
        Step::SourceBootEdited => "the SD card's boot files changed",
    }
}

/// Where things stand, from `facts`.
pub fn assess(facts: &Facts) -> Status {
    let mut status = Status {
        schema: STATUS_SCHEMA,
        stage: Stage::None,
        headline: None,
        lines: Vec::new(),
        news: false,
        target: None,
        trial: None,
        log: facts.log.clone(),
    };
    let Some(journal) = &facts.journal else {
        if facts.running {
            status.stage = Stage::Running;
            status.headline = Some("a pimigrate command is running now".into());
            status.news = true;
        }
        return status;
    };
    let target = journal.plan.target.path.display().to_string();
    status.target = Some(target.clone());
    let complete = journal.is_done(Step::SourceBootEdited) || facts.runs_target;
    let last_step = journal
        .done
        .iter()
        .max()
        .map(|s| step_name(*s))
        .unwrap_or("nothing written yet");
    let log_line = |status: &mut Status| {
        if let Some(log) = &facts.log {
            status.lines.push(format!("its log: {}", log.display()));
        }
    };
    if facts.running {
        status.stage = Stage::Running;
        status.news = true;
        status.headline = Some(match complete {
            false => format!("pimigrate is migrating to {target} right now (so far: {last_step})"),
            true => format!("pimigrate is running now (the migration to {target} is done; a check, commit or sync runs)"),
        });
        if let Some(log) = &facts.log {
            status
                .lines
                .push(format!("follow it: tail -f {}", log.display()));
        }
        return status;
    }
    if !complete {
        status.stage = Stage::Stopped;
        status.news = true;
        let ended = match &facts.log_end {
            Some(LogEnd::Error(error)) => format!("it failed: {error}"),
            Some(LogEnd::Open) => {
                "its log ends without an end: it was killed, or the power went".to_string()
            }
            _ => "it was interrupted".to_string(),
        };
        status.headline = Some(format!(
            "the migration to {target} stopped before it finished (done: {last_step}); {ended}"
        ));
        status.lines.push(
            "`sudo pimigrate migrate --resume` carries on; `sudo pimigrate rollback` undoes it; \
             the SD card boots as before meanwhile"
                .into(),
        );
        log_line(&mut status);
        return status;
    }
    let Some(trial) = &journal.plan.trial_boot else {
        status.stage = Stage::Migrated;
        status.news =
            facts.now.saturating_sub(journal.updated) < NEWS_FOR_SECONDS && !facts.runs_target;
        status.headline = Some(match (facts.runs_target, &facts.on_old_root) {
            (true, _) => format!("migrated to {target} at {}; this system runs from it", when(journal.updated)),
            (false, Some(old)) if facts.booted.is_some_and(|b| b > journal.updated) => format!(
                "migrated to {target} at {}, but this boot runs the SD card's root {old}: `sudo pimigrate verify` says why",
                when(journal.updated)
            ),
            _ => format!("migrated to {target} at {}; reboot to start it", when(journal.updated)),
        });
        return status;
    };
    let auto = trial.guard.as_ref().is_some_and(|g| g.auto_commit);
    // The trial's record, when it is about the latest trial.
    let outcome = facts.outcome.as_ref().filter(|o| o.is_about(journal));
    status.trial = outcome.cloned();
    if let Some(at) = journal.committed {
        status.stage = Stage::Committed;
        status.news = facts.now.saturating_sub(at) < NEWS_FOR_SECONDS;
        let how = match outcome {
            Some(o) if o.outcome.committed() => " by itself (--auto-commit: every check passed)",
            _ => "",
        };
        status.headline = Some(format!(
            "the trial of {target} came up and was committed at {}{how}",
            when(at)
        ));
        return status;
    }
    // A one-shot boot of a new drive that was passed over starts the SD
    // card with the trial flag still set: that is not the trial.
    if facts.in_trial_boot && facts.on_old_root.is_none() {
        status.stage = Stage::InTrial;
        status.news = true;
        status.headline = Some(match auto {
            true => format!(
                "this is the trial boot of {target}: it checks itself once up, then commits or goes back to the SD card"
            ),
            false => format!(
                "this is the trial boot of {target}: `sudo pimigrate verify --commit` makes it permanent"
            ),
        });
        return status;
    }
    let retry = match journal
        .plan
        .bootloader
        .as_ref()
        .is_some_and(|b| b.trial == Some(crate::plan::TrialRoute::Device))
    {
        true => "sudo pimigrate migrate --resume --reboot",
        false => "sudo reboot \"0 tryboot\"",
    };
    if let Some(outcome) = outcome {
        if outcome.outcome.committed() {
            // The SD card's system, booted again after a committed trial.
            status.stage = Stage::Committed;
            status.news = true;
            status.headline = Some(format!(
                "the trial of {target} came up and was committed at {}; this boot runs the SD card's system again",
                when(outcome.at)
            ));
            return status;
        }
        status.stage = Stage::TrialFailed;
        status.news = true;
        let back = match &facts.on_old_root {
            Some(_) => "; the Pi is back on the SD card",
            None => "",
        };
        status.headline = Some(format!(
            "the trial of {target} came up at {} but {}: it rebooted without committing{back}; nothing was committed",
            when(outcome.at),
            outcome.reason
        ));
        status
            .lines
            .extend(outcome.details.iter().map(|d| format!("  {d}")));
        status.lines.push(format!(
            "fix what it names and try again ({retry}), or undo the migration: sudo pimigrate rollback"
        ));
        return status;
    }
    let rebooted_since = facts.booted.is_some_and(|b| b > journal.updated);
    match (&facts.on_old_root, journal.trial_requested, rebooted_since) {
        // pimigrate rebooted into the trial, and the SD card's root runs:
        // the trial is over. (Not by the clock alone: a Pi 4 without the
        // network may start its boot with an older time than the last.)
        (Some(_), Some(asked), _) => {
            status.stage = Stage::TrialDidNotComeUp;
            status.news = true;
            let after = facts
                .booted
                .filter(|&b| b > asked)
                .map(|b| format!(" {} s after the trial reboot at {}", b - asked, when(asked)))
                .unwrap_or_else(|| format!(" after the trial reboot at {}", when(asked)));
            status.headline = Some(format!(
                "the trial of {target} did not come up: the Pi was back on the SD card{after}, and nothing \
                 was committed"
            ));
            status.lines.push(format!(
                "the trial left no record, so it ended before its system was up: the kernel or the initramfs \
                 found no root within its bound, a kernel panic, a boot that did not reach its target within \
                 {TRIAL_BOOT_DEADLINE_SECONDS} s, or a power cut"
            ));
            status.lines.push(match facts.target_attached {
                true => format!("{target} is attached now: `sudo pimigrate verify` and `dmesg` may say more"),
                false => format!(
                    "{target} is not attached now: most likely the trial found no root (a cable, the power of a \
                     bus-powered drive)"
                ),
            });
            status.lines.push(format!(
                "try again once it is seen by `pimigrate devices` ({retry}), or undo: sudo pimigrate rollback"
            ));
        }
        (Some(old), None, true) => {
            status.stage = Stage::TrialPending;
            status.news = true;
            status.headline = Some(format!(
                "migrated to {target} at {}; this boot runs the SD card's root {old}: the trial has not run, or did \
                 not come up",
                when(journal.updated)
            ));
            status.lines.push(format!(
                "start the trial: {retry}; `sudo pimigrate verify` says more"
            ));
        }
        _ if facts.runs_target => {
            status.stage = Stage::TrialPending;
            status.news = true;
            status.headline = Some(format!(
                "this system runs from {target}, and its trial is not committed: sudo pimigrate verify --commit"
            ));
        }
        _ => {
            status.stage = Stage::TrialPending;
            status.news = true;
            status.headline = Some(format!(
                "migrated to {target} at {}; the trial boot is next: {retry}{}",
                when(journal.updated),
                match auto {
                    true => " (it checks and commits itself)",
                    false => "",
                }
            ));
        }
    }
    status
}

/// `pimigrate status` as text: the headline, then the lines.
pub fn text(status: &Status) -> String {
    let mut out = String::new();
    match &status.headline {
        Some(headline) => {
            out.push_str(headline);
            out.push('\n');
        }
        None => out.push_str("no migration here (no journal in the state directory)\n"),
    }
    for line in &status.lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The login message: only news, prefixed so a person sees whose it is.
pub fn login_text(status: &Status) -> String {
    match (&status.headline, status.news) {
        (Some(headline), true) => {
            let mut out = format!("pimigrate: {headline}\n");
            for line in &status.lines {
                out.push_str(&format!("pimigrate: {line}\n"));
            }
            out.push_str("pimigrate: more with `pimigrate status`\n");
            out
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
