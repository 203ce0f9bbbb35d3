//! pimigrate's full move: `migrate --layout full --table mbr` onto a blank
//! USB SSD, power off, take the SD card out: the firmware stand-in boots
//! the SSD's FAT partition, root is the SSD's partition 2, `/boot/firmware`
//! its partition 1, and `verify` passes.

use super::pimigrate_bin::{self, IDS_UNIQUE};
use super::setup::{fact, migrate, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::mbr::{self, Mbr};
use crate::{fat, After, ImageSet};
use anyhow::{ensure, Context, Result};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, .. } = Setup::new("migrate-full", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();

    let f = migrate(
        &mut pi,
        "TB-SSD",
        "--layout full --table mbr",
        After::PowerOff,
    )?;
    let disk_id = fact(&f, "plan_disk_id")?;
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    let boot_partuuid = fact(&f, "plan_boot_partuuid")?;
    ensure!(
        boot_partuuid == format!("{disk_id}-01") && root_partuuid == format!("{disk_id}-02"),
        "the plan's boot/root PARTUUIDs are {boot_partuuid}/{root_partuuid} on disk {disk_id}"
    );
    let mbr = Mbr::read(&ssd)?.context("the SSD has no MBR after the migration")?;
    ensure!(
        format!("{:08x}", mbr.signature) == disk_id,
        "SSD signature {:08x}, the plan's {disk_id}",
        mbr.signature
    );
    let ssd_boot = mbr::partition_of(&ssd, 1)?;
    let cmdline = fat::read(&ssd, &ssd_boot, "cmdline.txt")?
        .context("the SSD's boot partition has no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={root_partuuid} ")),
        "the SSD's cmdline.txt does not name {root_partuuid}: {cmdline:?}"
    );

    // Without the SD card.
    pi.detach("sd")?;
    let check = format!(
        r#"{}{PROBE}{IDS_UNIQUE}
set +e
pimigrate verify --no-bench
echo "verify_status=$?"
"#,
        pimigrate_bin::find_disk("TB-SSD")
    );
    let second = pi.run(&check, After::PowerOff)?;
    ensure!(
        second.spec.disk == "ssd",
        "the firmware should boot the SSD: {:?}",
        second.spec
    );
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    let target = f.get("target").context("no target")?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    expect_fact(&f, "boot_firmware", &format!("{target}1"))?;
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    Ok(())
}
