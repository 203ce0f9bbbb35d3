//! `sync --install-timer` and `--remove-timer`: a systemd service and
//! timer that run `pimigrate sync --yes` on a schedule, as the ecosystem
//! schedules such jobs. What cron jobs of the peers' users got wrong, done
//! here: a full PATH (mkfs, losetup and mount live in /sbin), output to the
//! journal (`journalctl -u pimigrate-sync`), one run at a time (the state
//! directory's lock, and systemd never starts a oneshot twice), missed runs
//! made up after a power-off (`Persistent=true`), and the sync's own
//! stall timeout under systemd's.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

pub const SERVICE: &str = "pimigrate-sync.service";
pub const TIMER: &str = "pimigrate-sync.timer";
/// Where the units go, as a view path.
pub const UNIT_DIR: &str = "/etc/systemd/system";
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `daily`, `weekly`, `hourly` (systemd's own shorthands) or any
/// `OnCalendar=` expression, checked to be one line of plain text.
pub fn on_calendar(when: &str) -> Result<String> {
    let when = when.trim();
    if when.is_empty() || when.contains(['\n', '\r', '\\']) {
        bail!("--install-timer {when:?}: give daily, weekly, hourly or a systemd calendar time such as '*-*-* 03:00'");
    }
    Ok(when.to_string())
}

/// The service: one sync, as the timer runs it. `args` are sync's flags
/// to keep (--checksum, --stall-timeout); never a device name, which can
/// change from boot to boot: the standby record names the standby.
pub fn service_unit(program: &Path, args: &[String]) -> String {
    let mut command = vec![
        program.display().to_string(),
        "sync".to_string(),
        "--yes".to_string(),
    ];
    command.extend(args.iter().cloned());
    format!(
        "# Written by `pimigrate sync --install-timer`; `pimigrate sync --remove-timer` removes it.\n\
         [Unit]\n\
         Description=Bring the standby copy of this system up to date (pimigrate sync)\n\
         After=local-fs.target\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         Environment=PATH={PATH}\n\
         ExecStart={}\n\
         StandardOutput=journal\n\
         StandardError=journal\n\
         Nice=10\n\
         IOSchedulingClass=idle\n\
         # pimigrate's own lock keeps a second run out; its stall timeout\n\
         # ends a run whose disk stops answering long before this does.\n\
         TimeoutStartSec=6h\n",
        command.join(" ")
    )
}

pub fn timer_unit(on_calendar: &str) -> String {
    format!(
        "# Written by `pimigrate sync --install-timer`; `pimigrate sync --remove-timer` removes it.\n\
         [Unit]\n\
         Description=Keep the standby copy of this system in sync (pimigrate sync)\n\
         \n\
         [Timer]\n\
         OnCalendar={on_calendar}\n\
         Persistent=true\n\
         RandomizedDelaySec=10min\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n"
    )
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub units: Vec<PathBuf>,
    /// False when both units were there already, as they would be written.
    pub changed: bool,
}

/// Writes both units into `dir` (atomically each, only when they differ).
pub fn install(dir: &Path, program: &Path, args: &[String], when: &str) -> Result<Installed> {
    let when = on_calendar(when)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut installed = Installed {
        units: Vec::new(),
        changed: false,
    };
    for (name, text) in [
        (SERVICE, service_unit(program, args)),
        (TIMER, timer_unit(&when)),
    ] {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            crate::apply::atomic::replace(&path, text.as_bytes(), crate::apply::atomic::FILE)?;
            installed.changed = true;
        }
        installed.units.push(path);
    }
    Ok(installed)
}

/// Removes both units from `dir`; returns those that were there.
pub fn remove(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for name in [TIMER, SERVICE] {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("removing {}", path.display())),
        }
    }
    Ok(removed)
}

/// `systemctl ARGS`, when systemd runs this machine; a missing systemctl
/// or a system not booted with systemd is said, not hidden.
pub fn systemctl(args: &[&str]) -> Result<()> {
    if !Path::new("/run/systemd/system").exists() {
        bail!(
            "this system does not run systemd: start the timer by hand (systemctl {})",
            args.join(" ")
        );
    }
    let status = std::process::Command::new("systemctl")
        .args(args)
        .status()
        .with_context(|| format!("running systemctl {}", args.join(" ")))?;
    if !status.success() {
        bail!("systemctl {} failed ({status})", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_has_a_full_path_the_journal_and_no_device_name() {
        let unit = service_unit(Path::new("/usr/bin/pimigrate"), &["--checksum".into()]);
        assert!(unit.contains(&format!("\nEnvironment=PATH={PATH}\n")));
        assert!(unit.contains("\nExecStart=/usr/bin/pimigrate sync --yes --checksum\n"));
        assert!(unit.contains("\nStandardOutput=journal\n"));
        assert!(unit.contains("\nType=oneshot\n"));
        assert!(!unit.contains("/dev/"));
        let timer = timer_unit("daily");
        assert!(timer.contains("\nOnCalendar=daily\nPersistent=true\n"));
        assert!(timer.contains("\nWantedBy=timers.target\n"));
        assert!(on_calendar("daily\nExecStart=/bin/sh").is_err());
        assert!(on_calendar("").is_err());
    }

    #[test]
    fn install_and_remove_write_and_take_away_both_units() {
        let dir = tempfile::tempdir().unwrap();
        let written = install(
            dir.path(),
            Path::new("/usr/bin/pimigrate"),
            &[],
            "*-*-* 03:00",
        )
        .unwrap();
        assert_eq!(written.units.len(), 2);
        assert!(written.changed);
        let again = install(
            dir.path(),
            Path::new("/usr/bin/pimigrate"),
            &[],
            "*-*-* 03:00",
        );
        assert!(
            !again.unwrap().changed,
            "the same units again change nothing"
        );
        let timer = std::fs::read_to_string(dir.path().join(TIMER)).unwrap();
        assert!(timer.contains("OnCalendar=*-*-* 03:00\n"));
        assert_eq!(remove(dir.path()).unwrap().len(), 2);
        assert!(remove(dir.path()).unwrap().is_empty());
    }
}
