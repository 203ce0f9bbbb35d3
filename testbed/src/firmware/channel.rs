//! The firmware's side of the x86 guest's share, `$TESTBED/firmware/`:
//! what the stand-in hands the guest before each boot, which a real Pi's
//! guest would get from its firmware and EEPROM. The raspi machines get
//! the device tree itself instead ([`crate::firmware::device_tree::mark`]).
//!
//! - `device-tree/`: this boot's device tree as files
//!   ([`crate::firmware::device_tree::write_files`]), where `tb-as-pi` shows it as
//!   /proc/device-tree.
//! - `spi-flash.bin`: the SPI flash chip, the EEPROM's image, which the
//!   `flashrom` stand-in reads and writes.
//! - `vcgencmd/COMMAND`: what the `vcgencmd` stand-in answers
//!   ([`vcgencmd_answers`]).
//! - `dev/`: the devices the board has that the x86 guest lacks (a Pi 5's
//!   `spidev10.0`, the SPI flash), which `tb-as-pi` creates in /dev.
//!
//! What the guest leaves there for the firmware is read when the boot has
//! ended ([`after_boot`]):
//!
//! - `reboot-order`: the order the `vcmailbox` stand-in's
//!   `set_reboot_order` asked for (`0xf16`), for the next reboot.
//! - `spi-flash.bin`, where `flashrom` wrote another image: the EEPROM
//!   holds it from the next boot on (its config, its build time, the
//!   update time it was stamped with).

use crate::firmware::bootloader::Bootloader;
use crate::firmware::device_tree::{self, Chosen};
use crate::firmware::model::Model;
use crate::firmware::spec::BootSpec;
use crate::host::share::Share;
use anyhow::{Context, Result};
use std::fs;
use std::path::PathBuf;

/// Where the `vcmailbox` stand-in leaves a `set_reboot_order`.
const REBOOT_ORDER: &str = "reboot-order";

/// The SPI flash chip the `flashrom` stand-in writes.
const SPI_FLASH: &str = "spi-flash.bin";

/// The channel's folder in a share.
pub fn dir(share: &Share) -> PathBuf {
    share.dir.join("firmware")
}

