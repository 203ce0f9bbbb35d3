//! `pimigrate plan`: the dry run.

use super::{print_json, EXIT_OK, EXIT_REFUSED};
use crate::cli::{Cli, PlanArgs};
use crate::host::Host;
use crate::plan::render::{plan_text, Detail};
use crate::plan::{self, Options};
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

pub fn options_from(args: &PlanArgs) -> Options {
    Options {
        target: args.target.clone(),
        layout: args.layout,
        table: args.table,
        boot_size: args.boot_size,
        root_size: args.root_size,
        excludes: args.exclude.clone(),
        seed: args.seed,
        disk_signature: args.disk_signature,
    }
}

pub fn run(cli: &Cli, args: &PlanArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    match plan::plan(&system, &options_from(args)) {
        Ok(plan) => {
            if cli.json {
                print_json(&plan)?;
            } else {
                let detail = match (cli.quiet, cli.verbose) {
                    (true, _) => Detail::Brief,
                    (false, 0) => Detail::Normal,
                    (false, _) => Detail::Full,
                };
                print!("{}", plan_text(&plan, detail));
            }
            Ok(EXIT_OK)
        }
        Err(refusal) => {
            if cli.json {
                print_json(&RefusalOutput {
                    schema: REFUSAL_SCHEMA,
                    refused: true,
                    reasons: &refusal.reasons,
                })?;
            } else {
                eprint!("{refusal}");
            }
            Ok(EXIT_REFUSED)
        }
    }
}
