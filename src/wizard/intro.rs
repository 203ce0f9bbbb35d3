//! The first screens: what will and will not happen, an earlier migration
//! that is still pending, and the disks found.

use super::{Wizard, WizardEnd};
use crate::state::journal::Journal;
use crate::system::disks::{Disk, Role, Transport};
use crate::system::pi::BootSupport;
use anyhow::Result;

pub(super) fn what_happens(wizard: &Wizard) {
    // Lines fit 80 columns: a terminal wraps longer ones mid-word, and this
    // is the screen a first-time user reads most carefully.
    let mut text = String::from(
        "pimigrate moves this system off its SD card onto a faster disk\n\
         (a USB SSD or NVMe drive).\n\
         \n\
         What will happen:\n\
         \x20 1. the attached disks are listed and, if you like, measured, to find\n\
         \x20    the best one\n\
         \x20 2. you choose the disk, and whether only the system (root) or boot and\n\
         \x20    root move\n\
         \x20 3. you see the exact plan, every boot-file change included, and type\n\
         \x20    the disk's name to go on\n\
         \x20 4. that disk is erased, partitioned and formatted, and the system is\n\
         \x20    copied onto it\n\
         \x20 5. the boot files change last, so the Pi starts the copy at the next\n\
         \x20    reboot\n\
         \n\
         What will not happen:\n\
         \x20 - nothing is written before you type the disk's name, but what\n\
         \x20   measuring writes (test files it removes; a blank drive only if you\n\
         \x20   agree); Esc or Ctrl-C at any question stops with nothing changed\n\
         \x20 - no file on the SD card is deleted; only its boot files may change\n\
         \x20   (with a backup; `pimigrate rollback` restores them), and the\n\
         \x20   bootloader's config if you agree\n\
         \x20 - no disk but the one you choose is erased\n",
    );
    if !wizard.host.is_live() {
        text.push_str(&format!(
            "\nThis is an inspected system ({}), not the running one: a rehearsal that stops before writing.\n",
            wizard.host.root.display()
        ));
    }
    wizard.ui.say(&text);
}

/// A migration this machine has started or finished already: say how to go
/// on instead of planning another one over it.
pub(super) fn earlier_migration(wizard: &Wizard) -> Result<Option<WizardEnd>> {
    let state_dir = wizard.host.path(&wizard.host.state_dir);
    let Some(journal) = Journal::load(&state_dir)? else {
        return Ok(None);
    };
    let target = journal.plan.target.path.display();
    let message = if journal.landed(wizard.system) {
        format!(
            "This system was already migrated to {target}. Reboot into it and run \
             `sudo pimigrate verify`; `sudo pimigrate rollback` undoes it, before migrating again."
        )
    } else {
        format!(
            "An earlier migration to {target} stopped before it finished: \
             `sudo pimigrate migrate --resume` carries on, `sudo pimigrate rollback` undoes it."
        )
    };
    wizard.ui.say(&format!("{message}\nNothing was changed."));
    Ok(Some(WizardEnd::NothingToDo))
}

pub(super) fn show_disks(wizard: &Wizard) {
    let system = wizard.system;
    let mut text = String::new();
    let model = system
        .pi
        .model
        .as_deref()
        .unwrap_or("This machine (not a Raspberry Pi)");
    text.push_str(&format!("{model}: {}\n", boot_abilities(wizard)));
    text.push_str("\nDisks found:\n");
    // Columns as wide as their longest entry, and the role on a line of its
    // own: on one line it pushed every row past 80 columns.
    let disks: Vec<&Disk> = shown_disks(wizard).collect();
    let width =
        |column: &dyn Fn(&Disk) -> String| disks.iter().map(|d| column(d).len()).max().unwrap_or(0);
    let path = |d: &Disk| d.path.display().to_string();
    let size = |d: &Disk| d.size_human.clone();
    let link = |d: &Disk| d.transport.to_string();
    let (w_path, w_size, w_link) = (width(&path), width(&size), width(&link));
    for disk in disks {
        text.push_str(&format!(
            "  {:<w_path$}  {:<w_size$}  {:<w_link$}  {}\n      {}\n",
            path(disk),
            size(disk),
            link(disk),
            product_name(disk),
            role_in_words(disk)
        ));
    }
    wizard.ui.say(&text);
}

/// Real drives: loop, ram and zram devices are no place for a system.
pub(super) fn shown_disks<'a>(wizard: &Wizard<'a>) -> impl Iterator<Item = &'a Disk> {
    wizard
        .system
        .disks
        .iter()
        .filter(|d| d.transport != Transport::Virtual && d.size_bytes > 0)
}

pub(super) fn product_name(disk: &Disk) -> String {
    let name = crate::units::join_present([disk.vendor.as_deref(), disk.model.as_deref()]);
    if name.is_empty() {
        "(no name)".into()
    } else {
        name
    }
}

fn role_in_words(disk: &Disk) -> String {
    match disk.role {
        Role::SourceRoot if disk.role_reasons.is_empty() => "runs the system now".into(),
        Role::SourceRoot => format!("runs the system now ({})", disk.role_reasons.join("; ")),
        Role::SourceBoot => "holds the boot partition".into(),
        Role::Candidate => "can take the system".into(),
        // A drive the desktop mounted is often the very one bought for
        // this: say how to free it.
        Role::Unsuitable if !disk.uses().is_empty() => format!(
            "cannot take it: {}; unmount it first (e.g. `sudo umount {}`) to move the system there",
            disk.role_reasons.join("; "),
            crate::recommend::survey::mounts(disk)
                .first()
                .unwrap_or(&disk.path)
                .display()
        ),
        Role::Unsuitable => format!("cannot take it: {}", disk.role_reasons.join("; ")),
    }
}

fn boot_abilities(wizard: &Wizard) -> String {
    let can = &wizard.system.pi.can_boot;
    let word = |support: BootSupport| match support {
        BootSupport::Yes => "yes",
        BootSupport::NeedsOtp => "after a one-time setting",
        BootSupport::No => "no",
        BootSupport::Unknown => "unknown",
    };
    format!(
        "boots from USB: {}, from NVMe: {}",
        word(can.usb),
        word(can.nvme)
    )
}
