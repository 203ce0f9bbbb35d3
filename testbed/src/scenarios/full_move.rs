//! The full move finished (issue 29), on the x86 guest playing a Pi 4 and
//! a Pi 5 with Raspberry Pi OS's bootloader tools (the official
//! `rpi-eeprom-config` and `rpi-eeprom-update`, our stand-ins of
//! `vcgencmd`, `vcmailbox`, `flashrom`: [`crate::pi_tools`]), every
//! pimigrate command run through `tb-as-pi`, so it reads the device tree
//! the firmware stand-in hands over.
//!
//! `pi4-full-trial`: a full move to a USB SSD with the SD card left in, a
//! one-shot boot of the SSD through the EEPROM's `[tryboot]` order, `verify
//! --commit` setting the permanent order, the next normal boot on the SSD
//! with the card still in, then `rollback` putting the EEPROM's config back
//! so the SD card boots again.
//!
//! `pi5-nvme-trial`: a full move to an NVMe drive on a Pi 5 without a HAT+
//! (PCIE_PROBE=1 flashed at once), the trial through `set_reboot_order`;
//! the trial commits (the permanent order flashed), and a normal boot comes
//! up on the NVMe drive with the card still in, where `rollback` flashes
//! the EEPROM's own settings back. (Trials that fail are the unattended
//! failure matrix's, [`super::unattended`].)

use super::pimigrate_bin::{self, JOURNAL_FACTS};
use super::setup::{fact, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::eeprom::BootConf;
use crate::firmware::Model;
use crate::mbr;
use crate::{fat, After, Boot, Bus, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Runs a command as on the Pi the stand-in plays.
const TB: &str = "tb=\"$TESTBED/pi/bin/tb-as-pi\"";

/// What the trial's reboot runs once the job is done: pimigrate starts
/// the trial itself (a Pi 5's one-shot order first) and notes it.
const START_TRIAL: &str = "\"$TESTBED/pi/bin/tb-as-pi\" pimigrate migrate --resume --reboot";

/// Files the bootloader's update leaves on the SD card's boot partition:
/// rpi-eeprom-update's staged image and its digest, recovery.bin renamed
/// once it ran.
const UPDATE_FILES: [&str; 4] = [
    "pieeprom.upd",
    "pieeprom.sig",
    "recovery.bin",
    "RECOVERY.000",
];

/// The full migration with `--boot-order apply`, run through tb-as-pi.
fn migrate_args() -> &'static str {
    "--layout full --table mbr --boot-order apply"
}

/// A job snippet: `verify ARGS --json` into `out/verify.json` and its
/// exit status as `verify_status`.
fn verify(args: &str) -> String {
    format!(
        "set +e\n\"$tb\" pimigrate verify {args} --no-bench --json > \"$TESTBED/out/verify.json\"\n\
         echo \"verify_status=$?\"\nset -e\n"
    )
}

/// The `verify.json` the last job left.
fn verify_json(pi: &Pi) -> Result<serde_json::Value> {
    let path = pi.share().dir.join("out/verify.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: {text}", path.display()))
}

