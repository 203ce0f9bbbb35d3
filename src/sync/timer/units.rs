//! The text of the timer's units and of the drop-ins that
//! `sync --install-timer` writes. The package ships the two units (made
//! from [`service_unit`] and [`timer_unit`] by the tool crate, xtask/),
//! disabled; the drop-ins set the schedule and the service's command line.
//! A pimigrate installed without the package writes the units themselves
//! into /etc/systemd/system, from the same functions.

use super::quote;
use anyhow::Result;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The first line of every file `--install-timer` writes: `--remove-timer`
/// and the package's purge remove only files that start with it.
pub const WRITTEN_BY: &str = "# Written by `pimigrate sync --install-timer`";

/// The schedule of the shipped timer, which `--install-timer WHEN` replaces.
pub const DEFAULT_SCHEDULE: &str = "daily";

/// The service: one `pimigrate sync --yes`, with the hardening a sync can
/// live with. `program` is the `ExecStart=` program (the package's, or a
/// root-owned copy elsewhere).
pub fn service_unit(program: &Path, written_by_us: bool) -> Result<String> {
    let exec = quote::exec_line([program.as_os_str(), "sync".as_ref(), "--yes".as_ref()])?;
    let header = if written_by_us {
        format!("{WRITTEN_BY}; `pimigrate sync --remove-timer` removes it.\n")
    } else {
        String::new()
    };
    Ok(format!(
        "{header}\
# One sync of the standby copy, started by pimigrate-sync.timer.
# `pimigrate sync --install-timer WHEN` sets the sync's options in
# pimigrate-sync.service.d/50-pimigrate.conf and enables the timer.
[Unit]
Description=Bring the standby copy of this system up to date (pimigrate sync)
Documentation=man:pimigrate-sync(1)
After=local-fs.target

[Service]
Type=oneshot
ExecStart={exec}
Environment=PATH={PATH}
Nice=10
IOSchedulingClass=idle
# pimigrate's own lock keeps a second run out; its stall timeout ends a
# run whose disk stops answering long before this does.
TimeoutStartSec=6h
{HARDENING}"
    ))
}

