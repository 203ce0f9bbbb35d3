//! The emulated Raspberry Pi testbed.
//!
//! Raspberry Pis played by QEMU (TCG), of two kinds. The x86 guest
//! ([`Pi::new`]) is a Pi 4 in all but its CPU: disks on the buses a Pi has
//! (SD card via SDHCI, USB SSD via UAS, USB flash via usb-storage, NVMe),
//! each with a speed profile, and a command channel over a 9p share. The
//! ARM lane ([`Pi::raspi3b`], [`Pi::raspi4b`]) boots QEMU's `raspi3b` and
//! QEMU 10's `raspi4b` machine models with the Pi's own device tree, USB
//! disks behind dwc2 and the command channel on the SD card's FAT
//! partition ([`card_channel`]). Both have a firmware stand-in that reads
//! `config.txt`/`tryboot.txt` from the boot disk's FAT partition as the
//! model's firmware would; the scenarios are built from these
//! (docs/testbed.md).
//!
//! ```no_run
//! use pi_testbed::{After, Bus, ImageSet, Pi};
//! # fn main() -> anyhow::Result<()> {
//! let images = ImageSet::ensure()?;
//! let mut pi = Pi::new("my-scenario")?;
//! pi.insert_sd_copy(&images.bookworm, "sd-a1")?;
//! pi.attach_blank("ssd", Bus::UsbUas, 8 << 30, "usb-ssd")?;
//! pi.share().place_binary("target/release/pimigrate".as_ref(), "pimigrate")?;
//! let boot = pi.run("pimigrate --version", After::PowerOff)?;
//! println!("{}", boot.job_ok()?.stdout);
//! # Ok(()) }
//! ```

pub mod attach;
pub mod bootloader;
pub mod card_channel;
pub mod cmd;
pub mod device_tree;
pub mod disks;
pub mod eeprom;
pub mod fat;
pub mod fault;
pub mod firmware;
pub mod firmware_channel;
pub mod fsck;
pub mod image;
pub mod inspect;
pub mod live;
pub mod load;
pub mod mbr;
pub mod pi;
pub mod pi_tools;
pub mod power;
pub mod profiles;
pub mod qemu;
pub mod qmp;
pub mod raspi4b;
pub mod recovery;
pub mod scenarios;
pub mod sections;
pub mod share;
#[cfg(test)]
mod test_disks;
pub mod unattended;

pub use disks::{Bus, Disk};
pub use image::ImageSet;
pub use pi::{clear_work, keep_work, work_dir, Boot, Pi};
pub use profiles::Profile;
pub use qemu::Ending;
pub use share::{After, JobOutput, Share};
