//! Advice that does not fail the verification: a flaky uas bridge, an
//! under-powered Pi, TRIM that does not reach the new drive, swap left on
//! the SD card, old names of the SD card's root partition (in
//! old_root.rs), and a setting that regenerates cmdline.txt and disagrees
//! with it (in regenerated.rs). The decisions behind the first three are
//! the plan's and the system's own (`plan::after_move::quirk`,
//! `system::trim`, `system::power`), so the migration and verify say the
//! same of a drive.

use super::expected::Expected;
use super::Warning;
use crate::bootcfg::Cmdline;
use crate::plan::after_move::quirk;
use crate::plan::after_move::AfterMove;
use crate::plan::Layout;
use crate::system::disks::Disk;
use crate::system::kernel_events::{
    disk_events, power_events, DiskNames, EventKind, KernelLog, PowerEventKind,
};
use crate::system::power::{under_voltage_warning, Throttled};
use crate::system::source::resolve;
use crate::system::trim::decision::{decide, TrimDecision};
use crate::system::trim::timer::FstrimTimer;
use crate::system::trim::{on_root, Inquiry, TrimFacts};
use crate::system::System;

pub fn warnings(
    system: &System,
    expected: &Expected,
    after_move: &AfterMove,
    log: &KernelLog,
    throttled: Option<&Throttled>,
) -> Vec<Warning> {
    let target = target_disk(system, expected);
    let mut out = Vec::new();
    out.extend(uas(system, target, log));
    out.extend(under_voltage(throttled, log));
    out.extend(target.and_then(|disk| trim(system, expected, after_move, disk)));
    out.extend(swap_on_old_disk(system, expected));
    out.extend(super::old_root::references(system, expected));
    out.extend(super::regenerated::raspi_firmware(system, expected));
    out
}

/// The disk holding the target's root partition.
pub fn target_disk<'a>(system: &'a System, expected: &Expected) -> Option<&'a Disk> {
    system.disks.iter().find(|d| {
        d.partitions
            .iter()
            .any(|p| p.partuuid.as_deref() == Some(expected.root_partuuid.as_str()))
    })
}

/// The disk the old root partition is on (the SD card), while attached.
fn old_root_disk<'a>(system: &'a System, expected: &Expected) -> Option<&'a Disk> {
    let names = resolve(&expected.old_root_spec, &system.disks);
    system.disks.iter().find(|d| {
        d.partitions.iter().any(|p| {
            p.path
                .as_ref()
                .is_some_and(|path| names.contains(&path.display().to_string()))
        })
    })
}

/// This boot's command line, as the kernel got it.
fn running_cmdline(system: &System) -> Option<Cmdline> {
    let bytes = std::fs::read(system.host.proc("cmdline")).ok()?;
    Cmdline::parse(&bytes).ok()
}

/// Every disk on uas whose bridge aborted or reset since boot, with the
/// quirk that moves it to usb-storage when that can be set (the plan's
/// decision, on this boot's command line).
fn uas(system: &System, target: Option<&Disk>, log: &KernelLog) -> Vec<Warning> {
    if let Some(why) = &log.unreadable {
        return vec![Warning::new(
            "kernel-log-unreadable",
            format!("the kernel log could not be read ({why}), so uas resets were not looked for"),
        )
        .fix("run verify as root")];
    }
    let running = running_cmdline(system);
    let mut out = Vec::new();
    for disk in &system.disks {
        let Some(usb) = disk
            .usb
            .as_ref()
            .filter(|u| u.driver.as_deref() == Some("uas"))
        else {
            continue;
        };
        let events = disk_events(&log.records, &DiskNames::of_disk(&system.host, &disk.name));
        let resets: Vec<&str> = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::UasAbort | EventKind::UasReset | EventKind::UsbReset
                )
            })
            .map(|e| e.message.as_str())
            .collect();
        let Some(example) = resets.first() else {
            continue;
        };
        let warning = Warning::new(
            "uas-resets",
            format!(
                "{} ({} bridge {}) had {} uas abort/reset messages in the kernel log since boot, e.g. \"{example}\"",
                disk.path.display(),
                disk.describe(),
                usb.id(),
                resets.len()
            ),
        );
        let decided = quirk::decide(
            &system.host,
            disk,
            running.as_ref(),
            log,
            false,
            &mut Vec::new(),
        );
        let is_target = target.is_some_and(|t| t.name == disk.name);
        out.push(match decided {
            Some(q) if q.already => warning.fix(format!(
                "this boot's command line already has {}: reboot for it to take effect",
                q.argument.as_deref().unwrap_or("the quirk")
            )),
            Some(q) if q.refused.is_some() => warning.fix(format!(
                "usb-storage cannot take this bridge: {}",
                q.refused.as_deref().unwrap_or_default()
            )),
            Some(q) if is_target => warning
                .fix(format!(
                    "sudo pimigrate verify --apply-quirk   (adds {} to the command line the next boot reads, with a backup)",
                    q.argument.as_deref().unwrap_or("usb-storage.quirks")
                ))
                .fix(format!("then reboot: the bridge runs on usb-storage; {}", q.cost)),
            Some(q) => warning.fix(format!(
                "add {} to cmdline.txt and reboot",
                q.argument.as_deref().unwrap_or("usb-storage.quirks")
            )),
            None => warning,
        });
    }
    out
}

