//! The kernel log since boot (`/dev/kmsg`, through the Host so a fixture
//! can hold a plain file there) and what it says about one disk and about
//! the power: uas aborts and resets, I/O errors, NVMe controller resets, a
//! filesystem gone read-only, under-voltage.
//!
//! Each record keeps its sequence number, so a caller can note the last
//! one before its own benchmark or copy and look only at what came after
//! ([`KernelLog::after`]). Matching is on the messages' fixed words, as
//! Linux 6.1 prints them (the file and function are named at each kind),
//! and a disk is recognised by every name the kernel gives it: `[sda]`,
//! `sd 0:0:0:0:`, `scsi host0:`, its USB port `usb 2-2:`, `dev sda,`, its
//! partitions, `nvme nvme0:`.
//!
//! The plan (the quirk's evidence, under-voltage), `migrate` (resets
//! during its own copy) and verify's advice all read the log here.

use crate::host::Host;
use serde::Serialize;
use std::io::Read;
use std::path::Path;

/// One `/dev/kmsg` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// The record's sequence number: increasing, never reused in a boot.
    pub seq: u64,
    /// Microseconds since boot.
    pub usec: u64,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct KernelLog {
    pub records: Vec<Record>,
    /// Why the log could not be read (not root, `dmesg_restrict`).
    pub unreadable: Option<String>,
}

impl KernelLog {
    pub fn read(host: &Host) -> KernelLog {
        let path = host.path("/dev/kmsg");
        match read_all(&path) {
            Ok(bytes) => KernelLog {
                records: parse_kmsg(&String::from_utf8_lossy(&bytes)),
                unreadable: None,
            },
            Err(err) => KernelLog {
                records: Vec::new(),
                unreadable: Some(format!("{}: {err}", path.display())),
            },
        }
    }

    /// The sequence number of the newest record: note it before a step,
    /// then [`KernelLog::after`] it.
    pub fn last_seq(&self) -> Option<u64> {
        self.records.last().map(|r| r.seq)
    }

    /// The records newer than `seq`.
    pub fn after(&self, seq: u64) -> &[Record] {
        let start = self.records.partition_point(|r| r.seq <= seq);
        &self.records[start..]
    }
}

/// Reads every record there is. `/dev/kmsg` hands out one record per read
/// and would block at the end, hence O_NONBLOCK and EAGAIN as the end;
/// EPIPE means records were overwritten while reading, and reading goes on.
fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)?;
    let mut out = Vec::new();
    // A kmsg record is at most about 8 KiB (a smaller buffer gets EINVAL).
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// `priority,sequence,microseconds,flags;message` records; continuation
/// lines (` KEY=value` dictionary entries) are dropped, and so is a line
/// that is not a record.
pub fn parse_kmsg(text: &str) -> Vec<Record> {
    text.lines()
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| {
            let (prefix, message) = line.split_once(';')?;
            let mut fields = prefix.split(',');
            let _priority = fields.next()?;
            let seq = fields.next()?.parse().ok()?;
            let usec = fields.next()?.parse().ok()?;
            Some(Record {
                seq,
                usec,
                message: message.to_string(),
            })
        })
        .collect()
}

/// Every name a disk goes by in kernel messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DiskNames {
    /// `sda`, `nvme0n1`.
    pub disk: String,
    /// `sda1`, `nvme0n1p2`.
    pub partitions: Vec<String>,
    /// `host0`, for `scsi host0:`.
    pub scsi_host: Option<String>,
    /// `0:0:0:0`, for `sd 0:0:0:0:`.
    pub scsi_address: Option<String>,
    /// `2-2`, for `usb 2-2:`.
    pub usb_port: Option<String>,
    /// `nvme0`, for `nvme nvme0:`.
    pub nvme_controller: Option<String>,
}

