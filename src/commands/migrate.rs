//! `pimigrate migrate`: the plan, a typed confirmation, then the executor.

use super::plan::scan_spinner;
use super::print_json;
use crate::apply::journal::Journal;
use crate::apply::migration::{self, ProgressDisplay, RebootInto, Start, Status};
use crate::apply::render::finished_text;
use crate::cli::{Cli, MigrateArgs};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{self, Plan};
use crate::signals::Hangup;
use crate::system::System;
use crate::ui::confirm::{before_writing, Ask};
use anyhow::Result;
use serde::Serialize;
use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

pub const MIGRATE_SCHEMA: &str = "pimigrate.migrate/1";

#[derive(Serialize)]
struct MigrateOutput<'a> {
    schema: &'static str,
    status: Status,
    journal: Option<&'a Journal>,
    next_steps: Vec<String>,
}

pub fn run(cli: &Cli, args: &MigrateArgs, host: &Host) -> Result<u8> {
    // `migrate --dry-run` is `plan`: the same code, so the same plan and the
    // same output, and like `plan` it needs no root and writes nothing.
    if args.dry_run {
        return super::plan::run(cli, &args.plan, host);
    }
    crate::privilege::require_root("migrate writes the target disk and the SD card's boot files")?;
    // Ctrl-C stops at the next step; a closed terminal does not stop it
    // (its output goes to the migration's log).
    let cancel = crate::signals::install(Hangup::CarriesOn)?;
    let system = System::inspect(host)?;
    let state_dir = host.path(&host.state_dir);
    let previous = Journal::load(&state_dir)?;
    let start = migration::start(
        &system,
        previous,
        args.resume,
        args.plan.target.as_deref(),
        &state_dir,
    )?;
    let journal = match start {
        Start::Finished(mut journal, status) => {
            let code = finish(cli, &journal, status)?;
            // A migration done, its trial not yet run: `--reboot` starts it
            // (after the reboot a Pi 4's bootloader needed first).
            if args.reboot && status != Status::AlreadyMigrated {
                reboot(cli, &mut journal, &state_dir)?;
            }
            return Ok(code);
        }
        Start::Resume(journal) => {
            say(
                cli,
                &format!(
                    "resuming the migration to {}",
                    journal.plan.target.path.display()
                ),
            );
            journal
        }
        Start::Fresh => {
            let plan = match make_plan(cli, args, &system)? {
                Ok(plan) => plan,
                Err(code) => return Ok(code),
            };
            let confirmed = confirm(args, &plan);
            if cancel.load(Ordering::SeqCst) {
                crate::signals::eprint_line("pimigrate: interrupted; nothing was written");
                return Ok(EXIT_INTERRUPTED);
            }
            confirmed?;
            migration::new_journal(&system, plan)?
        }
    };
    let chatty = !cli.json && !cli.quiet;
    let display = ProgressDisplay {
        copy_bar: chatty && std::io::stderr().is_terminal(),
        step_lines: chatty,
    };
    let mut journal = match migration::apply_with_progress(
        &system,
        journal,
        &cancel,
        display,
        Purpose::Migrate,
    ) {
        Ok(journal) => journal,
        Err(err) if cancel.load(Ordering::SeqCst) => {
            crate::signals::eprint_line(&format!("pimigrate: {err:#}"));
            return Ok(EXIT_INTERRUPTED);
        }
        Err(err) => return Err(err),
    };
    let code = finish(cli, &journal, Status::Migrated)?;
    if args.reboot {
        reboot(cli, &mut journal, &state_dir)?;
    }
    Ok(code)
}

fn reboot(cli: &Cli, journal: &mut Journal, state_dir: &std::path::Path) -> Result<()> {
    let into = migration::reboot_into(journal)?;
    say(
        cli,
        match into {
            RebootInto::Trial => "rebooting into the trial boot",
            RebootInto::Normal
                if journal.plan.trial_boot.is_some() && journal.committed.is_none() =>
            {
                "rebooting once: the bootloader writes its new config first; after it, \
                 `sudo pimigrate migrate --resume --reboot` starts the trial"
            }
            RebootInto::Normal => "rebooting",
        },
    );
    migration::reboot(journal, state_dir, into)
}

fn say(cli: &Cli, message: &str) {
    if !cli.json && !cli.quiet {
        crate::signals::eprint_line(&format!("==> {message}"));
    }
}

fn make_plan(cli: &Cli, args: &MigrateArgs, system: &System) -> Result<Result<Plan, u8>> {
    let spinner = scan_spinner(cli);
    // Ctrl-C stops the scan, before anything is written.
    let result = plan::plan_with_progress(system, &args.plan.options(), &mut |_| {
        if let Some(spinner) = &spinner {
            spinner.tick();
        }
        match crate::signals::stop_requested() {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    });
    if crate::signals::stop_requested() {
        if let Some(spinner) = spinner {
            spinner.finish_and_clear();
        }
        crate::signals::eprint_line("pimigrate: interrupted; nothing was written");
        return Ok(Err(EXIT_INTERRUPTED));
    }
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    match result {
        Ok(plan) => {
            if !cli.json {
                // As `plan` shows it (-q brief, -v in full), but as the
                // plan about to be applied.
                let detail = Detail::from_flags(cli.quiet, cli.verbose);
                print!("{}", plan_text(&plan, detail, Purpose::Migrate));
            }
            Ok(Ok(plan))
        }
        Err(refusal) => {
            super::plan::print_refusal(cli, &refusal)?;
            Ok(Err(EXIT_REFUSED))
        }
    }
}

/// The user types the target's name (or gave --yes).
fn confirm(args: &MigrateArgs, plan: &Plan) -> Result<()> {
    let target = &plan.target;
    before_writing(
        Ask::Erase {
            path: &target.path,
            name: &target.name,
            what: format!("Everything on {} will be erased.", target.path.display()),
        },
        args.yes,
        &format!("migrate erases {}", target.path.display()),
    )
}

fn finish(cli: &Cli, journal: &Journal, status: Status) -> Result<u8> {
    let steps = migration::next_steps(&journal.plan, Purpose::Migrate);
    if cli.json {
        print_json(&MigrateOutput {
            schema: MIGRATE_SCHEMA,
            status,
            journal: Some(journal),
            next_steps: steps,
        })?;
        return Ok(EXIT_OK);
    }
    crate::signals::print(&finished_text(journal, status, &steps, cli.quiet));
    Ok(EXIT_OK)
}
