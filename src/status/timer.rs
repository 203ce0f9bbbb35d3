//! The daily check after the move as systemd runs it: a service that runs
//! `pimigrate status --check` once and a timer that starts it every day
//! (and once a little after each boot, when a bootloader update or a
//! clone shows itself), each as the package ships them (written by the
//! tool crate, xtask/, for the .deb and `install-extras`). The timer is
//! enabled by the package: the check only reads, and says "nothing to
//! check" (exit 0) on a Pi without a committed migration.
//!
//! What the check found goes to the journal (`journalctl -u
//! pimigrate-check`); a failure (exit 2) marks the service failed, so
//! `systemctl --failed` and a monitoring system that watches units see
//! it; a warning (exit 1) does not.

use crate::sync::timer::{quote, PATH};
use anyhow::Result;
use std::path::Path;

pub const SERVICE: &str = "pimigrate-check.service";
pub const TIMER: &str = "pimigrate-check.timer";

/// The service: one `pimigrate status --check`, hardened for a check that
/// writes nothing. `program` is the `ExecStart=` program.
pub fn service_unit(program: &Path) -> Result<String> {
    let exec = quote::exec_line([program.as_os_str(), "status".as_ref(), "--check".as_ref()])?;
    Ok(format!(
        "\
# The check after the move: what the migration set up, read again
# (pimigrate-check.timer starts it). What drifted goes to the journal;
# mute a finding in /etc/pimigrate/check.conf (`ignore CODE`).
[Unit]
Description=Check what the move to the new drive set up (pimigrate status --check)
Documentation=man:pimigrate-status(1)
After=local-fs.target

[Service]
Type=oneshot
ExecStart={exec}
Environment=PATH={PATH}
# 1 is a warning: the unit fails on a failure (2) alone.
SuccessExitStatus=1
Nice=10
IOSchedulingClass=idle
TimeoutStartSec=10min
{HARDENING}"
    ))
}

/// What `systemd-analyze security` suggests that the check can live
/// with, and why each of the others is left out. The check reads the
/// disks (sysfs, their superblocks), the kernel log, the device tree, the
/// bootloader's config (rpi-eeprom-config, vcgencmd through /dev/vcio),
/// the state directory, and what hides under the boot partition's mount
/// point (a detached copy of a mount, open_tree); it writes nothing.
const HARDENING: &str = "\
# Hardening. It writes nothing: the whole system is read-only to it.
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateNetwork=yes
IPAddressDeny=any
RestrictAddressFamilies=AF_UNIX
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectHostname=yes
ProtectProc=invisible
NoNewPrivileges=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RestrictRealtime=yes
RestrictNamespaces=yes
RestrictSUIDSGID=yes
UMask=0077
SystemCallArchitectures=native
SystemCallFilter=~@clock @cpu-emulation @debug @module @obsolete @raw-io @reboot @swap @chown @setuid
SystemCallErrorNumber=EPERM
# What it needs of root: the kernel log (dmesg_restrict) and a detached
# copy of a mount.
CapabilityBoundingSet=CAP_SYSLOG CAP_SYS_ADMIN
# Left out, each for its reason:
# - ProtectKernelLogs=: it reads the kernel log (/dev/kmsg) for the
#   drive's I/O errors and resets.
# - PrivateDevices=, DevicePolicy=closed, DeviceAllow=: it reads the
#   disks' superblocks, /dev/kmsg and the firmware's /dev/vcio.
# - ProtectClock=: it adds a DeviceAllow= entry, which turns the device
#   policy into an allow-list without those devices.
# - ProcSubset=pid: it reads /proc/cmdline, /proc/device-tree and the
#   running kernel's release.
# - the @mount calls: open_tree makes the detached copy of a mount that
#   shows what the boot partition's mount point hides.
# - PrivateUsers=, User=, DynamicUser=: the kernel log and open_tree take
#   the real root's capabilities.
";

/// The timer: daily at a random moment, a run missed while the Pi was off
/// made up at the next boot, and once a quarter of an hour after each
/// boot.
pub fn timer_unit() -> String {
    "\
# Starts pimigrate-check.service: daily, and a little after each boot.
# Enabled by the package; on a Pi without a committed migration the
# check says there is nothing to check.
[Unit]
Description=Check daily what the move to the new drive set up (pimigrate status --check)
Documentation=man:pimigrate-status(1)

[Timer]
OnCalendar=daily
RandomizedDelaySec=1h
# A run missed while the Pi was off is made up at the next boot.
Persistent=true
# A bootloader update or a clone shows itself at a boot.
OnBootSec=15min

[Install]
WantedBy=timers.target
"
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_runs_the_check_and_fails_on_a_failure_only() {
        let unit = service_unit(Path::new("/usr/bin/pimigrate")).unwrap();
        assert!(unit.contains("\nExecStart=/usr/bin/pimigrate status --check\n"));
        assert!(unit.contains("\nSuccessExitStatus=1\n"));
        assert!(unit.contains(&format!("\nEnvironment=PATH={PATH}\n")));
        assert!(unit.contains("\nProtectSystem=strict\n"));
        assert!(!unit.contains("StateDirectory="), "it writes nothing");
        let odd = service_unit(Path::new("/opt/pi migrate/pimigrate")).unwrap();
        assert!(odd.contains("\nExecStart=\"/opt/pi migrate/pimigrate\" status --check\n"));
    }

    #[test]
    fn every_hardening_option_left_out_says_why() {
        for option in [
            "ProtectKernelLogs=",
            "PrivateDevices=",
            "ProtectClock=",
            "ProcSubset=",
            "PrivateUsers=",
        ] {
            let reason = HARDENING
                .split("\n# - ")
                .skip(1)
                .find(|item| item.contains(option))
                .unwrap_or_else(|| panic!("no reason given for leaving out {option}"));
            assert!(reason.contains(": "), "{reason}");
            assert!(
                !HARDENING.lines().any(|l| l.starts_with(option)),
                "{option} is both set and left out"
            );
        }
    }

    #[test]
    fn the_timer_is_daily_after_each_boot_and_made_up() {
        let timer = timer_unit();
        for line in [
            "OnCalendar=daily",
            "Persistent=true",
            "RandomizedDelaySec=1h",
            "OnBootSec=15min",
            "WantedBy=timers.target",
        ] {
            assert!(timer.contains(&format!("\n{line}\n")), "{line}");
        }
    }
}
