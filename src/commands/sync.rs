//! `pimigrate sync`: the plan for the standby, a confirmation, the sync
//! with a progress line and a stall watchdog, and how it ended; or the
//! timer's units written or removed.

use super::plan::print_refusal;
use super::print_json;
use crate::apply::journal::Journal;
use crate::apply::log::MigrationLog;
use crate::cli::{Cli, SyncArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::signals::Hangup;
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
    // Ctrl-C stops at the next step; a closed terminal does not stop the
    // sync: its output goes to the sync's log.
    let cancel = crate::signals::install(Hangup::CarriesOn)?;
    let confirmed = confirm(args, &plan);
    if cancel.load(Ordering::SeqCst) {
        crate::signals::eprint_line("pimigrate: interrupted; nothing was written");
        return Ok(EXIT_INTERRUPTED);
    }
    confirmed?;
    let log = MigrationLog::create_named(&host.path(&host.log_dir), "sync")?;
    crate::signals::output_to(log.path())?;
    log.line(&format!(
        "pimigrate {} syncing the standby {}",
        env!("PIMIGRATE_VERSION"),
        plan.standby.disk.path.display()
    ));
    let outcome = run_with_progress(cli, args, &system, &plan, record.as_ref(), &cancel, &log);
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            let _ = mark_failed(&state_dir, &format!("{err:#}"));
            log.line(&format!("error: {err:#}"));
            if cancel.load(Ordering::SeqCst) {
                crate::signals::eprint_line("pimigrate: interrupted; the standby is marked incomplete, and the next `sudo pimigrate sync` completes it");
                return Ok(EXIT_INTERRUPTED);
            }
            return Err(err.context(format!(
                "syncing the standby {}; it is marked incomplete, and the next `sudo pimigrate sync` completes it",
                plan.standby.disk.path.display()
            )));
        }
    };
    let bootable = outcome.bootable();
    let text = render::outcome_text(&outcome, cli.quiet);
    log.line(&format!("done\n{text}"));
    if cli.json {
        print_json(&SyncOutput {
            plan: Some(&plan),
            outcome: Some(&outcome),
            bootable: Some(bootable),
            ..SyncOutput::new("synced")
        })?;
    } else if !crate::signals::hung_up() {
        crate::signals::print(&text);
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
    log: &MigrationLog,
) -> Result<SyncOutcome> {
    let chatty = !cli.json && !cli.quiet;
    let bar = (chatty && std::io::stderr().is_terminal()).then(|| {
        let bar =
            indicatif::ProgressBar::with_draw_target(None, crate::ui::stderr_term::draw_target());
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
            crate::signals::eprint_line(&format!("pimigrate: {message}"));
            std::process::exit(i32::from(crate::exit::EXIT_ERROR));
        }),
    );
    let step = |message: &str| {
        watchdog.advance();
        log.line(message);
        // After a hang-up stderr is the log, which has the line already.
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if chatty && !crate::signals::hung_up() => {
                crate::signals::eprint_line(&format!("==> {message}"))
            }
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
    crate::privilege::require_root("the timer's units go to /etc/systemd/system")?;
    let dir = host.path(timer::UNIT_DIR);
    let live = host.is_live();
    let (result, units, changed, lines) = match &args.install_timer {
        Some(when) => {
            let program = std::env::current_exe()
                .context("finding the pimigrate program for the service's ExecStart")?;
            let timer::Installed { units, changed } =
                timer::install(&dir, &program, &args.timer_args(), when)?;
            if live {
                timer::systemctl(&["daemon-reload"])?;
                timer::systemctl(&["enable", "--now", timer::TIMER])?;
            }
            let lines = vec![
                format!("the standby is synced {when}: {}", timer::TIMER),
                format!("its output: journalctl -u {}", timer::SERVICE),
                "the next run: systemctl list-timers pimigrate-sync.timer".to_string(),
            ];
            ("timer-installed", units, changed, lines)
        }
        None => {
            if live && dir.join(timer::TIMER).exists() {
                timer::systemctl(&["disable", "--now", timer::TIMER])?;
            }
            let units = timer::remove(&dir)?;
            if live && !units.is_empty() {
                timer::systemctl(&["daemon-reload"])?;
            }
            let line = if units.is_empty() {
                "there was no timer to remove".to_string()
            } else {
                "the timer is removed: the standby is synced only when you run `pimigrate sync`"
                    .to_string()
            };
            let changed = !units.is_empty();
            ("timer-removed", units, changed, vec![line])
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
