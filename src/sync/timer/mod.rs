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
//! /etc/systemd/system beside the drop-ins, and removes them again.
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
use anyhow::{bail, Context, Result};
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

/// Writes the drop-ins (and, without the package, the units) into `host`,
/// each atomically and only when it differs; with the package installed,
/// units an older pimigrate wrote into /etc/systemd/system (which would
/// hide the package's) are removed.
pub fn install(
    host: &Host,
    program: &Path,
    command: &ServiceCommand,
    when: &str,
) -> Result<Changes> {
    let files = files_to_write(host, program, command, when)?;
    let mut changes = Changes::default();
    for (view, text) in files {
        let path = host.path(&view);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            crate::apply::atomic::replace(&path, text.as_bytes(), crate::apply::atomic::FILE)
                .with_context(|| format!("writing {}", path.display()))?;
            changes.changed = true;
        }
        changes.files.push(path);
    }
    if packaged(host) {
        for name in [SERVICE, TIMER] {
            let path = host.path(Path::new(UNIT_DIR).join(name));
            if remove_if_ours(&path)? {
                changes.files.push(path);
                changes.changed = true;
            }
        }
    }
    Ok(changes)
}

/// Removes every file `--install-timer` wrote into `host` (the drop-ins,
/// and units it wrote itself), and the drop-in directories when that
/// leaves them empty; returns what was removed.
pub fn remove(host: &Host) -> Result<Changes> {
    let dir = host.path(UNIT_DIR);
    let mut changes = Changes::default();
    for name in [TIMER, SERVICE] {
        let drop_ins = dir.join(format!("{name}.d"));
        let path = drop_ins.join(DROP_IN);
        if remove_if_ours(&path)? {
            changes.files.push(path);
            changes.changed = true;
        }
        // Only when empty: an administrator's override.conf stays.
        let _ = std::fs::remove_dir(&drop_ins);
        let unit = dir.join(name);
        if remove_if_ours(&unit)? {
            changes.files.push(unit);
            changes.changed = true;
        }
    }
    Ok(changes)
}

/// Removes `path` if `--install-timer` wrote it (its first line says so);
/// a file of the same name that someone else wrote stays.
fn remove_if_ours(path: &Path) -> Result<bool> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.starts_with(units::WRITTEN_BY) => {
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
    }
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

/// Enables (and with a running systemd starts) the timer, after systemd
/// has read the new files.
pub fn enable(host: &Host) -> Result<Manager> {
    let manager = Manager::of(host);
    match manager {
        Manager::Running => {
            systemctl(host, &["daemon-reload"])?;
            systemctl(host, &["enable", "--now", TIMER])?;
        }
        Manager::Offline => systemctl(host, &["enable", TIMER])?,
    }
    Ok(manager)
}

/// Disables (and with a running systemd stops) the timer.
pub fn disable(host: &Host) -> Result<Manager> {
    let manager = Manager::of(host);
    match manager {
        Manager::Running => systemctl(host, &["disable", "--now", TIMER])?,
        Manager::Offline => systemctl(host, &["disable", TIMER])?,
    }
    Ok(manager)
}

/// systemd reads the files again (when it runs), after a removal.
pub fn reload(host: &Host) -> Result<()> {
    if Manager::of(host) == Manager::Running {
        systemctl(host, &["daemon-reload"])?;
    }
    Ok(())
}

/// `systemctl ARGS`, with `--root` for a system that is not this one.
fn systemctl(host: &Host, args: &[&str]) -> Result<()> {
    let Some(program) = crate::tools::which("systemctl") else {
        bail!(
            "systemctl (systemd) is not installed: the units are written, but the timer needs systemd to run (systemctl {})",
            args.join(" ")
        );
    };
    let mut command = std::process::Command::new(program);
    if !host.is_live() || Manager::of(host) == Manager::Offline {
        command.arg(format!("--root={}", host.root.display()));
    }
    let output = command
        .args(args)
        .output()
        .with_context(|| format!("running systemctl {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "systemctl {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> ServiceCommand {
        ServiceCommand {
            args: vec!["--checksum".into()],
            writable: vec![],
        }
    }

    #[test]
    fn without_the_package_the_units_are_written_beside_the_drop_ins() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::with_root(dir.path());
        let program = Path::new("/usr/local/bin/pimigrate");
        let written = install(&host, program, &command(), "*-*-* 03:00").unwrap();
        assert_eq!(written.files.len(), 4);
        assert!(written.changed);
        let units = dir.path().join("etc/systemd/system");
        let service = std::fs::read_to_string(units.join(SERVICE)).unwrap();
        assert!(service.contains("\nExecStart=/usr/local/bin/pimigrate sync --yes\n"));
        let drop_in =
            std::fs::read_to_string(units.join("pimigrate-sync.service.d").join(DROP_IN)).unwrap();
        assert!(drop_in.contains("\nExecStart=/usr/local/bin/pimigrate sync --yes --checksum\n"));
        let timer =
            std::fs::read_to_string(units.join("pimigrate-sync.timer.d").join(DROP_IN)).unwrap();
        assert!(timer.ends_with("OnCalendar=\nOnCalendar=*-*-* 03:00\n"));
        let again = install(&host, program, &command(), "*-*-* 03:00").unwrap();
        assert!(!again.changed, "the same files again change nothing");
        let removed = remove(&host).unwrap();
        assert_eq!(removed.files.len(), 4);
        assert!(!units.join("pimigrate-sync.timer.d").exists());
        assert!(!units.join(SERVICE).exists());
        assert!(!remove(&host).unwrap().changed);
    }

    #[test]
    fn with_the_package_only_drop_ins_are_written_and_old_units_go() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::with_root(dir.path());
        let shipped = dir.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&shipped).unwrap();
        std::fs::write(
            shipped.join(SERVICE),
            units::service_unit(Path::new(PACKAGE_PROGRAM), false).unwrap(),
        )
        .unwrap();
        std::fs::write(shipped.join(TIMER), units::timer_unit(false)).unwrap();
        // What an older pimigrate wrote, and an administrator's own file.
        let etc = dir.path().join("etc/systemd/system");
        std::fs::create_dir_all(etc.join("pimigrate-sync.timer.d")).unwrap();
        std::fs::write(
            etc.join(SERVICE),
            "# Written by `pimigrate sync --install-timer`; old\n",
        )
        .unwrap();
        std::fs::write(
            etc.join("pimigrate-sync.timer.d/override.conf"),
            "[Timer]\n",
        )
        .unwrap();
        let written = install(&host, Path::new(PACKAGE_PROGRAM), &command(), "weekly").unwrap();
        assert!(
            !etc.join(SERVICE).exists(),
            "the old unit would hide the package's"
        );
        assert!(!etc.join(TIMER).exists());
        assert_eq!(written.files.len(), 3, "{:?}", written.files);
        let removed = remove(&host).unwrap();
        assert_eq!(removed.files.len(), 2);
        assert!(etc.join("pimigrate-sync.timer.d/override.conf").exists());
        assert!(shipped.join(SERVICE).exists());
    }
}
