//! recovery.bin, as a Pi 4's or Pi 5's boot ROM runs it from the SD card
//! before the EEPROM bootloader: an update `rpi-eeprom-update` staged on
//! the boot partition (`recovery.bin`, `pieeprom.upd`, `pieeprom.sig`)
//! is written into the EEPROM, recovery.bin renames itself to
//! `RECOVERY.000` so it runs once, and the Pi resets into the new
//! bootloader. The stand-in plays that reset by carrying on with the same
//! boot, on the new config; the one-shot requests of the boot before (the
//! trial flag, a reboot order) do not survive it, so a trial of the new
//! config comes at a later reboot.

use crate::firmware::bootloader::Bootloader;
use crate::firmware::partition::boot_partition;
use crate::host::disks::{Bus, Disk};
use crate::host::fat;
use crate::host::mbr::Partition;
use anyhow::{Context, Result};
use std::path::Path;

/// The staged update's files on the boot partition.
const RECOVERY_BIN: &str = "recovery.bin";
const UPDATE: &str = "pieeprom.upd";
const SIGNATURE: &str = "pieeprom.sig";
/// What recovery.bin renames itself to once it has run.
const RAN: &str = "RECOVERY.000";

/// What recovery.bin did at this boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// No recovery.bin on the SD card (or no SD card): the bootloader
    /// boots as it is.
    Absent,
    /// The update was written and the Pi reset: the boot goes on with the
    /// new bootloader, as a normal boot.
    Applied(String),
    /// Something was staged but nothing was written (a missing or wrong
    /// signature, an image for another board); the files stay.
    NotApplied(String),
}

/// Whether the SD card holds an update recovery.bin would run at the next
/// boot (recovery.bin and pieeprom.upd on its first FAT partition).
pub fn staged(disks: &[Disk]) -> Result<bool> {
    let Some(sd) = disks.iter().find(|d| d.bus == Bus::Sd) else {
        return Ok(false);
    };
    let Some(part) = boot_partition(&sd.image)? else {
        return Ok(false);
    };
    Ok(fat::exists(&sd.image, &part, RECOVERY_BIN)? && fat::exists(&sd.image, &part, UPDATE)?)
}

/// Runs a staged update from the SD card's first FAT partition into
/// `bootloader`, with `scratch` as room for copying the image out. An
/// update needs recovery.bin, pieeprom.upd and pieeprom.sig whose first
/// line is pieeprom.upd's sha256; its `ts:` line becomes the update time.
/// A pieeprom.upd without recovery.bin is left to the bootloader's
/// self-update, which the stand-in does not play.
pub fn run(bootloader: &mut Bootloader, disks: &[Disk], scratch: &Path) -> Result<Recovery> {
    let Some(sd) = disks.iter().find(|d| d.bus == Bus::Sd) else {
        return Ok(Recovery::Absent);
    };
    let image = &sd.image;
    let Some(part) = boot_partition(image)? else {
        return Ok(Recovery::Absent);
    };
    if !fat::exists(image, &part, RECOVERY_BIN)? {
        // What recovery.bin applied stays behind; only a newer update
        // would be the self-update's to apply.
        let newer = fat::exists(image, &part, UPDATE)?
            && signed_time(image, &part)?.is_none_or(|t| t > bootloader.update_timestamp());
        return Ok(if newer {
            Recovery::NotApplied(format!(
                "{UPDATE} on the SD card without {RECOVERY_BIN}: left to the bootloader's \
                 self-update, which the testbed does not play"
            ))
        } else {
            Recovery::Absent
        });
    }
    match staged_update(image, &part, scratch)? {
        Err(why) => Ok(Recovery::NotApplied(format!(
            "{RECOVERY_BIN} ran and wrote nothing: {why}; the files stay on the SD card"
        ))),
        Ok((bytes, time)) => {
            if let Err(e) = bootloader.flash(bytes, Some(time)) {
                return Ok(Recovery::NotApplied(format!(
                    "{RECOVERY_BIN} ran and wrote nothing: {UPDATE} is no image for this Pi: {e:#}"
                )));
            }
            fat::rename(image, &part, RECOVERY_BIN, RAN)?;
            bootloader.clear_reboot_order();
            Ok(Recovery::Applied(format!(
                "{RECOVERY_BIN} wrote {UPDATE} into the EEPROM (built {}, update time {time}) and \
                 renamed itself {RAN}; the Pi reset and boots normally with the new config \
                 (a trial flag or reboot order of the boot before is gone): {}",
                crate::firmware::bootloader::utc(bootloader.build_timestamp()),
                one_line(bootloader.config())
            )))
        }
    }
}

