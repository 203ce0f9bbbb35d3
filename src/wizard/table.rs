//! The partition table, asked about only when the choice matters: a disk
//! larger than MBR can describe (2 TiB), where GPT is possible.

use super::Wizard;
use crate::plan::geometry::MBR_MAX_SECTORS;
use crate::plan::{Layout, TableChoice};
use crate::system::disks::Disk;
use crate::system::pi::BootSupport;
use anyhow::Result;

pub(super) fn choose(wizard: &Wizard, target: &Disk, layout: Layout) -> Result<TableChoice> {
    if let Some(table) = wizard.settings.table {
        return Ok(table);
    }
    let over_mbr_limit =
        target.size_bytes / u64::from(target.logical_sector_size.max(1)) > MBR_MAX_SECTORS;
    // In a root-only move the kernel reads the target, and it reads GPT on
    // every model; in a full move the firmware must.
    let gpt_bootable =
        layout == Layout::RootOnly || wizard.system.pi.can_boot.gpt != BootSupport::No;
    if !over_mbr_limit || !gpt_bootable {
        // The planner's automatic choice is right, and the plan says why.
        return Ok(TableChoice::Auto);
    }
    wizard.ui.say(&format!(
        "{} is {}: more than the 2 TiB an MBR partition table can describe. GPT uses the whole \
         disk{}; MBR, the table Raspberry Pi OS itself uses, leaves the rest unused.",
        target.path.display(),
        target.size_human,
        if layout == Layout::Full {
            " and this Pi's firmware boots from it"
        } else {
            ""
        }
    ));
    let items = [
        "GPT: use the whole disk".to_string(),
        "MBR: use only the first 2 TiB".to_string(),
    ];
    let index = wizard.answer(None, 0, || {
        wizard.ui.choose("Which partition table?", &items, 0)
    })?;
    Ok([TableChoice::Gpt, TableChoice::Mbr][index])
}
