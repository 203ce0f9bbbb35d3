//! The disks of one emulated Pi: raw image files on the host, each attached
//! to the bus a real Pi would see it on, with a speed profile.

use crate::host::cmd;
use crate::host::profiles::Profile;
use anyhow::{ensure, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// QEMU's I/O engine for the disks (`-drive aio=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoEngine {
    /// `io_uring`, for scenarios that time nothing: a read the host's page
    /// cache holds completes at once. QEMU's SD card reads 512 bytes per
    /// request, synchronously; with `threads` each waits for a worker
    /// thread, which on a busy host waits for a core. Side by side on a
    /// loaded host a root-only migration's copy took 28 % less time and the
    /// boots 10-17 % less.
    IoUring,
    /// `threads`, for scenarios that measure speed: the speed profiles
    /// (`testbed/profiles.tsv`) and the speed scenarios' margins were
    /// measured with it.
    Threads,
}

impl IoEngine {
    pub fn aio(self) -> &'static str {
        match self {
            IoEngine::IoUring => "io_uring",
            IoEngine::Threads => "threads",
        }
    }
}

/// How a disk is attached; decides the guest's device name and transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bus {
    /// SD card on an SDHCI controller: `mmcblk0`. The image size must be a
    /// power of two (QEMU's SD card model insists).
    Sd,
    /// USB 3 SSD behind a UAS bridge: `sdX`, transport `usb`.
    UsbUas,
    /// USB mass storage (bulk-only), like a flash drive: `sdX`, transport `usb`.
    UsbStorage,
    /// NVMe: `nvme0n1`.
    Nvme,
}

impl Bus {
    /// Largest request the emulated device sends to QEMU's block layer,
    /// where throttling counts requests; 0 when it passes the guest's own.
    pub fn request_size(self) -> u64 {
        match self {
            // hw/sd/sd.c transfers one block per read/write call.
            Bus::Sd => 512,
            _ => 0,
        }
    }

    pub fn is_usb(self) -> bool {
        matches!(self, Bus::UsbUas | Bus::UsbStorage)
    }
}

/// One disk: a raw image file, a bus and a speed profile.
#[derive(Debug, Clone)]
pub struct Disk {
    /// Short name, unique within a machine (used as the QEMU drive id).
    pub name: String,
    pub bus: Bus,
    pub profile: Profile,
    pub image: PathBuf,
    /// The guest's discards reach the image (`-drive discard=unmap`): a
    /// TRIM punches a hole in the host's sparse file. QEMU's default,
    /// `ignore`, drops them in its block layer.
    pub discard: bool,
    /// A USB Bulk-Only disk that claims this SCSI version (`usb-bot` with
    /// `scsi-hd,scsi_version=N`): 2 reports no VPD pages, which Linux then
    /// never reads (`scsi_level` 3, before SPC-2).
    pub scsi_version: Option<u8>,
}