/// Under-voltage since boot: `vcgencmd get_throttled` where it ran, else
/// the kernel's own messages.
fn under_voltage(throttled: Option<&Throttled>, log: &KernelLog) -> Option<Warning> {
    let message = match throttled.filter(|t| t.value.is_some()) {
        Some(throttled) => under_voltage_warning(throttled)?,
        None => {
            let first = power_events(&log.records)
                .into_iter()
                .find(|e| e.kind == PowerEventKind::UnderVoltage)?;
            format!(
                "under-voltage since boot (the kernel log: \"{}\"): a USB SSD draws from the same \
                 supply and can brown the Pi out",
                first.message
            )
        }
    };
    Some(
        Warning::new("under-voltage", message)
            .fix("use the official power supply (Pi 4: 5.1 V 3 A; Pi 5: 5 V 5 A)")
            .fix("or power the SSD separately: a powered USB hub or an enclosure with its own supply")
            .fix("Pi 5 with a 5 A supply: usb_max_current_enable=1 in config.txt"),
    )
}

/// TRIM that does not reach the new drive, or a timer that does not use
/// it: `system::trim`'s decision on the disk as it runs (its pages as the
/// kernel read them; a disk in use is never asked).
fn trim(
    system: &System,
    expected: &Expected,
    after_move: &AfterMove,
    disk: &Disk,
) -> Option<Warning> {
    let facts = TrimFacts::read(&system.host, disk, Inquiry::Never);
    let root = system.host.path(&system.source.root_dir);
    let name = disk.path.display().to_string();
    match decide(&facts) {
        TrimDecision::AlreadyOn { .. } => timer_off(&root, &name, expected.layout),
        TrimDecision::SwitchOn { rule } => {
            let planned = after_move.trim.rule.as_ref();
            let present = planned.is_some_and(|r| on_root(&root, &r.path).is_file());
            let mut warning = Warning::new(
                "trim-unavailable",
                format!(
                    "TRIM does not reach {name} (queue/discard_max_bytes is 0, provisioning_mode: {}): {}",
                    facts
                        .scsi
                        .as_ref()
                        .and_then(|s| s.provisioning_mode.as_deref())
                        .unwrap_or("unknown"),
                    match (planned, present) {
                        (Some(r), true) => format!(
                            "pimigrate's rule {} is in place but has not acted yet",
                            r.path.display()
                        ),
                        (Some(r), false) => format!(
                            "pimigrate's rule {} is missing",
                            r.path.display()
                        ),
                        (None, _) => "the bridge passes UNMAP, and a udev rule for it switches TRIM on".into(),
                    }
                ),
            );
            if !present {
                warning = warning.fix(format!(
                    "create {} holding these lines:",
                    rule.path().display()
                ));
                for line in rule.text().lines().filter(|l| !l.starts_with('#')) {
                    warning = warning.fix(format!("  {line}"));
                }
            }
            Some(
                warning
                    .fix("sudo udevadm control --reload && sudo udevadm trigger --action=add --subsystem-match=scsi_disk")
                    .fix("sudo fstrim -v /"),
            )
        }
        TrimDecision::Cannot { why } => Some(Warning::new(
            "trim-unavailable",
            format!("TRIM does not reach {name}: {}", why.explain()),
        )),
        TrimDecision::Unknown { .. } => None,
    }
}

