//! `verify` as one use case: the order in which it reads, checks, commits,
//! applies the quirk and benchmarks, for the command (or any caller).

use super::after::{self, BenchInputs};
use super::expected::Expected;
use super::kernel_log::KernelLog;
use super::state::{commit_refusal, not_yet, trial_did_not_run, CommitRefusal};
use super::{checks, commit, health, rollback_advice, Stopped, TrialState, Verdict, Verification};
use crate::apply::boot_partition::{BootWriter, StateLock};
use crate::apply::journal::Journal;
use crate::apply::trial_outcome::TrialOutcome;
use crate::bench::machine::read_throttled;
use crate::host::Host;
use crate::system::disks::Disk;
use crate::system::System;
use anyhow::{bail, Result};

/// What `verify` is asked to do (its flags).
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Make the trial boot permanent when every check passed.
    pub commit: bool,
    /// Set the USB bridge's quirk in cmdline.txt.
    pub apply_quirk: bool,
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
    let args = request;
    let state_dir = host.path(&host.state_dir);
    let Some(mut journal) = Journal::load(&state_dir)? else {
        return Ok((
            Verification::nothing(format!(
                "no migration journal in {} (`pimigrate migrate` writes it, and copies it to the new root)",
                state_dir.display()
            )),
            false,
        ));
    };
    let system = System::inspect(host)?;
    let expected = Expected::from_journal(&journal)?;
    if let Some(why) = not_yet(&system, &journal, &expected) {
        return Ok((Verification::nothing(why), false));
    }
    // The latest trial's own record, if it wrote one (see `pimigrate status`).
    let record = TrialOutcome::load(&state_dir)
        .ok()
        .flatten()
        .filter(|r| r.is_about(&journal));
    if let Some(v) = trial_did_not_run(&system, &expected, record.as_ref()) {
        return Ok((v, false));
    }
    let target = health::target_disk(&system, &expected);
    let quirk = requested_quirk(args, target)?;

    let log = KernelLog::read(host);
    let throttled = host.is_live().then(read_throttled).flatten();
    let mut v = Verification {
        target: target.map(|d| d.describe()),
        layout: Some(expected.layout),
        checks: checks::run(&system, &expected),
        warnings: health::warnings(&system, &expected, &log, throttled.as_ref()),
        ..Verification::nothing(String::new())
    };
    v.message = None;
    let passed = v.passed();

    // The permission to change the boot partition, taken only when asked to.
    let lock = (args.commit || quirk.is_some())
        .then(|| StateLock::acquire(&state_dir))
        .transpose()?;
    let boot = lock
        .as_ref()
        .map(|lock| BootWriter::new(lock, host, &journal.boot_dir));
    if let Some(boot) = boot.as_ref().filter(|_| args.commit) {
        match commit_refusal(&system, &expected, passed) {
            Some(CommitRefusal::Refused(why)) => v.refused.push(why),
            Some(CommitRefusal::NothingToDo(why)) => v.message = Some(why),
            None if expected.layout == crate::plan::Layout::Full => {
                let lock = lock.as_ref().expect("taken for --commit");
                v.actions.extend(commit::commit_full(
                    &system,
                    lock,
                    &mut journal,
                    &expected,
                    &state_dir,
                )?)
            }
            None => v
                .actions
                .extend(commit::commit(boot, &mut journal, &expected, &state_dir)?),
        }
    } else if passed && expected.trial_pending() {
        v.message =
            Some("run `sudo pimigrate verify --commit` to make the trial boot permanent".into());
    }
    // The commit changes which file the next boots read.
    let expected = Expected::from_journal(&journal)?;
    if let (Some(quirk), Some(boot)) = (quirk, &boot) {
        v.actions.extend(commit::apply_quirk(
            boot,
            &mut journal,
            &expected,
            &state_dir,
            &quirk,
        )?);
    }
    v.trial_boot = expected.trial.as_ref().map(|_| TrialState {
        active: system.pi.in_trial_boot,
        committed_at: expected.committed.map(crate::clock::rfc3339_utc),
    });

    // From here on nothing may end the run before the verification is
    // printed: the commit above may have replaced cmdline.txt, and the user
    // must learn that even when the benchmark fails or is interrupted.
    let interrupted =
        !args.no_bench && benchmark_into(&mut v, args, &system, &expected, &journal, passed);
    v.result = if passed && v.refused.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    if v.result == Verdict::Fail {
        v.rollback = rollback_advice(&expected);
    }
    Ok((v, interrupted))
}

/// The quirk `--apply-quirk` would set for the target's USB bridge;
/// refused, before anything changes, when there is no such bridge.
fn requested_quirk(args: &Request, target: Option<&Disk>) -> Result<Option<String>> {
    Ok(match (args.apply_quirk, target) {
        (false, _) => None,
        (true, Some(disk)) => match health::quirk_for(disk) {
            Some(quirk) => Some(quirk),
            None => bail!(
                "--apply-quirk: {} is not behind a USB bridge on the uas driver; nothing was changed",
                disk.path.display()
            ),
        },
        (true, None) => bail!("--apply-quirk: the target disk is not attached; nothing was changed"),
    })
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
