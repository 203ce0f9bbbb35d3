//! The emulated Raspberry Pi testbed.
//!
//! Raspberry Pis played by QEMU (TCG), of two kinds. The x86 guest
//! ([`Pi::new`]) is a Pi 4 in all but its CPU: disks on the buses a Pi has
//! (SD card via SDHCI, USB SSD via UAS, USB flash via usb-storage, NVMe),
//! each with a speed profile, and a command channel over a 9p share. The
//! ARM lane ([`Pi::raspi3b`], [`Pi::raspi4b`]) boots QEMU's `raspi3b` and
//! QEMU 10's `raspi4b` machine models with the Pi's own device tree, USB
//! disks behind dwc2 and the command channel on the SD card's FAT
//! partition ([`card_channel`](machine::card_channel)). Both have a firmware stand-in that reads
//! `config.txt`/`tryboot.txt` from the boot disk's FAT partition as the
//! model's firmware would; the scenarios are built from these
//! (docs/testbed/README.md).
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

// The rooms, each on the ones below it and never on one above: the
// scenarios on top, then the benchmarks, then the machine, the firmware
// stand-in and the host's tools (docs/testbed/README.md, "The code").
pub mod bench;
pub mod firmware;
pub mod host;
pub mod machine;
pub mod scenarios;

pub use host::disks::{Bus, Disk};
pub use host::image::ImageSet;
pub use host::profiles::Profile;
pub use host::share::{After, JobOutput, Share};
pub use machine::pi::{clear_work, keep_work, work_dir, Boot, Pi};
pub use machine::qemu::Ending;
