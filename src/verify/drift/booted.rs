//! Where this boot came from, and where the next one will: the running
//! root is the committed drive's (`booted-from`), and the bootloader's
//! BOOT_ORDER, read back, still tries the new drive first
//! (`boot-order`), now and after an update staged for the next boot.

use super::Facts;
use crate::bootcfg::eeprom::{mode_name, BootOrder, EepromEdit};
use crate::check::Finding;
use crate::plan::{BootloaderPlan, EepromTakesEffect, Handover, Layout};
use crate::system::bootloader::StagedUpdate;
use crate::system::disks::device_name;
use crate::system::pi::parse_eeprom_boot_order;
use crate::system::source::resolve;
use crate::system::System;

/// `/` is mounted from the committed drive's root partition. A boot of
/// anything else (the SD card's old system after a bootloader update put
/// it first, a clone) is a failure, said with what starts it.
pub fn booted_from(facts: &Facts) -> Finding {
    const CODE: &str = "booted-from";
    let (system, expected) = (facts.system, &facts.expected);
    let spec = expected.root_spec();
    let roots = resolve(&spec, &system.disks);
    let running = system
        .source
        .running_root_devno
        .and_then(|devno| device_name(&system.disks, devno));
    let Some(running) = running else {
        return Finding::warning(
            CODE,
            "the partition / is mounted from is on none of the disks listed, so it could not be told \
             whether this boot runs the committed drive"
                .into(),
        );
    };
    if roots.contains(&running) {
        return Finding::ok(
            CODE,
            format!("/ is mounted from {running} ({spec}), the committed drive's root"),
        )
        .devices(vec![running]);
    }
    let what = match crate::verify::state::running_from_old_root(system, expected) {
        Some(_) => "the SD card's root, the system the move left behind",
        None => "not the committed drive's root",
    };
    let committed = match roots.as_slice() {
        [] => format!("{spec}, not attached"),
        [one] => format!("{spec} on {one}"),
        many => format!(
            "{spec}, which {} partitions carry: {}",
            many.len(),
            many.join(", ")
        ),
    };
    let cause = match (roots.is_empty(), expected.layout) {
        (true, _) => "the committed drive is not attached, or not seen: check its cable and its power, then reboot".to_string(),
        (false, Layout::Full) => "the bootloader started another disk before the new drive: put BOOT_ORDER right (boot-order says how) \
             or shut down, take the SD card out and power on"
            .to_string(),
        (false, Layout::RootOnly) => format!(
            "the command line the firmware read names another root: {} must say root={spec} (`pimigrate verify` names the file it read)",
            expected.on_boot(&expected.cmdline_file).display()
        ),
    };
    Finding::failure(
        CODE,
        format!("this boot runs / from {running}, {what}; the committed drive's root is {committed}"),
    )
    .devices(std::iter::once(running).chain(roots).collect())
    .fix(cause)
    .fix("what is written in this boot stays on this system, not on the committed drive: copy what you need over before you go back")
    .fix("to go back to the SD card for good instead: sudo pimigrate rollback")
}

/// A full move that set the boot order (the SD card kept as the
/// fallback): BOOT_ORDER, as the bootloader started with it and as an
/// update staged for the next boot sets it, still tries the new drive
/// first. A move whose owner takes the card out left BOOT_ORDER alone:
/// nothing to check.
pub fn boot_order(facts: &Facts) -> Option<Finding> {
    let system = facts.system;
    let plan = facts
        .expected
        .bootloader
        .as_ref()
        .filter(|b| b.consent && b.handover == Handover::BootOrder)?;
    let mode = plan.target_mode;
    let drive = format!("the new drive ({})", mode_name(mode));
    let set = committed_order(plan)
        .map(|o| o.to_string())
        .unwrap_or_else(|| BootOrder::trial(mode).to_string());
    let order = match running_order(system, &set) {
        Ok(order) => order,
        Err(unread) => return Some(unread),
    };
    let first = |order: &BootOrder| order.modes().first() == Some(&mode);
    if !first(&order) {
        return Some(order_changed(plan, &order, &drive, &set));
    }
    let staged = system.pi.eeprom.staged.as_ref().and_then(|s| {
        Some((
            s,
            parse_eeprom_boot_order(s.config.as_ref().ok()?, system.pi.config_filter)?,
        ))
    });
    if let Some((update, next)) = staged.filter(|(_, next)| !first(next)) {
        return Some(staged_changes_order(update, &next, &drive, &set));
    }
    Some(Finding::ok(
        BOOT_ORDER_CODE,
        format!(
            "BOOT_ORDER {} tries {drive} first, as the commit set it",
            order.describe()
        ),
    ))
}

