//! The before/after benchmark of `verify`: the new root measured as the
//! SD card's root was before the migration, and the comparison.

use super::expected::Expected;
use super::{compare, BenchComparison, ReportRef, Stopped};
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, DeviceIdentity, Report, StoredReport};
use crate::bench::run::{run_target, RunOptions, RunOutcome};
use crate::bench::suite::{Preset, SuiteParams};
use crate::bootcfg::DeviceSpec;
use crate::state::journal::Journal;
use crate::system::source::resolve;
use crate::system::System;
use anyhow::Context;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::Ordering;

/// What the post-migration benchmark needs from the verification.
pub struct BenchInputs<'a> {
    pub system: &'a System,
    pub expected: &'a Expected,
    pub journal: &'a Journal,
    /// Every check passed: only then is the new root worth measuring.
    pub passed: bool,
    /// `--quick`: the quick suite whatever the "before" report ran.
    pub quick: bool,
    /// `--runtime`: seconds each timed test runs after its ramp.
    pub runtime: Option<f64>,
    /// Say what is measured, with progress bars on a terminal.
    pub chatty: bool,
}

/// The post-migration benchmark and its comparison, and whether it stopped
/// early. Never an error: why it stopped goes into `skipped`, so the
/// verification around it is still printed.
pub fn benchmark(inputs: &BenchInputs) -> (BenchComparison, Option<Stopped>) {
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
        system,
        expected,
        journal,
        passed,
        quick,
        runtime,
        chatty,
    } = *inputs;
    let host = &system.host;
    let reports_dir = report::reports_dir(host);
    let reports = report::list(&reports_dir)
        .with_context(|| format!("reading the saved reports in {}", reports_dir.display()))?;
    let old = disk_named_by(system, &expected.old_root_spec);
    let new = disk_named_by(system, &expected.root_spec());
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
    let preset = if quick {
        Preset::Quick
    } else {
        before.map_or(Preset::Standard, |r| r.report.parameters.suite.preset)
    };
    let options = RunOptions {
        params: SuiteParams::new(preset, runtime, None),
        size_given: None,
        engine: crate::bench::engine::choose(None)?,
        only: Vec::new(),
        existing_file: None,
    };
    // Before the announcement: a Ctrl-C once it is on screen must reach the
    // benchmark (which removes its test file), not kill the process.
    let interrupted = crate::signals::install(crate::signals::Hangup::Stops)?;
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
    compare_with_before(out, before, &after, &reports_dir);
    Ok(())
}

/// The identity of the disk whose partition `spec` names, to find the
/// saved report that measured it.
fn disk_named_by(system: &System, spec: &DeviceSpec) -> Option<DeviceIdentity> {
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
}

/// The after-report's rows against the "before" report, or why there are
/// none.
fn compare_with_before(
    out: &mut BenchComparison,
    before: Option<&StoredReport>,
    after: &Report,
    reports_dir: &Path,
) {
    match before {
        Some(before) => {
            out.rows = compare::compare(&before.report, after);
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
