//! What TRIM reaches on a disk, and what pimigrate can do about it.
//!
//! The kernel sends no discard to a USB disk unless it is told to: the
//! usb-storage driver skips the VPD pages that describe provisioning
//! (`skip_vpd_pages`) and reads the capacity with READ CAPACITY(10), so
//! the disk's LBPME bit is never seen, and the disk's `provisioning_mode`
//! stays `full` (drivers/usb/storage/scsiglue.c, drivers/scsi/sd.c). Under
//! uas the kernel does read the pages and READ CAPACITY(16), but most
//! bridges answer LBPME=0 there, with the same result. Raspberry Pi's
//! engineers keep it so on purpose: "far too many devices claim support
//! but freeze/corrupt data/brick themselves"
//! (RPi-Distro/raspberrypi-sys-mods#108). So pimigrate reads what the
//! bridge itself says (the Logical Block Provisioning page, 0xB2, and the
//! Block Limits page, 0xB0) and offers a rule for that one bridge
//! ([`rule::TrimRule`]), never a blanket one. An NVMe drive needs none:
//! the nvme driver sets `discard_max_bytes` when the drive supports
//! Dataset Management. An SD card is never a candidate.
//!
//! - [`vpd`] parses the pages; [`sgio`] asks a disk for one.
//! - [`TrimFacts::read`] gathers what sysfs and the pages say.
//! - [`decision`] turns the facts into the plan's [`decision::TrimDecision`].
//! - [`rule`] writes the udev rule; [`timer`] checks `fstrim.timer` on a
//!   root tree; [`fitrim`] trims a mounted filesystem once.

pub mod decision;
pub mod fitrim;
pub mod rule;
pub mod sgio;
pub mod timer;
pub mod vpd;

use crate::host::Host;
use crate::system::disks::{Disk, Transport};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use vpd::{BlockLimits, Provisioning};

/// The discard limits of a disk's request queue, from sysfs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueDiscard {
    /// `queue/discard_max_bytes`: 0 means the kernel sends no discard.
    pub max_bytes: Option<u64>,
    /// `queue/discard_max_hw_bytes`: what the driver allows.
    pub max_hw_bytes: Option<u64>,
    /// `queue/discard_granularity`.
    pub granularity: Option<u64>,
}

/// The SCSI disk driver's view of a SCSI disk (`scsi_disk/H:C:T:L/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScsiDisk {
    /// `H:C:T:L`.
    pub address: String,
    /// `full`, `unmap`, `writesame_16`, `writesame_10`, `writesame_zero`,
    /// or `disabled` (the disk failed a discard and the kernel gave up).
    pub provisioning_mode: Option<String>,
    /// `thin_provisioning`: LBPME as READ CAPACITY(16) reported it (0 when
    /// the kernel never asked, as behind usb-storage).
    pub thin_provisioning: Option<bool>,
    /// The device's `scsi_level` (its INQUIRY version plus one): VPD pages
    /// came with SPC-2, level 5.
    pub scsi_level: Option<u8>,
}

/// `scsi_level` of SPC-2 (include/scsi/scsi.h `SCSI_SPC_2`).
pub const SCSI_LEVEL_SPC2: u8 = 5;

/// Where the VPD pages came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VpdSource {
    /// The kernel read them at probe time (`device/vpd_pg*`).
    Sysfs,
    /// pimigrate asked with INQUIRY through SG_IO.
    Inquiry,
}

/// Why the VPD pages were not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum VpdNotRead {
    /// The kernel skipped them (usb-storage does, for bridges that crash
    /// on them) and pimigrate was not to ask.
    NotAsked,
    /// The kernel skipped them, and the disk is in use: a bridge that
    /// chokes on the question would take what is mounted with it.
    DiskInUse,
    /// The device claims a SCSI version before SPC-2, which has no VPD
    /// pages to speak of.
    BeforeSpc2 { scsi_level: Option<u8> },
    /// Asked, and the device did not answer.
    Failed { error: String },
}

/// The VPD pages about provisioning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Vpd {
    /// Not a SCSI disk (MMC, NVMe, virtio, loop).
    NotScsi,
    /// Read; a page the device does not list is `None`.
    Read {
        source: VpdSource,
        supported: Vec<u8>,
        block_limits: Option<BlockLimits>,
        provisioning: Option<Provisioning>,
    },
    NotRead {
        why: VpdNotRead,
    },
}

/// When pimigrate may send INQUIRY to a disk whose pages the kernel did
/// not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inquiry {
    Never,
    /// Only when nothing on the disk is mounted, swapped on or held: the
    /// target of a migration before it is written, never the running root.
    WhenIdle,
}

/// Everything that says whether TRIM reaches a disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrimFacts {
    pub disk: String,
    pub transport: Transport,
    /// `VID:PID` of the USB bridge, and its driver (`uas`, `usb-storage`).
    pub usb_id: Option<String>,
    pub usb_driver: Option<String>,
    pub logical_block_size: u32,
    pub physical_block_size: u32,
    pub queue: QueueDiscard,
    pub scsi: Option<ScsiDisk>,
    pub vpd: Vpd,
}

impl TrimFacts {
    /// Reads the facts of `disk`; pages the kernel did not read are asked
    /// for through SG_IO as `inquiry` allows (never on a fixture tree).
    pub fn read(host: &Host, disk: &Disk, inquiry: Inquiry) -> TrimFacts {
        let live = host.is_live();
        let device = disk.path.clone();
        Self::read_with(host, disk, inquiry, &mut |page| {
            if !live {
                return Err("no device nodes in a fixture tree".to_string());
            }
            sgio::inquiry_vpd(&device, page).map_err(|e| e.to_string())
        })
    }

