//! Whole disks and their partitions, from sysfs, the mount table, the
//! disk's own partition table and superblocks, and udev's database.
//!
//! Device names are never built by gluing strings together (`sda` + `1` works,
//! `mmcblk0` + `1` does not): partition names and `/dev` paths come from each
//! device's own sysfs entry.

use crate::host::Host;
use crate::system::mounts::{DevNo, MountTable, Swap};
use crate::system::probe::{self, FsInfo, TableInfo, TableKind};
use crate::system::udev::UdevProperties;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How a disk is attached; what the Pi firmware cares about when booting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Mmc,
    Usb,
    Nvme,
    Sata,
    Virtio,
    Scsi,
    /// loop, ram, zram: no hardware behind them.
    Virtual,
    Unknown,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_value(self).ok();
        f.write_str(text.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown"))
    }
}

/// The USB bridge in front of a USB disk: what to name when a bridge
/// misbehaves (`usb-storage.quirks=VID:PID:u`) or runs at USB 2 speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsbBridge {
    pub vendor_id: String,
    pub product_id: String,
    /// Link speed in Mbit/s as the kernel reports it: 480 is USB 2, 5000 USB 3.
    pub speed_mbps: Option<u32>,
    /// `uas` or `usb-storage`.
    pub driver: Option<String>,
    pub manufacturer: Option<String>,
    pub product: Option<String>,
    pub serial: Option<String>,
}

/// The host controller a disk hangs off: the first platform or PCI device
/// above it in sysfs that has a driver. On a Pi 3 the SD card's is
/// `sdhost-bcm2835` and a USB disk's `dwc2`; on a Pi 4 `mmc-bcm2835` or
/// `sdhci-iproc` and `xhci_hcd` (the VL805 on PCIe); on a Pi 5 `sdhci-brcmstb`
/// and the RP1's `xhci-hcd`. It says which port a disk is really on, which a
/// USB disk's 12 Mbit/s link or an SD card's slow bus can be traced to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Controller {
    /// The kernel driver bound to it (`sdhost-bcm2835`, `dwc2`, `xhci_hcd`).
    pub driver: String,
    /// Its sysfs name (`3f202000.mmc`, `0000:01:00.0`).
    pub device: String,
    /// `platform` or `pci`.
    pub bus: String,
}

impl UsbBridge {
    pub fn id(&self) -> String {
        format!("{}:{}", self.vendor_id, self.product_id)
    }

    /// The link's USB generation and the most a disk gets through it, when
    /// it is slower than USB 3: `("USB 2", "about 35 MB/s")`.
    pub fn slow_link(&self) -> Option<(&'static str, &'static str)> {
        match self.speed_mbps? {
            // Low and full speed: a USB 1.1 hub or port (a Pi 3's
            // disk behind a failing hub, QEMU's dwc2 model).
            s if s <= 12 => Some(("USB 1.1", "about 1 MB/s")),
            s if s < 5000 => Some(("USB 2", "about 35 MB/s")),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    pub number: u32,
    /// The kernel's name (`mmcblk0p2`); `None` when the kernel shows no device
    /// for it (no partition-table support, or a table not re-read yet).
    pub name: Option<String>,
    pub path: Option<PathBuf>,
    pub devno: Option<DevNo>,
    /// First sector in logical sectors of the disk.
    pub start: u64,
    pub start_bytes: u64,
    pub size_bytes: u64,
    pub fstype: Option<String>,
    pub label: Option<String>,
    pub uuid: Option<String>,
    pub partuuid: Option<String>,
    pub partlabel: Option<String>,
    pub mountpoints: Vec<PathBuf>,
    pub swap: bool,
    pub holders: Vec<String>,
}

impl Partition {
    /// Its node (`/dev/mmcblk0p2`), or "`disk` partition N" without one.
    pub fn node_name(&self, disk: &Path) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => format!("{} partition {}", disk.display(), self.number),
        }
    }
}

