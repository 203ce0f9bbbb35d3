//! What the new drive needs beyond the copy, decided with the rest of the
//! plan (issue 45): TRIM that reaches it ([`trim`]: a udev rule for a USB
//! bridge that passes UNMAP, `fstrim.timer` on the new root), the bridge
//! on the right driver ([`quirk`]: `usb-storage.quirks=VID:PID:u` on the
//! new command line for a bridge known for trouble on `uas`, or seen
//! resetting), and the power before the move ([`power`]: a Pi 5's 600 mA
//! USB limit, under-voltage since boot).
//!
//! Each part is decided from what the system says (sysfs, the bridge's
//! VPD pages, the kernel log, the device tree) and what the owner agreed
//! to (`--no-trim`, `--usb-quirk`, `--psu-max-current`); what is to be
//! written goes where the plan's writes go: the rule and the timer's link
//! to the executor's TRIM step, the quirk into the command line's edits,
//! `PSU_MAX_CURRENT` into the bootloader's changes.

pub mod power;
pub mod quirk;
pub mod trim;

pub use power::PowerPlan;
pub use quirk::UsbQuirk;
pub use trim::TrimPlan;

use super::{BootloaderPlan, EditOperation, Layout, Options, Reason};
use crate::bootcfg::Cmdline;
use crate::system::disks::Disk;
use crate::system::kernel_events::KernelLog;
use crate::system::System;
use serde::{Deserialize, Serialize};

/// The plan's part for the weeks after the move.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AfterMove {
    pub trim: TrimPlan,
    /// The target's USB bridge and its driver; `null` when the target is
    /// not behind one.
    #[serde(default)]
    pub usb_quirk: Option<UsbQuirk>,
    #[serde(default)]
    pub power: PowerPlan,
}

/// What the planner takes from this part besides the plan's own record.
pub(super) struct Decided {
    pub after_move: AfterMove,
    /// Added to every command line that starts the new root.
    pub cmdline_ops: Vec<EditOperation>,
    /// Things the owner should know, for the plan's warnings.
    pub warnings: Vec<String>,
}

/// Decides the three parts for a move onto `target`, every refusal
/// (a consent that cannot be honoured) added to `reasons`. `cmdline` is
/// the running system's command line, on which the quirk's argument is
/// worked out.
pub(super) fn decide(
    system: &System,
    options: &Options,
    target: &Disk,
    cmdline: Option<&Cmdline>,
    bootloader: Option<&mut BootloaderPlan>,
    reasons: &mut Vec<Reason>,
) -> Decided {
    let log = KernelLog::read(&system.host);
    let trim = trim::decide(system, target, options.layout, options.trim);
    let usb_quirk = quirk::decide(
        &system.host,
        target,
        cmdline,
        &log,
        options.usb_quirk,
        reasons,
    );
    let power = power::decide(system, options, target, &log, bootloader, reasons);
    let cmdline_ops = usb_quirk
        .as_ref()
        .and_then(UsbQuirk::operation)
        .into_iter()
        .collect();
    let mut warnings = power.warnings();
    warnings.extend(usb_quirk.as_ref().and_then(UsbQuirk::warning));
    Decided {
        after_move: AfterMove {
            trim,
            usb_quirk,
            power,
        },
        cmdline_ops,
        warnings,
    }
}

/// Whether the move's layout leaves the SD card's boot partition mounted
/// on the new system (a root-only move): a timer that trims every mounted
/// filesystem would then trim the SD card too.
fn sd_card_stays_mounted(layout: Layout) -> bool {
    layout == Layout::RootOnly
}

#[cfg(test)]
mod tests;