    /// [`TrimFacts::read`] with the INQUIRY given: `ask(page)` returns the
    /// page's bytes.
    pub fn read_with(
        host: &Host,
        disk: &Disk,
        inquiry: Inquiry,
        ask: &mut dyn FnMut(u8) -> Result<Vec<u8>, String>,
    ) -> TrimFacts {
        let block = host.sys(&format!("block/{}", disk.name));
        let number =
            |rest: &str| -> Option<u64> { host.read_attr(&block.join(rest))?.parse().ok() };
        let queue = QueueDiscard {
            max_bytes: number("queue/discard_max_bytes"),
            max_hw_bytes: number("queue/discard_max_hw_bytes"),
            granularity: number("queue/discard_granularity"),
        };
        let scsi = scsi_disk(host, &block.join("device"));
        let vpd = if scsi.is_none() {
            Vpd::NotScsi
        } else {
            read_vpd(&block.join("device"), disk, scsi.as_ref(), inquiry, ask)
        };
        TrimFacts {
            disk: disk.name.clone(),
            transport: disk.transport,
            usb_id: disk.usb.as_ref().map(|u| u.id()),
            usb_driver: disk.usb.as_ref().and_then(|u| u.driver.clone()),
            logical_block_size: disk.logical_sector_size,
            physical_block_size: disk.physical_sector_size,
            queue,
            scsi,
            vpd,
        }
    }
}

/// The `scsi_disk` entry under a SCSI device, `None` for other disks.
fn scsi_disk(host: &Host, device: &Path) -> Option<ScsiDisk> {
    let entry = std::fs::read_dir(device.join("scsi_disk"))
        .ok()?
        .flatten()
        .next()?;
    let attr = |name: &str| host.read_attr(&entry.path().join(name));
    Some(ScsiDisk {
        address: entry.file_name().to_string_lossy().into_owned(),
        provisioning_mode: attr("provisioning_mode"),
        thin_provisioning: attr("thin_provisioning").map(|v| v == "1"),
        scsi_level: host
            .read_attr(&device.join("scsi_level"))
            .and_then(|v| v.parse().ok()),
    })
}

/// The pages from sysfs when the kernel read them, else by INQUIRY when
/// allowed: page 0x00 first, then 0xB0 and 0xB2 only if it lists them.
fn read_vpd(
    device: &Path,
    disk: &Disk,
    scsi: Option<&ScsiDisk>,
    inquiry: Inquiry,
    ask: &mut dyn FnMut(u8) -> Result<Vec<u8>, String>,
) -> Vpd {
    // `device` is already the path to open (from Host::sys).
    let sysfs = |name: &str| std::fs::read(device.join(name)).ok();
    if let Some(list) = sysfs("vpd_pg0") {
        return pages(VpdSource::Sysfs, &list, &mut |code| {
            sysfs(&format!("vpd_pg{code:02x}")).ok_or_else(|| "not in sysfs".to_string())
        });
    }
    let level = scsi.and_then(|s| s.scsi_level);
    if level.is_some_and(|l| l < SCSI_LEVEL_SPC2) {
        return Vpd::NotRead {
            why: VpdNotRead::BeforeSpc2 { scsi_level: level },
        };
    }
    match inquiry {
        Inquiry::Never => Vpd::NotRead {
            why: VpdNotRead::NotAsked,
        },
        Inquiry::WhenIdle if !disk.uses().is_empty() => Vpd::NotRead {
            why: VpdNotRead::DiskInUse,
        },
        Inquiry::WhenIdle => match ask(0x00) {
            Ok(list) => pages(VpdSource::Inquiry, &list, ask),
            Err(error) => Vpd::NotRead {
                why: VpdNotRead::Failed { error },
            },
        },
    }
}

/// The pages named in the supported list `list`, fetched with `fetch`.
fn pages(
    source: VpdSource,
    list: &[u8],
    fetch: &mut dyn FnMut(u8) -> Result<Vec<u8>, String>,
) -> Vpd {
    let supported = match vpd::supported_pages(list) {
        Ok(codes) => codes,
        Err(e) => {
            return Vpd::NotRead {
                why: VpdNotRead::Failed {
                    error: e.to_string(),
                },
            }
        }
    };
    let mut fetch_page = |code: u8| -> Result<Option<Vec<u8>>, String> {
        if supported.contains(&code) {
            fetch(code).map(Some)
        } else {
            Ok(None)
        }
    };
    let read = (|| -> Result<(Option<BlockLimits>, Option<Provisioning>), String> {
        let limits = fetch_page(0xb0)?
            .map(|p| vpd::block_limits(&p))
            .transpose()
            .map_err(|e| e.to_string())?;
        let provisioning = fetch_page(0xb2)?
            .map(|p| vpd::provisioning(&p))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok((limits, provisioning))
    })();
    match read {
        Ok((block_limits, provisioning)) => Vpd::Read {
            source,
            supported,
            block_limits,
            provisioning,
        },
        Err(error) => Vpd::NotRead {
            why: VpdNotRead::Failed { error },
        },
    }
}

/// Where a rule or link lands on a root tree mounted at `root`.
pub fn on_root(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

#[cfg(test)]
mod tests;