impl DiskNames {
    /// Reads the names from the disk's sysfs device path
    /// (`…/usb2/2-2/2-2:1.0/host0/target0:0:0/0:0:0:0`, `…/nvme/nvme0`)
    /// and its partitions from sysfs.
    pub fn of_disk(host: &Host, disk: &str) -> DiskNames {
        let entry = host.sys(&format!("block/{disk}"));
        let device = std::fs::canonicalize(entry.join("device")).unwrap_or_default();
        let components: Vec<String> = device
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let host_index = components.iter().position(|c| {
            c.strip_prefix("host")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        let nvme = components
            .iter()
            .rposition(|c| c == "nvme")
            .and_then(|i| components.get(i + 1).cloned());
        let mut partitions: Vec<String> = std::fs::read_dir(&entry)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("partition").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        partitions.sort();
        DiskNames {
            disk: disk.to_string(),
            partitions,
            scsi_host: host_index.map(|i| components[i].clone()),
            scsi_address: host_index.and_then(|_| components.last().cloned()),
            usb_port: host_index
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| components[i].split_once(':'))
                .map(|(port, _)| port.to_string()),
            nvme_controller: nvme,
        }
    }

    /// The disk and its partitions.
    fn block_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.disk.as_str()).chain(self.partitions.iter().map(String::as_str))
    }

    fn scsi_mentioned(&self, line: &str) -> bool {
        line.contains(&format!("[{}]", self.disk))
            || self
                .scsi_host
                .as_ref()
                .is_some_and(|h| line.contains(&format!("scsi {h}:")))
            || self
                .scsi_address
                .as_ref()
                .is_some_and(|a| line.contains(&format!("sd {a}:")))
    }

    fn usb_mentioned(&self, line: &str) -> bool {
        self.usb_port
            .as_ref()
            .is_some_and(|p| line.contains(&format!("usb {p}:")))
    }

    /// `dev sda,`, `device sda2,` (block layer, buffer heads).
    fn block_dev_mentioned(&self, line: &str) -> bool {
        self.block_names()
            .any(|n| line.contains(&format!("dev {n},")) || line.contains(&format!("device {n},")))
    }

    /// `EXT4-fs (sda2):`, `EXT4-fs error (device sda2)`.
    fn fs_mentioned(&self, line: &str) -> bool {
        self.block_names()
            .any(|n| line.contains(&format!("({n})")) || line.contains(&format!("(device {n})")))
    }

    fn nvme_mentioned(&self, line: &str) -> bool {
        self.nvme_controller
            .as_ref()
            .is_some_and(|c| line.contains(&format!("nvme {c}:")))
    }
}

/// What a kernel message says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// uas gave up on a command: `uas_eh_abort_handler` (uas.c).
    UasAbort,
    /// uas reset the device or could not quiesce it:
    /// `uas_eh_device_reset_handler`, `uas_pre_reset: timed out`,
    /// `uas_zap_pending` (uas.c).
    UasReset,
    /// The USB port reset the bridge: `reset SuperSpeed USB device`
    /// (drivers/usb/core/hub.c).
    UsbReset,
    /// The `u` quirk took effect: `UAS is ignored for this device, using
    /// usb-storage instead` (uas-detect.h).
    UasIgnored,
    /// `I/O error, dev sda,`, `critical target error, dev sda,`,
    /// `Buffer I/O error on dev sda1,` (block/blk-core.c, fs/buffer.c).
    IoError,
    /// `device offline error, dev sda,`: the disk is gone.
    DeviceOffline,
    /// `controller is down; will reset`, `timeout, reset controller`
    /// (drivers/nvme/host/pci.c).
    NvmeReset,
    /// `timeout, aborting`, `timeout, completion polled`: a late command.
    NvmeTimeout,
    /// `EXT4-fs error (device sda2)` (fs/ext4/super.c).
    FsError,
    /// `EXT4-fs (sda2): Remounting filesystem read-only`.
    FsReadOnly,
}

/// A message about a disk, what kind it is and when it came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub kind: EventKind,
    pub seq: u64,
    pub message: String,
}

