//! `pimigrate migrate`: the plan, a typed confirmation, then the executor.

use super::plan::{options_from, scan_spinner};
use super::{print_json, EXIT_OK, EXIT_REFUSED};
use crate::apply::executor::{apply, ApplyContext};
use crate::apply::journal::{Journal, Step};
use crate::apply::log::MigrationLog;
use crate::cli::{Cli, MigrateArgs};
use crate::host::Host;
use crate::plan::render::{plan_text, Detail};
use crate::plan::{self, Layout, Plan};
use crate::system::System;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub const MIGRATE_SCHEMA: &str = "pimigrate.migrate/1";

#[derive(Serialize)]
struct MigrateOutput<'a> {
    schema: &'static str,
    status: &'static str,
    journal: Option<&'a Journal>,
    next_steps: Vec<String>,
}

pub fn run(cli: &Cli, args: &MigrateArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    let state_dir = host.path(&host.state_dir);
    let previous = Journal::load(&state_dir)?;
    let journal = match (args.resume, previous) {
        (true, None) => bail!("there is no migration to resume (no journal in {})", state_dir.display()),
        (true, Some(journal)) => {
            if let Some(target) = &args.plan.target {
                if *target != journal.plan.target.path {
                    bail!(
                        "the interrupted migration was to {}, not {}",
                        journal.plan.target.path.display(),
                        target.display()
                    );
                }
            }
            if is_complete(&journal) {
                return finish(cli, &journal, "already-complete");
            }
            say(cli, &format!("resuming the migration to {}", journal.plan.target.path.display()));
            journal
        }
        (false, Some(journal)) if !is_complete(&journal) => bail!(
            "an earlier migration to {} stopped before it finished: `pimigrate migrate --resume` carries \
             on, `pimigrate rollback` undoes it",
            journal.plan.target.path.display()
        ),
        (false, Some(journal)) if runs_from_target(&system, &journal.plan) => {
            return finish(cli, &journal, "already-migrated");
        }
        (false, Some(journal)) if target_still_holds(&system, &journal.plan) => {
            return finish(cli, &journal, "pending-reboot");
        }
        (false, _) => {
            let plan = match make_plan(cli, args, &system)? {
                Ok(plan) => plan,
                Err(code) => return Ok(code),
            };
            confirm(args, &plan)?;
            let boot_dir = system
                .source
                .boot_dir
                .clone()
                .context("no boot directory (the plan would have refused)")?;
            Journal::new(plan, host.source_root.clone(), boot_dir)
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&cancel))
            .context("installing the Ctrl-C handler")?;
    }
    let chatty = !cli.json && !cli.quiet;
    let display = ProgressDisplay {
        copy_bar: chatty && std::io::stderr().is_terminal(),
        step_lines: chatty,
    };
    let journal = apply_with_progress(&system, journal, &cancel, display)?;
    let code = finish(cli, &journal, "migrated")?;
    if args.reboot {
        reboot(&journal.plan)?;
    }
    Ok(code)
}

fn say(cli: &Cli, message: &str) {
    if !cli.json && !cli.quiet {
        eprintln!("==> {message}");
    }
}

fn is_complete(journal: &Journal) -> bool {
    journal.is_done(Step::SourceBootEdited)
}

/// Is the running root the planned root partition on the target?
fn runs_from_target(system: &System, plan: &Plan) -> bool {
    let Some(root) = plan
        .table
        .partitions
        .iter()
        .find(|p| p.role == plan::PartitionRole::Root)
    else {
        return false;
    };
    let Some(devno) = system.source.running_root_devno else {
        return false;
    };
    system
        .disks
        .iter()
        .flat_map(|d| &d.partitions)
        .any(|p| p.devno == Some(devno) && p.partuuid.as_deref() == Some(root.partuuid.as_str()))
}

/// Does the journal's target still carry the table the migration wrote
/// (the system just has not been rebooted into it)?
fn target_still_holds(system: &System, plan: &Plan) -> bool {
    system.disks.iter().any(|d| {
        d.devno == plan.target.devno && d.disk_id.as_deref() == Some(plan.table.disk_id.as_str())
    })
}

fn make_plan(cli: &Cli, args: &MigrateArgs, system: &System) -> Result<Result<Plan, u8>> {
    let spinner = scan_spinner(cli);
    // No handler is installed yet: Ctrl-C here ends the process, before
    // anything is written.
    let result = plan::plan_with_progress(system, &options_from(&args.plan), &mut |_| {
        if let Some(spinner) = &spinner {
            spinner.tick();
        }
        ControlFlow::Continue(())
    });
    if let Some(spinner) = spinner {
        spinner.finish_and_clear();
    }
    match result {
        Ok(plan) => {
            if !cli.json {
                // As `plan` shows it: -q brief, -v in full.
                let detail = match (cli.quiet, cli.verbose) {
                    (true, _) => Detail::Brief,
                    (false, 0) => Detail::Normal,
                    (false, _) => Detail::Full,
                };
                print!(
                    "{}",
                    plan_text(&plan, detail).replace("Dry run: nothing has been written.\n", "")
                );
            }
            Ok(Ok(plan))
        }
        Err(refusal) => {
            if cli.json {
                print_json(&serde_json::json!({
                    "schema": super::plan::REFUSAL_SCHEMA,
                    "refused": true,
                    "reasons": refusal.reasons,
                }))?;
            } else {
                eprint!("{refusal}");
            }
            Ok(Err(EXIT_REFUSED))
        }
    }
}