/// The check `code` of a verify document, which must have passed.
fn passed(verify: &serde_json::Value, code: &str) -> Result<String> {
    let check = verify["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["code"] == code))
        .with_context(|| format!("verify made no {code} check: {verify:#}"))?;
    ensure!(
        check["pass"] == true,
        "verify's {code} check failed: {check:#}"
    );
    Ok(check["message"].as_str().unwrap_or_default().to_string())
}

/// Which disk and config file the firmware stand-in booted.
fn booted(boot: &Boot, disk: &str, config: &str) -> Result<()> {
    ensure!(
        boot.spec.disk == disk && boot.spec.config_file == config,
        "boot {} came from {} ({}), not {disk} ({config}); see {}",
        boot.number,
        boot.spec.disk,
        boot.spec.config_file,
        boot.record.serial_log.display()
    );
    Ok(())
}

/// A boot partition's files, names and bytes.
fn boot_files(image: &Path, scratch: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let part = mbr::partition_of(image, 1)?;
    fat::snapshot(image, &part, scratch)
}

/// The bootloader's BOOT_ORDER for a normal boot and a trial, as the
/// stand-in reads its config.
fn orders(pi: &Pi) -> Result<(String, String)> {
    let bootloader = pi.bootloader().context("the Pi has no EEPROM bootloader")?;
    let conf = BootConf::parse(bootloader.config());
    let board = bootloader.board();
    Ok((
        format!("{:#x}", conf.boot_order(board, false)?.0),
        format!("{:#x}", conf.boot_order(board, true)?.0),
    ))
}

pub fn pi4(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, sd, .. } = Setup::new("pi4-full-trial", &images.bookworm)
        .usb_ssd()
        .build()?;
    pi.raspberry_pi_os_tools()?;
    // A Pi 4 with its bootloader as released: its config names no
    // BOOT_ORDER, so the default, SD card then USB, applies.
    let released = crate::bootloader::Bootloader::release(crate::eeprom::Board::Pi4)?
        .config()
        .to_string();
    pi.bootloader_mut()?.set_config(&released);
    ensure!(orders(&pi)? == ("0xf41".into(), "0xf41".into()));
    let ssd = pi.disk("ssd")?.image.clone();
    let scratch = pi.work.join("fat-snapshot");
    let pristine = boot_files(&sd, &scratch)?;

    // Boot 1: the migration stages the [tryboot] order on the SD card; the
    // Pi 4 must reboot once for recovery.bin to write it.
    pi.share().set_then(START_TRIAL)?;
    let boot = pi.run(&migrate_job("TB-SSD"), After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    ensure!(
        boot.record.ending == Ending::Reboot,
        "--reboot should reboot plainly while the bootloader's update waits: {:?}; see {}",
        boot.record.ending,
        pi.share().dir.join("out/then.log").display()
    );
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    expect_fact(&f, "bootloader_saved", "true")?;
    let sd_now = boot_files(&sd, &scratch)?;
    for file in ["pieeprom.upd", "pieeprom.sig", "recovery.bin"] {
        ensure!(
            sd_now.contains_key(file),
            "rpi-eeprom-update staged no {file} on the SD card: {:?}",
            sd_now.keys()
        );
    }
    ensure!(
        sd_now.get("cmdline.txt") == pristine.get("cmdline.txt"),
        "a full move changed the SD card's cmdline.txt"
    );
    trial_files_on(&ssd, &scratch, &root_partuuid, true)?;
    ensure!(
        orders(&pi)?.1 == "0xf41",
        "the update was written before its reboot"
    );

    // Boot 2: recovery.bin has written it; the SD card boots as before.
    // verify says the trial is to be started; pimigrate starts it.
    pi.share().set_then(START_TRIAL)?;
    let job = format!(
        "{TB}\n{PROBE}{}\"$tb\" vcgencmd bootloader_config > \"$TESTBED/out/bootconf.txt\"\n",
        verify("")
    );
    let boot = pi.run(&job, After::Then)?;
    booted(&boot, "sd", "config.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "verify_status", "4")?;
    let v = verify_json(&pi)?;
    ensure!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("migrate --resume --reboot")),
        "verify before the trial should say how to start it: {v:#}"
    );
    ensure!(orders(&pi)? == ("0xf41".into(), "0xf14".into()));
    let bootconf = std::fs::read_to_string(pi.share().dir.join("out/bootconf.txt"))?;
    ensure!(
        bootconf.contains("[tryboot]") && bootconf.contains("BOOT_ORDER=0xf14"),
        "vcgencmd bootloader_config in the guest: {bootconf}"
    );
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate should have rebooted into the trial: {:?}",
        boot.record.ending
    );
    let sd_now = boot_files(&sd, &scratch)?;
    ensure!(
        sd_now.contains_key("RECOVERY.000") && !sd_now.contains_key("recovery.bin"),
        "recovery.bin did not rename itself: {:?}",
        sd_now.keys()
    );

    // Boot 3: the trial, on the SSD; verify --commit stages the permanent
    // order on the SD card and removes the trial's files.
    let job = format!("{TB}\n{PROBE}{}", verify("--commit"));
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "ssd", "tryboot.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    let target = boot_target(&f)?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    expect_fact(&f, "boot_firmware", &format!("{target}1"))?;
    let v = verify_json(&pi)?;
    let mode = passed(&v, "boot-mode")?;
    ensure!(mode.contains("from USB"), "{mode}");
    passed(&v, "bootloader-config")?;
    passed(&v, "trial-boot")?;
    passed(&v, "ids-unique")?;
    let actions = v["actions"].to_string();
    ensure!(
        actions.contains("staged on the SD card's boot partition"),
        "the commit's actions: {actions}"
    );
    trial_files_on(&ssd, &scratch, &root_partuuid, false)?;
    ensure!(boot_files(&sd, &scratch)?.contains_key("recovery.bin"));

    // Boot 4: recovery.bin writes BOOT_ORDER=0xf14; the SSD boots with the
    // SD card still in. verify passes; rollback stages the old config.
    let job = format!(
        "{TB}\n{PROBE}{}\"$tb\" pimigrate rollback --yes > \"$TESTBED/out/rollback.txt\"\n",
        verify("")
    );
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "ssd", "config.txt")?;
    ensure!(
        orders(&pi)?.0 == "0xf14",
        "the permanent order is {:?}",
        orders(&pi)?
    );
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    let v = verify_json(&pi)?;
    passed(&v, "bootloader-config")?;
    let rollback = std::fs::read_to_string(pi.share().dir.join("out/rollback.txt"))?;
    ensure!(
        rollback.contains("staged on the SD card's boot partition"),
        "rollback said: {rollback}"
    );

    // Boot 5: recovery.bin puts the old config back; the SD card boots.
    let job = format!(
        "{TB}\n{PROBE}\"$tb\" vcgencmd bootloader_config > \"$TESTBED/out/bootconf.txt\"\n"
    );
    let boot = pi.run(&job, After::PowerOff)?;
    booted(&boot, "sd", "config.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    let bootconf = std::fs::read_to_string(pi.share().dir.join("out/bootconf.txt"))?;
    ensure!(
        BootConf::parse(&bootconf) == BootConf::parse(&released),
        "the bootloader's config after rollback:\n{bootconf}\nbefore the migration:\n{released}"
    );
    // The SD card's boot partition: as before, but for what the
    // bootloader's updates leave there.
    let mut now = boot_files(&sd, &scratch)?;
    now.retain(|name, _| !UPDATE_FILES.contains(&name.as_str()));
    let diff = fat::snapshot_diff(&pristine, &now);
    ensure!(
        diff.is_empty(),
        "the SD card's boot partition changed beyond the bootloader's update files: {diff:?}"
    );
    Ok(())
}

