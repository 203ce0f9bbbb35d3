//! The sync timer's writes: the drop-ins (and without the package the
//! units) `sync --install-timer` puts into /etc/systemd/system, their
//! removal, and systemctl's enable, disable and reload. What the files say
//! is decided in `sync::timer`; each write here takes the state
//! directory's lock as a value, so one pimigrate at a time changes them.

use super::atomic;
use super::state::StateLock;
use crate::host::Host;
use crate::sync::timer::{
    files_to_write, packaged, units, Changes, Manager, ServiceCommand, DROP_IN, SERVICE, TIMER,
    UNIT_DIR,
};
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Writes the drop-ins (and, without the package, the units) into `host`,
/// each atomically and only when it differs; with the package installed,
/// units an older pimigrate wrote into /etc/systemd/system (which would
/// hide the package's) are removed.
pub fn install(
    _lock: &StateLock,
    host: &Host,
    program: &Path,
    command: &ServiceCommand,
    when: &str,
) -> Result<Changes> {
    let files = files_to_write(host, program, command, when)?;
    // A state or log directory of its own must exist before the service
    // starts: it is the only place outside its own that the hardened
    // service may write.
    for dir in &command.writable {
        std::fs::create_dir_all(host.path(dir))
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut changes = Changes::default();
    for (view, text) in files {
        let path = host.path(&view);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            atomic::replace(&path, text.as_bytes(), atomic::FILE)
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
pub fn remove(_lock: &StateLock, host: &Host) -> Result<Changes> {
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

/// Enables (and with a running systemd starts) the timer, after systemd
/// has read the new files.
pub fn enable(_lock: &StateLock, host: &Host) -> Result<Manager> {
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
pub fn disable(_lock: &StateLock, host: &Host) -> Result<Manager> {
    let manager = Manager::of(host);
    match manager {
        Manager::Running => systemctl(host, &["disable", "--now", TIMER])?,
        Manager::Offline => systemctl(host, &["disable", TIMER])?,
    }
    Ok(manager)
}

/// systemd reads the files again (when it runs), after a removal.
pub fn reload(_lock: &StateLock, host: &Host) -> Result<()> {
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
    use crate::sync::timer::PACKAGE_PROGRAM;

    fn lock(host: &Host) -> StateLock {
        StateLock::acquire(&host.path(&host.state_dir)).unwrap()
    }

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
        let written = install(&lock(&host), &host, program, &command(), "*-*-* 03:00").unwrap();
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
        let again = install(&lock(&host), &host, program, &command(), "*-*-* 03:00").unwrap();
        assert!(!again.changed, "the same files again change nothing");
        let removed = remove(&lock(&host), &host).unwrap();
        assert_eq!(removed.files.len(), 4);
        assert!(!units.join("pimigrate-sync.timer.d").exists());
        assert!(!units.join(SERVICE).exists());
        assert!(!remove(&lock(&host), &host).unwrap().changed);
    }

    #[test]
    fn with_the_package_only_drop_ins_are_written_and_old_units_go() {
        let dir = tempfile::tempdir().unwrap();
        let host = Host::with_root(dir.path());
        let shipped = dir.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&shipped).unwrap();
        std::fs::write(
            shipped.join(SERVICE),
            crate::sync::timer::units::service_unit(Path::new(PACKAGE_PROGRAM), false).unwrap(),
        )
        .unwrap();
        std::fs::write(
            shipped.join(TIMER),
            crate::sync::timer::units::timer_unit(false),
        )
        .unwrap();
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
        let written = install(
            &lock(&host),
            &host,
            Path::new(PACKAGE_PROGRAM),
            &command(),
            "weekly",
        )
        .unwrap();
        assert!(
            !etc.join(SERVICE).exists(),
            "the old unit would hide the package's"
        );
        assert!(!etc.join(TIMER).exists());
        assert_eq!(written.files.len(), 3, "{:?}", written.files);
        let removed = remove(&lock(&host), &host).unwrap();
        assert_eq!(removed.files.len(), 2);
        assert!(etc.join("pimigrate-sync.timer.d/override.conf").exists());
        assert!(shipped.join(SERVICE).exists());
    }
}
