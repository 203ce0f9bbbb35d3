//! `pimigrate sync`: the plan for the standby, the confirmation, the sync
//! ([`crate::apply::sync`]) and how it ended; or the timer's units written
//! or removed.

use super::plan::print_refusal;
use super::print_json;
use crate::apply::journal::Journal;
use crate::apply::log::MigrationLog;
use crate::apply::standby::SyncOutcome;
use crate::apply::sync::{sync_with_progress, Display, Ended};
use crate::cli::{Cli, SyncArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::{Reason, Refusal};
use crate::signals::Hangup;
use crate::sync::plan::{plan_sync, SyncPlan};
use crate::sync::record::StandbyRecord;
use crate::sync::{render, timer, SYNC_SCHEMA};
use crate::system::System;
use crate::ui::confirm::{before_writing, Ask};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

/// What a run of `sync` did (`result` in its JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Done {
    Synced,
    DryRun,
    TimerInstalled,
    TimerRemoved,
}

#[derive(Serialize)]
struct SyncOutput<'a> {
    schema: &'static str,
    result: Done,
    plan: Option<&'a SyncPlan>,
    outcome: Option<&'a SyncOutcome>,
    bootable: Option<bool>,
    /// The unit files written or removed.
    units: Vec<PathBuf>,
    /// Whether the timer's units changed (for Ansible's `changed`).
    changed: bool,
}

impl<'a> SyncOutput<'a> {
    fn new(result: Done) -> SyncOutput<'a> {
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
                ..SyncOutput::new(Done::DryRun)
            })?;
        }
        return Ok(EXIT_OK);
    }
    let disk = plan.standby.disk.path.display();
    if plan.divergence.changed() && !args.overwrite_changes {
        if let Some(code) = changed_standby(cli, args, &plan)? {
            return Ok(code);
        }
    }
    let ask = match plan.erases() {
        true => Ask::Erase {
            path: &plan.standby.disk.path,
            name: &plan.standby.disk.name,
            what: format!("Everything on {disk} will be erased."),
        },
        false => Ask::Change {
            question: format!("Bring the standby on {disk} up to date?"),
            default: true,
        },
    };
    before_writing(ask, args.yes, &format!("sync writes {disk}"))?;
    // Ctrl-C stops at the next step; a closed terminal does not stop the
    // sync: its output goes to the sync's log from then on.
    let cancel = crate::signals::install(Hangup::CarriesOn)?;
    let log = MigrationLog::create_named(&host.path(&host.log_dir), "sync")?;
    crate::signals::output_to(log.path())?;
    log.line(&format!(
        "pimigrate {} syncing the standby {disk}",
        env!("PIMIGRATE_VERSION"),
    ));
    let chatty = !cli.json && !cli.quiet;
    let display = Display {
        step_lines: chatty,
        progress: chatty,
    };
    let timeout = Duration::from_secs(args.stall_timeout);
    let outcome = match sync_with_progress(
        &system,
        &plan,
        record.as_ref(),
        &cancel,
        timeout,
        display,
        &log,
    ) {
        Ok(outcome) => outcome,
        Err(Ended::Interrupted) => {
            log.line("error: interrupted");
            crate::signals::eprint_line("pimigrate: interrupted; the standby is marked incomplete, and the next `sudo pimigrate sync` completes it");
            return Ok(EXIT_INTERRUPTED);
        }
        Err(Ended::Failed(err)) => {
            log.line(&format!("error: {err:#}"));
            return Err(err);
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
            ..SyncOutput::new(Done::Synced)
        })?;
    } else if !crate::signals::hung_up() {
        crate::signals::print(&text);
    }
    Ok(if bootable { EXIT_OK } else { EXIT_FAILED })
}

/// A standby changed behind the sync's back: refused where no one can be
/// asked (--yes, the timer, no terminal), else asked; `None` to go on.
fn changed_standby(cli: &Cli, args: &SyncArgs, plan: &SyncPlan) -> Result<Option<u8>> {
    let disk = plan.standby.disk.path.display();
    let said = plan.divergence.summary().unwrap_or_default();
    let keep = format!(
        "to keep them, copy them off first (mount {} read-only elsewhere); to overwrite them: \
         sudo pimigrate sync --overwrite-changes",
        plan.standby.root_name()
    );
    if args.yes || !std::io::stdin().is_terminal() {
        let refusal = Refusal {
            reasons: vec![Reason::new("standby-changed", format!("{disk}: {said}")).hint(keep)],
        };
        print_refusal(cli, &refusal)?;
        return Ok(Some(EXIT_REFUSED));
    }
    eprintln!("pimigrate: {disk}: {said}\n  ({keep})");
    before_writing(
        Ask::Change {
            question: format!("Overwrite what changed on the standby {disk}?"),
            default: false,
        },
        false,
        "sync",
    )?;
    Ok(None)
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
            (Done::TimerInstalled, files, changed, lines)
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
            (
                Done::TimerRemoved,
                files,
                changed || was_enabled,
                vec![line],
            )
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
                if result == Done::TimerInstalled {
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