/// What `systemd-analyze security` suggests that a sync can live with, and
/// why each of the others is left out. A sync reads the whole root
/// (every user's files), opens and mounts the standby's block devices,
/// makes device nodes and sets owners, modes, setuid bits and file
/// capabilities on the copy, and writes /var/lib/pimigrate (its record and
/// lock), /var/log/pimigrate and /run/pimigrate (its mount points).
const HARDENING: &str = "\
# Hardening. The whole system is read-only to the sync but for its own
# directories; its mounts (the standby's filesystems, a read-only view of
# the root) stay in its own mount namespace and go with it.
ProtectSystem=strict
StateDirectory=pimigrate
LogsDirectory=pimigrate
RuntimeDirectory=pimigrate
RuntimeDirectoryPreserve=yes
PrivateMounts=yes
# A private /tmp: the copy reads the root through its own bind mount of
# the root filesystem, which shows the real /tmp, not this one.
PrivateTmp=yes
ProtectHome=read-only
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectHostname=yes
ProtectProc=invisible
NoNewPrivileges=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RestrictRealtime=yes
RestrictNamespaces=yes
SystemCallArchitectures=native
# The groups of system calls a sync never makes fail instead of running.
SystemCallFilter=~@clock @cpu-emulation @debug @module @obsolete @raw-io @reboot @swap
SystemCallErrorNumber=EPERM
# No network: udevadm settle speaks to udev over a unix socket.
PrivateNetwork=yes
IPAddressDeny=any
RestrictAddressFamilies=AF_UNIX AF_NETLINK
# What root may do that a sync never needs.
CapabilityBoundingSet=~CAP_SYS_BOOT CAP_SYS_TIME CAP_WAKE_ALARM CAP_SYS_MODULE CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_BROADCAST CAP_NET_RAW CAP_SYS_PTRACE CAP_SETUID CAP_SETGID CAP_SETPCAP CAP_KILL CAP_AUDIT_CONTROL CAP_AUDIT_READ CAP_AUDIT_WRITE CAP_MAC_ADMIN CAP_MAC_OVERRIDE CAP_SYSLOG CAP_SYS_PACCT CAP_SYS_TTY_CONFIG CAP_LEASE CAP_IPC_OWNER CAP_IPC_LOCK CAP_BLOCK_SUSPEND CAP_SYS_CHROOT CAP_SYS_NICE CAP_LINUX_IMMUTABLE CAP_BPF CAP_PERFMON CAP_CHECKPOINT_RESTORE
# Left out, each for its reason:
# - CAP_SYS_ADMIN, the @mount calls: the sync mounts the
#   standby's filesystems and a read-only view of the root.
# - CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, ProtectHome=yes,
#   PrivateUsers=, User=, DynamicUser=: it reads every user's files and
#   sets times and modes on files it does not own; only the real root can.
# - CAP_CHOWN, CAP_FSETID, CAP_SETFCAP, CAP_MKNOD, the @privileged calls
#   (chown, mknod): the copy keeps owners, setuid bits, file capabilities
#   and device nodes.
# - RestrictSUIDSGID=: the copy keeps the setuid and setgid bits of
#   programs such as sudo and passwd.
# - CAP_SYS_RESOURCE: root's share of ext4's reserved blocks, which a
#   nearly full standby needs as the running system has it.
# - CAP_SYS_RAWIO: block-device ioctls some disk drivers ask it for.
# - the @resources calls (setrlimit, ioprio_set): mkfs and e2fsck may set
#   their own limits and priorities.
# - PrivateDevices=, DevicePolicy=closed, DeviceAllow=: the sync opens the
#   standby's disk, whichever kind it is (SD, USB, NVMe), and its
#   partitions.
# - ProtectClock=: it adds a DeviceAllow= entry, which turns the device
#   policy into an allow-list without the block devices.
# - UMask=: the copy gives every file and directory the mode it has on the
#   running system; a umask could strip bits from what it creates.
# - ProcSubset=pid: the sync reads /proc/cmdline, /proc/partitions and
#   /proc/device-tree.
# - RootDirectory=, RootImage=: it works on the running system itself.
# - AF_UNIX, AF_NETLINK: udevadm settle talks to udev over them.
# - SystemCallFilter=@system-service (an allow-list): the sync runs mkfs,
#   e2fsck and udevadm, whose calls differ from release to release; a call
#   missing from the list would stop a sync midway. The groups above are
#   denied instead.
";

/// The timer as shipped: daily, until `--install-timer WHEN` says when.
pub fn timer_unit(written_by_us: bool) -> String {
    let header = if written_by_us {
        format!("{WRITTEN_BY}; `pimigrate sync --remove-timer` removes it.\n")
    } else {
        String::new()
    };
    format!(
        "{header}\
# Runs pimigrate-sync.service. Disabled until `pimigrate sync
# --install-timer WHEN` sets the schedule (in
# pimigrate-sync.timer.d/50-pimigrate.conf) and enables it.
[Unit]
Description=Keep the standby copy of this system in sync (pimigrate sync)
Documentation=man:pimigrate-sync(1)

[Timer]
OnCalendar={DEFAULT_SCHEDULE}
# A run missed while the Pi was off is made up at the next boot.
Persistent=true
RandomizedDelaySec=10min

[Install]
WantedBy=timers.target
"
    )
}

/// The schedule's drop-in: `OnCalendar=` emptied, then set to `when`
/// (daily, weekly, hourly or any calendar time).
pub fn timer_drop_in(when: &str) -> Result<String> {
    let value = quote::plain_value("--install-timer", when)?;
    Ok(format!(
        "{WRITTEN_BY}; `pimigrate sync --remove-timer` removes it.\n\
         [Timer]\n\
         OnCalendar=\n\
         OnCalendar={value}\n"
    ))
}

