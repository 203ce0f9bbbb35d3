//! `pimigrate migrate`: the plan, a typed confirmation, then the executor.

use super::plan::scan_spinner;
use super::print_json;
use crate::apply::migration::{self, ProgressDisplay, RebootInto, Start, Status};
use crate::apply::render::finished_text;
use crate::cli::{Cli, MigrateArgs};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::render::{plan_text, Detail, Purpose};
use crate::plan::{self, Plan};
use crate::signals::Hangup;
use crate::state::journal::Journal;
use crate::system::System;
use crate::ui::confirm::{before_writing, Ask};
use anyhow::Result;
use serde::Serialize;
use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

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
        return super::plan::run_as(cli, &args.plan, host, "migrate");
    }
    let state_dir = host.path(&host.state_dir);
    // Every error from here on ends with where the Pi stands and the
    // command that goes on, told from the journal this run took up.
    let mut about = TakenUp::default();
    migrate(cli, args, host, &mut about).map_err(|err| about.stopped(err, &state_dir))
}

/// The migration a run took up, once it has one: what its errors are
/// told from.
#[derive(Default)]
struct TakenUp {
    journal: Option<Journal>,
    /// The state directory held it when the run took it up (a resume).
    saved: bool,
}

impl TakenUp {
    fn stopped(&self, err: anyhow::Error, state_dir: &Path) -> anyhow::Error {
        migration::stopped(
            err,
            state_dir,
            self.journal.as_ref(),
            self.saved,
            Purpose::Migrate,
        )
    }
}

fn migrate(cli: &Cli, args: &MigrateArgs, host: &Host, about: &mut TakenUp) -> Result<u8> {
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
        Start::Finished(journal, status) => {
            return finished(cli, args, about, journal, status, &state_dir);
        }
        Start::Resume(journal) => {
            *about = TakenUp {
                journal: Some(journal.clone()),
                saved: true,
            };
            say(
                cli,
                &format!(
                    "resuming the migration to {}",
                    journal.plan.target.path.display()
                ),
            );
            journal
        }
        Start::Fresh => match fresh(cli, args, &system, &cancel, about)? {
            Ok(journal) => journal,
            Err(code) => return Ok(code),
        },
    };
    let mut journal = match apply(cli, &system, journal, &cancel, about, &state_dir)? {
        Ok(journal) => journal,
        Err(code) => return Ok(code),
    };
    let code = finish(cli, &journal, Status::Migrated)?;
    if args.reboot {
        reboot(cli, &mut journal, &state_dir)?;
    }
    Ok(code)
}

/// A migration the state directory holds as done: its report again, and
/// with `--reboot` the reboot into its trial.
fn finished(
    cli: &Cli,
    args: &MigrateArgs,
    about: &mut TakenUp,
    mut journal: Journal,
    status: Status,
    state_dir: &Path,
) -> Result<u8> {
    *about = TakenUp {
        journal: Some(journal.clone()),
        saved: true,
    };
    let code = finish(cli, &journal, status)?;
    // A migration done, its trial not yet run: `--reboot` starts it
    // (after the reboot a Pi 4's bootloader needed first).
    if args.reboot && status != Status::AlreadyMigrated {
        reboot(cli, &mut journal, state_dir)?;
    }
    Ok(code)
}

/// A new migration: its plan, confirmed, in a new journal; or the exit
/// code when it stops before anything is written.
fn fresh(
    cli: &Cli,
    args: &MigrateArgs,
    system: &System,
    cancel: &AtomicBool,
    about: &mut TakenUp,
) -> Result<Result<Journal, u8>> {
    let plan = match make_plan(cli, args, system)? {
        Ok(plan) => plan,
        Err(code) => return Ok(Err(code)),
    };
    let confirmed = confirm(args, &plan);
    if cancel.load(Ordering::SeqCst) {
        crate::signals::eprint_line("pimigrate: interrupted; nothing was written");
        return Ok(Err(EXIT_INTERRUPTED));
    }
    confirmed?;
    let journal = migration::new_journal(system, plan)?;
    *about = TakenUp {
        journal: Some(journal.clone()),
        saved: false,
    };
    Ok(Ok(journal))
}

/// The migration's steps run, with progress on the terminal; a run that
/// Ctrl-C stopped says where it stands and ends with EXIT_INTERRUPTED.
fn apply(
    cli: &Cli,
    system: &System,
    journal: Journal,
    cancel: &AtomicBool,
    about: &TakenUp,
    state_dir: &Path,
) -> Result<Result<Journal, u8>> {
    let chatty = !cli.json && !cli.quiet;
    let display = ProgressDisplay {
        copy_bar: chatty && std::io::stderr().is_terminal(),
        step_lines: chatty,
    };
    match migration::apply_with_progress(system, journal, cancel, display, Purpose::Migrate) {
        Ok(journal) => Ok(Ok(journal)),
        Err(err) if cancel.load(Ordering::SeqCst) => {
            let err = about.stopped(err, state_dir);
            crate::signals::eprint_line(&format!("pimigrate: {err:#}"));
            Ok(Err(EXIT_INTERRUPTED))
        }
        Err(err) => Err(err),
    }
}

fn reboot(cli: &Cli, journal: &mut Journal, state_dir: &Path) -> Result<()> {
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
    let options = args.plan.options("migrate")?;
    let spinner = scan_spinner(cli);
    // Ctrl-C stops the scan, before anything is written.
    let result = plan::plan_with_progress(system, &options, &mut |_| {
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
        "migrate",
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
