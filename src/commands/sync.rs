//! `pimigrate sync`: the plan for the standby, the confirmation, the sync
//! ([`crate::apply::sync`]) and how it ended; or the timer's units written
//! or removed.

use super::plan::print_refusal;
use super::print_json;
use crate::apply::log::MigrationLog;
use crate::apply::standby::SyncOutcome;
use crate::apply::standing;
use crate::apply::state::StateLock;
use crate::apply::sync::{sync_with_progress, Display, Ended};
use crate::apply::timer as apply_timer;
use crate::cli::{Cli, SyncArgs};
use crate::exit::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED};
use crate::host::Host;
use crate::plan::{Reason, Refusal};
use crate::signals::Hangup;
use crate::state::journal::Journal;
use crate::state::standby::{StandbyRecord, SyncState};
use crate::sync::plan::{plan_sync, SyncFacts, SyncPlan};
use crate::sync::standby::Standby;
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
    if args.dry_run {
        return plan_and_sync(cli, args, host, &mut None);
    }
    // Every error of a sync ends with where the Pi and the standby stand,
    // and the command that goes on.
    let mut standby = None;
    plan_and_sync(cli, args, host, &mut standby).map_err(|err| {
        let state_dir = host.path(&host.state_dir);
        standing::attach(err, |_| sync_standing(&state_dir, standby.as_ref()))
    })
}

/// Where a sync that stopped leaves things, from the standby's record as
/// the state directory holds it now.
fn sync_standing(state_dir: &std::path::Path, standby: Option<&Standby>) -> standing::Standing {
    let incomplete = standby.is_some_and(|standby| {
        StandbyRecord::load(state_dir)
            .ok()
            .flatten()
            .filter(|record| record.is_for(standby.root.partuuid.as_deref()))
            .is_some_and(|record| record.state != SyncState::Complete)
    });
    standing::sync(
        standby.map(|s| s.disk.path.as_path()),
        incomplete,
        &standing::this_command(),
    )
}

/// The sync, once the standby is known to `standby`.
fn plan_and_sync(
    cli: &Cli,
    args: &SyncArgs,
    host: &Host,
    standby: &mut Option<Standby>,
) -> Result<u8> {
    if !args.dry_run {
        crate::privilege::require_root("sync writes the standby disk")?;
    }
    let system = System::inspect(host)?;
    let state_dir = host.path(&host.state_dir);
    let journal = Journal::load(&state_dir)?;
    let record = StandbyRecord::load(&state_dir)?;
    let facts = SyncFacts {
        journal: journal.as_ref(),
        record: record.as_ref(),
        look: &crate::apply::standby::look,
    };
    let plan = match plan_sync(&system, &facts, &args.request()) {
        Ok(plan) => plan,
        Err(refusal) => {
            print_refusal(cli, &refusal)?;
            return Ok(EXIT_REFUSED);
        }
    };
    *standby = Some(plan.standby.clone());
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
    if let Some(code) = confirm(cli, args, &plan)? {
        return Ok(code);
    }
    sync(cli, args, host, &system, &plan, record.as_ref())
}

/// The person's word before anything is written: a changed standby is
/// asked about (or refused), an erased disk's name typed; an exit code
/// when the sync does not go on.
fn confirm(cli: &Cli, args: &SyncArgs, plan: &SyncPlan) -> Result<Option<u8>> {
    if plan.divergence.changed() && !args.overwrite_changes {
        if let Some(code) = changed_standby(cli, args, plan)? {
            return Ok(Some(code));
        }
    }
    let disk = plan.standby.disk.path.display();
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
    before_writing(ask, args.yes, "sync", &format!("sync writes {disk}"))?;
    Ok(None)
}

