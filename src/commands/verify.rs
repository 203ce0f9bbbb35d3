//! `pimigrate verify`: run after the reboot into the migrated system.
//! Order: read the journal and the system, check, commit (only when every
//! check passed), apply the quirk, benchmark, print.

use super::print_json;
use crate::apply::boot_partition::{BootWriter, StateLock};
use crate::apply::journal::Journal;
use crate::bench::machine::read_throttled;
use crate::bench::report;
use crate::cli::{Cli, VerifyArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOTHING_TO_VERIFY, EXIT_OK};
use crate::host::Host;
use crate::system::System;
use crate::verify::after::{self, BenchInputs};
use crate::verify::expected::Expected;
use crate::verify::kernel_log::KernelLog;
use crate::verify::state::{commit_refusal, not_yet, trial_did_not_run, Refusal};
use crate::verify::{
    checks, commit, health, render, rollback_advice, Outcome, Stopped, TrialState, Verification,
    VERIFY_SCHEMA,
};
use anyhow::{bail, Result};

pub fn run(cli: &Cli, args: &VerifyArgs, host: &Host) -> Result<u8> {
    // Checking alone reads what a normal user can; changing cmdline.txt
    // does not, and is said before anything is checked.
    if args.commit || args.apply_quirk {
        crate::privilege::require_root("verify --commit and --apply-quirk change the boot files")?;
    }
    let state_dir = host.path(&host.state_dir);
    let Some(mut journal) = Journal::load(&state_dir)? else {
        return finish(
            cli,
            Verification::nothing(format!(
                "no migration journal in {} (`pimigrate migrate` writes it, and copies it to the new root)",
                state_dir.display()
            )),
        );
    };
    let system = System::inspect(host)?;
    let expected = Expected::from_journal(&journal)?;
    if let Some(why) = not_yet(&system, &journal, &expected) {
        return finish(cli, Verification::nothing(why));
    }
    if let Some(v) = trial_did_not_run(&system, &expected) {
        return finish(cli, v);
    }
    let target = health::target_disk(&system, &expected);
    let quirk = match (args.apply_quirk, target) {
        (false, _) => None,
        (true, Some(disk)) => match health::quirk_for(disk) {
            Some(quirk) => Some(quirk),
            None => bail!(
                "--apply-quirk: {} is not behind a USB bridge on the uas driver; nothing was changed",
                disk.path.display()
            ),
        },
        (true, None) => bail!("--apply-quirk: the target disk is not attached; nothing was changed"),
    };

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
            Some(Refusal::Refused(why)) => v.refused.push(why),
            Some(Refusal::NothingToDo(why)) => v.message = Some(why),
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
        committed_at: expected.committed.map(report::rfc3339_utc),
    });

    // From here on nothing may end the run before the verification is
    // printed: the commit above may have replaced cmdline.txt, and the user
    // must learn that even when the benchmark fails or is interrupted.
    let mut interrupted = false;
    if !args.no_bench {
        let (bench, stopped) = after::benchmark(&BenchInputs {
            system: &system,
            expected: &expected,
            journal: &journal,
            passed,
            quick: args.quick,
            runtime: args.runtime,
            chatty: !cli.json && !cli.quiet,
        });
        interrupted = matches!(stopped, Some(Stopped::Interrupted));
        v.benchmark = Some(bench);
    }
    v.result = if passed && v.refused.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    if v.result == Outcome::Fail {
        v.rollback = rollback_advice(&expected);
    }
    let code = finish(cli, v)?;
    Ok(exit_code(code, interrupted))
}

/// Ctrl-C wins over the checks' verdict, as for `pimigrate bench`, so a
/// script sees that the run was cut short; a failed benchmark does not
/// change the verdict (it is reported in the comparison).
fn exit_code(checks: u8, interrupted: bool) -> u8 {
    if interrupted {
        EXIT_INTERRUPTED
    } else {
        checks
    }
}

fn finish(cli: &Cli, v: Verification) -> Result<u8> {
    debug_assert_eq!(v.schema, VERIFY_SCHEMA);
    if cli.json {
        print_json(&v)?;
    } else {
        print!("{}", render::text(&v));
    }
    Ok(match v.result {
        Outcome::Pass => EXIT_OK,
        Outcome::Fail => EXIT_FAILED,
        Outcome::NothingToVerify => EXIT_NOTHING_TO_VERIFY,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_c_overrides_the_checks_verdict_and_nothing_else_does() {
        for checks in [EXIT_OK, EXIT_FAILED] {
            assert_eq!(exit_code(checks, true), EXIT_INTERRUPTED);
            assert_eq!(exit_code(checks, false), checks);
        }
    }
}
