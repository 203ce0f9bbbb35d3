//! A full move and the EEPROM bootloader (Pi 4, 400, CM4, Pi 5): how the
//! trial boot reaches the new drive, which changes the bootloader's config
//! needs (shown as diffs, made only with consent), and what `verify
//! --commit` hands over. Decided here from what the Pi says of itself (the
//! bootloader's date, its config, a HAT+, an update staged for the next
//! boot, the rpi-eeprom package's images); the executor and `verify
//! --commit` make the changes through the system's own
//! `rpi-eeprom-config` (see `apply::bootloader`), each a list of settings
//! made on the config in the EEPROM at that moment.
//!
//! [`decide`] goes decision by decision: whether the bootloader plays a
//! part ([`eeprom_route_possible`]), the config the plan is made on
//! ([`current_config`]), the trial's route ([`route`]), the hand-over
//! ([`handover`]), the changes ([`changes`]), and whether they can be made
//! on this Pi without a downgrade ([`can_change`]).
//!
//! The routes, from the bootloader's release notes:
//! - Pi 4 family, bootloader 2024-05-17 or later: an EEPROM `[tryboot]`
//!   section (`[tryboot] BOOT_ORDER=0xf14`) makes `reboot "0 tryboot"` try
//!   the new drive first, once; the SD card is the fallback. The change is
//!   staged on the SD card's boot partition and written by recovery.bin at
//!   the next reboot, so the trial comes one reboot later. The hand-over
//!   takes the section out again, whichever the hand-over.
//! - Pi 5, bootloader 2025-01-14 or later: `set_reboot_order` (a mailbox
//!   call, nothing written to the EEPROM) overrides BOOT_ORDER for the next
//!   reboot only. An NVMe drive on an adapter that is not a HAT+ needs
//!   `PCIE_PROBE=1` first, which rpi-eeprom-update flashes at once.
//! - Older bootloaders, or no consent for a change the route needs: the
//!   SD card's kernel with the new drive's root on trial (as a root-only
//!   move), the new drive booting by itself only after the hand-over.

use super::edits::diff_files;
use super::{
    BootloaderPlan, EepromChange, EepromSource, EepromTakesEffect, Handover, Layout, Options,
    PartitionPath, Reason, TrialRoute,
};
use crate::bootcfg::eeprom::{
    mode_name, BootOrder, EepromConfig, EepromConfigError, EepromEdit, BOOT_MODE_NVME, BOOT_MODE_SD,
};
use crate::plan::options::{BootOrderChoice, HandoverChoice, TrialChoice};
use crate::system::bootloader::{BaseError, EepromBase, EepromWrites};
use crate::system::disks::Disk;
use crate::system::pi::{boot_mode, PiFamily, PiInfo};
use crate::system::System;

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
/// refusal added to `reasons`: the route of the trial, the hand-over, the
/// changes to the config, and whether they can be made here.
pub(super) fn decide(
    system: &System,
    options: &Options,
    target: &Disk,
    trial_wanted: bool,
    reasons: &mut Vec<Reason>,
) -> Decision {
    let pi = &system.pi;
    let mode = match eeprom_route_possible(pi, options, target, trial_wanted, reasons) {
        Ok(mode) => mode,
        Err(route) => {
            return Decision {
                route,
                ..Decision::default()
            }
        }
    };
    let consent = options.boot_order == BootOrderChoice::Apply;
    // A config read at inspection means the tool is there.
    let tool = pi.eeprom_config.is_some() || crate::tools::which("rpi-eeprom-config").is_some();
    let Some(current) = current_config(pi, consent, tool, reasons) else {
        return Decision::default();
    };
    let board = pi.config_filter;
    let needs_probe = needs_probe(pi, mode, current.config.as_ref());
    let (route, reason) = route(pi, mode, trial_wanted, consent, needs_probe);
    if options.trial == TrialChoice::Device && route != Some(TrialRoute::Device) {
        reasons.push(refuse_device(&reason));
    }
    let handover = handover(options.handover, consent, tool, reasons);
    let wanted = Wanted {
        board,
        mode,
        route,
        probe: needs_probe && consent,
        trial_order: route == Some(TrialRoute::Device) && pi.family != PiFamily::Pi5,
        handover,
    };
    let (at_migrate, at_commit) = planned_changes(current.config.as_ref(), &wanted, reasons);
    let mut notes = Vec::new();
    if current.config.is_none() && handover == Handover::BootOrder {
        notes.push(
            "the bootloader's config could not be read, so its changes cannot be shown".into(),
        );
    }
    let changing = consent && (at_migrate.is_some() || at_commit.is_some());
    let base = changing.then(|| can_change(pi, reasons)).flatten();
    let reboot_order = (route == Some(TrialRoute::Device) && pi.family == PiFamily::Pi5)
        .then(|| BootOrder::trial(mode));
    Decision {
        plan: Some(BootloaderPlan {
            trial: route,
            reason,
            target_mode: mode,
            reboot_order,
            current: current.text,
            current_from: current.from,
            base,
            at_migrate,
            handover,
            at_commit,
            consent,
            power: None,
            takes_effect: takes_effect(pi),
        }),
        route,
        notes,
    }
}

