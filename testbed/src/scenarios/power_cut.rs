//! The power-cut family's root-only move on the x86 guest
//! ([`crate::power`] judges each cut): a migration to a USB SSD (MBR)
//! that loses its power at every phase in turn, each boot after a cut
//! carrying it on with `migrate --resume` until the next one, on one set
//! of disks (a cut's boot is also the proof that the cut before it left a
//! Pi that boots).
//!
//! `power-cut-migrate` cuts at the partition table, mkfs, a random moment
//! in the copy, a named file of the copy, a second random moment in the
//! resumed copy, after the copy (journaled) while the target's files are
//! edited, cmdline.txt's backup renamed into place, the swap of
//! cmdline.txt (its temporary file, its rename), and the swap flushed but
//! not yet journaled: the SD root boots after every cut but the last,
//! which must boot the SSD. There `migrate --resume` completes the journal,
//! `verify` passes, and `rollback` puts the SD card's cmdline.txt back
//! byte for byte, so that the SD root boots again. The copy made across
//! the cuts is compared with the SD card's root by `rsync -naHAXc` from
//! the host.

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

/// The cuts, in order, each in the resume after the one before.
const CUTS: &[(&str, Cut)] = &[
    ("partition table", Cut::At("after-table")),
    ("mkfs", Cut::At("after-mkfs")),
    ("a random moment in the copy", Cut::IntoTheCopy),
    ("mid-copy", Cut::At("copy-file@2000")),
    ("a random moment in the resumed copy", Cut::IntoTheCopy),
    // The copy is journaled as done: what it wrote must be on the SSD.
    ("after the copy", Cut::At("after-target-edits")),
    // Nothing is flushed to the card's directory before these points.
    (
        "cmdline.txt's backup renamed",
        Cut::At("boot-backup-after-rename"),
    ),
    ("the new cmdline.txt written", Cut::At("boot-after-temp")),
    (
        "the new cmdline.txt renamed over",
        Cut::At("boot-after-rename"),
    ),
    // The swap flushed, the journal not yet told: the SSD must boot.
    ("the swap flushed", Cut::At("source-boot-written")),
];

#[derive(Clone, Copy)]
enum Cut {
    At(&'static str),
    IntoTheCopy,
}

pub fn migrate(images: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = Setup::new("power-cut-migrate", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();
    let pristine = fat::read(&sd, &sd_boot, "cmdline.txt")?
        .context("the pristine SD card has no cmdline.txt")?;
    let mut cuts = PowerCuts::new(pi, "power-cut-migrate")?;
    let find = pimigrate_bin::find_disk("TB-SSD");
    for (n, &(label, cut)) in CUTS.iter().enumerate() {
        let (prelude, command) = if n == 0 {
            (find.as_str(), MIGRATE)
        } else {
            ("", RESUME)
        };
        let at = match cut {
            Cut::At(point) => CutAt::Point(point),
            Cut::IntoTheCopy => CutAt::Random {
                step: COPY_STEP,
                within: INTO_THE_COPY,
            },
        };
        cuts.cut(label, prelude, command, at)?;
        let last = n + 1 == CUTS.len();
        cuts.require(if last { Root::Target } else { Root::Sd })?;
    }

    // With the machine off: the swap is what the migration settles on, the
    // copy faithful, the disks as planned.
    cuts.settled("migrated")?;
    cuts.compare_roots(&ssd, 1)?;
    let root_partuuid = migrated_as_planned(&cuts, &ssd, &sd, &sd_boot, &pristine)?;

    resume_verify_and_roll_back_on_the_ssd(&mut cuts, &find, &root_partuuid)?;

    // On the SD card again, its cmdline.txt as it was.
    let mut pi = cuts.finish()?;
    let last = pi.run(PROBE, After::PowerOff)?;
    ensure!(
        last.spec.disk == "sd",
        "the firmware should boot the SD card: {:?}",
        last.spec
    );
    let f = facts(&last.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    let restored = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        restored == pristine,
        "cmdline.txt after rollback is {restored:?}, pristine {pristine:?}"
    );
    Ok(())
}

/// On the SSD's root, the boot partition still the SD card's: the
/// resume completes the journal; then verify, and roll back from there.
fn resume_verify_and_roll_back_on_the_ssd(
    cuts: &mut PowerCuts,
    find: &str,
    root_partuuid: &str,
) -> Result<()> {
    let job = format!(
        r#"{find}{PROBE}{IDS_UNIQUE}
echo "fstab_root=$(findmnt -s -no SOURCE /)"
set +e
{RESUME}
echo "resume_status=$?"
echo "journal_done=$(jq -c .done /var/lib/pimigrate/migration.json)"
{JOURNAL_FACTS}
pimigrate verify --no-bench
echo "verify_status=$?"
pimigrate rollback --yes
echo "rollback_status=$?"
"#
    );
    let boot = cuts.boot(&job, After::Reboot)?;
    let out = boot.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "resume_status", "0").with_context(|| out.stderr.clone())?;
    ensure!(
        fact(&f, "journal_done")?.contains("source-boot-edited"),
        "migrate --resume on the new root did not complete its journal: {}",
        fact(&f, "journal_done")?
    );
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
    copied_every_file(&f)?;
    Ok(())
}

/// The plan's scan of the live root counted what `find -xdev` sees on the
/// copy (a scan that stopped at the first mount point once planned a root
/// of 4 KiB, and its space check could not refuse a small disk).
fn copied_every_file(f: &std::collections::BTreeMap<String, String>) -> Result<()> {
    let counted = |name: &str| -> Result<u64> {
        fact(f, name)?
            .parse()
            .with_context(|| format!("{name} is not a number"))
    };
    let (planned, found) = (counted("plan_copy_files")?, counted("root_files")?);
    ensure!(
        planned * 10 >= found * 9 && found > 1000,
        "the plan counted {planned} files of the live root; find -xdev counts {found} on the copy"
    );
    Ok(())
}

/// What the migration wrote, read from the host with the machine off:
/// the SSD's MBR signature and fstab, the SD card's new cmdline.txt and
/// its backup, against the plan in the SD card's journal. Returns the
/// root PARTUUID.
fn migrated_as_planned(
    cuts: &PowerCuts,
    ssd: &std::path::Path,
    sd: &std::path::Path,
    sd_boot: &crate::mbr::Partition,
    pristine: &str,
) -> Result<String> {
    let journal = cuts.journal()?.context("no journal on the SD card")?;
    let disk_id = journal["plan"]["table"]["disk_id"]
        .as_str()
        .context("the journal's plan has no disk id")?
        .to_string();
    let root_partuuid = cuts
        .plan_root_partuuid()?
        .context("the journal's plan has no root PARTUUID")?;
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