/// What a disk is to a migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Holds the root filesystem we copy or run from: never written.
    SourceRoot,
    /// Holds the boot partition: never written (but for the last, atomic
    /// cmdline.txt edit of a root-only move).
    SourceBoot,
    Candidate,
    Unsuitable,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disk {
    pub name: String,
    pub path: PathBuf,
    pub devno: DevNo,
    pub vendor: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub size_bytes: u64,
    pub size_human: String,
    pub logical_sector_size: u32,
    pub physical_sector_size: u32,
    pub transport: Transport,
    pub removable: bool,
    pub rotational: bool,
    pub read_only: bool,
    pub usb: Option<UsbBridge>,
    /// The host controller (null for loop, ram and zram devices).
    pub controller: Option<Controller>,
    /// For loop devices, the file behind them.
    pub backing_file: Option<PathBuf>,
    pub table: Option<TableKind>,
    pub disk_id: Option<String>,
    /// A filesystem written on the whole disk, without a partition table
    /// (a "superfloppy" USB stick, a loop device holding one partition).
    pub filesystem: Option<FsInfo>,
    pub partitions: Vec<Partition>,
    /// Whole-disk use: mounts, swap, device-mapper or md on the bare disk.
    pub mountpoints: Vec<PathBuf>,
    pub swap: bool,
    pub holders: Vec<String>,
    pub role: Role,
    /// Why the role is what it is (empty for a plain candidate).
    pub role_reasons: Vec<String>,
}

impl Disk {
    /// The role as one line: `candidate`, `unsuitable: too small, in use`.
    pub fn role_text(&self) -> String {
        let role = match self.role {
            Role::SourceRoot => "source-root",
            Role::SourceBoot => "source-boot",
            Role::Candidate => "candidate",
            Role::Unsuitable => "unsuitable",
        };
        if self.role_reasons.is_empty() {
            role.to_string()
        } else {
            format!("{role}: {}", self.role_reasons.join("; "))
        }
    }

    pub fn describe(&self) -> String {
        let name = crate::units::join_present([self.vendor.as_deref(), self.model.as_deref()]);
        if name.is_empty() {
            format!("{} ({})", self.path.display(), self.transport)
        } else {
            format!("{} ({}, {})", self.path.display(), name, self.transport)
        }
    }

    pub fn contains(&self, devno: DevNo) -> bool {
        self.devno == devno || self.partitions.iter().any(|p| p.devno == Some(devno))
    }

    /// Everything on this disk that the running system uses, in words.
    pub fn uses(&self) -> Vec<String> {
        let mut uses = Vec::new();
        let mut note = |what: &str, mountpoints: &[PathBuf], swap: bool, holders: &[String]| {
            for mp in mountpoints {
                uses.push(format!("{what} is mounted at {}", mp.display()));
            }
            if swap {
                uses.push(format!("{what} is active swap"));
            }
            for holder in holders {
                uses.push(format!("{what} is held by {holder}"));
            }
        };
        note(&self.name, &self.mountpoints, self.swap, &self.holders);
        for part in &self.partitions {
            let label = part
                .name
                .clone()
                .unwrap_or_else(|| format!("partition {}", part.number));
            note(&label, &part.mountpoints, part.swap, &part.holders);
        }
        uses
    }
}

/// The `/dev` name of a whole disk or partition by device number: the
/// node the kernel shows, or for a partition it shows none for (a loop disk
/// on a kernel without partition support) "`/dev/loop3` partition 2". The
/// one rule for naming a device in messages and checks.
pub fn device_name(disks: &[Disk], devno: DevNo) -> Option<String> {
    for disk in disks {
        if disk.devno == devno {
            return Some(disk.path.display().to_string());
        }
        if let Some(part) = disk.partitions.iter().find(|p| p.devno == Some(devno)) {
            return Some(part.node_name(&disk.path));
        }
    }
    None
}

/// Which devices to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions {
    /// Also loop, ram and zram devices.
    pub include_virtual: bool,
}

