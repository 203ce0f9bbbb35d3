//! A full move and the EEPROM bootloader (Pi 4, 400, CM4, Pi 5): how the
//! trial boot reaches the new drive, which changes the bootloader's config
//! needs (shown as diffs, made only with consent), and what `verify
//! --commit` hands over. Decided here from what the Pi says of itself (the
//! bootloader's date, its running config, a HAT+); the executor and
//! `verify --commit` make the changes through the system's own
//! `rpi-eeprom-config` (see `apply::bootloader`).
//!
//! The routes, from the bootloader's release notes:
//! - Pi 4 family, bootloader 2024-05-17 or later: an EEPROM `[tryboot]`
//!   section (`[tryboot] BOOT_ORDER=0xf14`) makes `reboot "0 tryboot"` try
//!   the new drive first, once; the SD card is the fallback. The change is
//!   staged on the SD card's boot partition and written by recovery.bin at
//!   the next reboot, so the trial comes one reboot later.
//! - Pi 5, bootloader 2025-01-14 or later: `set_reboot_order` (a mailbox
//!   call, nothing written to the EEPROM) overrides BOOT_ORDER for the next
//!   reboot only. An NVMe drive on an adapter that is not a HAT+ needs
//!   `PCIE_PROBE=1` first, which rpi-eeprom-update flashes at once.
//! - Older bootloaders, or no consent for a change the route needs: the
//!   SD card's kernel with the new drive's root on trial (as a root-only
//!   move), the new drive booting by itself only after the hand-over.

use super::edits::diff_files;
use super::{
    BootloaderPlan, EepromChange, EepromTakesEffect, Handover, Layout, Options, PartitionPath,
    Reason, TrialRoute,
};
use crate::bootcfg::eeprom::{
    mode_name, BootOrder, EepromConfig, BOOT_MODE_NVME, BOOT_MODE_SD, BOOT_MODE_USB,
};
use crate::plan::options::{BootOrderChoice, HandoverChoice, TrialChoice};
use crate::system::disks::{Disk, Transport};
use crate::system::pi::{PiFamily, PiInfo};
use crate::system::System;
use std::path::Path;

/// The first Pi 4 bootloader whose EEPROM config takes a `[tryboot]`
/// section (2024-05-17 00:00 UTC).
pub const PI4_TRYBOOT_SECTION_SINCE: u64 = 1_715_904_000;
/// The first Pi 5 bootloader with `set_reboot_order` (2025-01-14 00:00 UTC).
pub const PI5_REBOOT_ORDER_SINCE: u64 = 1_736_812_800;
/// Seconds a trial kernel that cannot go on waits before it resets (its
/// `panic=`): the next boot is a normal one, from the SD card.
pub const TRIAL_PANIC_SECONDS: u32 = 10;
/// The mailbox tag of `set_reboot_order` (`vcmailbox 0x0003808b 4 4 ORDER`).
pub const SET_REBOOT_ORDER_TAG: &str = "0x0003808b";

/// The update `rpi-eeprom-update` stages on a boot partition, and the
/// recovery program the boot ROM runs to write it; recovery.bin renames
/// itself once done (pieeprom.upd stays), so the two together are an
/// update not yet written.
pub const PENDING_UPDATE_FILE: &str = "/pieeprom.upd";
pub const RECOVERY_FILE: &str = "/recovery.bin";

/// Whether `dir` holds an update the boot ROM has not written yet.
pub fn pending_in(dir: &Path) -> bool {
    [PENDING_UPDATE_FILE, RECOVERY_FILE]
        .iter()
        .all(|file| PartitionPath::known(file).under(dir).exists())
}

/// What the planner learns here.
#[derive(Debug, Default)]
pub(super) struct Decision {
    pub plan: Option<BootloaderPlan>,
    /// How a full move's trial reaches the new drive (none: no trial).
    pub route: Option<TrialRoute>,
    pub notes: Vec<String>,
}

/// Which one-shot boot of another drive this bootloader offers, or why none.
fn device_trial(pi: &PiInfo) -> Result<(), String> {
    let day = crate::clock::day;
    let (since, what) = match pi.family {
        PiFamily::Pi4 | PiFamily::Cm4 => (
            PI4_TRYBOOT_SECTION_SINCE,
            "a [tryboot] section in its config",
        ),
        PiFamily::Pi5 => (PI5_REBOOT_ORDER_SINCE, "set_reboot_order"),
        _ => return Err("this Pi's bootloader cannot boot another drive once".into()),
    };
    match pi.bootloader_built {
        Some(built) if built >= since => Ok(()),
        Some(built) => Err(format!(
            "the bootloader is from {}: a one-shot boot of another drive ({what}) needs one from {} or later \
             (`sudo rpi-eeprom-update -a` and a reboot update it)",
            day(built),
            day(since)
        )),
        None => Err(format!(
            "the bootloader's date could not be read (no chosen/bootloader/build-timestamp in the device tree): \
             a one-shot boot of another drive ({what}) needs one from {} or later",
            day(since)
        )),
    }
}