/// The service's drop-in: its command line (`ExecStart=` emptied, then
/// set) with `args` after `sync --yes`, and the directories outside the
/// service's own that it must write (a non-default state or log
/// directory).
pub fn service_drop_in(program: &Path, args: &[OsString], writable: &[PathBuf]) -> Result<String> {
    let mut words: Vec<OsString> = vec![program.into(), "sync".into(), "--yes".into()];
    words.extend(args.iter().cloned());
    let exec = quote::exec_line(&words)?;
    let mut text = format!(
        "{WRITTEN_BY}; `pimigrate sync --remove-timer` removes it.\n\
         [Service]\n\
         ExecStart=\n\
         ExecStart={exec}\n"
    );
    for dir in writable {
        text.push_str(&format!(
            "ReadWritePaths={}\n",
            quote::path_value("the directory", dir)?
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_has_a_full_path_the_journal_and_no_device_name() {
        let unit = service_unit(Path::new("/usr/bin/pimigrate"), false).unwrap();
        assert!(unit.contains(&format!("\nEnvironment=PATH={PATH}\n")));
        assert!(unit.contains("\nExecStart=/usr/bin/pimigrate sync --yes\n"));
        assert!(unit.contains("\nType=oneshot\n"));
        assert!(unit.contains("\nProtectSystem=strict\n"));
        assert!(!unit.contains("/dev/"));
        assert!(
            !unit.starts_with(WRITTEN_BY),
            "the package's unit is not ours to remove"
        );
        let ours = service_unit(Path::new("/usr/local/bin/pimigrate"), true).unwrap();
        assert!(ours.starts_with(WRITTEN_BY));
        assert!(ours.contains("\nExecStart=/usr/local/bin/pimigrate sync --yes\n"));
    }

    #[test]
    fn every_hardening_option_left_out_says_why() {
        for option in [
            "PrivateDevices=",
            "ProtectClock=",
            "PrivateUsers=",
            "RestrictSUIDSGID=",
            "ProtectHome=yes",
            "RootDirectory=",
            "UMask=",
            "ProcSubset=",
            "SystemCallFilter=@system-service",
        ] {
            // Each item: its "# - " line and the lines that go on with it.
            let items = HARDENING.split("\n# - ").skip(1).map(|item| {
                item.split("\n")
                    .take_while(|l| !l.starts_with('#') || l.starts_with("#   "))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            let item = items
                .into_iter()
                .find(|item| item.contains(option))
                .unwrap_or_else(|| panic!("no reason given for leaving out {option}"));
            assert!(item.contains(": "), "{item}");
            assert!(
                !HARDENING.lines().any(|l| l.starts_with(option)),
                "{option} is both set and left out"
            );
        }
    }

    #[test]
    fn the_timer_and_its_drop_in() {
        let timer = timer_unit(false);
        assert!(timer.contains("\nOnCalendar=daily\n"));
        assert!(timer.contains("\nPersistent=true\n"));
        assert!(timer.contains("\nWantedBy=timers.target\n"));
        let drop_in = timer_drop_in("*-*-* 03:00").unwrap();
        assert!(drop_in.starts_with(WRITTEN_BY));
        assert!(drop_in.ends_with("[Timer]\nOnCalendar=\nOnCalendar=*-*-* 03:00\n"));
        assert!(timer_drop_in("daily\nExecStart=/bin/sh").is_err());
    }

    #[test]
    fn the_service_drop_in_replaces_the_command_line() {
        let text = service_drop_in(
            Path::new("/usr/bin/pimigrate"),
            &["--checksum".into(), "--exclude=/srv/a b".into()],
            &[PathBuf::from("/srv/pimigrate state")],
        )
        .unwrap();
        assert!(text.contains(
            "\n[Service]\nExecStart=\nExecStart=/usr/bin/pimigrate sync --yes --checksum \"--exclude=/srv/a b\"\n"
        ));
        assert!(
            text.ends_with("ReadWritePaths=\"/srv/pimigrate state\"\n"),
            "{text}"
        );
    }
}
