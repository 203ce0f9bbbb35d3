//! `sync --install-timer` and `--remove-timer`: a systemd service and
//! timer that run `pimigrate sync --yes` on a schedule, as Debian and
//! systemd expect. The package ships both units, disabled
//! ([`units::service_unit`], [`units::timer_unit`]); `--install-timer
//! WHEN` writes two drop-ins into /etc/systemd/system (the schedule, and
//! the service's command line with every option that changes what a sync
//! does, quoted the way systemd reads it: [`quote`]), then enables and
//! starts the timer; `--remove-timer` disables it and removes the
//! drop-ins; the package's purge removes whatever `--install-timer` wrote.
//! A pimigrate installed without the package writes the two units into
//! /etc/systemd/system beside the drop-ins, and removes them again. What
//! is written is decided here; `apply::timer` writes it and runs
//! systemctl, with the state directory's lock held.
//!
//! What cron jobs of the peers' users got wrong, done here: a full PATH
//! (mkfs, losetup and mount live in /sbin), output to the journal
//! (`journalctl -u pimigrate-sync`), one run at a time (the state
//! directory's lock, and systemd never starts a oneshot twice), missed
//! runs made up after a power-off (`Persistent=true`), the sync's own stall
//! timeout under systemd's, and a program only root can change
//! ([`program`]).

pub mod program;
pub mod quote;
pub mod units;

use crate::host::Host;
use anyhow::{bail, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use program::{service_program, PACKAGE_PROGRAM};
pub use units::PATH;

pub const SERVICE: &str = "pimigrate-sync.service";
pub const TIMER: &str = "pimigrate-sync.timer";
/// Where the administrator's units and drop-ins go (a view path).
pub const UNIT_DIR: &str = "/etc/systemd/system";
/// Where the package installs its units (view paths; the second for a
/// system whose /lib is not merged into /usr).
pub const PACKAGE_UNIT_DIRS: [&str; 2] = ["/usr/lib/systemd/system", "/lib/systemd/system"];
/// The drop-ins' file name, in `pimigrate-sync.service.d/` and
/// `pimigrate-sync.timer.d/`. It sorts before `override.conf`, so what an
/// administrator sets with `systemctl edit` comes last and wins.
pub const DROP_IN: &str = "50-pimigrate.conf";
/// The link `systemctl enable` makes for the timer.
pub const ENABLED_LINK: &str = "timers.target.wants/pimigrate-sync.timer";

/// `daily`, `weekly`, `hourly` (systemd's own shorthands) or any
/// `OnCalendar=` expression, checked to be one line of plain text.
pub fn on_calendar(when: &str) -> Result<String> {
    let when = when.trim();
    if when.is_empty() || when.contains(['\n', '\r', '\\']) {
        bail!("--install-timer {when:?}: give daily, weekly, hourly or a systemd calendar time such as '*-*-* 03:00'");
    }
    Ok(when.to_string())
}

/// What the service's command line carries besides `sync --yes`.
#[derive(Debug, Clone, Default)]
pub struct ServiceCommand {
    /// The arguments after `sync --yes`, each one word.
    pub args: Vec<OsString>,
    /// Directories outside the service's own (/var/lib/pimigrate,
    /// /var/log/pimigrate, /run/pimigrate) that it writes.
    pub writable: Vec<PathBuf>,
}

/// What `install` or `remove` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// Files written (install) or removed (remove, and old units that
    /// install replaced), as paths on this machine.
    pub files: Vec<PathBuf>,
    /// False when nothing had to change.
    pub changed: bool,
}

/// The files `--install-timer` writes, as view paths with their text.
pub fn files_to_write(
    host: &Host,
    program: &Path,
    command: &ServiceCommand,
    when: &str,
) -> Result<Vec<(PathBuf, String)>> {
    let when = on_calendar(when)?;
    let dir = Path::new(UNIT_DIR);
    let mut files = Vec::new();
    if !packaged(host) {
        // No package: the units themselves, ours to remove again.
        files.push((dir.join(SERVICE), units::service_unit(program, true)?));
        files.push((dir.join(TIMER), units::timer_unit(true)));
    }
    files.push((
        dir.join(format!("{SERVICE}.d")).join(DROP_IN),
        units::service_drop_in(program, &command.args, &command.writable)?,
    ));
    files.push((
        dir.join(format!("{TIMER}.d")).join(DROP_IN),
        units::timer_drop_in(&when)?,
    ));
    Ok(files)
}

/// Whether the package's units are installed in `host`.
pub fn packaged(host: &Host) -> bool {
    PACKAGE_UNIT_DIRS
        .iter()
        .any(|dir| host.path(Path::new(dir).join(SERVICE)).is_file())
}

/// Whether the timer is enabled in `host` (the link `systemctl enable`
/// makes is there).
pub fn enabled(host: &Host) -> bool {
    host.path(Path::new(UNIT_DIR).join(ENABLED_LINK))
        .symlink_metadata()
        .is_ok()
}

/// How systemctl reaches the system the units are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// systemd runs this machine: reload it and start or stop the timer.
    Running,
    /// The units are for a system that is not running (a fixture tree,
    /// an image, a chroot): `systemctl --root` only links or unlinks the
    /// timer, which starts at that system's next boot.
    Offline,
}

impl Manager {
    pub fn of(host: &Host) -> Manager {
        if host.is_live() && Path::new("/run/systemd/system").exists() {
            Manager::Running
        } else {
            Manager::Offline
        }
    }
}
