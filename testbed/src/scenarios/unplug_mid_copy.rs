//! The USB target pulled out while pimigrate copies onto it: a root-only
//! move to a USB SSD, and as soon as the guest reports the copy under way
//! the disk is unplugged through QEMU's monitor (`device_del`), the guest
//! keeping on running as a Pi would. pimigrate must fail naming the disk,
//! leave the SD card's boot files alone and the journal at the last step it
//! finished; the Pi boots its SD card again, and with the disk plugged back
//! in, `migrate --resume` (what pimigrate advised) completes the move, which
//! then boots on the SSD.

use super::{Lane, Scenario};
use crate::host::fat;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::qmp::Unplug;
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Boot, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::time::{Duration, Instant};

/// What pimigrate prints when it starts the copy (on stderr, which the
/// agent writes straight into the share, so the host sees it at once).
const COPY_STEP: &str = "==> copying the root filesystem";

/// How long after the copy step starts the disk is pulled: long enough for
/// the copier to be writing, far shorter than the minutes the copy takes.
const INTO_THE_COPY: Duration = Duration::from_secs(5);

/// The journal's finished steps, and what is left mounted or attached.
const AFTER_FAILURE: &str = r#"
echo "journal_done=$(jq -c .done /var/lib/pimigrate/migration.json)"
echo "target_present=$([ -b "$target" ] && echo yes || echo no)"
echo "mounts_left=$(findmnt -rn -o TARGET | grep -c '^/run/pimigrate' || true)"
"#;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "unplug-mid-copy",
    lane: Lane::Shared,
    run,
    about: r#"`pimigrate migrate --no-trial --table mbr` to a blank USB SSD (UAS); 5 s after pimigrate's stderr (written straight into the share) says `copying the root filesystem`, the harness unplugs the SSD through QEMU's monitor (`Pi::prepare_unplug`, QMP `device_del` of `uas-ssd`, waiting for `DEVICE_DELETED`) while the guest keeps running. pimigrate exits 1 (not the 124 of a hang) with an error naming `/dev/sda` as unplugged and advising `pimigrate migrate --resume`; the journal's `done` is `["partitioned","formatted"]`, no `/run/pimigrate` mount is left, and every file of the SD card's boot partition is byte-identical to before. Boot 2, the SSD plugged in again: root `mmcblk0p2` (the SD card boots as before), then `pimigrate migrate --resume --yes` finishes; boot 3: root is the SSD's partition 1, `verify --no-bench` exits 0, the SD card's `cmdline.txt` names the plan's PARTUUID"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new("unplug-mid-copy", &images.bookworm)
        .usb_ssd()
        .build()?;
    let unplug = pi.prepare_unplug("ssd")?;
    let scratch = pi.work.join("fat-snapshot");
    let pristine = fat::snapshot(&sd, &sd_boot, &scratch)?;

    let first = migrate_and_unplug(&mut pi, &unplug)?;
    let target = failed_naming_the_disk(&first)?;
    let after = fat::snapshot(&sd, &sd_boot, &scratch)?;
    let diff = fat::snapshot_diff(&pristine, &after);
    ensure!(
        diff.is_empty(),
        "the SD card's boot partition changed although the migration failed: {diff:?}"
    );

    // Boot 2: disk plugged in again; the Pi comes up on its SD card, and
    // the advised `--resume` finishes the move.
    let resume = format!("{PROBE}\npimigrate migrate --resume --yes\n{JOURNAL_FACTS}");
    let second = pi.run(&resume, After::Reboot)?;
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    let root_partuuid = fact(&f, "plan_root_partuuid")?;

    // Boot 3: on the SSD's root, which verify accepts.
    let check =
        format!("{PROBE}\nset +e\npimigrate verify --no-bench\necho \"verify_status=$?\"\n");
    let third = pi.run(&check, After::PowerOff)?;
    let out = third.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", &format!("{target}1"))?;
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={root_partuuid} ")),
        "the resumed migration's cmdline.txt does not name {root_partuuid}: {cmdline:?}"
    );
    Ok(())
}

/// Boot 1: migrate; the disk goes away a few seconds into the copy.
/// `timeout`: a pimigrate hung on a vanished disk fails here, not at the
/// boot's time limit.
fn migrate_and_unplug(pi: &mut Pi, unplug: &Unplug) -> Result<Boot> {
    let job = format!(
        r#"{find}
set +e
timeout 1200 pimigrate migrate --target "$target" --yes --no-trial --table mbr
echo "migrate_status=$?"
set -e
{AFTER_FAILURE}"#,
        find = pimigrate_bin::find_disk("TB-SSD")
    );
    let mut copy_seen: Option<Instant> = None;
    let mut unplugged_at: Option<Instant> = None;
    let first = pi.run_acting(&job, After::PowerOff, |share, _| {
        if unplugged_at.is_some() {
            return Ok(());
        }
        if copy_seen.is_none() {
            let stderr = std::fs::read_to_string(share.dir.join("out/stderr")).unwrap_or_default();
            if stderr.contains(COPY_STEP) {
                copy_seen = Some(Instant::now());
            }
        }
        if copy_seen.is_some_and(|t| t.elapsed() >= INTO_THE_COPY) {
            unplug.now()?;
            eprintln!("testbed: unplug-mid-copy: disk ssd unplugged during the copy");
            unplugged_at = Some(Instant::now());
        }
        Ok(())
    })?;
    ensure!(
        unplugged_at.is_some(),
        "the copy never started (no {COPY_STEP:?} on pimigrate's stderr), so nothing was unplugged:\n{}",
        first.job_ok()?.stderr
    );
    Ok(first)
}

/// The migration whose disk was pulled failed, naming the disk and how to
/// carry on, with its journal after the format and nothing left mounted;
/// the guest powered off. Returns the target's device.
fn failed_naming_the_disk(first: &Boot) -> Result<String> {
    let out = first.job_ok()?;
    ensure!(
        first.record.ending == Ending::PowerOff,
        "the guest did not power off after the failed migration: {:?}",
        first.record.ending
    );
    let f = facts(&out.stdout);
    let target = fact(&f, "target")?;
    let status = f.get("migrate_status").context("no migrate_status")?;
    ensure!(
        status != "0" && status != "124",
        "pimigrate should fail when its target is unplugged (status {status}; 124 is a hang):\n{}",
        out.stderr
    );
    expect_fact(&f, "target_present", "no")?;
    let error = out
        .stderr
        .lines()
        .filter(|l| l.contains("rror"))
        .collect::<Vec<_>>()
        .join("\n");
    ensure!(
        error.contains(&target) && error.contains("unplugged"),
        "pimigrate's error does not say that {target} was unplugged:\n{}",
        out.stderr
    );
    ensure!(
        out.stderr.contains("pimigrate migrate --resume"),
        "pimigrate did not say how to carry on:\n{}",
        out.stderr
    );
    // Partitioned and formatted, not copied: the journal says where it stopped.
    expect_fact(&f, "journal_done", r#"["partitioned","formatted"]"#)?;
    expect_fact(&f, "mounts_left", "0")?;
    Ok(target)
}
