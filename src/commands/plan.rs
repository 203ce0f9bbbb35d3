//! `pimigrate plan`: the dry run.

use super::print_json;
use crate::cli::{Cli, PlanArgs};
use crate::exit::{EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan;
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::system::System;
use anyhow::Result;
use serde::Serialize;

/// The JSON printed when a plan is refused.
#[derive(Serialize)]
struct RefusalOutput<'a> {
    schema: &'static str,
    refused: bool,
    reasons: &'a [plan::Reason],
}

pub const REFUSAL_SCHEMA: &str = "pimigrate.refusal/1";

pub fn run(cli: &Cli, args: &PlanArgs, host: &Host) -> Result<u8> {
    run_as(cli, args, host, "plan")
}

/// The dry run, for `plan` or `migrate --dry-run` (`command`, whose usage
/// a missing `--target` shows).
pub fn run_as(cli: &Cli, args: &PlanArgs, host: &Host, command: &str) -> Result<u8> {
    let options = args.options(command)?;
    let system = System::inspect(host)?;
    super::note_unreadable(&system, host);
    let spinner = scan_spinner(cli);
    let result = plan::plan_with_progress(&system, &options, &mut |usage| {
        if let Some(spinner) = &spinner {
            spinner.set_message(format!(
                "scanning the source: {} files, {}",
                usage.files,
                crate::units::binary(usage.bytes)
            ));
        }
        // A dry run keeps the default Ctrl-C, which ends it at once.
        std::ops::ControlFlow::Continue(())
    });
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    match result {
        Ok(plan) => {
            if cli.json {
                print_json(&plan)?;
            } else {
                let detail = Detail::from_flags(cli.quiet, cli.verbose);
                print!("{}", plan_text(&plan, detail, Purpose::DryRun));
            }
            Ok(EXIT_OK)
        }
        Err(refusal) => {
            print_refusal(cli, &refusal)?;
            Ok(EXIT_REFUSED)
        }
    }
}

/// A refused plan: every reason, as JSON on stdout or as text on stderr.
pub fn print_refusal(cli: &Cli, refusal: &plan::Refusal) -> Result<()> {
    if cli.json {
        print_json(&RefusalOutput {
            schema: REFUSAL_SCHEMA,
            refused: true,
            reasons: &refusal.reasons,
        })
    } else {
        eprint!("{refusal}");
        Ok(())
    }
}

/// A spinner on stderr while the source is scanned; none for scripts
/// (`--json`, `-q`, or stderr not a terminal).
pub fn scan_spinner(cli: &Cli) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if cli.json || cli.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner.set_message("scanning the source");
    Some(spinner)
}