/// pieeprom.upd's bytes and pieeprom.sig's time, or why recovery.bin
/// would refuse them.
fn staged_update(
    image: &Path,
    part: &Partition,
    scratch: &Path,
) -> Result<std::result::Result<(Vec<u8>, u32), String>> {
    if !fat::exists(image, part, UPDATE)? {
        return Ok(Err(format!("no {UPDATE}")));
    }
    let Some(sig) = fat::read(image, part, SIGNATURE)? else {
        return Ok(Err(format!("no {SIGNATURE}")));
    };
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let copy = scratch.join(UPDATE);
    fat::copy_out(image, part, UPDATE, &copy)?;
    let digest = crate::host::cmd::stdout(std::process::Command::new("sha256sum").arg(&copy))?;
    let digest = digest.split_whitespace().next().unwrap_or_default();
    let signed = sig.lines().next().unwrap_or_default().trim();
    if !signed.eq_ignore_ascii_case(digest) {
        return Ok(Err(format!(
            "{SIGNATURE} names sha256 {signed:?}, {UPDATE} has {digest}"
        )));
    }
    let Some(time) = ts_line(&sig) else {
        return Ok(Err(format!("{SIGNATURE} has no ts: line")));
    };
    let bytes = std::fs::read(&copy).with_context(|| format!("cannot read {}", copy.display()))?;
    Ok(Ok((bytes, time)))
}

/// pieeprom.sig's `ts:`, when it has one.
fn signed_time(image: &Path, part: &Partition) -> Result<Option<u32>> {
    Ok(fat::read(image, part, SIGNATURE)?
        .as_deref()
        .and_then(ts_line))
}

/// The time on a .sig's `ts: <unix time>` line.
fn ts_line(sig: &str) -> Option<u32> {
    sig.lines()
        .find_map(|l| l.trim().strip_prefix("ts:"))
        .and_then(|t| t.trim().parse().ok())
}