/// The changes `wanted` makes to the config read in `current`, at the
/// migration and at the commit; none when the config could not be read,
/// and a refusal in `reasons` when they cannot be worked out.
fn planned_changes(
    current: Option<&EepromConfig>,
    wanted: &Wanted,
    reasons: &mut Vec<Reason>,
) -> (Option<EepromChange>, Option<EepromChange>) {
    let Some(config) = current else {
        return (None, None);
    };
    changes(config, wanted).unwrap_or_else(|err| {
        reasons.push(config_refusal(&err));
        (None, None)
    })
}

/// When a change to the bootloader's config takes effect: at once where
/// flashrom writes the SPI flash itself, else at the next reboot (when the
/// bootloader takes in the staged update).
fn takes_effect(pi: &PiInfo) -> EepromTakesEffect {
    match pi.eeprom.writes {
        EepromWrites::AtOnce { .. } => EepromTakesEffect::AtOnce,
        _ => EepromTakesEffect::NextReboot,
    }
}

/// Whether the bootloader plays a part in this move at all: the new
/// drive's boot mode when it does, else the trial's route without it (a
/// root-only move, a target the bootloader does not boot, a Pi without the
/// EEPROM bootloader), with `--trial device` refused where it cannot be.
fn eeprom_route_possible(
    pi: &PiInfo,
    options: &Options,
    target: &Disk,
    trial_wanted: bool,
    reasons: &mut Vec<Reason>,
) -> Result<u8, Option<TrialRoute>> {
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
        return Err(None);
    }
    let without_eeprom = || trial_wanted.then_some(TrialRoute::KernelFromSd);
    // A mode other than the SD card's: a drive the bootloader can try
    // before the card.
    let Some(mode) = boot_mode(target.transport).filter(|&m| m != BOOT_MODE_SD) else {
        return Err(without_eeprom());
    };
    if !pi.eeprom_bootloader {
        if options.trial == TrialChoice::Device {
            reasons.push(refuse_device(
                "this Pi has no EEPROM bootloader, which a one-shot boot of another drive needs",
            ));
        }
        return Err(without_eeprom());
    }
    Ok(mode)
}

/// A Pi 5's NVMe drive on an adapter that is not a HAT+: the bootloader
/// finds it only with `PCIE_PROBE=1`.
fn needs_probe(pi: &PiInfo, mode: u8, config: Option<&EepromConfig>) -> bool {
    mode == BOOT_MODE_NVME
        && pi.family == PiFamily::Pi5
        && pi.hat_product.is_none()
        && config.is_some_and(|c| !c.flag("PCIE_PROBE", pi.config_filter))
}

fn refuse_device(why: &str) -> Reason {
    Reason::new("device-trial-unavailable", format!("--trial device: {why}"))
        .hint("use --trial always (the SD card's kernel with the new root on trial), or --no-trial")
}

/// The config the plan is made on, as read, and where from.
struct Current {
    text: Option<String>,
    config: Option<EepromConfig>,
    from: EepromSource,
}

