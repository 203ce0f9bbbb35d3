//! `pimigrate sync`: the plan for the standby, a confirmation, the sync
//! with a progress line and a stall watchdog, and how it ended; or the
//! timer's units written or removed.

use super::plan::print_refusal;
use super::print_json;
use crate::apply::journal::Journal;
use crate::cli::{Cli, SyncArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::sync::apply::{apply, SyncContext, SyncOutcome};
use crate::sync::plan::{plan_sync, SyncPlan};
use crate::sync::record::{mark_failed, StandbyRecord};
use crate::sync::watchdog::Watchdog;
use crate::sync::{render, timer, SYNC_SCHEMA};
use crate::system::System;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Serialize)]
struct SyncOutput<'a> {
    schema: &'static str,
    /// `synced`, `dry-run`, `timer-installed`, `timer-removed`.
    result: &'static str,
    plan: Option<&'a SyncPlan>,
    outcome: Option<&'a SyncOutcome>,
    bootable: Option<bool>,
    /// The unit files written or removed.
    units: Vec<PathBuf>,
    /// Whether the timer's units changed (for Ansible's `changed`).
    changed: bool,
}

impl<'a> SyncOutput<'a> {
    fn new(result: &'static str) -> SyncOutput<'a> {
        SyncOutput {
            schema: SYNC_SCHEMA,
            result,
            plan: None,
            outcome: None,
            bootable: None,
            units: Vec::new(),
            changed: false,
        }
    }
}

pub fn run(cli: &Cli, args: &SyncArgs, host: &Host) -> Result<u8> {
    if args.install_timer.is_some() || args.remove_timer {
        return timer_command(cli, args, host);
    }
    if !args.dry_run {
        crate::privilege::require_root("sync writes the standby disk")?;
    }
    let system = System::inspect(host)?;
    let state_dir = host.path(&host.state_dir);
    let journal = Journal::load(&state_dir)?;
    let record = StandbyRecord::load(&state_dir)?;
    let plan = match plan_sync(&system, journal.as_ref(), record.as_ref(), &args.request()) {
        Ok(plan) => plan,
        Err(refusal) => {
            print_refusal(cli, &refusal)?;
            return Ok(EXIT_REFUSED);
        }
    };
    if !cli.json && !cli.quiet {
        print!("{}", render::plan_text(&plan, cli.verbose > 0));
    }
    if args.dry_run {
        if cli.json {
            print_json(&SyncOutput {
                plan: Some(&plan),
                ..SyncOutput::new("dry-run")
            })?;
        }
        return Ok(EXIT_OK);
    }
    confirm(args, &plan)?;
    let cancel = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&cancel))
            .context("installing the Ctrl-C handler")?;
    }
    let outcome = run_with_progress(cli, args, &system, &plan, record.as_ref(), &cancel);
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            let _ = mark_failed(&state_dir, &format!("{err:#}"));
            if cancel.load(Ordering::SeqCst) {
                eprintln!("pimigrate: interrupted; the standby is marked incomplete, and the next `sudo pimigrate sync` completes it");
                return Ok(EXIT_INTERRUPTED);
            }
            return Err(err.context(format!(
                "syncing the standby {}; it is marked incomplete, and the next `sudo pimigrate sync` completes it",
                plan.standby.disk.path.display()
            )));
        }
    };
    let bootable = outcome.bootable();
    if cli.json {
        print_json(&SyncOutput {
            plan: Some(&plan),
            outcome: Some(&outcome),
            bootable: Some(bootable),
            ..SyncOutput::new("synced")
        })?;
    } else {
        print!("{}", render::outcome_text(&outcome, cli.quiet));
    }
    Ok(if bootable { EXIT_OK } else { EXIT_FAILED })
}

/// The sync under a watchdog, with step lines and a progress line on a
/// terminal (none with --json, -q or without a terminal).
fn run_with_progress(
    cli: &Cli,
    args: &SyncArgs,
    system: &System,
    plan: &SyncPlan,
    record: Option<&StandbyRecord>,
    cancel: &AtomicBool,
) -> Result<SyncOutcome> {
    let chatty = !cli.json && !cli.quiet;
    let bar = (chatty && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let state_dir = system.host.path(&system.host.state_dir);
    let disk = plan.standby.disk.path.clone();
    let timeout = Duration::from_secs(args.stall_timeout);
    let stat = system
        .host
        .sys(&format!("class/block/{}/stat", plan.standby.disk.name));
    let watchdog = Watchdog::start(
        timeout,
        Some(stat),
        Box::new(move |quiet| {
            let message = format!(
                "the standby {} stopped answering: nothing was copied, read or written for {} s \
                 (--stall-timeout {}). It is marked incomplete. Check the disk (`dmesg`), then run \
                 `sudo pimigrate sync` again",
                disk.display(),
                quiet.as_secs(),
                timeout.as_secs()
            );
            let _ = mark_failed(&state_dir, &message);
            eprintln!("pimigrate: {message}");
            std::process::exit(i32::from(crate::exit::EXIT_ERROR));
        }),
    );
    let step = |message: &str| {
        watchdog.advance();
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if chatty => eprintln!("==> {message}"),
            None => {}
        }
    };
    let progress = |bytes: u64, entries: u64| {
        watchdog.advance();
        if let Some(bar) = &bar {
            bar.set_message(format!(
                "{entries} entries, {} copied",
                crate::units::binary(bytes)
            ));
        }
    };
    let ctx = SyncContext {
        cancel,
        step: &step,
        progress: &progress,
    };
    let result = apply(system, plan, record, &ctx);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    result
}

