//! `verify` as one use case: the order in which it reads, checks, commits,
//! applies the quirk and benchmarks, for the command (or any caller).

use super::after::{self, BenchInputs};
use super::expected::Expected;
use super::state::{commit_refusal, not_yet, trial_did_not_run, CommitRefusal};
use super::{
    answers, checks, commit, health, rollback_advice, Stopped, TrialState, Verdict, Verification,
};
use crate::apply::boot_partition::BootWriter;
use crate::apply::state::StateLock;
use crate::apply::trial_outcome::{Outcome, TrialOutcome};
use crate::bootcfg::usb_quirks::UsbId;
use crate::host::Host;
use crate::state::journal::Journal;
use crate::system::disks::Disk;
use crate::system::kernel_events::KernelLog;
use crate::system::power::read_throttled;
use crate::system::source::resolve;
use crate::system::System;
use anyhow::{bail, Result};
use std::ops::ControlFlow;
use std::path::Path;

/// What `verify` is asked to do (its flags).
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Make the trial boot permanent when every check passed.
    pub commit: bool,
    /// Set the USB bridge's quirk in cmdline.txt.
    pub apply_quirk: bool,
    /// Trim the new root once (FITRIM), as the commit does.
    pub trim: bool,
    pub no_bench: bool,
    /// The quick suite, whatever the "before" report ran.
    pub quick: bool,
    /// Seconds each timed test runs after its ramp.
    pub runtime: Option<f64>,
    /// Say what is measured, with progress bars on a terminal.
    pub chatty: bool,
}

/// Reads the journal and the system, checks, commits (only when every
/// check passed), applies the quirk and benchmarks, as far as asked; the
/// verification, and whether Ctrl-C cut the benchmark short.
pub fn verify(host: &Host, request: &Request) -> Result<(Verification, bool)> {
    let state_dir = host.path(&host.state_dir);
    let mut found = match read(host, &state_dir)? {
        ControlFlow::Continue(found) => found,
        ControlFlow::Break(nothing) => return Ok((nothing, false)),
    };
    let target = health::target_disk(&found.system, &found.expected);
    let log = KernelLog::read(host);
    let quirk = requested_quirk(request, &found, target, &log)?;
    let mut v = check(host, &found, target, &log);
    let passed = v.passed();
    let committed_before = found.expected.committed.is_some();
    write_asked(host, &state_dir, request, quirk, passed, &mut found, &mut v)?;
    // One FITRIM of the new root: when asked, and once, with the commit.
    let committed_now = !committed_before && found.expected.committed.is_some();
    if request.trim || committed_now {
        if let Some(report) = v.after_move.as_mut().and_then(|a| a.trim.as_mut()) {
            let target = health::target_disk(&found.system, &found.expected);
            v.actions
                .push(super::after_move::trim_once(&found.system, target, report));
        }
    }
    let Found {
        journal,
        system,
        expected,
    } = &found;
    v.trial_boot = expected.trial.as_ref().map(|_| TrialState {
        active: system.pi.in_trial_boot,
        committed_at: expected.committed.map(crate::clock::rfc3339_utc),
    });

    // From here on nothing may end the run before the verification is
    // printed: the commit above may have replaced cmdline.txt, and the user
    // must learn that even when the benchmark fails or is interrupted.
    let interrupted =
        !request.no_bench && benchmark_into(&mut v, request, system, expected, journal, passed);
    v.result = if passed && v.refused.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    if v.result == Verdict::Fail {
        v.rollback = rollback_advice(expected);
    }
    Ok((v, interrupted))
}

/// A migration to verify: its journal, this system, and what the system
/// should show.
struct Found {
    journal: Journal,
    system: System,
    expected: Expected,
}

/// Reads the journal and the system; breaks with what verify says
/// instead when there is no migration, it is not yet time to verify, or
/// the trial boot did not run.
fn read(host: &Host, state_dir: &Path) -> Result<ControlFlow<Verification, Found>> {
    let Some(journal) = Journal::load(state_dir)? else {
        return Ok(ControlFlow::Break(Verification::nothing(format!(
            "no migration journal in {} (`pimigrate migrate` writes it, and copies it to the new root)",
            state_dir.display()
        ))));
    };
    let system = System::inspect(host)?;
    let expected = Expected::from_journal(&journal)?;
    if let Some(why) = not_yet(&system, &journal, &expected) {
        return Ok(ControlFlow::Break(Verification::nothing(why)));
    }
    // The latest trial's own record, if it wrote one (see `pimigrate status`).
    let record = TrialOutcome::load(state_dir)
        .ok()
        .flatten()
        .filter(|r| r.is_about(&journal));
    if let Some(v) = trial_did_not_run(&system, &expected, record.as_ref()) {
        return Ok(ControlFlow::Break(v));
    }
    Ok(ControlFlow::Continue(Found {
        journal,
        system,
        expected,
    }))
}

/// The checks, the new drive's driver and TRIM, and the warnings, before
/// anything changes.
fn check(host: &Host, found: &Found, target: Option<&Disk>, log: &KernelLog) -> Verification {
    let (system, expected) = (&found.system, &found.expected);
    let after_move = &found.journal.plan.after_move;
    let throttled = host.is_live().then(read_throttled).flatten();
    let mut v = Verification {
        target: target.map(|d| d.describe()),
        layout: Some(expected.layout),
        checks: checks::run(system, expected),
        after_move: Some(super::after_move::report(system, after_move, target)),
        warnings: health::warnings(system, expected, after_move, log, throttled.as_ref()),
        ..Verification::nothing(String::new())
    };
    v.message = None;
    v
}

