//! What the Pi's firmware can boot: the partition table it reads, the disks
//! it starts from, and the boot order that reaches the target.

use super::geometry::MBR_MAX_SECTORS;
use super::*;
use crate::system::disks::Disk;
use crate::system::pi::{self, BootSupport, PiFamily};
use crate::system::System;

pub(super) fn choose_table(
    system: &System,
    target: &Disk,
    options: &Options,
) -> Result<(TableKind, String), Reason> {
    let over_limit = target.size_bytes / u64::from(target.logical_sector_size) > MBR_MAX_SECTORS;
    let full = options.layout == Layout::Full;
    let firmware_reads_gpt = system.pi.can_boot.gpt != BootSupport::No;
    match options.table {
        TableChoice::Mbr => Ok((TableKind::Mbr, "asked for with --table mbr".into())),
        TableChoice::Gpt if full && !firmware_reads_gpt => Err(Reason::new(
            "table-not-bootable",
            format!("the firmware of a {} cannot boot from a GPT disk", family_name(system)),
        )
        .hint("use --table mbr, or --layout root-only (the kernel, not the firmware, reads the target then)")),
        TableChoice::Gpt => Ok((TableKind::Gpt, "asked for with --table gpt".into())),
        TableChoice::Auto if over_limit && full && !firmware_reads_gpt => Ok((
            TableKind::Mbr,
            "MBR, since this Pi's firmware cannot read GPT; MBR covers only the first 2 TiB".into(),
        )),
        TableChoice::Auto if over_limit => Ok((
            TableKind::Gpt,
            "GPT, since MBR cannot describe more than 2 TiB".into(),
        )),
        TableChoice::Auto => Ok((
            TableKind::Mbr,
            "MBR, as Raspberry Pi OS uses: every Pi firmware reads it, and the disk is under 2 TiB".into(),
        )),
    }
}

pub(super) fn family_name(system: &System) -> String {
    system
        .pi
        .model
        .clone()
        .unwrap_or_else(|| "this machine".into())
}

/// A full move needs the firmware to boot from the target's transport.
pub(super) fn check_full_move_bootable(system: &System, target: &Disk) -> Result<(), Reason> {
    use crate::system::disks::Transport;
    let caps = &system.pi.can_boot;
    let support = match target.transport {
        Transport::Usb => caps.usb,
        Transport::Nvme => caps.nvme,
        Transport::Mmc => caps.sd,
        _ if system.pi.family == PiFamily::NotAPi => BootSupport::Unknown,
        _ => BootSupport::No,
    };
    if support.possible() {
        return Ok(());
    }
    Err(Reason::new(
        "transport-not-bootable",
        format!(
            "a {} cannot boot from a {} disk, so a full move onto {} would not start",
            family_name(system),
            target.transport,
            target.path.display()
        ),
    )
    .hint("use --layout root-only: the boot partition stays on the SD card and only / moves, which works on every Pi"))
}

pub(super) fn boot_order_advice(
    system: &System,
    target: &Disk,
    warnings: &mut Vec<String>,
) -> Option<BootOrderAdvice> {
    use crate::system::disks::Transport;
    let (mode, name) = match target.transport {
        Transport::Usb => (pi::BOOT_MODE_USB, "USB"),
        Transport::Nvme => (pi::BOOT_MODE_NVME, "NVMe"),
        _ => return None,
    };
    if !system.pi.eeprom_bootloader {
        if system.pi.family != PiFamily::NotAPi {
            warnings.push(format!(
                "this Pi tries the SD card before {name}: take the SD card out after the move"
            ));
        }
        return None;
    }
    let Some(order) = &system.pi.boot_order else {
        return Some(BootOrderAdvice {
            current: None,
            needed: None,
            message: format!(
                "could not read BOOT_ORDER (rpi-eeprom-config is not installed or did not answer): it must try {name} \
                 ({mode:x}) before the SD card (1), or the SD card must come out after the move"
            ),
        });
    };
    let first = order.first_of(&[mode, pi::BOOT_MODE_SD]);
    let (needed, message) = if first == Some(mode) {
        (
            None,
            format!(
                "BOOT_ORDER {} already tries {name} before the SD card",
                order.describe()
            ),
        )
    } else {
        let wanted = order.with_first(mode);
        let message = if order.modes().contains(&mode) {
            format!(
                "BOOT_ORDER {} tries the SD card first: take the SD card out after the move, or set BOOT_ORDER={} \
                 with `sudo rpi-eeprom-config --edit`",
                order.describe(),
                wanted
            )
        } else {
            format!(
                "BOOT_ORDER {} never tries {name}: set BOOT_ORDER={} with `sudo rpi-eeprom-config --edit` before rebooting",
                order.describe(),
                wanted
            )
        };
        (Some(wanted.to_string()), message)
    };
    Some(BootOrderAdvice {
        current: Some(order.to_string()),
        needed,
        message,
    })
}
