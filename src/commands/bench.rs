//! `pimigrate bench`: measure disks the way fio and CrystalDiskMark do,
//! grade them as Raspberry Pi's SD card test does, keep the report.

use super::print_json;
use crate::bench::engine::{self, EngineChoice};
use crate::bench::progress::ProgressUi;
use crate::bench::report::{self, Report};
use crate::bench::run::{run_target, RunOptions, RunOutcome};
use crate::bench::suite::{Preset, SuiteParams, TestResult};
use crate::bench::target::{self, Refused, Target, TargetKind};
use crate::cli::{BenchArgs, Cli};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::Reason;
use crate::system::System;
use anyhow::Result;
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

#[derive(Serialize)]
struct RefusalOutput<'a> {
    schema: &'static str,
    refused: bool,
    reasons: &'a [Reason],
}

pub fn run(cli: &Cli, args: &BenchArgs, host: &Host) -> Result<u8> {
    if args.destructive {
        crate::privilege::require_root("bench --destructive writes to the raw device")?;
    }
    let system = System::inspect(host)?;
    let preset = if args.quick {
        Preset::Quick
    } else {
        args.preset.unwrap_or(Preset::Standard)
    };
    let params = SuiteParams::new(preset, args.runtime, args.size);

    let mut targets = Vec::new();
    let mut refusals = Vec::new();
    // An existing file is benchmarked where it lies: its directory is the
    // target that identifies the filesystem and the disk.
    let file_dir = args.file.as_ref().map(|f| match f.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    });
    let given: Vec<Option<&Path>> = if let Some(dir) = &file_dir {
        vec![Some(dir.as_path())]
    } else if args.targets.is_empty() {
        vec![None]
    } else {
        args.targets.iter().map(|p| Some(p.as_path())).collect()
    };
    for path in given {
        match target::resolve(&system, host, path, args.destructive) {
            Ok(t) => targets.push(t),
            Err(e) => match e.downcast::<Refused>() {
                Ok(refused) => refusals.push(Reason::new(refused.code, refused.message)),
                Err(other) => return Err(other),
            },
        }
    }
    if args.destructive && refusals.is_empty() && !confirmed(&targets, args.yes)? {
        refusals.push(
            Reason::new(
                "bench-not-confirmed",
                "raw writes destroy everything on the device, and were not confirmed",
            )
            .hint("add --yes when running without a terminal"),
        );
    }
    if !refusals.is_empty() {
        return refuse(cli, &refusals);
    }

    let engine = engine::choose(args.engine)?;
    let interrupted = crate::bench::stop_on_signals()?;
    let chatty = !cli.json && !cli.quiet;
    let ui = ProgressUi::new(chatty && std::io::stdout().is_terminal());
    if chatty {
        note_engine(&engine);
    }
    let options = RunOptions {
        params,
        size_given: args.size,
        engine,
        only: args.tests.clone(),
        existing_file: args.file.clone(),
    };
    let mut reports = Vec::new();
    for target in &targets {
        if chatty {
            println!("{}", heading(target));
        }
        let outcome = run_target(&system, host, target, &options, &ui, &interrupted);
        let outcome = match outcome {
            Err(_) if interrupted.load(Ordering::Relaxed) => RunOutcome::Interrupted(Vec::new()),
            other => other?,
        };
        match outcome {
            RunOutcome::Done(report) => {
                if !args.no_save {
                    let path = report::save(&report, &report::reports_dir(host))?;
                    if chatty {
                        print!("{}", report_text(&report));
                        println!("Report saved to {}", path.display());
                    }
                } else if chatty {
                    print!("{}", report_text(&report));
                }
                reports.push(*report);
            }
            RunOutcome::Interrupted(partial) => {
                eprintln!(
                    "pimigrate: interrupted after {} test(s); the test file, if any, was removed and no report was saved",
                    partial.len()
                );
                return Ok(EXIT_INTERRUPTED);
            }
        }
    }
    if cli.json {
        match reports.as_slice() {
            [one] => print_json(one)?,
            many => print_json(&many)?,
        }
    }
    Ok(EXIT_OK)
}