/// A config on one line for the boot's log.
fn one_line(config: &str) -> String {
    config
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::boot::select;
    use crate::firmware::bootloader::release_dir;
    use crate::firmware::eeprom::{Board, BootOrder};
    use crate::firmware::model::Model;
    use crate::firmware::spec::BootRequest;
    use crate::host::test_disks::{disk_with, have_tools, BOOTS, IMAGE_TOOLS};
    use std::process::Command;

    const CONFIG: &str = "[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n";

    /// A Pi 4 update as `rpi-eeprom-config --config` builds it (the
    /// official tool, offline) and its .sig, in `dir`.
    fn staged(dir: &Path) -> (Vec<u8>, String) {
        let config = dir.join("bootconf.txt");
        std::fs::write(&config, CONFIG).unwrap();
        let upd = dir.join("pieeprom.upd");
        let data = crate::firmware::bootloader::rpi_eeprom_data();
        crate::host::cmd::run(
            Command::new("python3")
                .arg(data.join("rpi-eeprom-config"))
                .arg("--config")
                .arg(&config)
                .arg("--out")
                .arg(&upd)
                .arg(crate::firmware::bootloader::release_image(Board::Pi4)),
        )
        .unwrap();
        let digest = crate::host::cmd::stdout(Command::new("sha256sum").arg(&upd)).unwrap();
        let digest = digest.split_whitespace().next().unwrap().to_string();
        (
            std::fs::read(&upd).unwrap(),
            format!("{digest}\nts: 1760000000\n"),
        )
    }

    /// The SD card of a Pi 4 with `extra` staged beside its boot files,
    /// and a USB disk that boots too.
    fn disks(dir: &Path, extra: &[(&str, &[u8])]) -> Vec<Disk> {
        let staging = dir.join("extra");
        std::fs::create_dir_all(&staging).unwrap();
        let mut sd = disk_with(dir, "sd", Bus::Sd, BOOTS);
        let part = crate::host::mbr::partition_of(&sd.image, 1).unwrap();
        for (name, bytes) in extra {
            let path = staging.join(name);
            std::fs::write(&path, bytes).unwrap();
            crate::host::cmd::run(
                Command::new("mcopy")
                    .env("MTOOLS_SKIP_CHECK", "1")
                    .arg("-i")
                    .arg(format!("{}@@{}", sd.image.display(), part.offset()))
                    .arg(&path)
                    .arg(format!("::/{name}")),
            )
            .unwrap();
        }
        sd.name = "sd".into();
        vec![sd, disk_with(dir, "usb", Bus::UsbUas, BOOTS)]
    }

    fn tools() -> bool {
        let mut tools = IMAGE_TOOLS.to_vec();
        tools.extend(["python3", "sha256sum", "mren", "mdel"]);
        have_tools(&tools)
    }

    fn pi4() -> Bootloader {
        Model::Pi4B.bootloader().unwrap().unwrap()
    }

    const TRIAL: BootRequest = BootRequest {
        tryboot: true,
        after_reboot: true,
    };

    /// The boot after staging (a trial asked for) runs recovery.bin: the
    /// new config, the .sig's time, RECOVERY.000, and a normal boot; the
    /// trial at the next reboot follows the new `[tryboot]` order to the
    /// USB disk, and recovery.bin does not run again.
    #[test]
    fn a_staged_update_is_applied_at_the_next_boot_and_the_trial_comes_after() {
        if !tools() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (upd, sig) = staged(dir.path());
        let recovery = std::fs::read(release_dir(Board::Pi4).join("recovery.bin")).unwrap();
        let disks = disks(
            dir.path(),
            &[
                ("recovery.bin", &recovery),
                ("pieeprom.upd", &upd),
                ("pieeprom.sig", sig.as_bytes()),
            ],
        );
        let scratch = dir.path().join("scratch");
        let mut bootloader = pi4();
        bootloader.set_reboot_order(BootOrder(0xf16));
        let first = select(Model::Pi4B, Some(&mut bootloader), &disks, TRIAL, &scratch).unwrap();
        assert!(
            !first.tryboot && first.disk == "sd",
            "the reset of recovery.bin did not drop the trial: {first:?}"
        );
        assert!(first.notes[0].contains("RECOVERY.000"), "{:?}", first.notes);
        assert_eq!(bootloader.config(), CONFIG);
        assert_eq!(bootloader.image(), &upd[..]);
        assert_eq!(bootloader.update_timestamp(), 1_760_000_000);
        assert_eq!(bootloader.reboot_order(), None);
        let (sd, part) = (
            &disks[0].image,
            crate::host::mbr::partition_of(&disks[0].image, 1).unwrap(),
        );
        assert!(fat::exists(sd, &part, "RECOVERY.000").unwrap());
        assert!(!fat::exists(sd, &part, "recovery.bin").unwrap());
        assert!(fat::exists(sd, &part, "pieeprom.upd").unwrap());
        let trial = select(Model::Pi4B, Some(&mut bootloader), &disks, TRIAL, &scratch).unwrap();
        assert_eq!(
            (trial.disk.as_str(), trial.tryboot),
            ("usb", false),
            "{trial:?}"
        );
        assert!(trial.notes.iter().all(|n| !n.contains("recovery.bin")));
    }

    /// A .sig that does not match, or none: nothing written, the files
    /// left, the boot noted and carried on with the old config.
    #[test]
    fn a_bad_or_missing_signature_writes_nothing() {
        if !tools() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (upd, sig) = staged(dir.path());
        let recovery = std::fs::read(release_dir(Board::Pi4).join("recovery.bin")).unwrap();
        let wrong = sig.replacen(&sig[..4], "0000", 1);
        for (case, files) in [
            (
                "wrong",
                vec![
                    ("recovery.bin", &recovery[..]),
                    ("pieeprom.upd", &upd[..]),
                    ("pieeprom.sig", wrong.as_bytes()),
                ],
            ),
            (
                "missing",
                vec![("recovery.bin", &recovery[..]), ("pieeprom.upd", &upd[..])],
            ),
        ] {
            let case_dir = dir.path().join(case);
            std::fs::create_dir_all(&case_dir).unwrap();
            let disks = disks(&case_dir, &files);
            let mut bootloader = pi4();
            let before = bootloader.config().to_string();
            let spec = select(
                Model::Pi4B,
                Some(&mut bootloader),
                &disks,
                TRIAL,
                &case_dir.join("scratch"),
            )
            .unwrap();
            assert!(spec.tryboot || spec.config_file == "config.txt");
            assert!(
                spec.notes[0].contains("wrote nothing"),
                "{case}: {:?}",
                spec.notes
            );
            assert_eq!(bootloader.config(), before, "{case}");
            let part = crate::host::mbr::partition_of(&disks[0].image, 1).unwrap();
            assert!(
                fat::exists(&disks[0].image, &part, "recovery.bin").unwrap(),
                "{case}"
            );
        }
    }
}
