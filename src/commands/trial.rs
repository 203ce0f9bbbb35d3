//! `pimigrate trial`: what a trial boot runs by itself, from the units the
//! new root's generator adds in that boot only (`apply::trial_guard`).
//! `check` (`--auto-commit`) runs verify's checks and commits when they
//! pass; `failed` says the trial stopped in emergency or rescue mode.
//! Either way the outcome is recorded in this system's state directory and
//! the SD card's (`apply::trial_outcome`); the exit code tells the unit
//! whether to reboot.

use crate::apply::trial_outcome::{record, Outcome, TrialOutcome};
use crate::cli::{Cli, TrialAction, TrialCheckArgs};
use crate::exit::{EXIT_FAILED, EXIT_OK};
use crate::host::Host;
use crate::state::journal::Journal;
use crate::system::System;
use crate::verify::run::{verify, Request};
use crate::verify::{Verdict, Verification};
use anyhow::{bail, Result};

pub fn run(_cli: &Cli, args: &TrialCheckArgs, host: &Host) -> Result<u8> {
    crate::privilege::require_root("the trial's check commits and records on the SD card")?;
    keep_in_memory();
    let state_dir = host.path(&host.state_dir);
    let Some(journal) = Journal::load(&state_dir)? else {
        bail!(
            "no migration journal in {}: this is no trial boot of a migration",
            state_dir.display()
        );
    };
    let system = System::inspect(host)?;
    if !system.pi.in_trial_boot {
        bail!("this is not a trial boot (no tryboot flag, no trial marker on the kernel's command line)");
    }
    match &args.action {
        TrialAction::Check => check(host, &system, &journal),
        TrialAction::Failed { why } => failed(&system, &journal, why),
    }
}

/// This program and its libraries, every page read in and kept in memory
/// now: they live on the new root, and a new drive pulled out during the
/// check would otherwise kill the check with SIGBUS at its next page not
/// yet read, before it could record why on the SD card. Without the lock
/// (a limit on locked memory) the check goes on as before.
fn keep_in_memory() {
    // SAFETY: mlockall takes flags only and changes no memory.
    let _ = unsafe { libc::mlockall(libc::MCL_CURRENT) };
}

/// Verify with `--commit` (a commit records itself), then record what
/// else came of it. Exit 0 when committed, 5 otherwise (the unit's
/// FailureAction reboots).
fn check(host: &Host, system: &System, journal: &Journal) -> Result<u8> {
    // On the console as the check starts: a person at the Pi sees why it
    // may reboot by itself.
    crate::signals::print(&format!(
        "pimigrate: checking the trial of {}: verify's checks, then the commit, or why not and a reboot \
         to the SD card\n",
        journal.plan.target.path.display()
    ));
    // The disks the checks look at must all be there: a clone of the new
    // drive plugged in is exactly what they must find.
    settle_udev();
    let request = Request {
        commit: true,
        no_bench: true,
        ..Request::default()
    };
    let verified = verify(host, &request);
    let outcome = match &verified {
        Ok((v, _)) => outcome_of(v, journal),
        Err(err) => TrialOutcome::new(
            Outcome::Error,
            journal,
            format!("its check could not run to its end: {err:#}"),
        ),
    };
    if outcome.outcome.committed() {
        // The commit recorded itself, as every commit does (verify's
        // actions say where).
        let actions = verified.map(|(v, _)| v.actions).unwrap_or_default();
        say(&outcome, &actions);
        return Ok(EXIT_OK);
    }
    // The commit updated the journal. A root that can no longer be read
    // (the new drive gone during the check) keeps the one read before, so
    // the outcome still reaches the SD card's record.
    let journal = match Journal::load(&host.path(&host.state_dir)) {
        Ok(Some(reread)) => reread,
        Ok(None) | Err(_) => journal.clone(),
    };
    let (outcome, lines) = record(system, &journal, outcome)?;
    say(&outcome, &lines);
    Ok(EXIT_FAILED)
}

/// What a verification with `--commit` means for the trial.
fn outcome_of(v: &Verification, journal: &Journal) -> TrialOutcome {
    let committed = v
        .trial_boot
        .as_ref()
        .is_some_and(|t| t.committed_at.is_some());
    match v.result {
        Verdict::Pass if committed => TrialOutcome::new(
            Outcome::Committed,
            journal,
            "every check passed, and the trial was made permanent",
        ),
        Verdict::Pass | Verdict::Fail => {
            let failed: Vec<String> = v
                .checks
                .iter()
                .filter(|c| !c.pass)
                .map(|c| format!("{}: {}", c.code, c.message))
                .chain(v.refused.iter().cloned())
                .collect();
            let codes: Vec<&str> = v
                .checks
                .iter()
                .filter(|c| !c.pass)
                .map(|c| c.code)
                .collect();
            let reason = match codes.as_slice() {
                [] => "it was not committed".to_string(),
                [one] => format!("a check failed ({one})"),
                many => format!("{} checks failed ({})", many.len(), many.join(", ")),
            };
            TrialOutcome {
                details: failed,
                ..TrialOutcome::new(Outcome::ChecksFailed, journal, reason)
            }
        }
        Verdict::NothingToVerify => TrialOutcome::new(
            Outcome::Error,
            journal,
            format!(
                "there was nothing to verify: {}",
                v.message.as_deref().unwrap_or("no reason given")
            ),
        ),
    }
}

/// The trial stopped in emergency or rescue mode: which units failed, on
/// record. The unit reboots whatever this returns.
fn failed(system: &System, journal: &Journal, why: &str) -> Result<u8> {
    let (kind, mode) = match why {
        "rescue" => (Outcome::Rescue, "rescue"),
        _ => (Outcome::Emergency, "emergency"),
    };
    let units = failed_units();
    let reason = match units.as_slice() {
        [] => format!("its system stopped in {mode} mode"),
        units => format!(
            "its system stopped in {mode} mode ({} failed)",
            units.join(", ")
        ),
    };
    let outcome = TrialOutcome {
        details: units
            .iter()
            .map(|u| {
                format!("{u} failed: `journalctl -b -1 -u {u}` on the new drive's system says why")
            })
            .collect(),
        ..TrialOutcome::new(kind, journal, reason)
    };
    let (outcome, lines) = record(system, journal, outcome)?;
    say(&outcome, &lines);
    Ok(EXIT_OK)
}

/// systemd's failed units, by name (none when systemctl cannot say).
fn failed_units() -> Vec<String> {
    let output = std::process::Command::new("systemctl")
        .args([
            "list-units",
            "--failed",
            "--plain",
            "--no-legend",
            "--no-pager",
        ])
        .output();
    let Ok(output) = output else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|unit| !unit.starts_with("pimigrate-"))
        .map(str::to_string)
        .collect()
}

fn settle_udev() {
    if let Some(udevadm) = crate::tools::which("udevadm") {
        let _ = std::process::Command::new(udevadm)
            .args(["settle", "--timeout=60"])
            .status();
    }
}

/// On the console and in the journal (the unit's output goes to both).
fn say(outcome: &TrialOutcome, lines: &[String]) {
    let head = match outcome.outcome {
        Outcome::Committed => format!(
            "pimigrate: the trial of {} came up and was committed: {}",
            outcome.target, outcome.reason
        ),
        _ => format!(
            "pimigrate: the trial of {} is not committed: {}; rebooting, the SD card starts next",
            outcome.target, outcome.reason
        ),
    };
    let mut text = format!("{head}\n");
    for line in outcome.details.iter().chain(lines) {
        text.push_str(&format!("pimigrate:   {line}\n"));
    }
    crate::signals::print(&text);
}
