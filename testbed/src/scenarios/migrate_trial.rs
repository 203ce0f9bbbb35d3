//! pimigrate's trial boot: a root-only move to NVMe with a GPT table and
//! `--trial always`; the agent reboots with `"0 tryboot"`, the firmware
//! stand-in reads `tryboot.txt`, the trial boot comes up on the NVMe root
//! and `verify --commit` makes it permanent; a normal boot is on NVMe again.
//!
//! The SD card's config.txt is laid out as Ubuntu 20.04's (issue #15):
//! `cmdline=` is set again by the included syscfg.txt, so the trial boot
//! reaches the NVMe root only if tryboot.txt's `cmdline=` comes after the
//! includes, and the stand-in follows `include` as the firmware does.
//!
//! The guest is x86_64 and has no device tree, so the trial boot's
//! `chosen/bootloader/tryboot` is handed to `verify` through `--sysroot`: a
//! tree whose every entry links to the running system's, plus the one
//! device-tree file the firmware would have made.

use super::pimigrate_bin::{ROOT_PARTUUID, TRIAL_SYSROOT};
use super::setup::{fact, migrate, Rig, Setup};
use super::{expect_fact, facts, PROBE};
use crate::{fat, After, Bus, ImageSet};
use anyhow::{ensure, Context, Result};

pub fn run(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new("migrate-trial", &images.bookworm)
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .ubuntu_config()
        .build()?;
    let syscfg_before = fat::read(&sd, &sd_boot, "syscfg.txt")?.context("no syscfg.txt")?;

    // Boot 1: migrate with a trial; the agent reboots into it.
    let f = migrate(
        &mut pi,
        "TB-NVME",
        "--table gpt --trial always",
        After::Tryboot,
    )?;
    let root_partuuid = fact(&f, "plan_root_partuuid")?.to_lowercase();
    ensure!(
        root_partuuid.len() == 36,
        "the plan's root PARTUUID {root_partuuid:?} is not a GPT partition GUID"
    );
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={}-02", images.bookworm_signature)),
        "a trial migration changed cmdline.txt before the trial: {cmdline:?}"
    );
    // tryboot.txt names the trial's command line after config.txt's includes.
    let tryboot = fat::read(&sd, &sd_boot, "tryboot.txt")?.context("no tryboot.txt")?;
    ensure!(
        tryboot
            .trim_end()
            .ends_with("[all]\ncmdline=cmdline.pimigrate.txt"),
        "tryboot.txt does not end with the trial's cmdline= after the includes: {tryboot:?}"
    );
    ensure!(
        fat::read(&sd, &sd_boot, "syscfg.txt")?.as_deref() == Some(syscfg_before.as_str()),
        "the migration changed syscfg.txt"
    );

    // Boot 2: the trial, on the NVMe root; commit it.
    let trial_job = format!(
        "{PROBE}{ROOT_PARTUUID}{TRIAL_SYSROOT}pimigrate verify --commit --no-bench --sysroot \"$sysroot\"\n"
    );
    let trial = pi.run(&trial_job, After::Reboot)?;
    ensure!(
        trial.spec.config_file == "tryboot.txt",
        "the trial boot read {}",
        trial.spec.config_file
    );
    let f = facts(&trial.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/nvme0n1p1")?;
    expect_fact(&f, "root_partuuid", &root_partuuid)?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;

    // Boot 3: a normal boot, after the commit.
    let normal = pi.run(
        &format!("{PROBE}{ROOT_PARTUUID}pimigrate verify --no-bench\n"),
        After::PowerOff,
    )?;
    ensure!(
        normal.spec.config_file == "config.txt",
        "the boot after the commit read {}",
        normal.spec.config_file
    );
    let f = facts(&normal.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/nvme0n1p1")?;
    expect_fact(&f, "root_partuuid", &root_partuuid)?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={root_partuuid} ")),
        "the committed cmdline.txt does not name {root_partuuid}: {cmdline:?}"
    );
    ensure!(
        fat::read(&sd, &sd_boot, "tryboot.txt")?.is_none(),
        "tryboot.txt is still on the SD card after the commit"
    );
    Ok(())
}
