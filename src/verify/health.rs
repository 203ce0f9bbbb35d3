//! Advice that does not fail the verification: a flaky uas bridge, an
//! under-powered Pi, TRIM that cannot work, swap left on the SD card, old
//! names of the SD card's root partition (in old_root.rs), and a setting
//! that regenerates cmdline.txt and disagrees with it (in regenerated.rs).

use super::expected::Expected;
use super::kernel_log::{uas_resets, KernelLog, LogNames};
use super::Warning;
use crate::bench::machine::Throttled;
use crate::system::disks::Disk;
use crate::system::source::resolve;
use crate::system::System;

pub fn warnings(
    system: &System,
    expected: &Expected,
    log: &KernelLog,
    throttled: Option<&Throttled>,
) -> Vec<Warning> {
    let target = target_disk(system, expected);
    let mut out = Vec::new();
    out.extend(uas(system, target, log));
    out.extend(throttled.and_then(under_voltage));
    out.extend(target.and_then(|disk| trim(system, disk)));
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

/// `usb-storage.quirks=VID:PID:u`: the bridge is driven by usb-storage
/// instead of uas.
pub fn quirk_for(disk: &Disk) -> Option<String> {
    disk.usb
        .as_ref()
        .filter(|usb| usb.driver.as_deref() == Some("uas"))
        .map(|usb| format!("{}:u", usb.id()))
}

fn uas(system: &System, target: Option<&Disk>, log: &KernelLog) -> Vec<Warning> {
    if let Some(why) = &log.unreadable {
        return vec![Warning::new(
            "kernel-log-unreadable",
            format!("the kernel log could not be read ({why}), so uas resets were not looked for"),
        )
        .fix("run verify as root")];
    }
    let mut out = Vec::new();
    for disk in &system.disks {
        let Some(quirk) = quirk_for(disk) else {
            continue;
        };
        let usb = disk.usb.as_ref().expect("quirk_for needs a bridge");
        let resets = uas_resets(&log.lines, &LogNames::of_disk(&system.host, &disk.name));
        let Some(example) = resets.first() else {
            continue;
        };
        let is_target = target.is_some_and(|t| t.name == disk.name);
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
        out.push(if is_target {
            warning
                .fix(format!("sudo pimigrate verify --apply-quirk   (adds usb-storage.quirks={quirk} to cmdline.txt, with a backup)"))
                .fix("then reboot: the bridge runs on usb-storage, a little slower and reliable")
        } else {
            warning.fix(format!("add usb-storage.quirks={quirk} to cmdline.txt and reboot"))
        });
    }
    out
}

fn under_voltage(throttled: &Throttled) -> Option<Warning> {
    if !(throttled.under_voltage_now || throttled.under_voltage_occurred) {
        return None;
    }
    let when = if throttled.under_voltage_now {
        "right now"
    } else {
        "since boot"
    };
    Some(
        Warning::new(
            "under-voltage",
            format!(
                "under-voltage {when} (vcgencmd get_throttled: {}): a bus-powered SSD can brown out the Pi",
                throttled.raw
            ),
        )
        .fix("use the official power supply (Pi 4: 5.1 V 3 A; Pi 5: 5 V 5 A)")
        .fix("or power the SSD separately: a powered USB hub or an enclosure with its own supply")
        .fix("Pi 5 with a 5 A supply: usb_max_current_enable=1 in config.txt"),
    )
}

/// TRIM keeps an SSD fast; many USB bridges need the SCSI provisioning
/// mode set to `unmap` before the kernel sends it.
fn trim(system: &System, disk: &Disk) -> Option<Warning> {
    let host = &system.host;
    let discard_max: u64 = host
        .read_attr(&host.sys(&format!("block/{}/queue/discard_max_bytes", disk.name)))?
        .parse()
        .ok()?;
    if discard_max == 0 {
        let mode = provisioning_mode(system, disk);
        let mut warning = Warning::new(
            "trim-unavailable",
            format!(
                "TRIM is not possible on {}: queue/discard_max_bytes is 0{}",
                disk.path.display(),
                mode.map(|m| format!(" (SCSI provisioning_mode: {m})"))
                    .unwrap_or_default()
            ),
        );
        if let Some(usb) = &disk.usb {
            warning = warning
                .fix(format!(
                    "echo 'ACTION==\"add|change\", ATTRS{{idVendor}}==\"{}\", ATTRS{{idProduct}}==\"{}\", SUBSYSTEM==\"scsi_disk\", ATTR{{provisioning_mode}}=\"unmap\"' | sudo tee /etc/udev/rules.d/50-usb-ssd-trim.rules",
                    usb.vendor_id, usb.product_id
                ))
                .fix("sudo udevadm control --reload && sudo udevadm trigger")
                .fix("sudo fstrim -v /   (still failing: the bridge cannot pass TRIM on)");
        }
        return Some(warning.fix("sudo systemctl enable --now fstrim.timer"));
    }
    let timer = host.path(
        system
            .source
            .root_dir
            .join("etc/systemd/system/timers.target.wants/fstrim.timer"),
    );
    if timer.symlink_metadata().is_err() {
        return Some(
            Warning::new(
                "fstrim-timer-off",
                format!(
                    "{} can TRIM, but fstrim.timer is not enabled",
                    disk.path.display()
                ),
            )
            .fix("sudo systemctl enable --now fstrim.timer"),
        );
    }
    None
}

/// `provisioning_mode` of the disk's SCSI device (`full`, `unmap`, ...).
fn provisioning_mode(system: &System, disk: &Disk) -> Option<String> {
    let dir = system
        .host
        .sys(&format!("block/{}/device/scsi_disk", disk.name));
    let entry = std::fs::read_dir(dir).ok()?.flatten().next()?;
    system
        .host
        .read_attr(&entry.path().join("provisioning_mode"))
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
        under_voltage(&Throttled::parse(output))
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
