//! The power-cut family on the x86 guest ([`crate::power`] judges each
//! cut): a root-only move to a USB SSD (MBR) whose migration loses its
//! power again and again, each boot after a cut carrying it on with
//! `migrate --resume` until the next one.
//!
//! - `power-cut-copy`: the early phases: the partition table, mkfs, a
//!   random moment in the copy, a named file of the copy, and after the
//!   copy (journaled) while the target's files are edited. Then what a
//!   root-only move must do once it ran through: the SSD boots, `verify`
//!   passes, `rollback` from there puts the SD card's cmdline.txt back
//!   byte for byte and the SD root boots.
//! - `power-cut-swap`: the SD card's last step: a random moment in the
//!   copy, the backup of cmdline.txt renamed into place, the swap of
//!   cmdline.txt (its temporary file, its rename) and the swap flushed but
//!   not yet journaled: that cut must boot the SSD, where `migrate
//!   --resume` completes the journal.
//!
//! Both end with the copy made across the cuts compared with the SD
//! card's root by `rsync -naHAXc` from the host.

use super::pimigrate_bin::{self, IDS_UNIQUE, JOURNAL_FACTS};
use super::setup::{fact, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::mbr::Mbr;
use crate::power::{CutAt, PowerCuts, Root};
use crate::{fat, inspect, After, ImageSet};
use anyhow::{ensure, Context, Result};
use std::time::Duration;

/// The migration the family interrupts.
const MIGRATE: &str = "pimigrate migrate --target \"$target\" --yes --no-trial --table mbr";
const RESUME: &str = "pimigrate migrate --resume --yes";

/// What pimigrate prints as the copy starts; a random cut comes within
/// [`INTO_THE_COPY`] of it, well inside the copy (which takes far longer
/// under emulation).
const COPY_STEP: &str = "==> copying the root filesystem";
const INTO_THE_COPY: Duration = Duration::from_secs(8);

pub fn copy(images: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = Setup::new("power-cut-copy", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();
    let pristine = fat::read(&sd, &sd_boot, "cmdline.txt")?
        .context("the pristine SD card has no cmdline.txt")?;
    let mut cuts = PowerCuts::new(pi, "power-cut-copy")?;
    let find = pimigrate_bin::find_disk("TB-SSD");
    cuts.cut(
        "partition table",
        &find,
        MIGRATE,
        CutAt::Point("after-table"),
    )?;
    cuts.cut("mkfs", "", RESUME, CutAt::Point("after-mkfs"))?;
    let random = CutAt::Random {
        step: COPY_STEP,
        within: INTO_THE_COPY,
    };
    cuts.cut("a random moment in the copy", "", RESUME, random)?;
    cuts.cut("mid-copy", "", RESUME, CutAt::Point("copy-file@2000"))?;
    // The copy is journaled as done: what it wrote must be on the SSD.
    cuts.cut(
        "after the copy",
        "",
        RESUME,
        CutAt::Point("after-target-edits"),
    )?;
    cuts.require(Root::Sd)?;

    // The resume that runs through, then a reboot onto the SSD.
    let boot = cuts.boot(&format!("{find}\n{RESUME}\n{JOURNAL_FACTS}"), After::Reboot)?;
    let f = facts(&boot.job_ok()?.stdout);
    cuts.settled("migrated")?;
    cuts.compare_roots(&ssd, 1)?;
    let root_partuuid = migrated_as_planned(&f, &ssd, &sd, &sd_boot, &pristine)?;

    // On the SSD's root, the boot partition still the SD card's; then
    // roll back from the migrated system, and reboot.
    let check = format!(
        r#"{find}{PROBE}{IDS_UNIQUE}
echo "fstab_root=$(findmnt -s -no SOURCE /)"
set +e
pimigrate verify --no-bench
echo "verify_status=$?"
pimigrate rollback --yes
echo "rollback_status=$?"
"#
    );
    let second = cuts.pi.run(&check, After::Reboot)?;
    ensure!(
        second.spec.disk == "sd",
        "the firmware should still boot the SD card: {:?}",
        second.spec
    );
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    expect_fact(&f, "rollback_status", "0").with_context(|| out.stdout.clone())?;
    let ssd_part1 = format!("{}1", fact(&f, "target")?);
    expect_fact(&f, "root", &ssd_part1)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    expect_fact(&f, "fstab_root", &format!("PARTUUID={root_partuuid}"))?;
    let cmdline = fact(&f, "cmdline")?;
    ensure!(
        cmdline
            .split_whitespace()
            .any(|w| w == format!("root=PARTUUID={root_partuuid}")),
        "/proc/cmdline has not root=PARTUUID={root_partuuid}: {cmdline}"
    );

    // On the SD card again, its cmdline.txt as it was.
    let mut pi = cuts.finish()?;
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

/// What the migration wrote, from the host: the plan's file count against
/// what `find -xdev` saw, the SSD's MBR signature, the SD card's new
/// cmdline.txt and its backup, the SSD's fstab. Returns the root PARTUUID.
fn migrated_as_planned(
    f: &std::collections::BTreeMap<String, String>,
    ssd: &std::path::Path,
    sd: &std::path::Path,
    sd_boot: &crate::mbr::Partition,
    pristine: &str,
) -> Result<String> {
    // The plan's scan of the live root counted what `find -xdev` sees
    // (a scan that stopped at the first mount point once planned a root
    // of 4 KiB, and its space check could not refuse a small disk).
    let counted = |name: &str| -> Result<u64> {
        fact(f, name)?
            .parse()
            .with_context(|| format!("{name} is not a number"))
    };
    let (planned, found) = (counted("plan_copy_files")?, counted("root_files")?);
    ensure!(
        planned * 10 >= found * 9 && found > 1000,
        "the plan counted {planned} files of the live root; find -xdev counts {found}"
    );
    let disk_id = fact(f, "plan_disk_id")?;
    let root_partuuid = fact(f, "plan_root_partuuid")?;
    ensure!(
        root_partuuid == format!("{disk_id}-01"),
        "the plan's root PARTUUID {root_partuuid} is not partition 1 of disk {disk_id}"
    );
    let mbr = Mbr::read(ssd)?.context("the SSD has no MBR after the migration")?;
    ensure!(
        format!("{:08x}", mbr.signature) == disk_id,
        "SSD signature {:08x}, the plan's {disk_id}",
        mbr.signature
    );
    let migrated = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        migrated.contains(&format!("root=PARTUUID={root_partuuid} ")),
        "the SD card's cmdline.txt does not name the new root {root_partuuid}: {migrated:?}"
    );
    let backup = fat::read(sd, sd_boot, "cmdline.txt.pimigrate-backup")?
        .context("no cmdline.txt.pimigrate-backup on the SD card")?;
    ensure!(
        backup == pristine,
        "the backup is not the pristine cmdline.txt: {backup:?} vs {pristine:?}"
    );
    let fstab = inspect::ext4_read(ssd, 1, "/etc/fstab")?;
    ensure!(
        fstab.contains(&format!("PARTUUID={root_partuuid}")),
        "the SSD's fstab does not name {root_partuuid}:\n{fstab}"
    );
    Ok(root_partuuid)
}

pub fn swap(images: &ImageSet) -> Result<()> {
    let Rig { pi, .. } = Setup::new("power-cut-swap", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();
    let mut cuts = PowerCuts::new(pi, "power-cut-swap")?;
    let find = pimigrate_bin::find_disk("TB-SSD");
    let random = CutAt::Random {
        step: COPY_STEP,
        within: INTO_THE_COPY,
    };
    cuts.cut("a random moment in the copy", &find, MIGRATE, random)?;
    // (The target's edits and the journal's copy there come before the
    // backup, in the same resume: the cuts after them find them journaled.)
    let points = [
        ("cmdline.txt's backup renamed", "boot-backup-after-rename"),
        ("the new cmdline.txt written", "boot-after-temp"),
        ("the new cmdline.txt renamed over", "boot-after-rename"),
    ];
    for (label, point) in points {
        cuts.cut(label, "", RESUME, CutAt::Point(point))?;
        // Nothing is flushed to the card's directory before these points.
        cuts.require(Root::Sd)?;
    }
    // The swap flushed, the journal not yet told: the SSD must boot.
    cuts.cut(
        "the swap flushed",
        "",
        RESUME,
        CutAt::Point("source-boot-written"),
    )?;
    cuts.require(Root::Target)?;

    let job = format!(
        r#"{PROBE}
set +e
{RESUME}
echo "resume_status=$?"
echo "journal_done=$(jq -c .done /var/lib/pimigrate/migration.json)"
pimigrate verify --no-bench
echo "verify_status=$?"
"#
    );
    let boot = cuts.boot(&job, After::PowerOff)?;
    let out = boot.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "resume_status", "0").with_context(|| out.stderr.clone())?;
    ensure!(
        fact(&f, "journal_done")?.contains("source-boot-edited"),
        "migrate --resume on the new root did not complete its journal: {}",
        fact(&f, "journal_done")?
    );
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    cuts.settled("migrated")?;
    cuts.compare_roots(&ssd, 1)?;
    cuts.finish()?;
    Ok(())
}
