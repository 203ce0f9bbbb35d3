//! The power-cut family's root-only move on the x86 guest
//! ([`crate::machine::power`] judges each cut): a migration to a USB SSD (MBR)
//! that loses its power at every phase in turn, each boot after a cut
//! carrying it on with `migrate --resume` until the next one, on one set
//! of disks (a cut's boot is also the proof that the cut before it left a
//! Pi that boots).
//!
//! `power-cut-migrate` cuts where pimigrate's own registry of fail points
//! says a cut leaves a state of its own ([`MIGRATE_POWER_CUTS`], which
//! says for every other point of the migration which cut covers it and
//! why): the partition table, mkfs, a named file of the copy with a random
//! moment in the copy before it and another in the resumed copy after it,
//! after the copy (journaled) while the target's files are edited,
//! cmdline.txt's backup renamed into place, the swap of cmdline.txt (its
//! temporary file, its rename), and the swap flushed but not yet
//! journaled: the SD root boots after every cut but the last,
//! which must boot the SSD. There `migrate --resume` completes the journal,
//! `verify` passes, and `rollback` puts the SD card's cmdline.txt back
//! byte for byte, so that the SD root boots again. The copy made across
//! the cuts is compared with the SD card's root by `rsync -naHAXc` from
//! the host.

use super::{Lane, Scenario};
use crate::host::mbr::Mbr;
use crate::host::{fat, inspect};
use crate::machine::pimigrate_bin::{self, IDS_UNIQUE, JOURNAL_FACTS};
use crate::machine::power::{CutAt, PowerCuts, Root};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, ImageSet};
use anyhow::{ensure, Context, Result};
use pimigrate::failpoint::{PowerCut, MIGRATE_POWER_CUTS};
use std::time::Duration;

/// The migration the family interrupts.
const MIGRATE: &str = "pimigrate migrate --target \"$target\" --yes --no-trial --table mbr";
const RESUME: &str = "pimigrate migrate --resume --yes";

/// What pimigrate prints as the copy starts; a random cut comes within
/// [`INTO_THE_COPY`] of it, well inside the copy (which takes far longer
/// under emulation).
const COPY_STEP: &str = "==> copying the root filesystem";
const INTO_THE_COPY: Duration = Duration::from_secs(8);

/// The file of the copy at whose copying the cut in the copy holds
/// pimigrate: well inside the copy (the guest's root has tens of thousands).
const MID_COPY_FILE: u32 = 2000;

/// The cuts, in order, each in the resume after the one before: held at
/// every point [`MIGRATE_POWER_CUTS`] marks for a cut, the one in the copy
/// at its [`MID_COPY_FILE`]-th file, with a random moment in the copy
/// before it and one in the copy it resumes after it. Each is labelled by
/// its point.
fn cuts() -> Vec<(String, CutAt)> {
    let random = |label: &str| {
        let at = CutAt::Random {
            step: COPY_STEP,
            within: INTO_THE_COPY,
        };
        (label.to_string(), at)
    };
    let mut cuts = Vec::new();
    for (point, cut) in MIGRATE_POWER_CUTS {
        match cut {
            PowerCut::Here => cuts.push((point.to_string(), CutAt::point(point))),
            PowerCut::InTheCopy => {
                let held = format!("{point}@{MID_COPY_FILE}");
                cuts.push(random("a random moment in the copy"));
                cuts.push((held.clone(), CutAt::Point(held)));
                cuts.push(random("a random moment in the resumed copy"));
            }
            PowerCut::SameAs { .. } => {}
        }
    }
    cuts
}

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "power-cut-migrate",
    lane: Lane::Shared,
    run: migrate,
    about: r#"a root-only move to a blank USB SSD (`migrate --no-trial --table mbr`, found by serial `TB-SSD`) whose power is cut ten times on one set of disks (`pi_testbed::machine::power`, [internals/migrate.md](../internals/migrate.md#power-cuts)): held (`PIMIGRATE_FAILPOINT=name:stop`) at the points pimigrate's registry of fail points marks for a cut (`failpoint::MIGRATE_POWER_CUTS`, which names the cut that covers each other point of the migration, and why), which are `after-table`, `after-mkfs`, `copy-file@2000`, `after-target-edits`, `boot-backup-after-rename` (the target's edits and the journal's copy there done and journaled in the same resume), `boot-after-temp`, `boot-after-rename` and `source-boot-written`, and twice at a random moment within 8 s of the copy's start (the first copy and the one resumed after `copy-file@2000`); after each cut, from the host: `fsck.fat -n` of the SD card's boot partition and `e2fsck -fn` of its root (the journal replayed first) find nothing, every backup the journal names is whole, `cmdline.txt` and the journal agree on the root that must boot; each next boot comes up there and `migrate --resume --yes` carries on to the next cut: the SD root until the swap is flushed, the SSD after `source-boot-written` (the swap flushed, the journal not told). Then, from the host with the machine off: `rsync -naHAXc --numeric-ids` of the SD root and the SSD's root lists nothing but what a running system rewrites (`RUNTIME_FILES` in `src/machine/power.rs`) and what the plan left out, the SSD's MBR signature is the plan's, the SD card's `cmdline.txt` names the new root and its `.pimigrate-backup` is the pristine one, the SSD's fstab names it. On the SSD's root: `/boot/firmware` still `mmcblk0p1`, `/proc/cmdline` and fstab name the plan's PARTUUID, ids unique, `migrate --resume --yes` exits 0 and the journal then holds `source-boot-edited`, the plan counted at least 90 % of the files `find / -xdev` sees on the copy, `verify --no-bench` exits 0, `rollback --yes` exits 0; the next boot: root `mmcblk0p2`, `cmdline.txt` byte-identical to the pristine card's. Every boot file of every cut is the original or the migrated version; it prints `power cuts: 10 cut, 10 booted, 10 resumed, 0 repaired by fsck`"#,
};

pub fn migrate(images: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = Setup::new("power-cut-migrate", &images.bookworm)
        .usb_ssd()
        .build()?;
    let ssd = pi.disk("ssd")?.image.clone();
    let pristine = fat::read(&sd, &sd_boot, "cmdline.txt")?
        .context("the pristine SD card has no cmdline.txt")?;
    let mut cuts = PowerCuts::new(pi, "power-cut-migrate")?;
    let find = pimigrate_bin::find_disk("TB-SSD");
    let every_cut = self::cuts();
    for (n, (label, at)) in every_cut.iter().enumerate() {
        let (prelude, command) = if n == 0 {
            (find.as_str(), MIGRATE)
        } else {
            ("", RESUME)
        };
        cuts.cut(label, prelude, command, at.clone())?;
        // The swap flushed, the journal not yet told: the SSD must boot.
        let last = n + 1 == every_cut.len();
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
    sd_boot: &crate::host::mbr::Partition,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What the scenario says of itself names each held cut, in order, and
    /// their number: a point the registry marks for a cut is said there.
    #[test]
    fn the_about_names_every_cut() {
        let all = cuts();
        let mut rest = SCENARIO.about;
        for (_, at) in &all {
            if let CutAt::Point(point) = at {
                let named = format!("`{point}`");
                let at = rest
                    .find(&named)
                    .unwrap_or_else(|| panic!("the about does not name {named} where it is cut"));
                rest = &rest[at + named.len()..];
            }
        }
        let n = all.len();
        let tally = format!("power cuts: {n} cut, {n} booted, {n} resumed");
        assert!(
            SCENARIO.about.contains(&tally),
            "the about does not say {tally:?}"
        );
    }
}
