//! `pimigrate bench`: measure disks the way fio and CrystalDiskMark do,
//! grade them as Raspberry Pi's SD card test does, keep the report.

use super::print_json;
use crate::bench::progress::Shown;
use crate::bench::session::{BenchEnd, Request, Session};
use crate::bench::suite::{Preset, SuiteParams};
use crate::bench::target::{Target, TargetKind};
use crate::cli::{BenchArgs, Cli};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::{Reason, Refusal};
use crate::system::System;
use crate::ui::confirm::{before_writing, Ask};
use anyhow::Result;
use std::io::IsTerminal;

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
    let request = Request {
        targets: args.targets.clone(),
        file: args.file.clone(),
        destructive: args.destructive,
        params: SuiteParams::new(preset, args.runtime, args.size),
        size_given: args.size,
        engine: args.engine,
        only: args.tests.clone(),
        save: !args.no_save,
    };
    let session = match Session::prepare(&system, host, request)? {
        Ok(session) => session,
        Err(refused) => {
            let reasons = refused
                .into_iter()
                .map(|r| Reason::new(r.code, r.message))
                .collect();
            return refuse(cli, reasons);
        }
    };
    if args.destructive && !confirmed(session.targets(), args.yes)? {
        return refuse(
            cli,
            vec![Reason::new(
                "bench-not-confirmed",
                "raw writes destroy everything on the device, and were not confirmed",
            )
            .hint("add --yes when running without a terminal")],
        );
    }

    let interrupted = crate::signals::install(crate::signals::Hangup::Stops)?;
    let chatty = !cli.json && !cli.quiet;
    let shown = Shown {
        chatty,
        progress_bars: chatty && std::io::stdout().is_terminal(),
    };
    let reports = match session.run(shown, &interrupted)? {
        BenchEnd::Done(reports) => reports,
        BenchEnd::Interrupted { tests } => {
            eprintln!(
                "pimigrate: interrupted after {tests} test(s); the test file, if any, was removed and no report was saved"
            );
            return Ok(EXIT_INTERRUPTED);
        }
    };
    if cli.json {
        match reports.as_slice() {
            [one] => print_json(one)?,
            many => print_json(&many)?,
        }
    }
    Ok(EXIT_OK)
}

/// As `plan` refuses: JSON on stdout or text on stderr.
fn refuse(cli: &Cli, reasons: Vec<Reason>) -> Result<u8> {
    super::plan::print_refusal(cli, &Refusal { reasons })?;
    Ok(EXIT_REFUSED)
}

/// Asks before raw writes. Without a terminal there is nobody to ask, so
/// only --yes confirms.
/// Every raw device to be written confirmed by typing its name (or
/// --yes); `false` where no one can be asked.
fn confirmed(targets: &[Target], yes: bool) -> Result<bool> {
    if !yes && !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    for target in targets.iter().filter(|t| t.kind == TargetKind::Device) {
        let described = target
            .disk
            .as_ref()
            .map_or_else(|| target.given.display().to_string(), |d| d.describe());
        let name = target
            .given
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| target.given.display().to_string());
        before_writing(
            Ask::Erase {
                path: &target.given,
                name: &name,
                what: format!(
                    "Test data will be written over {described}: everything on it will be lost."
                ),
            },
            yes,
            "bench",
            "bench --destructive writes over the device",
        )?;
    }
    Ok(true)
}
