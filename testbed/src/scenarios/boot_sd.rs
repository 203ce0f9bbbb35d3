//! Scenario (a): the SD card boots like a Pi's, and a USB SSD is visible.

use super::{Lane, Scenario};
use crate::machine::probe::{expect_fact, facts, guest_disks, PROBE};
use crate::machine::qemu::{wake_log, WAKE_AFTER};
use crate::machine::qmp::Qmp;
use crate::machine::rig::{Rig, Setup};
use crate::{After, Ending, ImageSet};
use anyhow::{bail, ensure, Result};
use serde_json::json;
use std::time::{Duration, Instant};

/// The scenario `sd-boot`, in [`super::all`]'s order.
pub const SD_BOOT: Scenario = Scenario {
    name: "sd-boot",
    lane: Lane::Shared,
    run: bookworm,
    about: r#"(a) bookworm SD boots from `config.txt`; root is `mmcblk0p2`, `/boot/firmware` is `mmcblk0p1`; cmdline came from the card; the guest has exactly `mmcblk0` and `sda`, the SSD with transport `usb` and 8G"#,
};

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

/// The scenario `sd-boot-bullseye`, in [`super::all`]'s order.
pub const SD_BOOT_BULLSEYE: Scenario = Scenario {
    name: "sd-boot-bullseye",
    lane: Lane::Shared,
    run: bullseye,
    about: r#"the bullseye layout: boot partition at `/boot`, nothing at `/boot/firmware`; the machine, stopped through the scenario's monitor as its job starts (as a stalled emulator stands), is woken by the harness within a minute and the job finishes, the wake and the guest running again in `boot-01.serial.wake.txt`"#,
};

/// Bullseye layout: the boot partition is /boot itself. The same boot
/// proves that the harness wakes an emulator that stopped running
/// (`qemu::Running::wake`): the scenario stops the machine through its own
/// monitor as the job starts, as a stall leaves it, and the job must still
/// finish, with the wake in the boot's log.
pub fn bullseye(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("sd-boot-bullseye", &images.bullseye)
        .without_pimigrate()
        .build()?;
    let monitor = pi.monitor_socket()?;
    // The job says when it may be stopped, then gives the scenario's
    // half-second polling time to do it before the probe runs.
    let job = format!("touch \"$TESTBED/out/stop-me\"\nsleep 3\n{PROBE}");
    let mut stopped: Option<Instant> = None;
    let boot = pi.run_acting(&job, After::PowerOff, |share, _| {
        match stopped {
            None if share.dir.join("out/stop-me").exists() => {
                Qmp::connect(&monitor, Duration::from_secs(10))?.execute("stop", json!({}))?;
                stopped = Some(Instant::now());
            }
            // The harness wakes it after qemu::WAKE_AFTER; past that and
            // a margin, continue it here so the boot ends, and fail.
            Some(at) if at.elapsed() > WAKE_AFTER * 3 => {
                let mut qmp = Qmp::connect(&monitor, Duration::from_secs(10))?;
                if qmp.execute("query-status", json!({}))?["running"] == false {
                    qmp.execute("cont", json!({}))?;
                    bail!(
                        "the harness did not wake the stopped machine in {:.0?}",
                        at.elapsed()
                    );
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    ensure!(
        stopped.is_some(),
        "the machine was never stopped: the job did not start"
    );
    let wakes = std::fs::read_to_string(wake_log(&boot.record.serial_log)).unwrap_or_default();
    ensure!(
        wakes.contains("stopped and continued") && wakes.contains("ran again"),
        "the wake log of the stopped boot says {wakes:?}"
    );
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