/// The bootloader's side of `options` for a move onto `target`, with every
/// refusal added to `reasons`.
pub(super) fn decide(
    system: &System,
    options: &Options,
    target: &Disk,
    boot_dir: Option<&Path>,
    trial_wanted: bool,
    reasons: &mut Vec<Reason>,
) -> Decision {
    let pi = &system.pi;
    if options.layout != Layout::Full {
        if options.trial == TrialChoice::Device {
            reasons.push(
                Reason::new(
                    "device-trial-unavailable",
                    "--trial device is a full move's one-shot boot of the new drive; a root-only move's trial always starts the SD card's kernel",
                )
                .hint("use --layout full, or --trial always"),
            );
        }
        return Decision::default();
    }
    let route_without_eeprom = trial_wanted.then_some(TrialRoute::KernelFromSd);
    let mode = match target.transport {
        Transport::Usb => BOOT_MODE_USB,
        Transport::Nvme => BOOT_MODE_NVME,
        _ => {
            return Decision {
                route: route_without_eeprom,
                ..Decision::default()
            }
        }
    };
    if !pi.eeprom_bootloader {
        if options.trial == TrialChoice::Device {
            reasons.push(refuse_device(
                "this Pi has no EEPROM bootloader, which a one-shot boot of another drive needs",
            ));
        }
        return Decision {
            route: route_without_eeprom,
            ..Decision::default()
        };
    }
    let consent = options.boot_order == BootOrderChoice::Apply;
    // A config read at inspection means the tool is there.
    let tool = pi.eeprom_config.is_some() || crate::tools::which("rpi-eeprom-config").is_some();
    let current = pi
        .eeprom_config
        .as_deref()
        .map(|text| EepromConfig::parse(text.as_bytes()));
    let board = pi.config_filter;
    let mut notes = Vec::new();
    let current = match current {
        Some(Ok(config)) => Some(config),
        Some(Err(err)) => {
            reasons.push(
                Reason::new("bootloader-config-unreadable", err.to_string())
                    .hint("look at `rpi-eeprom-config`'s output; fix the config with `sudo rpi-eeprom-config --edit`"),
            );
            return Decision::default();
        }
        None => None,
    };
    if consent {
        if !tool {
            reasons.push(
                Reason::new(
                    "eeprom-tool-missing",
                    "--boot-order apply changes the bootloader's config through rpi-eeprom-config, which is not installed",
                )
                .hint("install it with: sudo apt install rpi-eeprom (or plan with --boot-order show)"),
            );
        } else if current.is_none() {
            reasons.push(
                Reason::new(
                    "bootloader-config-unreadable",
                    "rpi-eeprom-config did not print the bootloader's config (it reads it with `vcgencmd bootloader_config`)",
                )
                .hint("run `rpi-eeprom-config` to see why, or plan with --boot-order show"),
            );
        }
        if let Some(dir) = boot_dir.filter(|dir| update_pending(system, dir)) {
            reasons.push(
                Reason::new(
                    "eeprom-update-pending",
                    format!(
                        "a bootloader update is already pending ({} and {} are staged for the next boot)",
                        PartitionPath::known(PENDING_UPDATE_FILE).under(dir).display(),
                        PartitionPath::known(RECOVERY_FILE).under(dir).display()
                    ),
                )
                .hint("reboot once to let the bootloader apply it, or cancel it with `sudo rpi-eeprom-update -r`, then plan again"),
            );
        }
    }
    let needs_probe = mode == BOOT_MODE_NVME
        && pi.family == PiFamily::Pi5
        && pi.hat_product.is_none()
        && current
            .as_ref()
            .is_some_and(|c| !c.flag("PCIE_PROBE", board));
    // The route the trial takes, and why.
    let capable = device_trial(pi);
    let mailbox = pi.family != PiFamily::Pi5 || crate::tools::which("vcmailbox").is_some();
    let (route, reason) = match (&capable, trial_wanted) {
        (_, false) => (None, "no trial boot".to_string()),
        (Err(why), true) => (Some(TrialRoute::KernelFromSd), why.clone()),
        (Ok(()), true) if pi.family == PiFamily::Pi5 && !mailbox => (
            Some(TrialRoute::KernelFromSd),
            "set_reboot_order needs vcmailbox (sudo apt install raspi-utils), which is not installed"
                .to_string(),
        ),
        (Ok(()), true) if pi.family == PiFamily::Pi5 && needs_probe && !consent => (
            Some(TrialRoute::KernelFromSd),
            "the bootloader looks for an NVMe drive without a HAT+ only with PCIE_PROBE=1, a change to its config \
             that pimigrate makes only with --boot-order apply"
                .to_string(),
        ),
        (Ok(()), true) if pi.family == PiFamily::Pi5 => (
            Some(TrialRoute::Device),
            format!(
                "set_reboot_order makes the next reboot try {} first, once; the SD card is the fallback",
                mode_name(mode)
            ),
        ),
        (Ok(()), true) if !consent => (
            Some(TrialRoute::KernelFromSd),
            "a one-shot boot of the new drive needs a [tryboot] section in the bootloader's config, a change \
             pimigrate makes only with --boot-order apply"
                .to_string(),
        ),
        (Ok(()), true) => (
            Some(TrialRoute::Device),
            format!(
                "the bootloader's [tryboot] section makes `reboot \"0 tryboot\"` try {} first, once; the SD card is the fallback",
                mode_name(mode)
            ),
        ),
    };
    if options.trial == TrialChoice::Device && route != Some(TrialRoute::Device) {
        reasons.push(refuse_device(&reason));
    }
    let handover = match options.handover {
        HandoverChoice::BootOrder if !consent => {
            reasons.push(
                Reason::new(
                    "handover-needs-consent",
                    "--handover boot-order changes the bootloader's BOOT_ORDER, which pimigrate does only with --boot-order apply",
                )
                .hint("add --boot-order apply, or use --handover remove-card"),
            );
            Handover::RemoveCard
        }
        HandoverChoice::BootOrder => Handover::BootOrder,
        HandoverChoice::RemoveCard => Handover::RemoveCard,
        HandoverChoice::Auto if consent && tool => Handover::BootOrder,
        HandoverChoice::Auto => Handover::RemoveCard,
    };
    let changes = current
        .as_ref()
        .map(|config| changes(config, board, mode, route, needs_probe && consent, handover));
    let (at_migrate, at_commit) = match changes {
        Some(Ok(changes)) => changes,
        Some(Err(err)) => {
            reasons.push(Reason::new("bootloader-config-unreadable", err.to_string()));
            (None, None)
        }
        None => (None, None),
    };
    if current.is_none() && handover == Handover::BootOrder {
        notes.push(
            "the bootloader's config could not be read, so its changes cannot be shown".into(),
        );
    }
    let takes_effect = match pi.family {
        PiFamily::Pi5 => EepromTakesEffect::AtOnce,
        _ => EepromTakesEffect::NextReboot,
    };
    let reboot_order = (route == Some(TrialRoute::Device) && pi.family == PiFamily::Pi5)
        .then(|| BootOrder::trial(mode).to_string());
    Decision {
        plan: Some(BootloaderPlan {
            trial: route,
            reason,
            target_mode: mode,
            reboot_order,
            current: pi.eeprom_config.clone(),
            at_migrate,
            handover,
            at_commit,
            consent,
            takes_effect,
        }),
        route,
        notes,
    }
}