/// The user types the target's name: a slip of the finger on a prompt with
/// a default must not erase a disk.
fn confirm(args: &MigrateArgs, plan: &Plan) -> Result<()> {
    if args.yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "migrate erases {}: confirm with --yes when not running on a terminal",
            plan.target.path.display()
        );
    }
    let typed: String = dialoguer::Input::new()
        .with_prompt(format!(
            "Everything on {} will be erased. Type its name ({}) to go on",
            plan.target.path.display(),
            plan.target.name
        ))
        .allow_empty(true)
        .interact_text()
        .context("reading the confirmation; nothing was written")?;
    let typed = typed.trim();
    if typed != plan.target.name && typed != plan.target.path.to_string_lossy() {
        bail!("not confirmed; nothing was written");
    }
    Ok(())
}

/// How the executor's progress is shown.
#[derive(Debug, Clone, Copy)]
pub struct ProgressDisplay {
    /// A bar for the copy (bytes, files, speed, ETA).
    pub copy_bar: bool,
    /// A `==> step` line as each step begins.
    pub step_lines: bool,
}

/// Runs the executor with the progress display `migrate` uses (the wizard
/// too): step lines on stderr, printed above the copy bar while it runs,
/// and the full log in the host's log directory.
pub fn apply_with_progress(
    system: &System,
    journal: Journal,
    cancel: &AtomicBool,
    display: ProgressDisplay,
) -> Result<Journal> {
    // Created before the first write, so a migration that cannot keep a
    // log does not start.
    let log = MigrationLog::create(&system.host.path(&system.host.log_dir))?;
    log_start(&log, &journal);
    let bar = display
        .copy_bar
        .then(|| copy_bar(journal.plan.copy.space.used_bytes));
    let step = |message: &str| {
        log.line(message);
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if display.step_lines => eprintln!("==> {message}"),
            None => {}
        }
    };
    let copy_progress = |bytes: u64, files: u64| {
        if let Some(bar) = &bar {
            bar.set_position(bytes);
            bar.set_message(format!("{files} files"));
        }
    };
    let ctx = ApplyContext {
        cancel,
        step: &step,
        copy_progress: &copy_progress,
        log: Some(&log),
    };
    let result = apply(system, journal, &ctx);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    match &result {
        Ok(journal) => {
            log.line("done");
            log.line(&format!("next:\n{}", next_steps(&journal.plan).join("\n")));
            if display.step_lines {
                eprintln!("==> the full log is in {}", log.path().display());
            }
        }
        Err(err) => {
            log.line(&format!("error: {err:#}"));
            // Shown even with -q: it is what a bug report needs.
            eprintln!("pimigrate: the full log is in {}", log.path().display());
        }
    }
    result
}

/// The log's head: which build, what is moved where, and the whole plan.
fn log_start(log: &MigrationLog, journal: &Journal) {
    log.line(&format!(
        "pimigrate {} migrating {} to {}",
        env!("PIMIGRATE_VERSION"),
        journal.source_root.display(),
        journal.plan.target.path.display()
    ));
    if !journal.done.is_empty() {
        let done: Vec<String> = journal.done.iter().map(|s| format!("{s:?}")).collect();
        log.line(&format!(
            "resuming; steps already done: {}",
            done.join(", ")
        ));
    }
    log.line("the plan:");
    log.block(
        &plan_text(&journal.plan, Detail::Full).replace("Dry run: nothing has been written.\n", ""),
    );
}

fn copy_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} {msg} ETA {eta}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// What the user does next, in order.
pub fn next_steps(plan: &Plan) -> Vec<String> {
    let mut steps = Vec::new();
    match (plan.layout, &plan.trial_boot) {
        (Layout::RootOnly, Some(_)) => {
            steps.push("reboot once into the new root on trial: sudo reboot \"0 tryboot\" (or rerun with --reboot)".into());
            steps.push("if it does not come up, power-cycle: the SD card boots as before".into());
            steps.push(
                "once it runs from the new disk, make it permanent: sudo pimigrate verify --commit"
                    .into(),
            );
        }
        (Layout::RootOnly, None) => {
            steps.push("reboot: the SD card's boot partition now starts the new root (the SD card stays in)".into());
        }
        (Layout::Full, _) => {
            if let Some(order) = &plan.boot_order {
                steps.push(order.message.clone());
            }
            steps.push(
                "shut down, take the SD card out (or keep it as a fallback), and power on".into(),
            );
        }
    }
    steps.push("to undo the boot-file changes: sudo pimigrate rollback".into());
    steps
}

fn finish(cli: &Cli, journal: &Journal, status: &'static str) -> Result<u8> {
    let steps = next_steps(&journal.plan);
    if cli.json {
        print_json(&MigrateOutput {
            schema: MIGRATE_SCHEMA,
            status,
            journal: Some(journal),
            next_steps: steps,
        })?;
        return Ok(EXIT_OK);
    }
    let target = journal.plan.target.path.display();
    match status {
        "already-migrated" => println!("This system already runs from {target}: nothing to do."),
        "already-complete" => {
            println!("The migration to {target} is already complete: nothing to do.")
        }
        "pending-reboot" => println!(
            "The system was already migrated to {target} and waits for a reboot: nothing to do \
             (`pimigrate rollback` first to migrate again)."
        ),
        _ => println!("\nDone: the system is on {target}."),
    }
    if status == "migrated" || !cli.quiet {
        println!("Next:");
        for (n, step) in steps.iter().enumerate() {
            println!("  {}. {step}", n + 1);
        }
    }
    Ok(EXIT_OK)
}

fn reboot(plan: &Plan) -> Result<()> {
    let mut command = std::process::Command::new("systemctl");
    command.arg("reboot");
    if plan.trial_boot.is_some() {
        command.arg("0 tryboot");
    }
    let status = command.status().context("running systemctl reboot")?;
    if !status.success() {
        bail!("systemctl reboot failed ({status}); reboot by hand");
    }
    Ok(())
}
