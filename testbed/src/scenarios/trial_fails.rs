//! A trial boot that never comes up: a root-only move to a USB SSD with
//! `--trial always`, the agent reboots with `"0 tryboot"`, and the SSD is no
//! longer on the bus for that boot. That is how a trial most often fails for
//! users: a bus-powered SSD that browns out, a bridge that does not enumerate
//! at boot, a cable that came loose (PI-FACTS, "USB and power trouble"); it
//! is also the failed trial the migration issue names. The initramfs waits
//! for the new root, gives up, and the user pulls the plug.
//!
//! The next power cycle must boot the SD card exactly as before (config.txt,
//! root mmcblk0p2, cmdline.txt byte-identical); `verify` there fails and says
//! how to roll back; `rollback` leaves the SD's boot partition holding
//! exactly what it held before the migration, and a last boot confirms it.

use super::setup::{fact, migrate, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::{fat, After, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;

/// What the initramfs prints when the root device never shows up (Debian's
/// initramfs-tools), any one of which means the trial is lost.
const GAVE_UP: [&str; 3] = [
    "Gave up waiting for root file system device",
    "does not exist.  Dropping to a shell",
    "Rebooting automatically due to panic",
];

/// The files on the SD card's boot partition, names and bytes.
type BootFiles = BTreeMap<String, Vec<u8>>;

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new("trial-fails", &images.bookworm)
        .usb_ssd()
        .build()?;
    let scratch = pi.work.join("fat-snapshot");
    let sd_files = || fat::snapshot(&sd, &sd_boot, &scratch);
    let pristine = sd_files()?;
    let pristine_cmdline = pristine
        .get("cmdline.txt")
        .context("the pristine SD card has no cmdline.txt")?
        .clone();

    let root_partuuid = migrate_with_trial(&mut pi)?;
    trial_files_in_place(&sd_files()?, &pristine_cmdline)?;
    trial_without_the_ssd(&mut pi, &root_partuuid)?;
    verify_and_roll_back_on_the_sd(&mut pi)?;
    let diff = fat::snapshot_diff(&pristine, &sd_files()?);
    ensure!(
        diff.is_empty(),
        "after rollback the SD card's boot partition differs from before the migration: {diff:?}"
    );
    sd_boots_its_own_root(&mut pi, &pristine_cmdline)
}

/// Boot 1: migrate with a trial; the agent reboots into it. Returns the
/// new root's PARTUUID.
fn migrate_with_trial(pi: &mut Pi) -> Result<String> {
    let f = migrate(pi, "TB-SSD", "--table mbr --trial always", After::Tryboot)?;
    fact(&f, "plan_root_partuuid")
}

/// A trial migration leaves cmdline.txt as it was and adds tryboot.txt.
fn trial_files_in_place(trial_files: &BootFiles, pristine_cmdline: &[u8]) -> Result<()> {
    ensure!(
        trial_files.get("cmdline.txt").map(Vec::as_slice) == Some(pristine_cmdline),
        "a trial migration changed cmdline.txt before the trial"
    );
    ensure!(
        trial_files.contains_key("tryboot.txt"),
        "the trial migration left no tryboot.txt on the SD card: {:?}",
        trial_files.keys().collect::<Vec<_>>()
    );
    Ok(())
}

/// Boot 2: the trial, with the SSD gone. The job would report if the
/// trial came up anyway; the power is cut once the initramfs gives up.
fn trial_without_the_ssd(pi: &mut Pi, root_partuuid: &str) -> Result<()> {
    pi.detach("ssd")?;
    pi.share().set_job(PROBE, After::Stay)?;
    let trial =
        pi.boot_once(&mut |_, console: &str| GAVE_UP.iter().any(|m| console.contains(m)))?;
    ensure!(
        trial.spec.tryboot && trial.spec.config_file == "tryboot.txt",
        "the boot after the trial reboot read {} (tryboot {})",
        trial.spec.config_file,
        trial.spec.tryboot
    );
    ensure!(
        trial
            .spec
            .cmdline
            .contains(&format!("root=PARTUUID={root_partuuid}")),
        "the trial boot's command line does not name the SSD's root {root_partuuid}: {}",
        trial.spec.cmdline
    );
    let console = trial.record.console();
    ensure!(
        GAVE_UP.iter().any(|m| console.contains(m)),
        "the trial boot ended ({:?}) without the initramfs giving up on its root; see {}",
        trial.record.ending,
        trial.record.serial_log.display()
    );
    // Cut by the harness, or rebooted by the initramfs itself (the
    // testbed's panic=-1, as cmdline.txt names none) before the cut
    // landed, or reset by a kernel panic: either way no system.
    ensure!(
        matches!(
            trial.record.ending,
            Ending::Killed | Ending::Reboot | Ending::Reset
        ),
        "the failed trial ended {:?}",
        trial.record.ending
    );
    ensure!(
        !pi.share().started(),
        "the trial boot without its root still ran the job"
    );
    ensure!(!pi.tryboot_pending(), "the trial flag survived the trial");
    Ok(())
}

/// Boot 3: power on again: the SD card as before. verify fails there and
/// says how to roll back; rollback removes the trial files.
fn verify_and_roll_back_on_the_sd(pi: &mut Pi) -> Result<()> {
    let job = format!(
        r#"{PROBE}
set +e
pimigrate verify --no-bench > "$TESTBED/out/verify.txt" 2>&1
echo "verify_status=$?"
pimigrate rollback --yes
echo "rollback_status=$?"
"#
    );
    let back = pi.run(&job, After::PowerOff)?;
    ensure!(
        back.spec.disk == "sd" && back.spec.config_file == "config.txt" && !back.spec.tryboot,
        "the power cycle after the failed trial booted {} from {}",
        back.spec.config_file,
        back.spec.disk
    );
    let out = back.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    let verify = std::fs::read_to_string(pi.share().dir.join("out/verify.txt"))
        .context("the guest left no verify output")?;
    // The share is emptied by the next boot; the log folder keeps it.
    std::fs::write(pi.logs.join("verify.txt"), &verify)?;
    let verify_status = f.get("verify_status").context("no verify_status")?;
    // 5: checks failed; 4: nothing to verify. Either must point at rollback.
    ensure!(
        verify_status == "5" || verify_status == "4",
        "verify on the SD card after a failed trial exited {verify_status}:\n{verify}"
    );
    ensure!(
        verify.contains("pimigrate rollback"),
        "verify after a failed trial does not say how to roll back:\n{verify}"
    );
    expect_fact(&f, "rollback_status", "0").with_context(|| out.stderr.clone())
}

/// Boot 4: the SD card's own root, from config.txt, with its own command
/// line.
fn sd_boots_its_own_root(pi: &mut Pi, pristine_cmdline: &[u8]) -> Result<()> {
    let last = pi.run(PROBE, After::PowerOff)?;
    ensure!(
        last.spec.config_file == "config.txt",
        "the boot after rollback read {}",
        last.spec.config_file
    );
    let f = facts(&last.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    let cmdline = f.get("cmdline").context("no cmdline")?;
    let pristine_text = String::from_utf8_lossy(pristine_cmdline);
    // The firmware stand-in's own words come first, as a Pi's do.
    ensure!(
        cmdline.ends_with(pristine_text.trim()),
        "the last boot's /proc/cmdline {cmdline:?} is not the SD card's own {pristine_text:?}"
    );
    Ok(())
}