/// Reads every whole disk. Roles are left as `Candidate` with no reasons;
/// [`crate::system::roles`] assigns them once the source is known.
pub fn list_disks(
    host: &Host,
    mounts: &MountTable,
    swaps: &[Swap],
    options: ListOptions,
) -> anyhow::Result<Vec<Disk>> {
    use anyhow::Context;
    let block_dir = host.sys("block");
    let entries = std::fs::read_dir(&block_dir)
        .with_context(|| format!("listing block devices in {}", block_dir.display()))?;
    let swap_devnos: Vec<DevNo> = swaps
        .iter()
        .filter_map(|swap| devno_of_node(host, &swap.path))
        .collect();
    let mut disks = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(disk) = read_disk(host, &name, mounts, &swap_devnos)? {
            if disk.transport == Transport::Virtual && !options.include_virtual {
                continue;
            }
            disks.push(disk);
        }
    }
    disks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(disks)
}

/// The device number behind a `/dev` path: from the node itself on a live
/// system, from sysfs by the node's name in a fixture tree (which holds no
/// device nodes).
pub fn devno_of_node(host: &Host, path: &Path) -> Option<DevNo> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if host.is_live() {
        let meta = std::fs::metadata(path).ok()?;
        return meta
            .file_type()
            .is_block_device()
            .then(|| DevNo::from_raw(meta.rdev()));
    }
    let name = path.file_name()?.to_string_lossy().into_owned();
    let dev = host.read_attr(&host.sys(&format!("class/block/{name}/dev")))?;
    DevNo::parse(&dev)
}

fn flag(host: &Host, path: PathBuf) -> bool {
    host.read_attr(&path).as_deref() == Some("1")
}

fn read_number<T: std::str::FromStr>(host: &Host, path: PathBuf) -> Option<T> {
    host.read_attr(&path)?.parse().ok()
}

/// The `/dev` path a sysfs entry's uevent names (`DEVNAME=mmcblk0p1`).
fn dev_path(sys_entry: &Path, fallback_name: &str) -> PathBuf {
    let devname = std::fs::read_to_string(sys_entry.join("uevent"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
        })
        .unwrap_or_else(|| fallback_name.to_string());
    Path::new("/dev").join(devname)
}

fn read_disk(
    host: &Host,
    name: &str,
    mounts: &MountTable,
    swap_devnos: &[DevNo],
) -> anyhow::Result<Option<Disk>> {
    let sys_entry = host.sys(&format!("block/{name}"));
    let Some(devno) = host
        .read_attr(&sys_entry.join("dev"))
        .and_then(|d| DevNo::parse(&d))
    else {
        return Ok(None);
    };
    let size_bytes = read_number::<u64>(host, sys_entry.join("size")).unwrap_or(0) * 512;
    // An unattached loop device or an empty card reader slot: nothing to show.
    if size_bytes == 0 {
        return Ok(None);
    }
    let Attachment {
        usb,
        controller,
        transport,
    } = attachment(host, &sys_entry);
    let (vendor, model, serial) = identity(host, &sys_entry, transport, usb.as_ref());
    let logical_sector_size =
        read_number::<u32>(host, sys_entry.join("queue/logical_block_size")).unwrap_or(512);
    let path = dev_path(&sys_entry, name);
    let udev = UdevProperties::read(host, devno);
    let Contents {
        table,
        disk_id,
        filesystem,
        partitions,
    } = read_contents(
        host,
        &sys_entry,
        &path,
        &udev,
        logical_sector_size,
        mounts,
        swap_devnos,
    );

    let disk = Disk {
        name: name.to_string(),
        path,
        devno,
        vendor,
        model,
        serial: serial.or_else(|| udev.get("ID_SERIAL_SHORT")),
        size_bytes,
        size_human: crate::units::human_bytes(size_bytes),
        logical_sector_size,
        physical_sector_size: read_number(host, sys_entry.join("queue/physical_block_size"))
            .unwrap_or(logical_sector_size),
        transport,
        removable: flag(host, sys_entry.join("removable")),
        rotational: flag(host, sys_entry.join("queue/rotational")),
        read_only: flag(host, sys_entry.join("ro")),
        usb,
        controller,
        backing_file: host
            .read_attr(&sys_entry.join("loop/backing_file"))
            .map(PathBuf::from),
        table,
        disk_id,
        filesystem,
        partitions,
        mountpoints: mounts
            .of_device(devno)
            .map(|m| m.mountpoint.clone())
            .collect(),
        swap: swap_devnos.contains(&devno),
        holders: list_dir(&sys_entry.join("holders")),
        role: Role::Candidate,
        role_reasons: Vec::new(),
    };
    Ok(Some(disk))
}

