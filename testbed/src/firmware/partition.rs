//! Where on a disk the firmware looks: the first FAT partition of its MBR,
//! and whether it holds the model's firmware.

use crate::firmware::model::Model;
use crate::host::disks::Disk;
use crate::host::fat;
use crate::host::mbr::{Mbr, Partition};
use anyhow::Result;
use std::path::Path;

/// The first FAT partition of an MBR disk, the only place the firmware looks.
pub fn boot_partition(image: &Path) -> Result<Option<Partition>> {
    Ok(Mbr::read(image)?.and_then(|m| m.partitions.into_iter().find(Partition::is_fat)))
}

/// The partition `model`'s bootloader would start the firmware from on
/// `disk`: its first FAT partition, holding the model's firmware file
/// ([`Model::firmware_file`]). `Ok(Err(why))` when the disk has none, where
/// the bootloader moves on to the next device or mode.
pub fn firmware_partition(model: Model, disk: &Disk) -> Result<Result<Partition, String>> {
    let image = &disk.image;
    let Some(mbr) = Mbr::read(image)? else {
        return Ok(Err("no partition table".into()));
    };
    let Some(part) = mbr.partitions.into_iter().find(Partition::is_fat) else {
        return Ok(Err("no FAT partition".into()));
    };
    if let Some(file) = model.firmware_file() {
        if !fat::exists(image, &part, file)? {
            return Ok(Err(format!(
                "no {file} on its FAT partition {}",
                part.number
            )));
        }
    }
    Ok(Ok(part))
}