/// TRIM reaches the disk; is the timer there to use it?
fn timer_off(root: &std::path::Path, name: &str, layout: Layout) -> Option<Warning> {
    let state = match FstrimTimer::of_root(root) {
        FstrimTimer::Enabled => return None,
        FstrimTimer::Masked => "masked",
        FstrimTimer::Disabled { .. } => "not enabled",
        FstrimTimer::NotInstalled => "not installed",
    };
    let warning = Warning::new(
        "fstrim-timer-off",
        format!("{name} takes TRIM, but fstrim.timer is {state}"),
    );
    Some(match layout {
        // The SD card's boot partition is mounted too, and the timer
        // trims every mounted filesystem that takes discards.
        Layout::RootOnly => warning.fix(
            "sudo fstrim -v /   (trims the new root alone; fstrim.timer would trim the SD card's boot partition too, \
             which some cards do not survive: raspberrypi/linux#6349)",
        ),
        Layout::Full => warning.fix("sudo systemctl enable --now fstrim.timer"),
    })
}

fn swap_on_old_disk(system: &System, expected: &Expected) -> Vec<Warning> {
    let Some(old) = old_root_disk(system, expected) else {
        return Vec::new();
    };
    let host = &system.host;
    let mut out = Vec::new();
    for swap in &system.swaps {
        let devno = if swap.kind == "partition" {
            crate::system::disks::devno_of_node(host, &swap.path)
        } else {
            system.mounts.containing(&swap.path).map(|m| m.devno)
        };
        if !devno.is_some_and(|d| old.contains(d)) {
            continue;
        }
        let path = swap.path.display();
        let warning = Warning::new(
            "swap-on-sd",
            format!(
                "swap {path} is still on {} ({}): swapping wears the card and is slow",
                old.path.display(),
                old.describe()
            ),
        )
        .fix(format!("sudo swapoff {path}"));
        out.push(if swap.kind == "partition" {
            warning.fix("remove or comment out its line in /etc/fstab (a swap file on the new root: sudo dphys-swapfile setup && sudo dphys-swapfile swapon)")
        } else {
            warning.fix("point CONF_SWAPFILE in /etc/dphys-swapfile at the new root, then sudo dphys-swapfile setup && sudo dphys-swapfile swapon")
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision from what `vcgencmd get_throttled` prints.
    fn from_vcgencmd(output: &str) -> Option<Warning> {
        under_voltage(Some(&Throttled::parse(output)), &KernelLog::default())
    }

    #[test]
    fn under_voltage_right_now() {
        // Bits 0 and 16 (with throttling, bits 2 and 18): a Pi browning out.
        let warning = from_vcgencmd("throttled=0x50005\n").expect("a warning");
        assert_eq!(warning.code, "under-voltage");
        assert!(
            warning
                .message
                .starts_with("under-voltage right now (vcgencmd get_throttled: throttled=0x50005)"),
            "{}",
            warning.message
        );
        assert!(warning.fix.iter().any(|f| f.contains("powered USB hub")));
    }

    #[test]
    fn under_voltage_earlier_since_boot() {
        let warning = from_vcgencmd("throttled=0x50000\n").expect("a warning");
        assert!(
            warning.message.starts_with(
                "under-voltage since boot (vcgencmd get_throttled: throttled=0x50000)"
            ),
            "{}",
            warning.message
        );
    }

    #[test]
    fn no_under_voltage_no_warning() {
        assert_eq!(from_vcgencmd("throttled=0x0\n"), None);
        // Throttled for heat (bits 2 and 18) is not a power problem.
        assert_eq!(from_vcgencmd("throttled=0x40004\n"), None);
        // Output the tool never gives decides nothing.
        assert_eq!(
            from_vcgencmd("error=1 error_msg=\"Command not registered\"\n"),
            None
        );
    }
}