/// Asked before anything is written: a first sync erases the disk, so its
/// name is typed, as for `migrate`; a later sync is a yes or no.
fn confirm(args: &SyncArgs, plan: &SyncPlan) -> Result<()> {
    if args.yes {
        return Ok(());
    }
    let disk = &plan.standby.disk;
    if !std::io::stdin().is_terminal() {
        bail!(
            "sync writes {}: confirm with --yes when not running on a terminal",
            disk.path.display()
        );
    }
    if plan.erases() {
        let typed: String = dialoguer::Input::new()
            .with_prompt(format!(
                "Everything on {} will be erased. Type its name ({}) to go on",
                disk.path.display(),
                disk.name
            ))
            .allow_empty(true)
            .interact_text()
            .context("reading the confirmation; nothing was written")?;
        let typed = typed.trim();
        if typed != disk.name && typed != disk.path.to_string_lossy() {
            bail!("not confirmed; nothing was written");
        }
        return Ok(());
    }
    let go = dialoguer::Confirm::new()
        .with_prompt(format!(
            "Bring the standby on {} up to date?",
            disk.path.display()
        ))
        .default(true)
        .interact()
        .context("reading the confirmation; nothing was written")?;
    if !go {
        bail!("not confirmed; nothing was written");
    }
    Ok(())
}

/// `--install-timer WHEN` and `--remove-timer`.
fn timer_command(cli: &Cli, args: &SyncArgs, host: &Host) -> Result<u8> {
    crate::privilege::require_root("the timer's files go to /etc/systemd/system")?;
    let (result, units, changed, lines) = match &args.install_timer {
        Some(when) => {
            let running = std::env::current_exe()
                .context("finding the pimigrate program for the service's ExecStart")?;
            let program = match timer::service_program(host, &running) {
                Ok(program) => program,
                Err(refusal) => {
                    print_refusal(cli, &refusal)?;
                    return Ok(EXIT_REFUSED);
                }
            };
            let command = args
                .timer_args(cli)
                .context("making the service's paths absolute")?;
            // A state or log directory of its own must exist before the
            // service starts: it is the only place outside its own that
            // the hardened service may write.
            for dir in &command.writable {
                std::fs::create_dir_all(host.path(dir))
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let timer::Changes { files, changed } = timer::install(host, &program, &command, when)?;
            let manager = timer::enable(host)?;
            let mut lines = vec![
                format!("the standby is synced {when}: {}", timer::TIMER),
                format!("its output: journalctl -u {}", timer::SERVICE),
            ];
            lines.push(match manager {
                timer::Manager::Running => {
                    "the next run: systemctl list-timers pimigrate-sync.timer".to_string()
                }
                timer::Manager::Offline => {
                    "systemd does not run here: the timer is enabled and starts at the next boot"
                        .to_string()
                }
            });
            ("timer-installed", files, changed, lines)
        }
        None => {
            let was_enabled = timer::enabled(host);
            if was_enabled {
                timer::disable(host)?;
            }
            let timer::Changes { files, changed } = timer::remove(host)?;
            if changed {
                timer::reload(host)?;
            }
            let line = if changed || was_enabled {
                "the timer is removed: the standby is synced only when you run `pimigrate sync`"
                    .to_string()
            } else {
                "there was no timer to remove".to_string()
            };
            ("timer-removed", files, changed || was_enabled, vec![line])
        }
    };
    if cli.json {
        print_json(&SyncOutput {
            units,
            changed,
            ..SyncOutput::new(result)
        })?;
    } else {
        for unit in &units {
            println!(
                "{} {}",
                if result == "timer-installed" {
                    "wrote"
                } else {
                    "removed"
                },
                unit.display()
            );
        }
        for line in lines {
            println!("{line}");
        }
    }
    Ok(EXIT_OK)
}
