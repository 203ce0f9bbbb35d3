//! Changes to the EEPROM bootloader, made only through the system's own
//! tools, as raspi-config makes them: `rpi-eeprom-config --apply FILE`
//! (which builds a new image and hands it to `rpi-eeprom-update`: staged
//! on a boot partition for recovery.bin on a Pi 4, flashed at once on a
//! Pi 5), `rpi-eeprom-update -r` to cancel an update not yet applied, and
//! `vcmailbox` for the Pi 5's one-shot `set_reboot_order`. pimigrate never
//! writes an EEPROM image itself.

use super::atomic;
use super::journal::Journal;
use super::sd_boot::SdBoot;
use crate::bootcfg::eeprom::same_config;
use crate::plan::bootloader::{pending_in, SET_REBOOT_ORDER_TAG};
use crate::plan::EepromTakesEffect;
use crate::system::System;
use crate::tools::{package_for, which};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

/// Runs one of the bootloader's tools, its output in the error when it fails.
fn run(program: &str, args: &[&str], bootfs: Option<&Path>) -> Result<Output> {
    let Some(path) = which(program) else {
        bail!(
            "{program} is not installed: sudo apt install {}",
            package_for(program)
        );
    };
    let mut command = Command::new(&path);
    command.args(args);
    // rpi-eeprom-update stages an update in BOOTFS: on a Pi 4 the SD card's
    // boot partition, where the boot ROM runs recovery.bin from.
    if let Some(dir) = bootfs {
        command.env("BOOTFS", dir);
    }
    let output = command
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        let said: Vec<String> = [&output.stdout, &output.stderr]
            .iter()
            .map(|bytes| String::from_utf8_lossy(bytes).trim().to_string())
            .filter(|text| !text.is_empty())
            .collect();
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            said.join("\n")
        );
    }
    Ok(output)
}

/// The bootloader's running config, as `rpi-eeprom-config` prints it.
pub fn read_config() -> Result<String> {
    let output = run("rpi-eeprom-config", &[], None).context("reading the bootloader's config")?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Applies `config` through `rpi-eeprom-config --apply`, staging the
/// update (where the bootloader stages) in `bootfs`. Returns the tool's
/// output for the log.
pub fn apply_config(config: &str, bootfs: &Path) -> Result<String> {
    let mut file = tempfile::Builder::new()
        .prefix("pimigrate-bootconf")
        .suffix(".txt")
        .tempfile()
        .context("creating a temporary file for the bootloader's config")?;
    file.write_all(config.as_bytes())
        .and_then(|()| file.flush())
        .context("writing the bootloader's config to a temporary file")?;
    let path = file.path().to_string_lossy().into_owned();
    let output =
        run("rpi-eeprom-config", &["--apply", &path], Some(bootfs)).with_context(|| {
            format!(
                "applying the bootloader's config (staged in {}); nothing else was changed",
                bootfs.display()
            )
        })?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Cancels an update staged in `bootfs` and not yet applied
/// (`rpi-eeprom-update -r`).
pub fn cancel_pending(bootfs: &Path) -> Result<()> {
    run("rpi-eeprom-update", &["-r"], Some(bootfs)).with_context(|| {
        format!(
            "cancelling the bootloader update staged in {}",
            bootfs.display()
        )
    })?;
    Ok(())
}

/// The Pi 5's one-shot boot order for the next reboot (`set_reboot_order`
/// through the firmware's mailbox); the bootloader clears it once used.
pub fn set_reboot_order(order: &str) -> Result<()> {
    run("vcmailbox", &[SET_REBOOT_ORDER_TAG, "4", "4", order], None)
        .with_context(|| format!("setting the one-shot boot order {order} for the next reboot"))?;
    Ok(())
}

/// `rollback`'s part: the bootloader's config as it was before the
/// migration (`before`, from the journal). An update the migration staged
/// and the bootloader has not written yet is cancelled; a config already
/// changed is put back the way it was changed (on a Pi 4 staged on the SD
/// card's boot partition for the next reboot). Returns what it did.
pub fn restore(system: &System, journal: &Journal, before: &str) -> Result<Vec<String>> {
    let staged = journal
        .plan
        .bootloader
        .as_ref()
        .is_none_or(|b| b.takes_effect == EepromTakesEffect::NextReboot);
    let sd_boot;
    let bootfs = if staged {
        sd_boot = SdBoot::open(system, journal)?;
        system.host.path(sd_boot.dir())
    } else {
        system.host.path(&journal.boot_dir)
    };
    let mut done = Vec::new();
    if pending_in(&bootfs) {
        cancel_pending(&bootfs)?;
        done.push(format!(
            "cancelled the bootloader update staged in {}",
            bootfs.display()
        ));
    }
    if same_config(&read_config()?, before) {
        done.push("the bootloader's config is as it was before the migration".into());
        return Ok(done);
    }
    apply_config(before, &bootfs)?;
    atomic::sync_filesystem(&bootfs)?;
    done.push(match staged {
        true => "the bootloader's config from before the migration is staged on the SD card's boot partition: \
                 reboot, and the bootloader writes it (recovery.bin) and starts the SD card as before"
            .into(),
        false => "the bootloader's config is back as it was before the migration".into(),
    });
    Ok(done)
}