fn refuse_device(why: &str) -> Reason {
    Reason::new("device-trial-unavailable", format!("--trial device: {why}"))
        .hint("use --trial always (the SD card's kernel with the new root on trial), or --no-trial")
}

/// Whether `rpi-eeprom-update` left an update for the next boot in `dir`.
pub fn update_pending(system: &System, dir: &Path) -> bool {
    pending_in(&system.host.path(dir))
}

/// The migration's change (before the trial) and the hand-over's, from
/// the running config.
fn changes(
    current: &EepromConfig,
    board: Option<&str>,
    mode: u8,
    route: Option<TrialRoute>,
    probe: bool,
    handover: Handover,
) -> Result<(Option<EepromChange>, Option<EepromChange>), crate::bootcfg::EepromConfigError> {
    let file = PartitionPath::known("/bootconf.txt");
    let change = |from: &EepromConfig, to: &EepromConfig, purpose: String| {
        (from != to).then(|| EepromChange {
            config: to.to_text(),
            diff: diff_files(&file, &file, &from.to_bytes(), &to.to_bytes()),
            purpose,
        })
    };
    // PCIE_PROBE stays: the drive is found at every boot from now on.
    let base = match probe {
        true => current.with_setting("PCIE_PROBE", "1")?,
        false => current.clone(),
    };
    let order = current.boot_order(board, false)?;
    let permanent = order.with_first(mode);
    let needs_order = order.first_of(&[mode, BOOT_MODE_SD]) != Some(mode);
    let handed_over = match (handover, needs_order) {
        (Handover::BootOrder, true) => base.with_boot_order(permanent)?,
        _ => base.clone(),
    };
    let trial_config = match (route, board) {
        (Some(TrialRoute::Device), Some(b)) if !b.starts_with("pi5") && !b.starts_with("cm5") => {
            base.with_trial_order(BootOrder::trial(mode))?
        }
        _ => base.clone(),
    };
    let purpose_migrate = match (route, probe) {
        (Some(TrialRoute::Device), _) if trial_config != base => format!(
            "[tryboot] BOOT_ORDER={}: `reboot \"0 tryboot\"` tries {} first, once{}",
            BootOrder::trial(mode),
            mode_name(mode),
            if probe {
                "; PCIE_PROBE=1 finds the NVMe drive"
            } else {
                ""
            }
        ),
        (_, true) => "PCIE_PROBE=1: the bootloader looks for the NVMe drive without a HAT+".into(),
        _ => String::new(),
    };
    Ok(match route {
        // No trial: the migration hands over at once.
        None => (
            change(
                current,
                &handed_over,
                format!(
                    "BOOT_ORDER={permanent}: {} first, the SD card as the fallback",
                    mode_name(mode)
                ),
            ),
            None,
        ),
        Some(_) => (
            change(current, &trial_config, purpose_migrate),
            change(
                &trial_config,
                &handed_over,
                format!(
                    "BOOT_ORDER={permanent}: {} first from now on, the SD card as the fallback",
                    mode_name(mode)
                ),
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PI4: &str = "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\n";
    const PI5: &str = "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\nNET_INSTALL_AT_POWER_ON=1\n";

    fn config(text: &str) -> EepromConfig {
        EepromConfig::parse(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_pi4_device_trial_adds_a_tryboot_order_and_the_handover_the_permanent_one() {
        let (migrate, commit) = changes(
            &config(PI4),
            Some("pi4"),
            BOOT_MODE_USB,
            Some(TrialRoute::Device),
            false,
            Handover::BootOrder,
        )
        .unwrap();
        let migrate = migrate.unwrap();
        assert_eq!(
            migrate.config,
            format!("{PI4}[tryboot]\nBOOT_ORDER=0xf14\n")
        );
        assert!(
            migrate.diff.contains("+[tryboot]\n+BOOT_ORDER=0xf14"),
            "{}",
            migrate.diff
        );
        // The hand-over drops the trial section and puts USB first.
        let commit = commit.unwrap();
        assert_eq!(commit.config, format!("{PI4}BOOT_ORDER=0xf14\n"));
        assert!(commit.diff.contains("-[tryboot]"), "{}", commit.diff);
    }

    #[test]
    fn a_pi5_nvme_trial_needs_only_pcie_probe_and_hands_over_nvme_first() {
        let (migrate, commit) = changes(
            &config(PI5),
            Some("pi5"),
            BOOT_MODE_NVME,
            Some(TrialRoute::Device),
            true,
            Handover::BootOrder,
        )
        .unwrap();
        assert_eq!(migrate.unwrap().config, format!("{PI5}PCIE_PROBE=1\n"));
        assert_eq!(
            commit.unwrap().config,
            format!("{}PCIE_PROBE=1\n", PI5.replace("0xf461", "0xf416"))
        );
        // Taking the card out changes nothing at the hand-over.
        let (_, commit) = changes(
            &config(PI5),
            Some("pi5"),
            BOOT_MODE_NVME,
            Some(TrialRoute::Device),
            false,
            Handover::RemoveCard,
        )
        .unwrap();
        assert!(commit.is_none());
    }

    #[test]
    fn without_a_trial_the_migration_hands_over_and_an_order_already_right_is_left() {
        let (migrate, commit) = changes(
            &config(PI4),
            Some("pi4"),
            BOOT_MODE_USB,
            None,
            false,
            Handover::BootOrder,
        )
        .unwrap();
        assert_eq!(migrate.unwrap().config, format!("{PI4}BOOT_ORDER=0xf14\n"));
        assert!(commit.is_none());
        let usb_first = format!("{PI4}BOOT_ORDER=0xf14\n");
        let (migrate, commit) = changes(
            &config(&usb_first),
            Some("pi4"),
            BOOT_MODE_USB,
            Some(TrialRoute::KernelFromSd),
            false,
            Handover::BootOrder,
        )
        .unwrap();
        assert!(migrate.is_none() && commit.is_none());
    }
}