/// Where a disk hangs in the sysfs tree: behind which USB bridge and
/// controller, and so its transport.
struct Attachment {
    usb: Option<UsbBridge>,
    controller: Option<Controller>,
    transport: Transport,
}

fn attachment(host: &Host, sys_entry: &Path) -> Attachment {
    let device_path = std::fs::canonicalize(sys_entry).unwrap_or_else(|_| sys_entry.to_path_buf());
    let sys_root = std::fs::canonicalize(host.sys("")).unwrap_or_else(|_| host.sys(""));
    let ancestry = device_path
        .strip_prefix(&sys_root)
        .unwrap_or(&device_path)
        .to_path_buf();
    let usb = find_usb_bridge(host, &device_path, &sys_root);
    let controller = find_controller(&device_path, &sys_root);
    let transport = transport_of(&ancestry, usb.is_some());
    Attachment {
        usb,
        controller,
        transport,
    }
}

/// What a disk holds: a partition table and its partitions, or a
/// filesystem on the whole disk.
struct Contents {
    table: Option<TableKind>,
    disk_id: Option<String>,
    filesystem: Option<FsInfo>,
    partitions: Vec<Partition>,
}

/// What the disk at `path` holds; its table as read from the disk
/// itself, else as udev names it.
fn read_contents(
    host: &Host,
    sys_entry: &Path,
    path: &Path,
    udev: &UdevProperties,
    logical_sector_size: u32,
    mounts: &MountTable,
    swap_devnos: &[DevNo],
) -> Contents {
    let table = read_table(host, path, logical_sector_size);
    let filesystem = match &table {
        Some(_) => None,
        None => whole_disk_filesystem(host, path, udev),
    };
    let partitions = read_partitions(
        host,
        sys_entry,
        path,
        table.as_ref(),
        mounts,
        swap_devnos,
        logical_sector_size,
    );
    Contents {
        table: table
            .as_ref()
            .map(|t| t.kind)
            .or_else(|| udev_table_kind(udev)),
        disk_id: table
            .as_ref()
            .map(|t| t.disk_id.clone())
            .or_else(|| udev.get("ID_PART_TABLE_UUID").map(|id| id.to_lowercase())),
        filesystem,
        partitions,
    }
}

fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Classifies a disk by the devices above it in the sysfs tree, the way
/// lsblk and udev's path_id do.
fn transport_of(ancestry: &Path, behind_usb: bool) -> Transport {
    let parts: Vec<String> = ancestry
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let has = |pred: &dyn Fn(&str) -> bool| parts.iter().any(|p| pred(p));
    if behind_usb {
        Transport::Usb
    } else if has(&|p| p == "nvme") {
        Transport::Nvme
    } else if has(&|p| p == "mmc_host") {
        Transport::Mmc
    } else if ancestry.starts_with("devices/virtual") {
        Transport::Virtual
    } else if has(&|p| p.starts_with("virtio")) {
        Transport::Virtio
    } else if has(&|p| {
        p.starts_with("ata") && p[3..].chars().all(|c| c.is_ascii_digit()) && p.len() > 3
    }) {
        Transport::Sata
    } else if has(&|p| {
        p.starts_with("host") && p.len() > 4 && p[4..].chars().all(|c| c.is_ascii_digit())
    }) {
        Transport::Scsi
    } else {
        Transport::Unknown
    }
}