/// The code of every finding of `boot_order`.
const BOOT_ORDER_CODE: &str = "boot-order";

/// BOOT_ORDER as the bootloader started with it, or the warning that it
/// could not be read (`set`: the order the commit set, for the fix).
fn running_order(system: &System, set: &str) -> Result<BootOrder, Finding> {
    let Some(config) = system.pi.eeprom_config.as_deref() else {
        return Err(Finding::warning(
            BOOT_ORDER_CODE,
            "the bootloader's config could not be read (rpi-eeprom-config did not answer), so BOOT_ORDER was not checked"
                .into(),
        )
        .fix("install rpi-eeprom (sudo apt install rpi-eeprom) and check as root: sudo pimigrate status --check"));
    };
    parse_eeprom_boot_order(config, system.pi.config_filter).ok_or_else(|| {
        Finding::warning(
            BOOT_ORDER_CODE,
            "BOOT_ORDER in the bootloader's config cannot be read (`rpi-eeprom-config` shows the config)".into(),
        )
        .fix(format!("sudo rpi-eeprom-config --edit: set BOOT_ORDER={set} under [all]"))
    })
}

/// The running BOOT_ORDER no longer tries `drive` first.
fn order_changed(plan: &BootloaderPlan, order: &BootOrder, drive: &str, set: &str) -> Finding {
    let reboot = match plan.takes_effect {
        EepromTakesEffect::NextReboot => {
            "and reboot with the SD card in: the bootloader writes it at that reboot"
        }
        EepromTakesEffect::AtOnce => "and reboot",
    };
    Finding::failure(
        BOOT_ORDER_CODE,
        format!(
            "BOOT_ORDER is {}: it no longer tries {drive} first, as the commit set it ({set}); a bootloader \
             update or an edit changed it, and the SD card, while it is in, starts instead",
            order.describe()
        ),
    )
    .fix(format!(
        "sudo rpi-eeprom-config --edit: set BOOT_ORDER={set} under [all], save, {reboot}"
    ))
}

/// The update staged for the next boot sets a BOOT_ORDER, `next`, that
/// no longer tries `drive` first.
fn staged_changes_order(
    update: &StagedUpdate,
    next: &BootOrder,
    drive: &str,
    set: &str,
) -> Finding {
    Finding::failure(
        BOOT_ORDER_CODE,
        format!(
            "the bootloader update staged for the next boot ({}) sets BOOT_ORDER {}: from then on {drive} \
             is no longer tried first",
            update.image.display(),
            next.describe()
        ),
    )
    .fix(format!(
        "sudo rpi-eeprom-config --edit (it builds on the staged update): set BOOT_ORDER={set} under [all], save"
    ))
    .fix("or cancel the update: sudo rpi-eeprom-update -r")
}

/// The permanent BOOT_ORDER the move set: the last one its changes name.
fn committed_order(plan: &BootloaderPlan) -> Option<BootOrder> {
    plan.changes()
        .flat_map(|change| change.edits.iter())
        .filter_map(|edit| match edit {
            EepromEdit::BootOrder(Some(order)) => Some(*order),
            _ => None,
        })
        .last()
}
