//! pimigrate's own root-only move, in the guest: `migrate --no-trial` onto
//! a blank USB SSD (MBR), reboot onto it, `verify`; then `rollback` from the
//! migrated system and a reboot back onto the SD card, whose `cmdline.txt`
//! must be byte-identical to the pristine one.

use super::pimigrate_bin::{self, IDS_UNIQUE};
use super::setup::{fact, migrate, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::mbr::Mbr;
use crate::{fat, inspect, After, ImageSet};
use anyhow::{ensure, Context, Result};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new("migrate-root-only", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();
    let pristine = fat::read(&sd, &sd_boot, "cmdline.txt")?
        .context("the pristine SD card has no cmdline.txt")?;

    // Boot 1: migrate, then reboot onto the SSD.
    let f = migrate(&mut pi, "TB-SSD", "--no-trial --table mbr", After::Reboot)?;
    // The plan's scan of the live root counted what `find -xdev` sees
    // (a scan that stopped at the first mount point once planned a root
    // of 4 KiB, and its space check could not refuse a small disk).
    let counted = |name: &str| -> Result<u64> {
        f.get(name)
            .with_context(|| format!("no {name}"))?
            .parse()
            .with_context(|| format!("{name} is not a number"))
    };
    let (planned, found) = (counted("plan_copy_files")?, counted("root_files")?);
    ensure!(
        planned * 10 >= found * 9 && found > 1000,
        "the plan counted {planned} files of the live root; find -xdev counts {found}"
    );
    let disk_id = fact(&f, "plan_disk_id")?;
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    ensure!(
        root_partuuid == format!("{disk_id}-01"),
        "the plan's root PARTUUID {root_partuuid} is not partition 1 of disk {disk_id}"
    );

    // From the host, after the reboot that ended boot 1: what the
    // migration wrote.
    let mbr = Mbr::read(&ssd)?.context("the SSD has no MBR after the migration")?;
    ensure!(
        format!("{:08x}", mbr.signature) == disk_id,
        "SSD signature {:08x}, the plan's {disk_id}",
        mbr.signature
    );
    let migrated = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        migrated.contains(&format!("root=PARTUUID={root_partuuid} ")),
        "the SD card's cmdline.txt does not name the new root {root_partuuid}: {migrated:?}"
    );
    let backup = fat::read(&sd, &sd_boot, "cmdline.txt.pimigrate-backup")?
        .context("no cmdline.txt.pimigrate-backup on the SD card")?;
    ensure!(
        backup == pristine,
        "the backup is not the pristine cmdline.txt: {backup:?} vs {pristine:?}"
    );
    let fstab = inspect::ext4_read(&ssd, 1, "/etc/fstab")?;
    ensure!(
        fstab.contains(&format!("PARTUUID={root_partuuid}")),
        "the SSD's fstab does not name {root_partuuid}:\n{fstab}"
    );

    // Boot 2: on the SSD's root, the boot partition still the SD card's;
    // then roll back from the migrated system, and reboot.
    let check = format!(
        r#"{}{PROBE}{IDS_UNIQUE}
echo "fstab_root=$(findmnt -s -no SOURCE /)"
set +e
pimigrate verify --no-bench
echo "verify_status=$?"
pimigrate rollback --yes
echo "rollback_status=$?"
"#,
        pimigrate_bin::find_disk("TB-SSD")
    );
    let second = pi.run(&check, After::Reboot)?;
    ensure!(
        second.spec.disk == "sd",
        "the firmware should still boot the SD card: {:?}",
        second.spec
    );
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    expect_fact(&f, "rollback_status", "0").with_context(|| out.stdout.clone())?;
    let ssd_part1 = format!("{}1", f.get("target").context("no target")?);
    expect_fact(&f, "root", &ssd_part1)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    expect_fact(&f, "fstab_root", &format!("PARTUUID={root_partuuid}"))?;
    let cmdline = f.get("cmdline").context("no cmdline")?;
    ensure!(
        cmdline
            .split_whitespace()
            .any(|w| w == format!("root=PARTUUID={root_partuuid}")),
        "/proc/cmdline has not root=PARTUUID={root_partuuid}: {cmdline}"
    );

    // Boot 3: on the SD card again.
    let third = pi.run(PROBE, After::PowerOff)?;
    let f = facts(&third.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    let restored = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        restored == pristine,
        "cmdline.txt after rollback is {restored:?}, pristine {pristine:?}"
    );
    Ok(())
}