fn refuse(cli: &Cli, reasons: &[Reason]) -> Result<u8> {
    if cli.json {
        print_json(&RefusalOutput {
            schema: super::plan::REFUSAL_SCHEMA,
            refused: true,
            reasons,
        })?;
    } else {
        eprint!(
            "{}",
            crate::plan::Refusal {
                reasons: reasons.to_vec()
            }
        );
    }
    Ok(EXIT_REFUSED)
}

/// Asks before raw writes. Without a terminal there is nobody to ask, so
/// only --yes confirms.
fn confirmed(targets: &[Target], yes: bool) -> Result<bool> {
    if yes {
        return Ok(true);
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(false);
    }
    for target in targets.iter().filter(|t| t.kind == TargetKind::Device) {
        let name = target
            .disk
            .as_ref()
            .map_or_else(|| target.given.display().to_string(), |d| d.describe());
        eprint!(
            "Write test data over {} ({name})? Everything on it will be lost. Type 'yes' to go on: ",
            target.given.display()
        );
        std::io::stderr().flush().ok();
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            return Ok(false);
        }
    }
    Ok(true)
}

fn note_engine(engine: &EngineChoice) {
    match &engine.fallback_reason {
        None => println!("Engine: {}", engine.kind),
        Some(reason) => println!("Engine: {} ({reason})", engine.kind),
    }
}

fn heading(target: &Target) -> String {
    let disk = target
        .disk
        .as_ref()
        .map(|d| format!(" on {}", d.describe()))
        .unwrap_or_default();
    match target.kind {
        TargetKind::File => format!(
            "Benchmarking {}{disk} with a test file (removed afterwards)",
            target.given.display()
        ),
        TargetKind::Device if target.destructive => {
            format!(
                "Benchmarking {}{disk}: read and WRITE tests",
                target.given.display()
            )
        }
        TargetKind::Device => format!(
            "Benchmarking {}{disk}: read tests only (writes need --destructive)",
            target.given.display()
        ),
    }
}

/// The report as a table people read.
pub fn report_text(report: &Report) -> String {
    let mut out = String::new();
    let p = &report.parameters;
    out.push_str(&format!(
        "Preset {}, {} s per test after a {} s ramp, over {}{}\n",
        p.suite.preset,
        p.suite.runtime_seconds,
        p.suite.ramp_seconds,
        crate::units::binary(p.span_bytes),
        p.size_note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "{:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "test", "MB/s", "MiB/s", "IOPS", "p50 us", "p99 us", "p99.9 us"
    ));
    for r in &report.results {
        out.push_str(&result_line(r));
    }
    if let Some(class) = &report.grades.app_class {
        out.push_str(&format!(
            "SD card class: {} ({})\n",
            class.class, class.basis
        ));
        for check in &class.checks {
            out.push_str(&format!(
                "  {:<24} {:>10.0} (A1 needs {:.0}) {}\n",
                check.what,
                check.value,
                check.target,
                if check.pass { "PASS" } else { "FAIL" }
            ));
        }
    }
    if let Some(score) = &report.grades.pibenchmarks {
        out.push_str(&format!("PiBenchmarks-style score: {:.0}\n", score.score));
    }
    for note in &report.grades.notes {
        out.push_str(&format!("Note: {note}\n"));
    }
    if let Some(t) = &report.machine.throttled {
        if t.under_voltage_now || t.under_voltage_occurred || t.throttling_occurred {
            out.push_str(&format!(
                "Warning: the Pi reports under-voltage or throttling ({}); figures may be low\n",
                t.raw
            ));
        }
    }
    out
}

fn result_line(r: &TestResult) -> String {
    let lat = |f: fn(&crate::bench::histogram::LatencySummary) -> f64| {
        r.latency
            .as_ref()
            .map_or_else(|| "-".to_string(), |l| format!("{:.0}", f(l)))
    };
    format!(
        "{:<16} {:>10.1} {:>10.1} {:>10.0} {:>10} {:>10} {:>10}\n",
        r.name,
        r.mb_per_s,
        r.mib_per_s,
        r.iops,
        lat(|l| l.p50_us),
        lat(|l| l.p99_us),
        lat(|l| l.p99_9_us)
    )
}
