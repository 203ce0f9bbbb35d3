//! The sync as a use case, for `sync` and its timer alike: the standby's
//! executor ([`super::standby`]) driven under a stall watchdog, with step
//! lines and a progress line on a terminal, and a run that fails, stalls
//! or is interrupted recorded as incomplete with its reason.

use super::executor::ApplyContext;
use super::log::MigrationLog;
use super::standby::{apply, SyncOutcome};
use super::state::StateLock;
use crate::state::standby::StandbyRecord;
use crate::sync::plan::SyncPlan;
use crate::sync::watchdog::Watchdog;
use crate::system::System;
use anyhow::Result;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the person sees while it runs.
#[derive(Debug, Clone, Copy)]
pub struct Display {
    /// A line for each step (on stderr).
    pub step_lines: bool,
    /// A live progress line, where stderr is a terminal.
    pub progress: bool,
}

/// How a run ended, when it did not end with an outcome.
#[derive(Debug)]
pub enum Ended {
    /// Stopped by Ctrl-C (or SIGTERM): the standby is marked incomplete.
    Interrupted,
    /// An error; the standby is marked incomplete with it.
    Failed(anyhow::Error),
}

/// Syncs as `plan` says; a standby that shows no progress for
/// `stall_timeout` ends the process (a thread stuck in the kernel on a
/// dead device cannot be unwound) after recording why.
pub fn sync_with_progress(
    system: &System,
    plan: &SyncPlan,
    record: Option<&StandbyRecord>,
    cancel: &AtomicBool,
    stall_timeout: Duration,
    display: Display,
    log: &MigrationLog,
) -> Result<SyncOutcome, Ended> {
    let bar = (display.progress && std::io::stderr().is_terminal()).then(|| {
        // Drawn through the handle that a hang-up repoints (signals.rs).
        let bar =
            indicatif::ProgressBar::with_draw_target(None, crate::ui::stderr_term::draw_target());
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    });
    let state_dir = system.host.path(&system.host.state_dir);
    // Another run holds the lock: this one ends here, and leaves the
    // record, which is that run's, alone.
    let lock = Arc::new(StateLock::acquire(&state_dir).map_err(Ended::Failed)?);
    let watchdog = stall_watchdog(system, plan, stall_timeout, Arc::clone(&lock));
    let step = |message: &str| {
        watchdog.advance();
        log.line(message);
        // After a hang-up stderr is the log, which has the line already.
        match &bar {
            Some(bar) => bar.println(format!("==> {message}")),
            None if display.step_lines && !crate::signals::hung_up() => {
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
    let ctx = ApplyContext {
        cancel,
        step: &step,
        progress: &progress,
        log: Some(log),
    };
    let result = apply(system, plan, record, &lock, &ctx);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    drop(watchdog);
    result.map_err(|err| {
        let _ = lock.mark_standby_failed(&state_dir, &format!("{err:#}"));
        match cancel.load(Ordering::SeqCst) {
            true => Ended::Interrupted,
            // What it leaves and what goes on: `commands::sync` says.
            false => Ended::Failed(err.context(format!(
                "syncing the standby {}",
                plan.standby.disk.path.display()
            ))),
        }
    })
}

/// Ends the run when the standby's disk stops answering.
/// It holds the state directory's lock too, to record why.
fn stall_watchdog(
    system: &System,
    plan: &SyncPlan,
    timeout: Duration,
    lock: Arc<StateLock>,
) -> Watchdog {
    let state_dir = system.host.path(&system.host.state_dir);
    let disk = plan.standby.disk.path.clone();
    let stat = system
        .host
        .sys(&format!("class/block/{}/stat", plan.standby.disk.name));
    Watchdog::start(
        timeout,
        Some(stat),
        Box::new(move |quiet| {
            let message = format!(
                "the standby {} stopped answering: nothing was copied, read or written for {} s \
                 (--stall-timeout {}); check the disk (`dmesg`)",
                disk.display(),
                quiet.as_secs(),
                timeout.as_secs()
            );
            let _ = lock.mark_standby_failed(&state_dir, &message);
            let standing =
                super::standing::sync(Some(&disk), true, &super::standing::this_command());
            crate::signals::eprint_line(&format!("pimigrate: {message}\n{standing}"));
            std::process::exit(i32::from(crate::exit::EXIT_ERROR));
        }),
    )
}
