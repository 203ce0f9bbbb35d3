//! The plan in a few plain sentences, shown above the full printout: a
//! first-time user reads this; the printout is for checking the details.

use crate::plan::{EditSite, FileEdit, PartitionRole, Plan};
use crate::system::probe::TableKind;
use crate::units::binary;

/// Which disk is erased, what goes on it, what is copied, what changes on
/// the SD card, and the two words of the printout a newcomer will not know.
pub(super) fn in_short(plan: &Plan) -> String {
    let mut text = String::from("In short:\n");
    for line in [
        erased(plan),
        copied(plan),
        sd_card(plan),
        "PARTUUID (in the printout below): the ID a partition carries; the boot files name the \
         system's partition by it, so the new disk's ID is what points the Pi at the new disk."
            .to_string(),
    ] {
        text.push_str(&format!("  - {line}\n"));
    }
    if plan.trial_boot.is_some() {
        text.push_str(
            "  - Trial boot (the firmware's \"tryboot\"): the next reboot starts the new disk \
             once; if that fails, switching the Pi off and on starts the SD card system again.\n",
        );
    }
    text
}

fn erased(plan: &Plan) -> String {
    let table = match plan.disk.table.kind {
        TableKind::Mbr => "an MBR partition table",
        TableKind::Gpt => "a GPT partition table",
    };
    let partitions: Vec<String> = plan
        .disk
        .table
        .partitions
        .iter()
        .map(|p| {
            let role = match p.role {
                PartitionRole::Boot => "boot (FAT32, the files the Pi starts from)",
                PartitionRole::Root => "root (ext4, the system)",
            };
            format!("{} {role}", binary(p.size_bytes))
        })
        .collect();
    format!(
        "{} is erased and gets {table} with {}.",
        plan.target.path.display(),
        partitions.join(" and ")
    )
}

fn copied(plan: &Plan) -> String {
    let boot = if plan.boot_copy.is_some() {
        " and the boot files"
    } else {
        ""
    };
    format!(
        "The system ({}, {} files){boot} is copied onto it; the SD card is only read.",
        binary(plan.copy.space.used_bytes),
        plan.copy.files
    )
}

/// What happens to the boot files the Pi reads from the SD card.
fn sd_card(plan: &Plan) -> String {
    let on_sd: Vec<&FileEdit> = plan
        .edits
        .iter()
        .filter(|e| e.site == EditSite::SourceBoot)
        .collect();
    if let Some(trial) = &plan.trial_boot {
        return format!(
            "On the SD card, {} and {} are added; cmdline.txt (which says where the system is) \
             stays as it is until `pimigrate verify --commit`, which keeps a backup.",
            trial.cmdline_file.display(),
            trial.tryboot_file.display()
        );
    }
    let changed: Vec<String> = on_sd
        .iter()
        .map(|e| match &e.backup {
            Some(backup) => format!(
                "{} changes to point at the new disk (the original is kept as {})",
                e.file.display(),
                backup.display()
            ),
            None => format!("{} is added", e.output.display()),
        })
        .collect();
    if changed.is_empty() {
        "Nothing on the SD card changes: the new disk starts the Pi on its own.".into()
    } else {
        format!("On the SD card, {}.", changed.join("; "))
    }
}
