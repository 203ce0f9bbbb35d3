//! The Pi the firmware stand-in plays ([`Model`]): a Pi 4, a Pi 5 or a
//! Pi 3, with what each one's boot ROM and bootloader do differently: the
//! config.txt section it reads, its bootloader and boot order, which buses
//! a boot mode finds, the file that makes a FAT partition bootable, the
//! device tree it names and loads.

use crate::firmware::bootloader::Bootloader;
use crate::firmware::eeprom::{Board, BootMode, BootOrder};
use crate::host::disks::Bus;
use anyhow::Result;

/// The EEPROM config of a Pi 4 set up for USB/NVMe boot, which the x86
/// guest's Pi 4 starts with: SD card first, then NVMe, then USB mass
/// storage.
pub const PI4_BOOTCONF: &str = "[all]\nBOOT_ORDER=0xf461\n";

/// The Pi the stand-in plays. The x86 guest plays a Pi 4 (its disks and
/// boot order) or a Pi 5 ([`crate::Pi::play`]); QEMU's `raspi3b` machine is
/// a Pi 3 Model B, its `raspi4b` a Pi 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Pi4B,
    /// A Raspberry Pi 5: the BCM2712's bootloader, its `[pi5]` section,
    /// NVMe only where PCIe is probed (`PCIE_PROBE=1` or a HAT+).
    Pi5,
    /// With the one-time OTP setting for USB boot (`program_usb_boot_mode`):
    /// the SD card first, then USB mass storage. No EEPROM bootloader, so no
    /// tryboot, and no NVMe.
    Pi3B,
}