impl Disk {
    /// A copy of `pristine` at `image`, so the cached original is never written.
    /// The copy stays sparse, which keeps it to a few seconds.
    pub fn copy_of(
        pristine: &Path,
        image: PathBuf,
        name: &str,
        bus: Bus,
        profile: &str,
    ) -> Result<Disk> {
        if let Some(dir) = image.parent() {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        cmd::run(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(pristine)
                .arg(&image),
        )
        .with_context(|| {
            format!(
                "cannot copy the pristine image {} for disk {name}",
                pristine.display()
            )
        })?;
        Disk::new(image, name, bus, profile)
    }

    /// A new, empty (all zero, sparse) disk of `size` bytes.
    pub fn blank(image: PathBuf, size: u64, name: &str, bus: Bus, profile: &str) -> Result<Disk> {
        if let Some(dir) = image.parent() {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let _ = fs::remove_file(&image);
        let f = fs::File::create(&image)
            .with_context(|| format!("cannot create disk image {}", image.display()))?;
        f.set_len(size)
            .with_context(|| format!("cannot size disk image {}", image.display()))?;
        Disk::new(image, name, bus, profile)
    }

    /// An existing image file.
    pub fn new(image: PathBuf, name: &str, bus: Bus, profile: &str) -> Result<Disk> {
        let len = fs::metadata(&image)
            .with_context(|| format!("disk image {} is missing", image.display()))?
            .len();
        if bus == Bus::Sd {
            ensure!(
                len.is_power_of_two(),
                "SD card image {} is {len} bytes; QEMU's SD card needs a power of two",
                image.display()
            );
        }
        ensure!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "disk name {name:?}: use letters, digits and '-' (it becomes a QEMU id)"
        );
        Ok(Disk {
            name: name.to_string(),
            bus,
            profile: Profile::named(profile)?,
            image,
            discard: false,
            scsi_version: None,
        })
    }

    /// The QEMU id of the device a hot-unplug (QMP `device_del`) removes:
    /// the USB device, which takes its SCSI disk with it. `None` where the
    /// machine has no hot-plug slot for the bus (the SD card, NVMe on q35's
    /// root bus).
    pub fn device_id(&self) -> Option<String> {
        match self.bus {
            Bus::UsbUas => Some(format!("uas-{}", self.name)),
            Bus::UsbStorage => Some(format!("usb-{}", self.name)),
            Bus::Sd | Bus::Nvme => None,
        }
    }

    /// The QEMU arguments for this disk; the controllers it hangs off come
    /// from [`controller_args`]. Guests find the disk by its serial
    /// `TB-<NAME>` (`lsblk -o NAME,SERIAL`), not by its kernel name.
    pub fn qemu_args(&self, io_engine: IoEngine) -> Vec<String> {
        let id = format!("drv-{}", self.name);
        // cache=unsafe: the guest's flushes are not passed on to the host's
        // disk. A raw image has no cache of QEMU's own, so every write QEMU
        // took from the guest is in the host's page cache at once, and
        // killing QEMU (the testbed's power cut) still loses only what the
        // guest had not written to its "disk" yet; only a crash of the host
        // would lose more, and the images are scratch copies. With
        // cache=writeback each flush was an fdatasync of the image, which
        // waits behind the host's other writers (the builds beside the
        // speed scenarios): the likeliest cause of the guests that used no
        // CPU for two minutes there (docs/testbed/README.md, "Two lanes").
        let drive = format!(
            "if=none,id={id},file={},format=raw,cache=unsafe,aio={}{}{}",
            self.image.display(),
            io_engine.aio(),
            if self.discard { ",discard=unmap" } else { "" },
            self.profile.drive_options(self.bus.request_size())
        );
        let serial = format!("TB-{}", self.name.to_uppercase());
        let dev_id = self.device_id().unwrap_or_default();
        let device = match self.bus {
            Bus::Sd => vec![format!("sd-card,drive={id}")],
            Bus::UsbUas => vec![
                // The USB serial is what udev reports; the SCSI one is for sg_inq.
                format!("usb-uas,id={dev_id},bus=xhci.0,serial={serial}"),
                format!("scsi-hd,bus={dev_id}.0,scsi-id=0,lun=0,drive={id},serial={serial}"),
            ],
            // hw/usb/dev-storage-bot.c: the same Bulk-Only device, its SCSI
            // disk attached by hand so that its properties can be set.
            Bus::UsbStorage if self.scsi_version.is_some() => vec![
                // The USB serial is what udev reports (lsblk's SERIAL).
                format!("usb-bot,id={dev_id},bus=xhci.0,serial={serial}"),
                format!(
                    "scsi-hd,bus={dev_id}.0,scsi-id=0,lun=0,drive={id},serial={serial},removable=on,scsi_version={}",
                    self.scsi_version.unwrap_or(5)
                ),
            ],
            Bus::UsbStorage => vec![format!(
                "usb-storage,id={dev_id},bus=xhci.0,drive={id},removable=on,serial={serial}"
            )],
            Bus::Nvme => vec![format!("nvme,drive={id},serial={serial}")],
        };
        let mut args = vec!["-drive".to_string(), drive];
        for d in device {
            args.push("-device".into());
            args.push(d);
        }
        args
    }
}

impl Disk {
    /// The QEMU arguments for this disk on a raspi machine: the SD card in
    /// the SoC's slot, a USB disk as bulk-only mass storage on dwc2 (which
    /// has no USB 3, so no UAS); the Pi 3 has no NVMe.
    pub fn raspi_args(&self, io_engine: IoEngine) -> Result<Vec<String>> {
        let id = format!("drv-{}", self.name);
        let options = format!(
            "file={},format=raw,cache=unsafe,aio={}{}",
            self.image.display(),
            io_engine.aio(),
            self.profile.drive_options(self.bus.request_size())
        );
        let serial = format!("TB-{}", self.name.to_uppercase());
        Ok(match self.bus {
            Bus::Sd => vec!["-drive".into(), format!("if=sd,index=0,{options}")],
            Bus::UsbStorage => vec![
                "-drive".into(),
                format!("if=none,id={id},{options}"),
                "-device".into(),
                format!("usb-storage,drive={id},removable=on,serial={serial}"),
            ],
            Bus::UsbUas | Bus::Nvme => anyhow::bail!(
                "disk {}: a Raspberry Pi 3 has no {:?}; attach it as Bus::UsbStorage",
                self.name,
                self.bus
            ),
        })
    }
}

/// Controllers the given disks need, each once: SDHCI for the card, one xHCI
/// for all USB disks (NVMe controllers come with each NVMe disk).
pub fn controller_args(disks: &[Disk]) -> Vec<String> {
    let mut args = Vec::new();
    if disks.iter().any(|d| d.bus == Bus::Sd) {
        args.extend(["-device".into(), "sdhci-pci".into()]);
    }
    if disks.iter().any(|d| d.bus.is_usb()) {
        args.extend(["-device".into(), "qemu-xhci,id=xhci".into()]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drive_takes_the_machines_io_engine_and_the_profiles_throttle() {
        let disk = Disk {
            name: "ssd".into(),
            bus: Bus::UsbUas,
            profile: Profile::named("usb-flash").unwrap(),
            image: PathBuf::from("/nonexistent/ssd.img"),
            discard: false,
            scsi_version: None,
        };
        let drive = |engine| disk.qemu_args(engine)[1].clone();
        assert!(drive(IoEngine::IoUring).contains(",aio=io_uring,"));
        let calibrated = drive(IoEngine::Threads);
        assert!(calibrated.contains(",aio=threads,"), "{calibrated}");
        assert!(
            calibrated.ends_with(",throttling.bps-write=5000000"),
            "{calibrated}"
        );
    }

    /// A disk that passes discards on and claims SCSI-2: `usb-bot` with its
    /// SCSI disk's version set, the drive unmapping what the guest trims.
    #[test]
    fn a_scsi_2_disk_on_usb_bot_and_discards_reaching_the_image() {
        let disk = Disk {
            name: "old".into(),
            bus: Bus::UsbStorage,
            profile: Profile::named("usb-ssd").unwrap(),
            image: PathBuf::from("/nonexistent/old.img"),
            discard: true,
            scsi_version: Some(2),
        };
        let args = disk.qemu_args(IoEngine::IoUring);
        assert!(args[1].contains(",aio=io_uring,discard=unmap"), "{args:?}");
        assert_eq!(args[3], "usb-bot,id=usb-old,bus=xhci.0,serial=TB-OLD");
        assert_eq!(
            args[5],
            "scsi-hd,bus=usb-old.0,scsi-id=0,lun=0,drive=drv-old,serial=TB-OLD,removable=on,scsi_version=2"
        );
        let plain = Disk {
            discard: false,
            scsi_version: None,
            ..disk
        };
        let args = plain.qemu_args(IoEngine::IoUring);
        assert!(!args[1].contains("discard"), "{args:?}");
        assert!(args[3].starts_with("usb-storage,id=usb-old,"), "{args:?}");
    }
}
