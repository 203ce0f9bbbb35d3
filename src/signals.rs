//! Every signal handler pimigrate has, installed here and nowhere else.
//!
//! - Ctrl-C (SIGINT) and SIGTERM set the stop flag: the work checks it
//!   between steps, tidies up and the command exits 130
//!   ([`crate::exit::EXIT_INTERRUPTED`]).
//! - SIGHUP is what a closed terminal or a dropped SSH session sends. From
//!   then on every write to that terminal fails (EIO), and Rust's `print!`
//!   panics on a failed write, so the handler first points fds 1 and 2
//!   elsewhere: at the command's log once it has one ([`output_to`]),
//!   else at /dev/null. What SIGHUP means beyond that depends on the work
//!   ([`Hangup`]): a command that only reads or measures stops, as for
//!   Ctrl-C; a migration or a sync, once it writes, carries on, its output
//!   going to its log, so a dropped session never leaves a half-done disk
//!   for somebody to notice.
//!
//! The handlers only store into atomics and call dup2(2), both
//! async-signal-safe.

use anyhow::{Context, Result};
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

/// What SIGHUP does to the command running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hangup {
    /// It stops, as for Ctrl-C (a benchmark, a check, the wizard's
    /// questions: nobody is left to read the answer).
    Stops,
    /// It carries on, its output in its log: work that must not be left
    /// half done because a terminal went away.
    CarriesOn,
}

struct State {
    stop: Arc<AtomicBool>,
    hung_up: AtomicBool,
    carries_on: AtomicBool,
}

static STATE: OnceLock<State> = OnceLock::new();
/// Where fds 1 and 2 go once the terminal hung up: /dev/null until a log
/// is named. -1 before [`install`].
static OUTPUT_FD: AtomicI32 = AtomicI32::new(-1);

/// Installs the handlers (once per process; later calls only switch
/// SIGHUP from [`Hangup::Stops`] to [`Hangup::CarriesOn`], never back) and
/// returns the stop flag, which SIGINT and SIGTERM set (and SIGHUP, while
/// it stops the command).
pub fn install(hangup: Hangup) -> Result<Arc<AtomicBool>> {
    let state = match STATE.get() {
        Some(state) => state,
        None => install_handlers()?,
    };
    if hangup == Hangup::CarriesOn {
        state.carries_on.store(true, Ordering::SeqCst);
    }
    Ok(Arc::clone(&state.stop))
}

fn install_handlers() -> Result<&'static State> {
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .context("opening /dev/null for the output after a hang-up")?;
    OUTPUT_FD.store(null.into_raw_fd(), Ordering::SeqCst);
    let state = STATE.get_or_init(|| State {
        stop: Arc::new(AtomicBool::new(false)),
        hung_up: AtomicBool::new(false),
        carries_on: AtomicBool::new(false),
    });
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&state.stop))
            .context("installing the Ctrl-C handler")?;
    }
    // SAFETY: the action only loads and stores atomics and calls dup2,
    // which are async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        signal_hook::low_level::register(signal_hook::consts::SIGHUP, on_hangup)
            .context("installing the hang-up handler")?;
    }
    Ok(state)
}

/// The SIGHUP handler (see the module's text).
fn on_hangup() {
    let Some(state) = STATE.get() else {
        return;
    };
    state.hung_up.store(true, Ordering::SeqCst);
    redirect_output();
    if !state.carries_on.load(Ordering::SeqCst) {
        state.stop.store(true, Ordering::SeqCst);
    }
}

/// Points fds 1 and 2 at [`OUTPUT_FD`]. Async-signal-safe.
fn redirect_output() {
    let fd = OUTPUT_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: dup2 on descriptors this process owns; a failure leaves
        // the old descriptor, whose writes then fail without harm.
        unsafe {
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
        }
    }
}

/// From now on SIGHUP lets the command carry on: for the wizard, once its
/// last question is answered and it starts writing.
pub fn carry_on_after_hangup() {
    if let Some(state) = STATE.get() {
        state.carries_on.store(true, Ordering::SeqCst);
    }
}

/// Output after a hang-up goes to `log` (appended): at once if the
/// terminal is gone already. The log must be opened for appending by its
/// writer too, so both add to its end.
pub fn output_to(log: &Path) -> Result<()> {
    if STATE.get().is_none() {
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .with_context(|| format!("opening {} for the output after a hang-up", log.display()))?;
    let old = OUTPUT_FD.swap(file.into_raw_fd(), Ordering::SeqCst);
    // Set before the check: a SIGHUP from here on uses the log itself, and
    // one that came before is seen here.
    if hung_up() {
        redirect_output();
    }
    if old >= 0 {
        // The old target (/dev/null or an earlier log) may still be fds 1
        // and 2 until the redirect above; closing our own copy is harmless.
        // SAFETY: `old` came from into_raw_fd and nothing else owns it.
        unsafe {
            libc::close(old);
        }
    }
    Ok(())
}

/// Whether the terminal went away (SIGHUP came).
pub fn hung_up() -> bool {
    STATE
        .get()
        .is_some_and(|state| state.hung_up.load(Ordering::SeqCst))
}

/// Whether the command was asked to stop (Ctrl-C, SIGTERM, or SIGHUP
/// while it stops the command).
pub fn stop_requested() -> bool {
    STATE
        .get()
        .is_some_and(|state| state.stop.load(Ordering::SeqCst))
}

/// A child that must finish its job even when the terminal goes away
/// (mkfs, udevadm): a process group of its own, so the SIGHUP a shell or
/// the kernel sends to the terminal's foreground group misses it. Ctrl-C
/// misses it too: pimigrate stops at its next step, once the child is done.
pub fn shield(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    command.process_group(0)
}

/// `text` on stdout, never panicking: after a hang-up the write may fail
/// until the handler has moved fd 1, and then nobody reads it anyway.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// `text` and a newline on stderr, never panicking (see [`print`]).
pub fn eprint_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process-wide state in one test, so no other test of this
    /// module sees it half set. (A real hang-up moves fds 1 and 2, which
    /// the test harness shares: `tests/migrate_host.rs` hangs up a
    /// migration's terminal instead.)
    #[test]
    fn the_handlers_install_once_and_only_upgrade_to_carrying_on() {
        let stop = install(Hangup::Stops).unwrap();
        assert!(!hung_up() && !stop_requested());
        let again = install(Hangup::CarriesOn).unwrap();
        assert!(Arc::ptr_eq(&stop, &again), "one stop flag per process");
        install(Hangup::Stops).unwrap();
        assert!(STATE.get().unwrap().carries_on.load(Ordering::SeqCst));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("migrate.log");
        assert!(output_to(&log).is_err(), "the log must exist");
        std::fs::write(&log, "head\n").unwrap();
        output_to(&log).unwrap();
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
        assert!(stop_requested());
    }
}