/// The config that is in the EEPROM now, as far as a plan can read it: an
/// update staged for the next boot (which the EEPROM holds from then on),
/// else the config the bootloader started with. `None` when it cannot be
/// read (a refusal); a config that is not there at all is allowed without
/// consent (the plan then shows no changes).
fn current_config(
    pi: &PiInfo,
    consent: bool,
    tool: bool,
    reasons: &mut Vec<Reason>,
) -> Option<Current> {
    let (text, from) = match &pi.eeprom.staged {
        Some(staged) => match &staged.config {
            Ok(text) => (Some(text.clone()), EepromSource::Staged),
            Err(why) => {
                reasons.push(
                    Reason::new(
                        "bootloader-config-unreadable",
                        format!(
                            "the bootloader update staged for the next boot ({}) cannot be read: {why}",
                            staged.image.display()
                        ),
                    )
                    .hint("cancel it with `sudo rpi-eeprom-update -r`, or reboot once to let the bootloader apply it, then plan again"),
                );
                return None;
            }
        },
        None => (pi.eeprom_config.clone(), EepromSource::Running),
    };
    let config = match text.as_deref().map(|t| EepromConfig::parse(t.as_bytes())) {
        Some(Ok(config)) => Some(config),
        Some(Err(err)) => {
            reasons.push(config_refusal(&err));
            return None;
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
        } else if config.is_none() {
            reasons.push(
                Reason::new(
                    "bootloader-config-unreadable",
                    "rpi-eeprom-config did not print the bootloader's config (it reads it with `vcgencmd bootloader_config`)",
                )
                .hint("run `rpi-eeprom-config` to see why, or plan with --boot-order show"),
            );
        }
    }
    Some(Current { text, config, from })
}

/// A config pimigrate cannot read or change as a refusal.
fn config_refusal(err: &EepromConfigError) -> Reason {
    match err {
        EepromConfigError::Conditional { .. } => Reason::new("bootloader-order-conditional", err.to_string())
            .hint("make the line unconditional (or under [all]) with `sudo rpi-eeprom-config --edit`, or plan with --boot-order show"),
        _ => Reason::new("bootloader-config-unreadable", err.to_string()).hint(
            "look at `rpi-eeprom-config`'s output; fix the config with `sudo rpi-eeprom-config --edit`",
        ),
    }
}

/// The route the trial takes, and why.
fn route(
    pi: &PiInfo,
    mode: u8,
    trial_wanted: bool,
    consent: bool,
    needs_probe: bool,
) -> (Option<TrialRoute>, String) {
    if !trial_wanted {
        return (None, "no trial boot".into());
    }
    if let Err(why) = device_trial(pi) {
        return (Some(TrialRoute::KernelFromSd), why);
    }
    let from_sd = |why: &str| (Some(TrialRoute::KernelFromSd), why.to_string());
    match pi.family {
        PiFamily::Pi5 if crate::tools::which("vcmailbox").is_none() => from_sd(
            "set_reboot_order needs vcmailbox (sudo apt install raspi-utils), which is not installed",
        ),
        PiFamily::Pi5 if needs_probe && !consent => from_sd(
            "the bootloader looks for an NVMe drive without a HAT+ only with PCIE_PROBE=1, a change to its config \
             that pimigrate makes only with --boot-order apply",
        ),
        PiFamily::Pi5 => (
            Some(TrialRoute::Device),
            format!(
                "set_reboot_order makes the next reboot try {} first, once; the SD card is the fallback",
                mode_name(mode)
            ),
        ),
        _ if !consent => from_sd(
            "a one-shot boot of the new drive needs a [tryboot] section in the bootloader's config, a change \
             pimigrate makes only with --boot-order apply",
        ),
        _ => (
            Some(TrialRoute::Device),
            format!(
                "the bootloader's [tryboot] section makes `reboot \"0 tryboot\"` try {} first, once; the SD card is the fallback",
                mode_name(mode)
            ),
        ),
    }
}

/// Who hands the Pi over to the new drive: the boot order (only with
/// consent) or the owner, taking the card out.
fn handover(
    choice: HandoverChoice,
    consent: bool,
    tool: bool,
    reasons: &mut Vec<Reason>,
) -> Handover {
    match choice {
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
    }
}