/// The migration job: through tb-as-pi, then the facts the scenario needs.
fn migrate_job(serial: &str) -> String {
    format!(
        "{}\n{TB}\n\"$tb\" pimigrate migrate --target \"$target\" --yes {}\n{JOURNAL_FACTS}\n\
         echo \"bootloader_saved=$(jq -r '.bootloader_before != null' /var/lib/pimigrate/migration.json)\"\n",
        pimigrate_bin::find_disk(serial),
        migrate_args()
    )
}

/// The disk (`/dev/sda`, `/dev/nvme0n1p`) whose partitions root and boot are.
fn boot_target(f: &BTreeMap<String, String>) -> Result<String> {
    let root = fact(f, "root")?;
    Ok(root
        .strip_suffix('2')
        .with_context(|| format!("root {root} is not a partition 2"))?
        .to_string())
}

/// The new drive's trial files: tryboot.txt pointing at the trial's
/// command line, which starts the new root with panic=; gone after the
/// commit.
fn trial_files_on(image: &Path, scratch: &Path, root_partuuid: &str, present: bool) -> Result<()> {
    let files = boot_files(image, scratch)?;
    let text = |name: &str| {
        files
            .get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    if !present {
        ensure!(
            text("tryboot.txt").is_none() && text("cmdline.pimigrate.txt").is_none(),
            "the commit left the trial's files on the new drive: {:?}",
            files.keys()
        );
        return Ok(());
    }
    let tryboot = text("tryboot.txt").context("the new drive has no tryboot.txt")?;
    ensure!(
        tryboot
            .trim_end()
            .ends_with("cmdline=cmdline.pimigrate.txt"),
        "tryboot.txt: {tryboot}"
    );
    let cmdline =
        text("cmdline.pimigrate.txt").context("the new drive has no cmdline.pimigrate.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={root_partuuid} "))
            && cmdline.contains("panic=10"),
        "the trial's command line: {cmdline}"
    );
    let normal = text("cmdline.txt").context("the new drive has no cmdline.txt")?;
    ensure!(
        !normal.contains("panic="),
        "the new drive's cmdline.txt: {normal}"
    );
    Ok(())
}