/// The sync itself, with its log, and how it ended.
fn sync(
    cli: &Cli,
    args: &SyncArgs,
    host: &Host,
    system: &System,
    plan: &SyncPlan,
    record: Option<&StandbyRecord>,
) -> Result<u8> {
    // Ctrl-C stops at the next step; a closed terminal does not stop the
    // sync: its output goes to the sync's log from then on.
    let cancel = crate::signals::install(Hangup::CarriesOn)?;
    let log = MigrationLog::create_named(&host.path(&host.log_dir), "sync")?;
    crate::signals::output_to(log.path())?;
    log.line(&format!(
        "pimigrate {} syncing the standby {}",
        env!("PIMIGRATE_VERSION"),
        plan.standby.disk.path.display()
    ));
    let chatty = !cli.json && !cli.quiet;
    let display = Display {
        step_lines: chatty,
        progress: chatty,
    };
    let timeout = Duration::from_secs(args.stall_timeout);
    let outcome = match sync_with_progress(system, plan, record, &cancel, timeout, display, &log) {
        Ok(outcome) => outcome,
        Err(Ended::Interrupted) => {
            log.line("error: interrupted");
            let standing = sync_standing(&host.path(&host.state_dir), Some(&plan.standby));
            crate::signals::eprint_line(&format!(
                "pimigrate: interrupted (Ctrl-C or SIGTERM)\n{standing}"
            ));
            return Ok(EXIT_INTERRUPTED);
        }
        Err(Ended::Failed(err)) => {
            log.line(&format!("error: {err:#}"));
            return Err(err);
        }
    };
    let bootable = outcome.bootable();
    let text = crate::apply::render::sync_outcome_text(&outcome, cli.quiet);
    log.line(&format!("done\n{text}"));
    if cli.json {
        print_json(&SyncOutput {
            plan: Some(plan),
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
        &format!("sync overwrites what changed on {disk}"),
    )?;
    Ok(None)
}

/// What a timer command did, for the text and the JSON.
struct TimerDone {
    result: Done,
    units: Vec<PathBuf>,
    changed: bool,
    lines: Vec<String>,
}

/// `--install-timer WHEN` and `--remove-timer`, with the state directory's
/// lock held: the permission to change the timer's units.
fn timer_command(cli: &Cli, args: &SyncArgs, host: &Host) -> Result<u8> {
    crate::privilege::require_root("the timer's files go to /etc/systemd/system")?;
    let lock = StateLock::acquire(&host.path(&host.state_dir))?;
    let done = match &args.install_timer {
        Some(when) => match install_timer(cli, args, host, &lock, when)? {
            Ok(done) => done,
            Err(refusal) => {
                print_refusal(cli, &refusal)?;
                return Ok(EXIT_REFUSED);
            }
        },
        None => remove_timer(host, &lock)?,
    };
    if cli.json {
        print_json(&SyncOutput {
            units: done.units,
            changed: done.changed,
            ..SyncOutput::new(done.result)
        })?;
        return Ok(EXIT_OK);
    }
    let verb = match done.result {
        Done::TimerInstalled => "wrote",
        _ => "removed",
    };
    for unit in &done.units {
        println!("{verb} {}", unit.display());
    }
    for line in done.lines {
        println!("{line}");
    }
    Ok(EXIT_OK)
}

/// The timer's units written and the timer enabled; a refusal when the
/// program the service would run is not root's alone.
fn install_timer(
    cli: &Cli,
    args: &SyncArgs,
    host: &Host,
    lock: &StateLock,
    when: &str,
) -> Result<Result<TimerDone, Refusal>> {
    let running = std::env::current_exe()
        .context("finding the pimigrate program for the service's ExecStart")?;
    let program = match timer::service_program(host, &running) {
        Ok(program) => program,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let command = args
        .timer_args(cli)
        .context("making the service's paths absolute")?;
    let timer::Changes { files, changed } =
        apply_timer::install(lock, host, &program, &command, when)?;
    let next = match apply_timer::enable(lock, host)? {
        timer::Manager::Running => "the next run: systemctl list-timers pimigrate-sync.timer",
        timer::Manager::Offline => {
            "systemd does not run here: the timer is enabled and starts at the next boot"
        }
    };
    Ok(Ok(TimerDone {
        result: Done::TimerInstalled,
        units: files,
        changed,
        lines: vec![
            format!("the standby is synced {when}: {}", timer::TIMER),
            format!("its output: journalctl -u {}", timer::SERVICE),
            next.to_string(),
        ],
    }))
}

/// The timer disabled and its units removed.
fn remove_timer(host: &Host, lock: &StateLock) -> Result<TimerDone> {
    let was_enabled = timer::enabled(host);
    if was_enabled {
        apply_timer::disable(lock, host)?;
    }
    let timer::Changes { files, changed } = apply_timer::remove(lock, host)?;
    if changed {
        apply_timer::reload(lock, host)?;
    }
    let line = match changed || was_enabled {
        true => "the timer is removed: the standby is synced only when you run `pimigrate sync`",
        false => "there was no timer to remove",
    };
    Ok(TimerDone {
        result: Done::TimerRemoved,
        units: files,
        changed: changed || was_enabled,
        lines: vec![line.to_string()],
    })
}
