//! `pimigrate verify`: run after the reboot into the migrated system.
//! Order: read the journal and the system, check, commit (only when every
//! check passed), apply the quirk, benchmark, print.

use super::print_json;
use crate::apply::boot_partition::{BootWriter, StateLock};
use crate::apply::journal::Journal;
use crate::bench::machine::read_throttled;
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, DeviceIdentity, Report};
use crate::bench::run::{run_target, RunOptions, RunOutcome};
use crate::bench::suite::{Preset, SuiteParams};
use crate::cli::{Cli, VerifyArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOTHING_TO_VERIFY, EXIT_OK};
use crate::host::Host;
use crate::system::source::resolve;
use crate::system::System;
use crate::verify::expected::Expected;
use crate::verify::kernel_log::KernelLog;
use crate::verify::state::{commit_refusal, not_yet, trial_did_not_run, Refusal};
use crate::verify::{
    checks, commit, compare, health, render, rollback_advice, BenchComparison, Outcome, ReportRef,
    Stopped, TrialState, Verification, VERIFY_SCHEMA,
};
use anyhow::{bail, Context, Result};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;

pub fn run(cli: &Cli, args: &VerifyArgs, host: &Host) -> Result<u8> {
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
        let (bench, stopped) = benchmark(&BenchInputs {
            cli,
            args,
            system: &system,
            expected: &expected,
            journal: &journal,
            passed,
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

/// What the post-migration benchmark needs from the verification.
struct BenchInputs<'a> {
    cli: &'a Cli,
    args: &'a VerifyArgs,
    system: &'a System,
    expected: &'a Expected,
    journal: &'a Journal,
    /// Every check passed: only then is the new root worth measuring.
    passed: bool,
}

/// The post-migration benchmark and its comparison, and whether it stopped
/// early. Never an error: why it stopped goes into `skipped`, so the
/// verification around it is still printed.
fn benchmark(inputs: &BenchInputs) -> (BenchComparison, Option<Stopped>) {
    let mut out = BenchComparison::default();
    match measure(inputs, &mut out) {
        Ok(()) => (out, None),
        Err(stopped) => {
            out.skipped = Some(stopped.reason());
            (out, Some(stopped))
        }
    }
}

/// Finds the "before" report, runs the benchmark and fills in the
/// comparison, as far as it gets.
fn measure(inputs: &BenchInputs, out: &mut BenchComparison) -> Result<(), Stopped> {
    let BenchInputs {
        cli,
        args,
        system,
        expected,
        journal,
        passed,
    } = *inputs;
    let host = &system.host;
    let reports_dir = report::reports_dir(host);
    let reports = report::list(&reports_dir)
        .with_context(|| format!("reading the saved reports in {}", reports_dir.display()))?;
    let identity = |spec: &crate::bootcfg::DeviceSpec| {
        let names = resolve(spec, &system.disks);
        system
            .disks
            .iter()
            .find(|d| {
                d.partitions.iter().any(|p| {
                    p.path
                        .as_ref()
                        .is_some_and(|path| names.contains(&path.display().to_string()))
                })
            })
            .map(DeviceIdentity::from_disk)
    };
    let old = identity(&expected.old_root_spec);
    let new = identity(&expected.root_spec());
    let before = compare::find_before(&reports, old.as_ref(), new.as_ref(), journal.started);
    out.before = before.map(|r| reference(&r.report, &r.path));
    let skip = if !passed {
        Some("not run: the checks failed".to_string())
    } else if !host.is_live() {
        Some("not run: an inspected system (--sysroot) cannot be benchmarked".to_string())
    } else {
        None
    };
    if let Some(why) = skip {
        out.skipped = Some(why);
        return Ok(());
    }
    let preset = if args.quick {
        Preset::Quick
    } else {
        before.map_or(Preset::Standard, |r| r.report.parameters.suite.preset)
    };
    let options = RunOptions {
        params: SuiteParams::new(preset, args.runtime, None),
        size_given: None,
        engine: crate::bench::engine::choose(None)?,
        only: Vec::new(),
        existing_file: None,
    };
    // Before the announcement: a Ctrl-C once it is on screen must reach the
    // benchmark (which removes its test file), not kill the process.
    let interrupted = crate::bench::stop_on_signals()?;
    let chatty = !cli.json && !cli.quiet;
    if chatty {
        println!(
            "Benchmarking the new root ({preset} suite, a test file on /, removed afterwards)"
        );
    }
    let ui = ProgressUi::new(chatty && std::io::stdout().is_terminal());
    let target = crate::bench::target::resolve(system, host, None, false)?;
    let outcome = match run_target(system, host, &target, &options, &ui, &interrupted) {
        Err(_) if interrupted.load(Ordering::Relaxed) => return Err(Stopped::Interrupted),
        other => other.context("benchmarking the new root (/)")?,
    };
    let after = match outcome {
        RunOutcome::Done(report) => report,
        RunOutcome::Interrupted(_) => return Err(Stopped::Interrupted),
    };
    let saved = report::save(&after, &reports_dir);
    let path = saved
        .as_ref()
        .map_or_else(|_| Path::new("(not saved)").to_path_buf(), Clone::clone);
    out.after = Some(reference(&after, &path));
    if let Err(err) = saved {
        out.skipped = Some(format!("the new report was not saved: {err:#}"));
    }
    match before {
        Some(before) => {
            out.rows = compare::compare(&before.report, &after);
            if out.rows.is_empty() {
                out.skipped = Some("the before report has no test in common with this run".into());
            }
        }
        None => {
            out.skipped = Some(format!(
                "no \"before\" report of the old root in {}: `pimigrate bench` on the SD system saves one",
                reports_dir.display()
            ))
        }
    }
    Ok(())
}

fn reference(report: &Report, path: &Path) -> ReportRef {
    ReportRef {
        id: report.id.clone(),
        path: path.display().to_string(),
        device: report.target.device.as_ref().map(|d| {
            let name = crate::units::join_present([d.vendor.as_deref(), d.model.as_deref()]);
            format!("{} {name}", d.path.display())
        }),
        started_at: report.started_at.clone(),
        preset: report.parameters.suite.preset.to_string(),
    }
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