pub fn pi5(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, sd, .. } = Setup::new("pi5-nvme-trial", &images.bookworm)
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .build()?;
    pi.play(Model::Pi5)?;
    pi.raspberry_pi_os_tools()?;
    let released = pi
        .bootloader()
        .context("a Pi 5 has its bootloader")?
        .config()
        .to_string();
    let nvme = pi.disk("nvme")?.image.clone();
    let scratch = pi.work.join("fat-snapshot");
    ensure!(
        orders(&pi)?.0 == "0xf461",
        "a Pi 5 as released: {:?}",
        orders(&pi)?
    );

    // Boot 1: PCIE_PROBE=1 is flashed at once; pimigrate sets the one-shot
    // order 0xf16 and reboots into the trial.
    pi.share().set_then(START_TRIAL)?;
    let boot = pi.run(&migrate_job("TB-NVME"), After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate should have rebooted into the trial: {:?}; see {}",
        boot.record.ending,
        pi.share().dir.join("out/then.log").display()
    );
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    let bootloader = pi.bootloader().context("a Pi 5 has its bootloader")?;
    ensure!(
        BootConf::parse(bootloader.config()).value("PCIE_PROBE", bootloader.board(), false)
            == Some("1"),
        "PCIE_PROBE=1 was not flashed during the migration: {}",
        bootloader.config()
    );
    ensure!(
        orders(&pi)?.0 == "0xf461",
        "the migration changed BOOT_ORDER"
    );
    let sd_files = boot_files(&sd, &scratch)?;
    ensure!(
        !sd_files.contains_key("recovery.bin") && !sd_files.contains_key("pieeprom.upd"),
        "a Pi 5's update is flashed at once, nothing is staged: {:?}",
        sd_files.keys()
    );
    trial_files_on(&nvme, &scratch, &root_partuuid, true)?;

    // Boot 2: the trial comes up on the NVMe drive (PCIE_PROBE, the
    // one-shot order); verify --commit flashes the permanent order. (A
    // trial that fails is the unattended matrix's: `super::unattended`.)
    let job = format!("{TB}\n{PROBE}{}", verify("--commit"));
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "nvme", "tryboot.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    let target = boot_target(&f)?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    let v = verify_json(&pi)?;
    let mode = passed(&v, "boot-mode")?;
    ensure!(mode.contains("from NVMe"), "{mode}");
    passed(&v, "bootloader-config")?;
    ensure!(
        orders(&pi)?.0 == "0xf416",
        "the permanent order: {:?}",
        orders(&pi)?
    );
    trial_files_on(&nvme, &scratch, &root_partuuid, false)?;

    // Boot 3: a normal boot starts the NVMe drive with the SD card in;
    // then rollback flashes the settings the migration changed back (read
    // back from the EEPROM, not from the config this boot started with).
    let job = format!(
        "{TB}\n{PROBE}{}\"$tb\" pimigrate rollback --yes > \"$TESTBED/out/rollback.txt\"\n",
        verify("")
    );
    let boot = pi.run(&job, After::PowerOff)?;
    booted(&boot, "nvme", "config.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    passed(&verify_json(&pi)?, "bootloader-config")?;
    let rollback = std::fs::read_to_string(pi.share().dir.join("out/rollback.txt"))?;
    ensure!(
        rollback.contains("read back from its EEPROM"),
        "rollback said: {rollback}"
    );
    let bootloader = pi.bootloader().context("a Pi 5 has its bootloader")?;
    ensure!(
        BootConf::parse(bootloader.config()) == BootConf::parse(&released),
        "the bootloader's config after rollback:\n{}\nbefore the migration:\n{released}",
        bootloader.config()
    );
    // rpi-eeprom-update's files went to the SD card, never to the NVMe
    // drive, and are gone once flashed.
    let nvme_files = boot_files(&nvme, &scratch)?;
    ensure!(
        UPDATE_FILES.iter().all(|f| !nvme_files.contains_key(*f)),
        "bootloader update files on the NVMe drive: {:?}",
        nvme_files.keys()
    );
    Ok(())
}
