//! The firmware's boot order: with the SD card removed, a Pi 4 boots the USB
//! SSD's first FAT partition (what a full move relies on).

use super::{Lane, Scenario};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{Rig, Setup};
use crate::{After, Bus, Disk, Ending, ImageSet};
use anyhow::{ensure, Result};

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "usb-boot",
    lane: Lane::Shared,
    run,
    about: r#"the SD card removed, the firmware boots the USB SSD (a copy of the card): root `sda2`, `/boot/firmware` `sda1`"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("usb-boot", &images.bookworm)
        .without_pimigrate()
        .build()?;
    let ssd_image = pi.work.join("ssd.img");
    pi.attach(Disk::copy_of(
        &images.bookworm,
        ssd_image,
        "ssd",
        Bus::UsbUas,
        "usb-ssd",
    )?)?;
    // Two disks with the same PARTUUIDs must never be attached together;
    // pull the card, as a user finishing a full move would.
    pi.detach("sd")?;

    let boot = pi.run(PROBE, After::PowerOff)?;
    ensure!(
        boot.spec.disk == "ssd",
        "the firmware booted {:?}, expected the SSD",
        boot.spec.disk
    );
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/sda2")?;
    expect_fact(&f, "boot_firmware", "/dev/sda1")?;
    ensure!(
        boot.record.ending == Ending::PowerOff,
        "the guest did not power off: {:?}",
        boot.record.ending
    );
    Ok(())
}