/// Commits (when asked, and only when every check `passed`) and sets the
/// quirk (when asked), into `v`; afterwards `found.expected` is what the
/// next boots read.
fn write_asked(
    host: &Host,
    state_dir: &Path,
    request: &Request,
    quirk: Option<UsbId>,
    passed: bool,
    found: &mut Found,
    v: &mut Verification,
) -> Result<()> {
    let Found {
        journal,
        system,
        expected,
    } = found;
    // The permission to change the boot partition, taken only when asked to.
    let lock = (request.commit || quirk.is_some())
        .then(|| StateLock::acquire(state_dir))
        .transpose()?;
    let boot = lock
        .as_ref()
        .map(|lock| BootWriter::new(lock, host, &journal.boot_dir));
    let committed_before = journal.committed.is_some();
    if let Some(boot) = boot.as_ref().filter(|_| request.commit) {
        match commit_refusal(system, expected, passed) {
            Some(CommitRefusal::Refused(why)) => v.refused.push(why),
            Some(CommitRefusal::NothingToDo(why)) => v.message = Some(why),
            None => match new_root_answers(host, system, expected) {
                Err(why) => v
                    .refused
                    .push(format!("not committed: {why:#}; nothing was changed")),
                Ok(()) if expected.layout == crate::plan::Layout::Full => {
                    let lock = lock.as_ref().expect("taken for --commit");
                    v.actions.extend(commit::commit_full(
                        system, lock, journal, expected, state_dir,
                    )?)
                }
                Ok(()) => {
                    let still_answers = || new_root_answers(host, system, expected);
                    v.actions.extend(commit::commit(
                        boot,
                        journal,
                        expected,
                        state_dir,
                        &still_answers,
                    )?)
                }
            },
        }
    } else if passed && expected.trial_pending() {
        v.message =
            Some("run `sudo pimigrate verify --commit` to make the trial boot permanent".into());
    }
    if !committed_before && journal.committed.is_some() {
        v.actions.extend(record_commit(system, journal));
    }
    // The commit changes which file the next boots read.
    *expected = Expected::from_journal(journal)?;
    if let (Some(quirk), Some(boot)) = (quirk, &boot) {
        v.actions.extend(commit::apply_quirk(
            boot, journal, expected, state_dir, quirk,
        )?);
    }
    Ok(())
}

/// The new root's partition, asked once more as the commit is made: the
/// checks read the system as it was when they began (`answers`). When
/// its id does not name exactly one partition the checks failed already.
fn new_root_answers(host: &Host, system: &System, expected: &Expected) -> Result<()> {
    match resolve(&expected.root_spec(), &system.disks).as_slice() {
        [device] => answers::partition_answers(host, device),
        _ => Ok(()),
    }
}

/// Every commit leaves its record where the SD card's system reads it, as
/// a trial that commits itself does (`apply::trial_outcome`): booted again
/// later (a bootloader update that put the card first), the card's system
/// knows it is the old one, and says so (`pimigrate status`, the check
/// after the move). Never an error: the commit is made, and a record that
/// could not be written is said among its actions.
fn record_commit(system: &System, journal: &Journal) -> Vec<String> {
    let outcome = TrialOutcome::new(
        Outcome::Committed,
        journal,
        "every check passed, and the trial was made permanent",
    );
    match crate::apply::trial_outcome::record(system, journal, outcome) {
        Ok((_, lines)) => lines,
        Err(err) => vec![format!(
            "the commit is not on record for the SD card's system: {err:#}"
        )],
    }
}

/// The bridge `--apply-quirk` keeps uas off: the target's, when the
/// plan's decision lets the quirk be set there; refused, before anything
/// changes, when it cannot (no USB bridge, no Bulk-Only setting, past the
/// 127 characters the kernel takes in the file the next boots read).
fn requested_quirk(
    args: &Request,
    found: &Found,
    target: Option<&Disk>,
    log: &KernelLog,
) -> Result<Option<UsbId>> {
    if !args.apply_quirk {
        return Ok(None);
    }
    let Some(disk) = target else {
        bail!("--apply-quirk: the target disk is not attached; nothing was changed");
    };
    if disk.usb.is_none() {
        bail!(
            "--apply-quirk: {} is not behind a USB bridge; nothing was changed",
            disk.path.display()
        );
    }
    let file = commit::quirk_file(&found.expected);
    let bytes = std::fs::read(found.system.host.path(found.expected.on_boot(&file)))
        .ok()
        .and_then(|b| crate::bootcfg::Cmdline::parse(&b).ok());
    let mut reasons = Vec::new();
    let decided = crate::plan::after_move::quirk::decide(
        &found.system.host,
        disk,
        bytes.as_ref(),
        log,
        true,
        &mut reasons,
    );
    if let Some(reason) = reasons.first() {
        bail!(
            "--apply-quirk: {}; nothing was changed",
            reason.message.trim_start_matches("--usb-quirk: ")
        );
    }
    Ok(decided.and_then(|q| UsbId::parse(&q.bridge)))
}

/// The after-benchmark, against the saved "before" report, into `v`;
/// whether Ctrl-C cut it short.
fn benchmark_into(
    v: &mut Verification,
    args: &Request,
    system: &System,
    expected: &Expected,
    journal: &Journal,
    passed: bool,
) -> bool {
    let (bench, stopped) = after::benchmark(&BenchInputs {
        system,
        expected,
        journal,
        passed,
        quick: args.quick,
        runtime: args.runtime,
        chatty: args.chatty,
    });
    v.benchmark = Some(bench);
    matches!(stopped, Some(Stopped::Interrupted))
}