/// The kind of a message about the disk `names`, or `None` when it is not
/// one, or about another disk.
pub fn classify(message: &str, names: &DiskNames) -> Option<EventKind> {
    use EventKind::*;
    let scsi = || names.scsi_mentioned(message);
    if message.contains("uas_eh_abort_handler") {
        scsi().then_some(UasAbort)
    } else if message.contains("uas_eh_device_reset_handler")
        || message.contains("uas_pre_reset: timed out")
        || message.contains("uas_zap_pending")
    {
        scsi().then_some(UasReset)
    } else if message.contains("UAS is ignored for this device") {
        names.usb_mentioned(message).then_some(UasIgnored)
    } else if message.contains(": reset ") && message.contains("USB device number") {
        names.usb_mentioned(message).then_some(UsbReset)
    } else if message.contains("device offline error,") {
        names.block_dev_mentioned(message).then_some(DeviceOffline)
    } else if (message.contains("I/O error") && !message.contains("EXT4-fs"))
        || (message.contains("critical") && message.contains(" error, dev "))
    {
        names.block_dev_mentioned(message).then_some(IoError)
    } else if message.contains("controller is down; will reset")
        || message.contains("timeout, reset controller")
    {
        names.nvme_mentioned(message).then_some(NvmeReset)
    } else if message.contains("timeout, aborting")
        || message.contains("timeout, completion polled")
    {
        names.nvme_mentioned(message).then_some(NvmeTimeout)
    } else if message.contains("Remounting filesystem read-only") {
        names.fs_mentioned(message).then_some(FsReadOnly)
    } else if message.starts_with("EXT4-fs error") {
        names.fs_mentioned(message).then_some(FsError)
    } else {
        None
    }
}

/// Every message about the disk `names` among `records`, in order.
pub fn disk_events(records: &[Record], names: &DiskNames) -> Vec<Event> {
    records
        .iter()
        .filter_map(|r| {
            classify(&r.message, names).map(|kind| Event {
                kind,
                seq: r.seq,
                message: r.message.clone(),
            })
        })
        .collect()
}

/// Whether the bridge misbehaves on `uas`: any abort or reset of it.
pub fn uas_trouble(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::UasAbort | EventKind::UasReset | EventKind::UsbReset
        )
    })
}

/// What the power supply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerEventKind {
    /// Raspberry Pi's kernels print `Under-voltage detected! (0x00050005)`;
    /// mainline's raspberrypi-hwmon (6.1) `hwmon hwmon1: Undervoltage
    /// detected!`.
    UnderVoltage,
    /// `Voltage normalised (0x00000000)`.
    VoltageNormalised,
    /// `usb usb2-port2: over-current change #1` (drivers/usb/core/hub.c).
    UsbOverCurrent,
}

/// A message about the power.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PowerEvent {
    pub kind: PowerEventKind,
    pub seq: u64,
    pub message: String,
}

/// Every message about the power among `records`, in order.
pub fn power_events(records: &[Record]) -> Vec<PowerEvent> {
    records
        .iter()
        .filter_map(|r| {
            let m = r.message.as_str();
            let kind =
                if m.contains("Under-voltage detected!") || m.contains("Undervoltage detected!") {
                    PowerEventKind::UnderVoltage
                } else if m.contains("Voltage normalised") {
                    PowerEventKind::VoltageNormalised
                } else if m.contains("over-current change") {
                    PowerEventKind::UsbOverCurrent
                } else {
                    return None;
                };
            Some(PowerEvent {
                kind,
                seq: r.seq,
                message: r.message.clone(),
            })
        })
        .collect()
}

/// How often each kind came, and its first message: what a plan or a
/// check quotes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KindCount {
    pub kind: EventKind,
    pub count: usize,
    pub first: String,
}

/// [`Event`]s counted by kind, kinds in [`EventKind`]'s order.
pub fn summarise(events: &[Event]) -> Vec<KindCount> {
    let mut out: Vec<KindCount> = Vec::new();
    for event in events {
        match out.iter_mut().find(|c| c.kind == event.kind) {
            Some(count) => count.count += 1,
            None => out.push(KindCount {
                kind: event.kind,
                count: 1,
                first: event.message.clone(),
            }),
        }
    }
    out.sort_by_key(|c| c.kind);
    out
}

#[cfg(test)]
mod tests;
