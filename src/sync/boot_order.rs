//! Whether the Pi would start the standby instead of the running system:
//! a full standby (its own boot partition) on a device the bootloader
//! tries first boots at the next restart, however good the copy. The boot
//! order is the one `system::pi` read for `migrate --boot-order` too
//! (BOOT_ORDER of the bootloader's config, the way this board's bootloader
//! reads it), and a disk's boot mode the one mapping of
//! [`crate::system::pi::boot_mode`]; a Pi without the EEPROM bootloader
//! starts the SD card whenever it holds a bootable system. Read-only.

use crate::bootcfg::eeprom::{mode_name, BOOT_MODE_SD};
use crate::plan::{Layout, TargetIdentity};
use crate::system::pi::boot_mode;
use crate::system::System;

/// A warning with the fix, when the bootloader would start the standby on
/// `disk` (laid out as `layout`) before the disk the running system boots
/// from.
pub fn standby_boots_first(
    system: &System,
    disk: &TargetIdentity,
    layout: Layout,
) -> Option<String> {
    if layout != Layout::Full {
        return None;
    }
    let standby = boot_mode(disk.transport)?;
    let running_disk = system
        .source
        .boot_devno
        .and_then(|devno| system.disk_holding(devno))?;
    if running_disk.devno == disk.devno {
        return None;
    }
    let running = boot_mode(running_disk.transport)?;
    if running == standby {
        return None;
    }
    let pi = &system.pi;
    if !pi.eeprom_bootloader {
        return (standby == BOOT_MODE_SD).then(|| {
            format!(
                "this Pi's firmware starts the SD card whenever it holds a bootable system: with the standby \
                 {} in, the Pi boots the standby, not {}. Keep a full standby out of the SD slot (sync it in a \
                 USB card reader), or keep a root-only one (sync --target {} --erase --layout root-only)",
                disk.path.display(),
                running_disk.path.display(),
                disk.path.display()
            )
        });
    }
    let order = pi.boot_order?;
    if order.first_of(&[standby, running]) != Some(standby) {
        return None;
    }
    Some(format!(
        "the bootloader tries {} before {} (BOOT_ORDER={}): at the next restart this Pi boots the standby {}, \
         not the running system on {}. Put {} first and keep the standby as the fallback: \
         `sudo rpi-eeprom-config --edit`, BOOT_ORDER={} (what `pimigrate migrate --boot-order apply` sets)",
        mode_name(standby),
        mode_name(running),
        order.describe(),
        disk.path.display(),
        running_disk.path.display(),
        mode_name(running),
        order.with_first(running)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Pi 4 fixture running from its SSD (sda1), the SD card a full
    /// standby, with `config` as the bootloader's.
    fn running_from_usb(config: Option<&str>) -> (System, TargetIdentity) {
        let (_, mut system) = crate::system::inspect_fixture("pi4");
        let sda = system.disks.iter().find(|d| d.name == "sda").unwrap();
        system.source.boot_devno = sda.partitions[0].devno;
        system.pi.eeprom_bootloader = config.is_some();
        system.pi.boot_order = config
            .and_then(|c| crate::system::pi::parse_eeprom_boot_order(c, system.pi.config_filter));
        let card = system.disks.iter().find(|d| d.name == "mmcblk0").unwrap();
        let card = crate::plan::identity(card);
        (system, card)
    }

    #[test]
    fn a_card_tried_first_is_warned_about_with_the_order_that_fixes_it() {
        let (system, card) = running_from_usb(Some("[all]\nBOOT_UART=0\n"));
        let warning = standby_boots_first(&system, &card, Layout::Full).unwrap();
        assert!(
            warning.contains("BOOT_ORDER=0xf41 (SD, USB, restart)"),
            "{warning}"
        );
        assert!(warning.contains("BOOT_ORDER=0xf14"), "{warning}");
        // A root-only standby has no boot partition to be started from.
        assert_eq!(standby_boots_first(&system, &card, Layout::RootOnly), None);
    }

    #[test]
    fn the_order_is_read_as_this_boards_bootloader_reads_it() {
        let (system, card) = running_from_usb(Some("[all]\nBOOT_ORDER=0xf14\n"));
        assert_eq!(standby_boots_first(&system, &card, Layout::Full), None);
        // A later [pi4] section wins on a Pi 4.
        let (system, card) =
            running_from_usb(Some("[all]\nBOOT_ORDER=0xf14\n[pi4]\nBOOT_ORDER=0xf41\n"));
        assert!(standby_boots_first(&system, &card, Layout::Full).is_some());
    }

    #[test]
    fn without_an_eeprom_bootloader_the_card_always_comes_first() {
        let (system, card) = running_from_usb(None);
        let warning = standby_boots_first(&system, &card, Layout::Full).unwrap();
        assert!(warning.contains("starts the SD card whenever"), "{warning}");
    }
}
