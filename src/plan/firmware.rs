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
    layout: Layout,
    table: TableChoice,
) -> Result<(TableKind, String), Reason> {
    let over_limit = target.size_bytes / u64::from(target.logical_sector_size) > MBR_MAX_SECTORS;
    let full = layout == Layout::Full;
    let firmware_reads_gpt = system.pi.can_boot.gpt != BootSupport::No;
    match table {
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
    let mode = pi::boot_mode(target.transport).filter(|&m| m != pi::BOOT_MODE_SD)?;
    let name = crate::bootcfg::eeprom::mode_name(mode);
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
        (Some(wanted), message)
    };
    Some(BootOrderAdvice {
        current: Some(*order),
        needed,
        message,
    })
}

/// The first Pi 4 bootloader release that boots from USB mass storage
/// (2020-09-03, the stable release that made USB boot the default).
pub const PI4_USB_BOOT_SINCE: u64 = 1_599_091_200;

/// What the EEPROM bootloader must have for a full move to boot from the
/// target: a Pi 4 bootloader new enough for USB, and on a Pi 5 an NVMe
/// drive the bootloader and Linux can find. Read where the machine allows
/// (the device tree, `rpi-eeprom-config`, config.txt) and otherwise stated:
/// a refusal when the move could not boot, warnings with the exact fix
/// when it needs a setting, notes for what could not be read.
pub(super) fn firmware_prerequisites(
    system: &System,
    config_txt: Option<&[u8]>,
    target: &Disk,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<Reason> {
    use crate::system::disks::Transport;
    let pi = &system.pi;
    let built = pi.bootloader_built.map(|t| {
        let day = crate::clock::rfc3339_utc(t);
        day[..10].to_string()
    });
    match (pi.family, target.transport) {
        (PiFamily::Pi4 | PiFamily::Cm4, Transport::Usb) => match pi.bootloader_built {
            Some(t) if t < PI4_USB_BOOT_SINCE => {
                return Some(
                    Reason::new(
                        "bootloader-too-old",
                        format!(
                            "this {}'s bootloader is from {}: USB boot needs one from 2020-09-03 or later, so a full move onto {} would not start",
                            family_name(system),
                            built.unwrap_or_default(),
                            target.path.display()
                        ),
                    )
                    .hint("update it first: sudo apt update && sudo apt full-upgrade && sudo rpi-eeprom-update -a, reboot, and plan again (or use --layout root-only)"),
                )
            }
            Some(_) => {}
            None => notes.push(
                "the bootloader's date could not be read (no chosen/bootloader/build-timestamp in the device tree): \
                 USB boot needs a Pi 4 bootloader from 2020-09-03 or later; `rpi-eeprom-update` shows yours"
                    .into(),
            ),
        },
        (PiFamily::Pi5, Transport::Nvme) if pi.model.as_deref().is_some_and(|m| m.starts_with("Raspberry Pi 5")) => {
            pi5_nvme(pi, config_txt, notes, warnings)
        }
        _ => {}
    }
    None
}

/// A Pi 5 boots NVMe on a HAT+ adapter by itself (the firmware reads the
/// HAT+ EEPROM and turns PCIe on); behind any other adapter the bootloader
/// looks only with `PCIE_PROBE=1`, and Linux sees the drive only with
/// `dtparam=pciex1` (or `dtparam=nvme`) in config.txt, which the full move
/// copies to the new boot partition.
fn pi5_nvme(
    pi: &crate::system::pi::PiInfo,
    config_txt: Option<&[u8]>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    // A HAT+ adapter is found by the bootloader itself; any HAT with an
    // EEPROM shows up the same way, so this is said, not relied on.
    if let (Some(product), false) = (&pi.hat_product, pi.pcie_probe == Some(true)) {
        notes.push(format!(
            "a HAT with an EEPROM is attached ({product}): if it is the NVMe adapter (a HAT+), the bootloader finds \
             the drive by itself; if not, it needs PCIE_PROBE=1 (`sudo rpi-eeprom-config --edit`)"
        ));
        return;
    }
    match pi.pcie_probe {
        Some(true) => {}
        Some(false) => warnings.push(
            "no HAT+ adapter was detected (no hat/ in the device tree), and the bootloader configuration lacks PCIE_PROBE=1: \
             without it the bootloader does not look for the NVMe drive. Run `sudo rpi-eeprom-config --edit`, add the line \
             PCIE_PROBE=1, save, and reboot before booting without the SD card"
                .into(),
        ),
        None => notes.push(
            "no HAT+ adapter was detected and the bootloader configuration could not be read: an NVMe drive on an adapter \
             that is not a HAT+ boots only with PCIE_PROBE=1 (`sudo rpi-eeprom-config --edit`)"
                .into(),
        ),
    }
    let text = config_txt.map(String::from_utf8_lossy).unwrap_or_default();
    let enabled = text.lines().any(|line| {
        let line = line.split('#').next().unwrap_or("").trim();
        line.strip_prefix("dtparam=").is_some_and(|params| {
            params
                .split(',')
                .any(|p| matches!(p.trim(), "pciex1" | "nvme" | "pciex1=on" | "nvme=on"))
        })
    });
    if !enabled {
        warnings.push(
            "config.txt has no dtparam=pciex1: without a HAT+ adapter Linux on the new boot partition may not see the NVMe \
             drive. Add the line dtparam=pciex1 to config.txt (under [all]) before migrating, so the copy has it too"
                .into(),
        );
    }
}
