//! Root-only or full: what this Pi's firmware can boot decides what is
//! offered, and the person is told why in plain words.

use super::Wizard;
use crate::plan::Layout;
use crate::system::disks::{Disk, Transport};
use crate::system::pi::BootSupport;
use anyhow::Result;

const ROOT_ONLY: &str = "Root only: the system moves, the SD card stays in and keeps starting it";
const FULL: &str = "Full: boot and system move, the SD card can come out";

pub(super) fn choose(wizard: &Wizard, target: &Disk) -> Result<Layout> {
    let support = firmware_boots(wizard, target);
    let why = explanation(wizard, target, support);
    if let Some(layout) = wizard.settings.layout {
        wizard.ui.say(&format!(
            "{why}\nLayout: {}{}\n",
            name(layout),
            wizard.not_asked("--layout", true)
        ));
        return Ok(layout);
    }
    if support == BootSupport::No {
        wizard.ui.say(&format!(
            "{why}\nLayout: root only (the only one this Pi can start).\n"
        ));
        return Ok(Layout::RootOnly);
    }
    wizard.ui.say(&why);
    let full_item = match support {
        BootSupport::NeedsOtp => {
            format!("{FULL} (only after the one-time USB boot setting)")
        }
        _ => FULL.to_string(),
    };
    let items = [ROOT_ONLY.to_string(), full_item];
    let index = wizard.answer(None, 0, || wizard.ui.choose("What should move?", &items, 0))?;
    let layout = [Layout::RootOnly, Layout::Full][index];
    wizard.ui.say(&format!(
        "Layout: {}{}.\n",
        name(layout),
        wizard.not_asked("--layout", false)
    ));
    Ok(layout)
}

fn name(layout: Layout) -> &'static str {
    match layout {
        Layout::RootOnly => "root only",
        Layout::Full => "full (boot and root)",
    }
}

/// Can this firmware start the system from the target's kind of disk?
fn firmware_boots(wizard: &Wizard, target: &Disk) -> BootSupport {
    let can = &wizard.system.pi.can_boot;
    match target.transport {
        Transport::Usb => can.usb,
        Transport::Nvme => can.nvme,
        Transport::Mmc => can.sd,
        _ if can.sd == BootSupport::Unknown => BootSupport::Unknown,
        _ => BootSupport::No,
    }
}

fn explanation(wizard: &Wizard, target: &Disk, support: BootSupport) -> String {
    let pi = wizard.system.pi.model.as_deref().unwrap_or("this machine");
    let kind = match target.transport {
        Transport::Usb => "USB",
        Transport::Nvme => "NVMe",
        Transport::Mmc => "an SD card",
        _ => "this kind of disk",
    };
    let trial = if wizard.system.pi.tryboot_available {
        " Root only can also be tried once (a trial boot) before it is made permanent."
    } else {
        ""
    };
    match support {
        BootSupport::Yes => format!(
            "Your {pi} can boot from {kind}: a full move lets you take the SD card out; root only \
             keeps the SD card as the boot disk and works the same.{trial}"
        ),
        BootSupport::NeedsOtp => format!(
            "Your {pi} cannot boot from {kind} without a one-time change (program_usb_boot_mode=1, \
             which cannot be undone); root only keeps the SD card as the boot disk and needs no change."
        ),
        BootSupport::No => format!(
            "Your {pi} cannot boot from {kind}: only the system (root) moves, and the SD card stays \
             in to start it. That is most of the speed: the Pi reads the SD card only while booting."
        ),
        BootSupport::Unknown => format!(
            "pimigrate cannot tell whether {pi} boots from {kind}: root only keeps the SD card as \
             the boot disk and is the safe choice."
        ),
    }
}