/// Walks up from the block device to the first USB device (the one with
/// `idVendor`); the directory just below it on the way is the interface,
/// whose driver is `uas` or `usb-storage`.
fn find_usb_bridge(host: &Host, device_path: &Path, sys_root: &Path) -> Option<UsbBridge> {
    let mut below: Option<&Path> = None;
    let mut current = device_path.parent();
    while let Some(dir) = current {
        if !dir.starts_with(sys_root) || dir == sys_root {
            return None;
        }
        if dir.join("idVendor").exists() {
            let attr = |name: &str| host.read_attr(&dir.join(name));
            let driver = below
                .and_then(|iface| std::fs::read_link(iface.join("driver")).ok())
                .and_then(|link| link.file_name().map(|n| n.to_string_lossy().into_owned()));
            return Some(UsbBridge {
                vendor_id: attr("idVendor")?,
                product_id: attr("idProduct")?,
                speed_mbps: attr("speed")
                    .and_then(|s| s.parse::<f64>().ok())
                    .map(|s| s as u32),
                driver,
                manufacturer: attr("manufacturer"),
                product: attr("product"),
                serial: attr("serial"),
            });
        }
        below = Some(dir);
        current = dir.parent();
    }
    None
}

/// Walks up from the block device to the first device on the `platform` or
/// `pci` bus with a driver bound: the disk's host controller.
fn find_controller(device_path: &Path, sys_root: &Path) -> Option<Controller> {
    let link_name = |dir: &Path, link: &str| {
        std::fs::read_link(dir.join(link))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
    };
    let mut current = device_path.parent();
    while let Some(dir) = current {
        if !dir.starts_with(sys_root) || dir == sys_root {
            return None;
        }
        let bus = link_name(dir, "subsystem");
        if let (Some(bus @ ("platform" | "pci")), Some(driver)) =
            (bus.as_deref(), link_name(dir, "driver"))
        {
            return Some(Controller {
                driver,
                device: dir.file_name()?.to_string_lossy().into_owned(),
                bus: bus.to_string(),
            });
        }
        current = dir.parent();
    }
    None
}

/// Vendor, model and serial, each from where its kind of device keeps it.
fn identity(
    host: &Host,
    sys_entry: &Path,
    transport: Transport,
    usb: Option<&UsbBridge>,
) -> (Option<String>, Option<String>, Option<String>) {
    let device = sys_entry.join("device");
    let attr = |name: &str| host.read_attr(&device.join(name));
    match transport {
        Transport::Mmc => {
            // SD cards report a type (SD, MMC) and a product name; the
            // manufacturer is only a number.
            let kind = attr("type");
            (kind, attr("name"), attr("serial"))
        }
        Transport::Nvme => (None, attr("model"), attr("serial")),
        Transport::Virtual => {
            let kind = if sys_entry.join("loop").exists() {
                "loop"
            } else {
                "virtual"
            };
            (None, Some(kind.to_string()), None)
        }
        Transport::Virtio => (Some("virtio".to_string()), None, attr("serial")),
        _ => {
            // A USB flash drive's serial is its USB serial; a bridge's is
            // the enclosure's, still the best handle on that disk.
            let serial = vpd_serial(&device).or_else(|| usb.and_then(|u| u.serial.clone()));
            (attr("vendor"), attr("model"), serial)
        }
    }
}

/// The unit serial number from SCSI VPD page 0x80.
fn vpd_serial(device: &Path) -> Option<String> {
    let page = std::fs::read(device.join("vpd_pg80")).ok()?;
    let len = usize::from(*page.get(3)?);
    let serial = String::from_utf8_lossy(page.get(4..4 + len)?)
        .trim()
        .to_string();
    (!serial.is_empty()).then_some(serial)
}

/// The filesystem on a disk without a partition table: its superblock on a
/// live system, udev's record otherwise.
fn whole_disk_filesystem(host: &Host, path: &Path, udev: &UdevProperties) -> Option<FsInfo> {
    if host.is_live() {
        if let Ok(file) = std::fs::File::open(path) {
            return probe::probe_filesystem(&file, 0).ok().flatten();
        }
    }
    Some(FsInfo {
        fstype: udev.get("ID_FS_TYPE")?,
        uuid: udev.get("ID_FS_UUID"),
        label: udev.get("ID_FS_LABEL"),
    })
}

