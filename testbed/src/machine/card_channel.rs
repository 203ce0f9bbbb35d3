//! The command channel of QEMU's raspi machines, which have no virtio and
//! so no 9p share: the [`Share`] folder's `job/` and `bin/` are copied onto
//! the SD card's FAT partition as `testbed/` before the boot, where the ARM
//! image's agent (`testbed/image-arm64/files/usr/local/sbin/testbed-agent`)
//! finds them at /boot/firmware/testbed, and its `out/` is copied back into
//! the share after QEMU has ended. Scenarios see the same [`Share`] on
//! either machine; only nothing in it changes while the Pi runs.

use crate::firmware::partition::boot_partition;
use crate::host::disks::{Bus, Disk};
use crate::host::fat;
use crate::host::mbr::Partition;
use crate::host::share::Share;
use anyhow::{Context, Result};
use std::path::Path;

/// The channel's folder on the FAT partition.
pub const FOLDER: &str = "testbed";

/// The SD card and its FAT partition, which carry the channel.
fn card(disks: &[Disk]) -> Result<(&Path, Partition)> {
    let sd = disks
        .iter()
        .find(|d| d.bus == Bus::Sd)
        .context("the raspi machine's command channel is on the SD card, and there is none")?;
    let part = boot_partition(&sd.image)?
        .with_context(|| format!("the SD card {} has no FAT partition", sd.image.display()))?;
    Ok((&sd.image, part))
}

/// Before a boot: the card's `testbed/` becomes the share's `job/` and
/// `bin/`, with no `out/` (a job's output is the boot's own).
pub fn to_card(share: &Share, disks: &[Disk]) -> Result<()> {
    let (image, part) = card(disks)?;
    fat::remove_tree(image, &part, FOLDER)?;
    let staging = share.dir.with_extension("card");
    let _ = std::fs::remove_dir_all(&staging);
    let folder = staging.join(FOLDER);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    for sub in ["job", "bin"] {
        let from = share.dir.join(sub);
        let to = folder.join(sub);
        std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
        for entry in
            std::fs::read_dir(&from).with_context(|| format!("cannot list {}", from.display()))?
        {
            let entry = entry?;
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .with_context(|| format!("cannot stage {}", entry.path().display()))?;
        }
    }
    let res = fat::copy_tree_in(image, &part, &folder, "/");
    let _ = std::fs::remove_dir_all(&staging);
    res.context("cannot put the job on the SD card's boot partition")
}

/// After QEMU has ended: the card's `testbed/out/` becomes the share's
/// `out/` (empty when the agent never started the job).
pub fn from_card(share: &Share, disks: &[Disk]) -> Result<()> {
    let (image, part) = card(disks)?;
    let out = share.dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    fat::copy_tree_out(image, &part, &format!("{FOLDER}/out"), &share.dir)
        .context("cannot read the job's output from the SD card's boot partition")?;
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))
}

/// Whether a path on the boot partition belongs to the channel (scenarios
/// comparing the partition before and after leave it out).
pub fn is_channel(path: &str) -> bool {
    let path = path.trim_start_matches('/');
    path == FOLDER || path.starts_with(&format!("{FOLDER}/"))
}
