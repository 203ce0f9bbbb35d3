//! `unattended-full`: a full move on a Pi 4 with Raspberry Pi OS's
//! bootloader tools. A bootloader too old for a one-shot trial of the new
//! drive (refused at plan time; the owner stages the update it names),
//! that update's write cut short by a power cut (recovery.bin writes it at
//! the next boot), then the trials of [`matrix::FULL`]: the new drive's
//! boot partition broken, the new drive gone. Last, on the SD card:
//! `verify` says so, `rollback` puts the bootloader's config back.

use super::chain::{self, Chain, AGENT_RUNS_JOB, BOOT_LIMIT, WHAT_IT_SAYS};
use super::matrix;
use super::tally;
use crate::firmware::bootloader::Bootloader;
use crate::firmware::eeprom::Board;
use crate::firmware::recovery;
use crate::host::fat;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::probe::{expect_fact, facts};
use crate::machine::rig::{fact, Rig, Setup};
use crate::scenarios::{Lane, Scenario};
use crate::{After, Ending, ImageSet};
use anyhow::{bail, ensure, Result};
use std::time::{Duration, Instant};

/// The scenario `unattended-full`, in [`crate::scenarios::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: NAME,
    lane: Lane::Shared,
    run,
    about: r#"[the failure matrix](#unattended), full move, the x86 guest as a Pi 4 with Raspberry Pi OS's tools, its bootloader the release but built 2023-11-14 (`set_build_timestamp`): `plan --layout full --trial device --boot-order apply --auto-commit` is refused (`device-trial-unavailable`), and `rpi-eeprom-update -a`, what the refusal advises, stages the update; the power is cut while recovery.bin writes it (`Pi::power_cut_in_recovery`: nothing written, the files stay); at the next power-on recovery.bin writes it and the SD card's system migrates (`--trial device --auto-commit`), which stages the `[tryboot]` order for the reboot after; the new drive's boot partition loses `start4.elf` and the trial starts: the bootloader passes over the SSD and starts the SD card (`trial-did-not-come-up`); mended, the SSD unplugged for the next trial: the same; `verify` exits 5 and `rollback` there"#,
};

const NAME: &str = "unattended-full";

/// Runs a command as on the Pi the stand-in plays (its device tree, the
/// official bootloader tools).
const TB: &str = "tb=\"$TESTBED/pi/bin/tb-as-pi\"\n";
const START_DEVICE_TRIAL: &str = "\"$TESTBED/pi/bin/tb-as-pi\" pimigrate migrate --resume --reboot";
/// A Pi 4 bootloader from 2023-11-14: it boots USB, but has no EEPROM
/// `[tryboot]` section (2024-05-17) for a one-shot boot of another drive.
const OLD_BOOTLOADER: u32 = 1_700_000_000;

/// The USB SSD's serial, where the job finds the new drive.
const SSD_SERIAL: &str = "TB-SSD";
/// The migration asked for, refused first.
const MIGRATE: &str = "--layout full --table mbr --boot-order apply --trial device --auto-commit";

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new(NAME, &images.bookworm).usb_ssd().build()?;
    pi.raspberry_pi_os_tools()?;
    let released = Bootloader::release(Board::Pi4)?.config().to_string();
    pi.bootloader_mut()?
        .set_config(&released)
        .set_build_timestamp(OLD_BOOTLOADER);
    let mut chain = Chain::new(pi, NAME);
    refused_for_the_old_bootloader(&mut chain)?;
    update_cut_short_then_migrate(&mut chain)?;
    start_the_first_trial(&mut chain)?;

    // The trials fail; the SD card's system, back by itself, says why and
    // mends it. The new drive gone at the last: there, verify, and
    // rollback puts the bootloader's config back.
    let ending = format!(
        "{TB}set +e\n\"$tb\" pimigrate verify --no-bench > \"$TESTBED/out/verify.txt\" 2>&1\n\
         echo \"verify_status=$?\"\nset -e\n\"$tb\" pimigrate rollback --yes\n"
    );
    let back = chain.run_matrix(matrix::FULL, &ending)?;
    chain::verify_ended(&chain, &back, "5")?;
    ensure!(
        fat::read(&sd, &sd_boot, "tryboot.txt")?.is_none(),
        "a full move's trial files are the new drive's, never the SD card's"
    );
    Ok(())
}