/// Before a boot of the x86 guest: what the firmware hands over for the
/// boot `spec` describes.
pub fn before_boot(
    share: &Share,
    model: Model,
    bootloader: &Bootloader,
    spec: &BootSpec,
) -> Result<()> {
    let dir = dir(share);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _ = fs::remove_file(dir.join(REBOOT_ORDER));
    let flash = dir.join(SPI_FLASH);
    fs::write(&flash, bootloader.image())
        .with_context(|| format!("cannot write {}", flash.display()))?;
    let answers = dir.join("vcgencmd");
    fs::create_dir_all(&answers).with_context(|| format!("cannot create {}", answers.display()))?;
    for (command, answer) in vcgencmd_answers(model, bootloader)? {
        let path = answers.join(command);
        fs::write(&path, answer).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let devices = dir.join("dev");
    let _ = fs::remove_dir_all(&devices);
    fs::create_dir_all(&devices).with_context(|| format!("cannot create {}", devices.display()))?;
    if model == Model::Pi5 {
        // rpi-eeprom-update flashes a Pi 5 at once when this exists.
        fs::write(devices.join("spidev10.0"), "")
            .with_context(|| format!("cannot write into {}", devices.display()))?;
    }
    device_tree::write_files(
        &dir.join("device-tree"),
        model,
        &Chosen::of(spec, bootloader),
        bootloader.hat_plus(),
    )
}

/// What `vcgencmd COMMAND` prints on this Pi, for the commands played:
/// `bootloader_config` (the running config), `bootloader_version`,
/// `otp_dump` (row 30 holds the board revision rpi-eeprom-update reads
/// where there is no device tree, row 28 the serial number),
/// `get_throttled` (never under-voltage).
pub fn vcgencmd_answers(
    model: Model,
    bootloader: &Bootloader,
) -> Result<Vec<(&'static str, String)>> {
    let (_, _, revision) = model.identity();
    // Rows are numbered in decimal, as the tool prints them.
    let otp: String = (8..=36_u32)
        .map(|row| {
            let value = match row {
                28 => 0x5eed_0001,
                30 => revision,
                _ => 0,
            };
            format!("{row:02}:{value:08x}\n")
        })
        .collect();
    Ok(vec![
        ("bootloader_config", bootloader.config().to_string()),
        ("bootloader_version", bootloader.version_report()?),
        ("otp_dump", otp),
        ("get_throttled", "throttled=0x0\n".to_string()),
    ])
}

/// After a boot of the x86 guest, however it ended: what the guest did to
/// the firmware goes into `bootloader`: an image `flashrom` wrote into the
/// SPI flash, a reboot order (whether the next boot honours it is
/// [`Bootloader::boot_order`]'s to say). A flash that holds no bootloader
/// for this Pi is an error, as the Pi would not start again.
pub fn after_boot(share: &Share, bootloader: &mut Bootloader) -> Result<()> {
    let flash = dir(share).join(SPI_FLASH);
    match fs::read(&flash) {
        Ok(bytes) if bytes != bootloader.image() => bootloader
            .flash(bytes, None)
            .with_context(|| format!("the SPI flash the guest wrote ({})", flash.display()))?,
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", flash.display())),
    }
    let path = dir(share).join(REBOOT_ORDER);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let order = crate::firmware::bootloader::parse_reboot_order(&text)
                .with_context(|| format!("the guest's set_reboot_order in {}", path.display()))?;
            bootloader.set_reboot_order(order);
            fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::eeprom::BootOrder;
    use std::process::Command;

    /// A share with the stand-in `name` where `tb-as-pi` finds it.
    fn share_with(dir: &std::path::Path, name: &str) -> (Share, PathBuf) {
        let share = Share::create(dir.join("share")).unwrap();
        let bin = share.dir.join("pi/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(super::dir(&share)).unwrap();
        let tool = bin.join(name);
        fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("pi-tools")
                .join(name),
            &tool,
        )
        .unwrap();
        (share, tool)
    }

    /// `vcmailbox 0x0003808b 4 4 0xf16` answers as the firmware does and
    /// leaves the order for the harness, which hands it to the bootloader;
    /// another tag fails.
    #[test]
    fn set_reboot_order_goes_through_the_channel_to_the_bootloader() {
        let dir = tempfile::tempdir().unwrap();
        let (share, tool) = share_with(dir.path(), "vcmailbox");
        let out =
            crate::host::cmd::stdout(Command::new(&tool).args(["0x0003808b", "4", "4", "0xf16"]))
                .unwrap();
        assert_eq!(
            out.trim_end(),
            "0x0000001c 0x80000000 0x0003808b 0x00000004 0x80000004 0x00000f16 0x00000000"
        );
        let mut pi5 =
            crate::firmware::bootloader::Bootloader::release(crate::firmware::eeprom::Board::Pi5)
                .unwrap();
        after_boot(&share, &mut pi5).unwrap();
        assert_eq!(pi5.reboot_order(), Some(BootOrder(0xf16)));
        assert!(!super::dir(&share).join(REBOOT_ORDER).exists());
        let other = Command::new(&tool)
            .args(["0x00030002", "8", "4", "1"])
            .output()
            .unwrap();
        assert!(!other.status.success());
        assert!(String::from_utf8_lossy(&other.stderr).contains("not played"));
    }

    /// What rpi-eeprom-update runs on a Pi 5: the probe (`-V`) names the
    /// chip, `-w` writes an image the official tool built (refusing one of
    /// the wrong size), `-v` verifies it; once the boot has ended the
    /// EEPROM holds it, with its config and the update time it was
    /// stamped with.
    #[test]
    fn flashrom_writes_the_spi_flash_that_becomes_the_eeprom() {
        if !crate::host::test_disks::have_tools(&["python3", "cmp"]) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (share, flashrom) = share_with(dir.path(), "flashrom");
        let mut pi5 =
            crate::firmware::bootloader::Bootloader::release(crate::firmware::eeprom::Board::Pi5)
                .unwrap();
        let spec = crate::firmware::spec::BootSpec {
            disk: "sd".into(),
            boot_mode: crate::firmware::eeprom::BootMode::SdCard,
            partition: 1,
            config_file: "config.txt".into(),
            tryboot: false,
            kernel: PathBuf::new(),
            initrd: None,
            cmdline: String::new(),
            dtb: None,
            notes: Vec::new(),
        };
        before_boot(&share, Model::Pi5, &pi5, &spec).unwrap();
        let spidev = dir.path().join("spidev10.0");
        fs::write(&spidev, "").unwrap();
        let programmer = format!("linux_spi:dev={},spispeed=16000", spidev.display());
        let run = |args: &[&str]| {
            Command::new(&flashrom)
                .args(["-p", &programmer])
                .args(args)
                .output()
                .unwrap()
        };
        let probe = run(&["-V"]);
        assert!(probe.status.success());
        assert!(String::from_utf8_lossy(&probe.stdout)
            .lines()
            .any(|l| l.starts_with("Found Winbond flash chip \"") && l.contains("(2048 kB, SPI)")));
        let config = dir.path().join("boot.conf");
        fs::write(
            &config,
            "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf416\nPCIE_PROBE=1\n",
        )
        .unwrap();
        let upd = dir.path().join("pieeprom.upd");
        crate::host::cmd::run(
            Command::new("python3")
                .arg(crate::firmware::bootloader::rpi_eeprom_data().join("rpi-eeprom-config"))
                .args(["--timestamp", "1760000000", "--config"])
                .arg(&config)
                .arg("--out")
                .arg(&upd)
                .arg(crate::firmware::bootloader::release_image(
                    crate::firmware::eeprom::Board::Pi5,
                )),
        )
        .unwrap();
        let upd = upd.to_str().unwrap();
        assert!(
            !run(&["-v", upd]).status.success(),
            "verified before it was written"
        );
        let small = dir.path().join("small.bin");
        fs::write(&small, [0u8; 16]).unwrap();
        assert!(!run(&["-w", small.to_str().unwrap()]).status.success());
        assert!(run(&["-w", upd]).status.success());
        assert!(run(&["-v", upd]).status.success());
        after_boot(&share, &mut pi5).unwrap();
        assert_eq!(pi5.image(), &fs::read(upd).unwrap()[..]);
        assert!(pi5.config().contains("PCIE_PROBE=1"), "{}", pi5.config());
        assert_eq!(pi5.update_timestamp(), 1_760_000_000);
        // Without the SPI device the probe fails, as rpi-eeprom-update
        // expects on a Pi without one.
        fs::remove_file(&spidev).unwrap();
        assert!(!run(&["-V"]).status.success());
    }
}