/// Whether the changes can be made on this Pi with its tools, and the
/// image they are built on; refusals otherwise. Checked only when there
/// are changes to make.
pub(super) fn can_change(pi: &PiInfo, reasons: &mut Vec<Reason>) -> Option<EepromBase> {
    let compute_module = pi.family == PiFamily::Cm4 || pi.config_filter == Some("cm5");
    if compute_module {
        reasons.push(
            Reason::new(
                "compute-module-bootloader",
                "this is a Compute Module: rpi-eeprom-update leaves its EEPROM alone unless its owner enabled updates, \
                 its boot ROM runs no recovery.bin from eMMC, and its carrier board may fix the boot order",
            )
            .hint("plan with --boot-order show and set the boot order the carrier's way (rpiboot/usbboot), \
                   or use --layout root-only"),
        );
        return None;
    }
    if pi.eeprom.writes == EepromWrites::AbPartitions {
        reasons.push(
            Reason::new(
                "bootloader-ab-unverifiable",
                "this Pi 5 has an A/B EEPROM, which rpi-eeprom-update writes through rpi-eeprom-ab: pimigrate cannot \
                 read back what was written",
            )
            .hint("plan with --boot-order show and make the change shown with `sudo rpi-eeprom-config --edit`"),
        );
        return None;
    }
    match pi.eeprom.base(pi.bootloader_built) {
        Ok(base) => Some(base),
        Err(BaseError::Downgrade(why)) => {
            reasons.push(Reason::new("bootloader-downgrade", why).hint(
                "update the rpi-eeprom package (sudo apt update && sudo apt install rpi-eeprom), or cancel a staged \
                 update with `sudo rpi-eeprom-update -r`, then plan again",
            ));
            None
        }
        Err(BaseError::Unknown(why)) => {
            reasons.push(Reason::new("bootloader-image-unknown", why).hint(
                "install rpi-eeprom (sudo apt install rpi-eeprom), or plan with --boot-order show",
            ));
            None
        }
    }
}

/// What the changes are to achieve.
struct Wanted<'a> {
    board: Option<&'a str>,
    /// The new drive's boot mode.
    mode: u8,
    route: Option<TrialRoute>,
    /// PCIE_PROBE=1 for a Pi 5's NVMe drive without a HAT+.
    probe: bool,
    /// A Pi 4's `[tryboot]` order for a one-shot boot of the new drive.
    trial_order: bool,
    handover: Handover,
}

/// The migration's change (before the trial) and the hand-over's, shown
/// on `current`: the settings each changes, and the config they give.
fn changes(
    current: &EepromConfig,
    wanted: &Wanted,
) -> Result<(Option<EepromChange>, Option<EepromChange>), EepromConfigError> {
    let Wanted { board, mode, .. } = *wanted;
    let order = current.boot_order(board, false)?;
    let permanent = order.with_first(mode);
    let needs_order = order.first_of(&[mode, BOOT_MODE_SD]) != Some(mode);
    // PCIE_PROBE stays: the drive is found at every boot from now on.
    let probe = wanted
        .probe
        .then(|| EepromEdit::PcieProbe(Some("1".into())));
    let permanent_edit = (wanted.handover == Handover::BootOrder && needs_order)
        .then_some(EepromEdit::BootOrder(Some(permanent)));
    let permanent_purpose = |then: &str| {
        format!(
            "BOOT_ORDER={permanent}: {} first{then}, the SD card as the fallback",
            mode_name(mode)
        )
    };
    if wanted.route.is_none() {
        // No trial: the migration hands over at once.
        let edits: Vec<EepromEdit> = probe.into_iter().chain(permanent_edit).collect();
        let at_migrate = change(current, edits, permanent_purpose(""), board)?;
        return Ok((at_migrate.map(|(c, _)| c), None));
    }
    let trial = wanted
        .trial_order
        .then(|| EepromEdit::TrialBootOrder(Some(BootOrder::trial(mode))));
    let had_trial = trial.is_some();
    let purpose = trial_purpose(mode, had_trial, wanted.probe);
    let at_migrate = change(
        current,
        probe.into_iter().chain(trial).collect(),
        purpose,
        board,
    )?;
    let after_migrate = at_migrate
        .as_ref()
        .map(|(_, to)| to.clone())
        .unwrap_or_else(|| current.clone());
    // Nothing of the trial stays in the EEPROM, whichever the hand-over.
    let untrial = had_trial.then_some(EepromEdit::TrialBootOrder(None));
    let purpose = match (&permanent_edit, had_trial) {
        (Some(_), true) => format!(
            "{}; the trial's [tryboot] BOOT_ORDER taken out",
            permanent_purpose(" from now on")
        ),
        (Some(_), false) => permanent_purpose(" from now on"),
        (None, true) => "the trial's [tryboot] BOOT_ORDER taken out: a trial boot follows the normal order again".into(),
        (None, false) => String::new(),
    };
    let at_commit = change(
        &after_migrate,
        untrial.into_iter().chain(permanent_edit).collect(),
        purpose,
        board,
    )?;
    Ok((at_migrate.map(|(c, _)| c), at_commit.map(|(c, _)| c)))
}