/// The partition table, read from the disk itself on a live system.
fn read_table(host: &Host, path: &Path, logical_sector_size: u32) -> Option<TableInfo> {
    if !host.is_live() {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    probe::probe_table(&mut file, logical_sector_size)
}

/// The table's kind as udev saw it, for a table pimigrate could not read.
fn udev_table_kind(udev: &UdevProperties) -> Option<TableKind> {
    match udev.get("ID_PART_TABLE_TYPE").as_deref() {
        Some("dos") => Some(TableKind::Mbr),
        Some("gpt") => Some(TableKind::Gpt),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn read_partitions(
    host: &Host,
    disk_entry: &Path,
    disk_path: &Path,
    table: Option<&TableInfo>,
    mounts: &MountTable,
    swap_devnos: &[DevNo],
    logical_sector_size: u32,
) -> Vec<Partition> {
    let disk_file = if host.is_live() {
        std::fs::File::open(disk_path).ok()
    } else {
        None
    };
    let mut partitions: Vec<Partition> = Vec::new();
    for entry in std::fs::read_dir(disk_entry)
        .into_iter()
        .flatten()
        .flatten()
    {
        let sys = entry.path();
        let Some(number) = read_number::<u32>(host, sys.join("partition")) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let devno = host
            .read_attr(&sys.join("dev"))
            .and_then(|d| DevNo::parse(&d));
        // sysfs counts start and size in 512-byte units whatever the disk's
        // logical sector size.
        let start_bytes = read_number::<u64>(host, sys.join("start")).unwrap_or(0) * 512;
        let size_bytes = read_number::<u64>(host, sys.join("size")).unwrap_or(0) * 512;
        let udev = devno
            .map(|d| UdevProperties::read(host, d))
            .unwrap_or_default();
        let probed = disk_file
            .as_ref()
            .and_then(|f| probe::probe_filesystem(f, start_bytes).ok().flatten());
        let table_entry = table.and_then(|t| t.partitions.iter().find(|p| p.number == number));
        partitions.push(Partition {
            number,
            path: Some(dev_path(&sys, &name)),
            name: Some(name),
            devno,
            start: start_bytes / u64::from(logical_sector_size),
            start_bytes,
            size_bytes,
            partuuid: table_entry
                .map(|t| t.partuuid.clone())
                .or_else(|| udev.get("ID_PART_ENTRY_UUID").map(|u| u.to_lowercase())),
            partlabel: table_entry
                .and_then(|t| t.name.clone())
                .or_else(|| udev.get("ID_PART_ENTRY_NAME")),
            mountpoints: devno
                .map(|d| mounts.of_device(d).map(|m| m.mountpoint.clone()).collect())
                .unwrap_or_default(),
            swap: devno.is_some_and(|d| swap_devnos.contains(&d)),
            holders: list_dir(&sys.join("holders")),
            ..fs_fields(probed, &udev)
        });
    }
    if let Some(table) = table {
        let without_nodes =
            partitions_without_nodes(table, &partitions, disk_file.as_ref(), logical_sector_size);
        partitions.extend(without_nodes);
    }
    partitions.sort_by_key(|p| p.number);
    partitions
}

/// The table's entries the kernel shows no device for (a kernel without
/// partition-table support), read from the table and probed on the disk.
fn partitions_without_nodes(
    table: &TableInfo,
    with_nodes: &[Partition],
    disk_file: Option<&std::fs::File>,
    logical_sector_size: u32,
) -> Vec<Partition> {
    let mut partitions = Vec::new();
    for entry in &table.partitions {
        if with_nodes.iter().any(|p| p.number == entry.number) {
            continue;
        }
        let start_bytes = entry.start * u64::from(logical_sector_size);
        let probed = disk_file.and_then(|f| probe::probe_filesystem(f, start_bytes).ok().flatten());
        partitions.push(Partition {
            number: entry.number,
            name: None,
            path: None,
            devno: None,
            start: entry.start,
            start_bytes,
            size_bytes: entry.sectors * u64::from(logical_sector_size),
            partuuid: Some(entry.partuuid.clone()),
            partlabel: entry.name.clone(),
            mountpoints: Vec::new(),
            swap: false,
            holders: Vec::new(),
            ..fs_fields(probed, &UdevProperties::default())
        });
    }
    partitions
}

/// Filesystem fields: the superblock when it could be read, else udev.
fn fs_fields(probed: Option<FsInfo>, udev: &UdevProperties) -> Partition {
    let (fstype, uuid, label) = match probed {
        Some(fs) => (Some(fs.fstype), fs.uuid, fs.label),
        None => (
            udev.get("ID_FS_TYPE"),
            udev.get("ID_FS_UUID"),
            udev.get("ID_FS_LABEL"),
        ),
    };
    Partition {
        number: 0,
        name: None,
        path: None,
        devno: None,
        start: 0,
        start_bytes: 0,
        size_bytes: 0,
        fstype,
        label,
        uuid,
        partuuid: None,
        partlabel: None,
        mountpoints: Vec::new(),
        swap: false,
        holders: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_transports_from_the_device_path() {
        let cases = [
            ("devices/platform/emmc2bus/fe340000.mmc/mmc_host/mmc0/mmc0:aaaa/block/mmcblk0", Transport::Mmc),
            ("devices/platform/axi/1000110000.pcie/pci0001:00/0001:00:00.0/0001:01:00.0/nvme/nvme0/nvme0n1", Transport::Nvme),
            ("devices/pci0000:00/0000:00:05.0/virtio2/block/vda", Transport::Virtio),
            ("devices/virtual/block/loop0", Transport::Virtual),
            ("devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", Transport::Sata),
            ("devices/pci0000:00/0000:00:10.0/host2/target2:0:0/2:0:0:0/block/sdb", Transport::Scsi),
        ];
        for (path, expected) in cases {
            assert_eq!(transport_of(Path::new(path), false), expected, "{path}");
        }
        assert_eq!(
            transport_of(Path::new("devices/whatever/block/sda"), true),
            Transport::Usb
        );
    }

    #[test]
    fn names_the_generation_of_a_slow_usb_link() {
        let bridge = |speed| UsbBridge {
            vendor_id: "152d".into(),
            product_id: "0578".into(),
            speed_mbps: speed,
            driver: Some("uas".into()),
            manufacturer: None,
            product: None,
            serial: None,
        };
        assert_eq!(bridge(Some(12)).slow_link().unwrap().0, "USB 1.1");
        assert_eq!(bridge(Some(480)).slow_link().unwrap().0, "USB 2");
        assert_eq!(bridge(Some(5000)).slow_link(), None);
        assert_eq!(bridge(None).slow_link(), None);
    }

    /// A Pi 3's USB disk, as sysfs lays it out: the dwc2 controller is the
    /// first platform device with a driver above it, past the USB devices
    /// (bus `usb`) and the SoC's bus node (no driver).
    #[test]
    fn the_controller_is_the_first_platform_or_pci_device_with_a_driver() {
        use std::os::unix::fs::symlink;
        let sys = tempfile::tempdir().unwrap();
        let root = sys.path();
        let bus = |name: &str| root.join("bus").join(name);
        let driver = |name: &str| root.join("bus/platform/drivers").join(name);
        let soc = root.join("devices/platform/soc");
        let dwc2 = soc.join("3f980000.usb");
        let port = dwc2.join("usb1/1-1/1-1.1");
        let disk = port.join("1-1.1:1.0/host0/target0:0:0/0:0:0:0/block/sda");
        std::fs::create_dir_all(&disk).unwrap();
        symlink(bus("platform"), soc.join("subsystem")).unwrap();
        symlink(bus("platform"), dwc2.join("subsystem")).unwrap();
        symlink(driver("dwc2"), dwc2.join("driver")).unwrap();
        symlink(bus("usb"), port.join("subsystem")).unwrap();
        symlink(root.join("bus/usb/drivers/usb"), port.join("driver")).unwrap();
        assert_eq!(
            find_controller(&disk, root),
            Some(Controller {
                driver: "dwc2".into(),
                device: "3f980000.usb".into(),
                bus: "platform".into(),
            })
        );
        // A loop device: nothing above it has a driver.
        let loop0 = root.join("devices/virtual/block/loop0");
        std::fs::create_dir_all(&loop0).unwrap();
        assert_eq!(find_controller(&loop0, root), None);
    }
}
