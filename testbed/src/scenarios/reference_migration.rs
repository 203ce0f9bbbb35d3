//! Scenario (b): the migration a careful person does by hand today, with
//! standard tools only, so later scenarios have a known-good reference:
//! a root-only move (the boot partition stays on the SD card, as on a Pi
//! that cannot boot from USB), root on the SSD's only partition, sda1.

use super::setup::{Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::inspect;
use crate::mbr::Mbr;
use crate::{After, Ending, ImageSet};
use anyhow::{ensure, Context, Result};

/// A fresh signature for the SSD (never the SD card's, see PI-FACTS.md on
/// duplicate ids).
const SSD_SIGNATURE: &str = "2a7e5c01";

fn migrate_script(sd_signature: &str) -> String {
    format!(
        r#"
ssd=/dev/$(lsblk -dno NAME,SERIAL | awk '$2 == "TB-SSD" {{ print $1 }}')
[ -b "$ssd" ] || {{ echo "no SSD with serial TB-SSD"; lsblk; exit 1; }}
echo "ssd=$ssd"
# A marker written before the copy must arrive on the SSD.
echo before-copy > /root/migration-marker
sfdisk --wipe always "$ssd" <<SFDISK
label: dos
label-id: 0x{SSD_SIGNATURE}
start=8192, type=83
SFDISK
udevadm settle
mkfs.ext4 -q -F -L ssdroot "${{ssd}}1"
mkdir -p /mnt/ssd
mount "${{ssd}}1" /mnt/ssd
rsync -aHAXx --numeric-ids / /mnt/ssd/
sed -i 's/PARTUUID={sd_signature}-02/PARTUUID={SSD_SIGNATURE}-01/' /mnt/ssd/etc/fstab
sed -i 's/root=PARTUUID={sd_signature}-02/root=PARTUUID={SSD_SIGNATURE}-01/' /boot/firmware/cmdline.txt
cat /mnt/ssd/etc/fstab /boot/firmware/cmdline.txt
umount /mnt/ssd
sync
"#
    )
}

const VERIFY: &str = r#"
echo "marker=$(cat /root/migration-marker)"
echo after-reboot > /root/second-boot
sync
"#;

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("reference-migration", &images.bookworm)
        .usb_ssd()
        .without_pimigrate()
        .build()?;

    let first = pi.run(&migrate_script(&images.bookworm_signature), After::Reboot)?;
    first.job_ok()?;
    ensure!(
        first.record.ending == Ending::Reboot,
        "the guest did not reboot: {:?}",
        first.record.ending
    );

    let second = pi.run(&format!("{PROBE}{VERIFY}"), After::PowerOff)?;
    ensure!(
        second.spec.disk == "sd",
        "the firmware should still boot from the SD card: {:?}",
        second.spec
    );
    let f = facts(&second.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/sda1")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    expect_fact(&f, "marker", "before-copy")?;
    ensure!(
        second.record.ending == Ending::PowerOff,
        "the guest did not power off: {:?}",
        second.record.ending
    );

    // From the host, powered off: the new root took the write of the second
    // boot, the SD root did not, and the ids are what the edit said.
    let ssd = &pi.disk("ssd")?.image;
    let sd = &pi.disk("sd")?.image;
    let mbr = Mbr::read(ssd)?.context("the SSD has no partition table after the migration")?;
    ensure!(
        mbr.partuuid(1) == format!("{SSD_SIGNATURE}-01"),
        "SSD PARTUUID is {}",
        mbr.partuuid(1)
    );
    let written = inspect::ext4_read(ssd, 1, "/root/second-boot")?;
    ensure!(
        written.trim() == "after-reboot",
        "second boot's file on the SSD reads {written:?}"
    );
    ensure!(
        inspect::ext4_read(sd, 2, "/root/second-boot").is_err(),
        "the second boot wrote to the SD card's root: root was not on the SSD"
    );
    let fstab = inspect::ext4_read(ssd, 1, "/etc/fstab")?;
    ensure!(
        fstab.contains(&format!("PARTUUID={SSD_SIGNATURE}-01  /")),
        "the SSD's fstab does not mount root from the SSD:\n{fstab}"
    );
    let (_, label) = inspect::ext4_ids(ssd, 1)?;
    ensure!(label == "ssdroot", "SSD root label is {label:?}");
    Ok(())
}
