//! Scenario (a): the SD card boots like a Pi's, and a USB SSD is visible.

use super::setup::{Rig, Setup};
use super::{expect_fact, facts, guest_disks, PROBE};
use crate::{After, Ending, ImageSet};
use anyhow::{ensure, Result};

/// Bookworm layout: boot partition at /boot/firmware.
pub fn bookworm(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("sd-boot", &images.bookworm)
        .usb_ssd()
        .without_pimigrate()
        .build()?;
    let boot = pi.run(PROBE, After::PowerOff)?;
    ensure!(
        boot.spec.disk == "sd" && boot.spec.config_file == "config.txt",
        "firmware chose {:?}",
        boot.spec
    );
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    ensure!(
        f.get("cmdline").is_some_and(|c| c.contains(&format!("root=PARTUUID={}-02", images.bookworm_signature))),
        "the kernel did not get cmdline.txt from the SD card: {:?}",
        f.get("cmdline")
    );

    let disks = guest_disks(pi.share())?;
    let mut names: Vec<&str> = disks.iter().map(|d| d.name.as_str()).collect();
    names.sort();
    // Exactly the two disks: the 9p share must not show up as a block device.
    ensure!(
        names == ["mmcblk0", "sda"],
        "guest block devices: {disks:?}"
    );
    let ssd = disks
        .iter()
        .find(|d| d.name == "sda")
        .expect("checked above");
    ensure!(
        ssd.tran.as_deref() == Some("usb"),
        "the SSD's transport is {:?}, expected usb",
        ssd.tran
    );
    ensure!(
        ssd.size == "8G",
        "the SSD is {} in the guest, expected 8G",
        ssd.size
    );

    ensure!(
        boot.record.ending == Ending::PowerOff,
        "the guest did not power off: {:?}",
        boot.record.ending
    );
    Ok(())
}

/// Bullseye layout: the boot partition is /boot itself.
pub fn bullseye(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("sd-boot-bullseye", &images.bullseye)
        .without_pimigrate()
        .build()?;
    let boot = pi.run(PROBE, After::PowerOff)?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot", "/dev/mmcblk0p1")?;
    expect_fact(&f, "boot_firmware", "")?;
    ensure!(
        boot.record.ending == Ending::PowerOff,
        "the guest did not power off: {:?}",
        boot.record.ending
    );
    Ok(())
}