/// `edits` made on `from`, with the config they give, and what for;
/// none when they change nothing.
fn change(
    from: &EepromConfig,
    edits: Vec<EepromEdit>,
    purpose: String,
    board: Option<&str>,
) -> Result<Option<(EepromChange, EepromConfig)>, EepromConfigError> {
    let file = PartitionPath::known("/bootconf.txt");
    let to = from.with_edits(&edits, board)?;
    Ok((!edits.is_empty() && &to != from).then(|| {
        let change = EepromChange {
            edits,
            config: to.to_text(),
            diff: diff_files(&file, &file, &from.to_bytes(), &to.to_bytes()),
            purpose,
        };
        (change, to)
    }))
}

/// What the migration's change is for, ahead of a trial: a one-shot
/// order that tries the new drive (`trial`), the NVMe probe, or both.
fn trial_purpose(mode: u8, trial: bool, probe: bool) -> String {
    match (trial, probe) {
        (true, probe) => format!(
            "[tryboot] BOOT_ORDER={}: `reboot \"0 tryboot\"` tries {} first, once{}",
            BootOrder::trial(mode),
            mode_name(mode),
            if probe {
                "; PCIE_PROBE=1 finds the NVMe drive"
            } else {
                ""
            }
        ),
        (false, true) => {
            "PCIE_PROBE=1: the bootloader looks for the NVMe drive without a HAT+".into()
        }
        (false, false) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootcfg::eeprom::BOOT_MODE_USB;

    const PI4: &str = "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\n";
    const PI5: &str = "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\nNET_INSTALL_AT_POWER_ON=1\n";

    fn config(text: &str) -> EepromConfig {
        EepromConfig::parse(text.as_bytes()).unwrap()
    }

    fn wanted(board: &'static str, mode: u8, route: Option<TrialRoute>) -> Wanted<'static> {
        Wanted {
            board: Some(board),
            mode,
            route,
            probe: false,
            trial_order: route == Some(TrialRoute::Device) && !board.starts_with("pi5"),
            handover: Handover::BootOrder,
        }
    }

    fn order(value: u32) -> Option<BootOrder> {
        Some(BootOrder { value })
    }

    #[test]
    fn a_pi4_device_trial_adds_a_tryboot_order_and_the_handover_the_permanent_one() {
        let (migrate, commit) = changes(
            &config(PI4),
            &wanted("pi4", BOOT_MODE_USB, Some(TrialRoute::Device)),
        )
        .unwrap();
        let migrate = migrate.unwrap();
        assert_eq!(migrate.edits, [EepromEdit::TrialBootOrder(order(0xf14))]);
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
        assert_eq!(
            commit.edits,
            [
                EepromEdit::TrialBootOrder(None),
                EepromEdit::BootOrder(order(0xf14))
            ]
        );
        assert_eq!(commit.config, format!("{PI4}BOOT_ORDER=0xf14\n"));
        assert!(commit.diff.contains("-[tryboot]"), "{}", commit.diff);
    }

    #[test]
    fn taking_the_card_out_still_takes_the_trial_order_out_of_the_eeprom() {
        let mut w = wanted("pi4", BOOT_MODE_USB, Some(TrialRoute::Device));
        w.handover = Handover::RemoveCard;
        let (migrate, commit) = changes(&config(PI4), &w).unwrap();
        assert!(migrate.is_some());
        let commit = commit.expect("the [tryboot] order goes at the hand-over");
        assert_eq!(commit.edits, [EepromEdit::TrialBootOrder(None)]);
        assert_eq!(commit.config, PI4);
        assert!(commit.purpose.contains("taken out"), "{}", commit.purpose);
    }

    #[test]
    fn a_pi5_nvme_trial_needs_only_pcie_probe_and_hands_over_nvme_first() {
        let mut w = wanted("pi5", BOOT_MODE_NVME, Some(TrialRoute::Device));
        w.probe = true;
        let (migrate, commit) = changes(&config(PI5), &w).unwrap();
        let migrate = migrate.unwrap();
        assert_eq!(migrate.edits, [EepromEdit::PcieProbe(Some("1".into()))]);
        assert_eq!(migrate.config, format!("{PI5}PCIE_PROBE=1\n"));
        let commit = commit.unwrap();
        assert_eq!(commit.edits, [EepromEdit::BootOrder(order(0xf416))]);
        assert_eq!(
            commit.config,
            format!("{}PCIE_PROBE=1\n", PI5.replace("0xf461", "0xf416"))
        );
        // Taking the card out changes nothing at the hand-over: a Pi 5's
        // trial left nothing in the EEPROM.
        w.handover = Handover::RemoveCard;
        let (_, commit) = changes(&config(PI5), &w).unwrap();
        assert!(commit.is_none());
    }

    #[test]
    fn without_a_trial_the_migration_hands_over_and_an_order_already_right_is_left() {
        let (migrate, commit) = changes(&config(PI4), &wanted("pi4", BOOT_MODE_USB, None)).unwrap();
        assert_eq!(migrate.unwrap().config, format!("{PI4}BOOT_ORDER=0xf14\n"));
        assert!(commit.is_none());
        let usb_first = format!("{PI4}BOOT_ORDER=0xf14\n");
        let (migrate, commit) = changes(
            &config(&usb_first),
            &wanted("pi4", BOOT_MODE_USB, Some(TrialRoute::KernelFromSd)),
        )
        .unwrap();
        assert!(migrate.is_none() && commit.is_none());
    }

    #[test]
    fn a_board_filtered_order_is_read_and_changed_where_the_pi_reads_it() {
        // [all] says USB first, but a Pi 4 follows its own section: SD first.
        let filtered = "[all]\nBOOT_ORDER=0xf14\n[pi4]\nBOOT_ORDER=0xf41\n";
        let (_, commit) = changes(
            &config(filtered),
            &wanted("pi4", BOOT_MODE_USB, Some(TrialRoute::KernelFromSd)),
        )
        .unwrap();
        let commit = commit.expect("the Pi 4's own order tries the SD card first");
        assert_eq!(
            commit.config,
            "[all]\nBOOT_ORDER=0xf14\n[pi4]\nBOOT_ORDER=0xf14\n"
        );
        // A CM4 reads [pi4] too.
        let cm4 = "[all]\nBOOT_ORDER=0xf41\n[cm4]\nBOOT_ORDER=0xf61\n";
        let (_, commit) = changes(
            &config(cm4),
            &wanted("cm4", BOOT_MODE_NVME, Some(TrialRoute::KernelFromSd)),
        )
        .unwrap();
        assert_eq!(
            commit.unwrap().config,
            "[all]\nBOOT_ORDER=0xf41\n[cm4]\nBOOT_ORDER=0xf16\n"
        );
        // An order under a filter pimigrate cannot evaluate is refused.
        let serial = "[all]\nBOOT_ORDER=0xf41\n[0x1234abcd]\nBOOT_ORDER=0xf14\n";
        let err = changes(
            &config(serial),
            &wanted("pi4", BOOT_MODE_USB, Some(TrialRoute::Device)),
        )
        .unwrap_err();
        assert_eq!(config_refusal(&err).code, "bootloader-order-conditional");
    }
}