/// Boot 1: the bootloader is too old for a one-shot trial of the new
/// drive: refused at plan time, nothing written. The owner does what the
/// refusal says: rpi-eeprom-update -a stages the update.
fn refused_for_the_old_bootloader(chain: &mut Chain) -> Result<()> {
    let failure = "a bootloader too old for a trial";
    let find = pimigrate_bin::find_disk(SSD_SERIAL);
    let job = format!(
        "{find}{TB}set +e\n\"$tb\" pimigrate plan --target \"$target\" {MIGRATE} --json > \"$TESTBED/out/refused.json\"\n\
         echo \"plan_status=$?\"\nset -e\n\
         echo \"refusal=$(jq -r '[.reasons[].code] | join(\",\")' \"$TESTBED/out/refused.json\")\"\n\
         BOOTFS=/boot/firmware \"$tb\" rpi-eeprom-update -a > \"$TESTBED/out/update.txt\" 2>&1\n"
    );
    let boot = chain.pi.run(&job, After::Reboot)?;
    let f = facts(&boot.job_ok()?.stdout);
    let refused = expect_fact(&f, "plan_status", "3").and_then(|()| {
        let codes = fact(&f, "refusal")?;
        ensure!(
            codes.contains("device-trial-unavailable"),
            "refused, but not for the bootloader: {codes}"
        );
        ensure!(
            recovery::staged(chain.pi.disks())?,
            "rpi-eeprom-update -a staged nothing; see {}",
            chain.pi.share().dir.join("out/update.txt").display()
        );
        Ok(())
    });
    match refused {
        Ok(()) => tally::came_back(
            NAME,
            &format!("{failure} (refused at plan time)"),
            Duration::ZERO,
        ),
        Err(e) => {
            tally::needed_hands(NAME, failure, &format!("{e:#}"));
            return Err(e);
        }
    }
    Ok(())
}

/// The update's write cut short by a power cut; at the next power-on
/// recovery.bin writes it, and the SD card's system migrates.
fn update_cut_short_then_migrate(chain: &mut Chain) -> Result<()> {
    let failure = "the bootloader's staged update cut short (recovery.bin tries again)";
    let find = pimigrate_bin::find_disk(SSD_SERIAL);
    let started = Instant::now();
    chain.pi.power_cut_in_recovery()?;
    let job = format!(
        "{find}{TB}\"$tb\" pimigrate migrate --target \"$target\" --yes {MIGRATE}\n{JOURNAL_FACTS}"
    );
    chain.pi.share().set_job(&job, After::Reboot)?;
    let mut job_seen = None;
    chain.pi.boot_limit = Duration::from_secs(20 * 60);
    let boot = chain.pi.boot_through_faults(&mut |_, console: &str| {
        if job_seen.is_none() && console.contains(AGENT_RUNS_JOB) {
            job_seen = Some(Instant::now());
        }
        false
    })?;
    chain.pi.boot_limit = BOOT_LIMIT;
    let updated = chain
        .pi
        .bootloader()
        .is_some_and(|b| b.build_timestamp() > OLD_BOOTLOADER);
    if !updated || boot.job.is_none() {
        let why = format!(
            "after the cut the next boot did not write the update and run the SD card's system; see {}",
            chain.pi.logs.display()
        );
        tally::needed_hands(NAME, failure, &why);
        bail!(why);
    }
    tally::came_back(
        NAME,
        failure,
        job_seen.map_or(started.elapsed(), |t| t - started),
    );
    boot.job_ok()?;
    Ok(())
}

/// Boot 3: recovery.bin writes the `[tryboot]` order the migration staged;
/// the SD card's system makes the first failure (the new drive's boot
/// partition without its firmware file) and starts the trial.
fn start_the_first_trial(chain: &mut Chain) -> Result<()> {
    chain.pi.share().set_then(START_DEVICE_TRIAL)?;
    let job = format!("{WHAT_IT_SAYS}{}", matrix::FULL[0].make.job_lines());
    let boot = chain.pi.run(&job, After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "stage", "trial-pending")?;
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate did not start the trial: {:?}",
        boot.record.ending
    );
    Ok(())
}