impl Model {
    /// The config.txt section filter naming this model.
    pub(super) fn section(self) -> &'static str {
        match self {
            Model::Pi4B => "pi4",
            Model::Pi5 => "pi5",
            Model::Pi3B => "pi3",
        }
    }

    /// The board of its EEPROM bootloader; None for a Pi 3, whose boot
    /// ROM reads the SD card (and USB, after the OTP bit) itself.
    pub fn board(self) -> Option<Board> {
        match self {
            Model::Pi4B => Some(Board::Pi4),
            Model::Pi5 => Some(Board::Pi5),
            Model::Pi3B => None,
        }
    }

    /// The bootloader a Pi of this model starts with: a Pi 5's release
    /// image as it ships; the x86 guest's Pi 4 the release image run with
    /// [`PI4_BOOTCONF`], a Pi 4 set up for USB and NVMe boot; a Pi 3 none.
    pub fn bootloader(self) -> Result<Option<Bootloader>> {
        Ok(match self {
            Model::Pi4B => {
                let mut pi4 = Bootloader::release(Board::Pi4)?;
                pi4.set_config(PI4_BOOTCONF);
                Some(pi4)
            }
            Model::Pi5 => Some(Bootloader::release(Board::Pi5)?),
            Model::Pi3B => None,
        })
    }

    /// The disks' buses a boot mode finds. USB mass storage is either
    /// kind of USB disk.
    pub(super) fn buses(mode: BootMode) -> &'static [Bus] {
        match mode {
            BootMode::SdCard => &[Bus::Sd],
            BootMode::Nvme => &[Bus::Nvme],
            BootMode::UsbMassStorage => &[Bus::UsbUas, Bus::UsbStorage],
            _ => &[],
        }
    }

    /// The boot modes in the order a boot tries them: a Pi 3's boot ROM
    /// has a fixed order; a Pi 4 or 5 follows its bootloader's order
    /// ([`Bootloader::boot_order`]), digit by digit from the right, one
    /// pass up to the restart or the stop.
    pub(super) fn modes(self, order: Option<BootOrder>) -> Vec<BootMode> {
        match order {
            Some(order) => order.modes(),
            None => vec![BootMode::SdCard, BootMode::UsbMassStorage],
        }
    }

    /// The file whose presence makes a FAT partition one this model's
    /// bootloader boots from, where it has one: a Pi 4's loads the GPU
    /// firmware, `start4.elf`; a Pi 5's (which has no GPU firmware) needs
    /// `config.txt` (PI-FACTS, "Boot order and trial boots").
    pub fn firmware_file(self) -> Option<&'static str> {
        match self {
            Model::Pi4B => Some("start4.elf"),
            Model::Pi5 => Some("config.txt"),
            Model::Pi3B => None,
        }
    }

    /// How the device tree names the Pi: its `model`, its `compatible`
    /// list (NUL-separated) and its board revision code
    /// (`/system/linux,revision`, which rpi-eeprom-update reads).
    pub fn identity(self) -> (&'static str, &'static str, u32) {
        match self {
            Model::Pi4B => (
                "Raspberry Pi 4 Model B Rev 1.4",
                "raspberrypi,4-model-b\0brcm,bcm2711\0",
                0x00c0_3114,
            ),
            Model::Pi5 => (
                "Raspberry Pi 5 Model B Rev 1.0",
                "raspberrypi,5-model-b\0brcm,bcm2712\0",
                0x00c0_4170,
            ),
            Model::Pi3B => (
                "Raspberry Pi 3 Model B Rev 1.2",
                "raspberrypi,3-model-b\0brcm,bcm2837\0",
                0x00a0_2082,
            ),
        }
    }

    /// Whether `reboot "0 tryboot"` makes the next boot a trial boot: only
    /// the EEPROM bootloader of the Pi 4 family (and later) keeps the flag.
    pub fn has_tryboot(self) -> bool {
        self.board().is_some()
    }

    /// The device trees the firmware looks for, in order: with
    /// `upstream_kernel=1` (Debian's raspi-firmware writes it) upstream
    /// Linux's name first, then the Raspberry Pi kernel's, which the
    /// firmware falls back to.
    pub fn device_trees(self, upstream_kernel: bool) -> &'static [&'static str] {
        match (self, upstream_kernel) {
            (Model::Pi4B, _) => &["bcm2711-rpi-4-b.dtb"],
            (Model::Pi5, _) => &["bcm2712-rpi-5-b.dtb"],
            (Model::Pi3B, true) => &["bcm2837-rpi-3-b.dtb", "bcm2710-rpi-3-b.dtb"],
            (Model::Pi3B, false) => &["bcm2710-rpi-3-b.dtb"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Pi 4's bootloader running `config`.
    fn pi4(config: &str) -> Bootloader {
        let mut pi4 = Bootloader::release(Board::Pi4).unwrap();
        pi4.set_config(config);
        pi4
    }

    fn pi4_default() -> Bootloader {
        Model::Pi4B.bootloader().unwrap().unwrap()
    }

    #[test]
    fn a_pi4_boots_in_its_eeprom_order_and_its_tryboot_section_in_a_trial() {
        use BootMode::*;
        let modes = |bootloader: &mut Bootloader, tryboot| {
            let (order, _) = bootloader.boot_order(tryboot, false).unwrap();
            Model::Pi4B.modes(Some(order))
        };
        let all = [SdCard, Nvme, UsbMassStorage, Restart];
        assert_eq!(modes(&mut pi4_default(), false), all);
        assert_eq!(modes(&mut pi4_default(), true), all);
        let mut usb_trial = pi4("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        assert_eq!(
            modes(&mut usb_trial, false),
            [SdCard, UsbMassStorage, Restart]
        );
        assert_eq!(
            modes(&mut usb_trial, true),
            [UsbMassStorage, SdCard, Restart]
        );
        // A Pi 3 has no EEPROM: its ROM's order.
        assert_eq!(Model::Pi3B.modes(None), [SdCard, UsbMassStorage]);
        assert_eq!(Model::buses(UsbMassStorage), [Bus::UsbUas, Bus::UsbStorage]);
        assert!(pi4("BOOT_ORDER=usb\n").boot_order(false, false).is_err());
    }
}
