//! The kernel log since boot, from `/dev/kmsg` (through the Host, so a
//! fixture can hold a plain file there), and the uas resets in it.

use crate::host::Host;
use std::io::Read;
use std::path::PathBuf;

#[derive(Debug, Clone, Default)]
pub struct KernelLog {
    /// Messages, without the `priority,sequence,time,flags;` prefix.
    pub lines: Vec<String>,
    /// Why the log could not be read (not root, dmesg_restrict).
    pub unreadable: Option<String>,
}

impl KernelLog {
    pub fn read(host: &Host) -> KernelLog {
        let path = host.path("/dev/kmsg");
        match read_all(&path) {
            Ok(bytes) => KernelLog {
                lines: parse_kmsg(&String::from_utf8_lossy(&bytes)),
                unreadable: None,
            },
            Err(err) => KernelLog {
                lines: Vec::new(),
                unreadable: Some(format!("{}: {err}", path.display())),
            },
        }
    }
}

/// Reads every record there is. `/dev/kmsg` hands out one record per read
/// and would block at the end, hence O_NONBLOCK and EAGAIN as the end;
/// EPIPE means records were overwritten while reading, and reading goes on.
fn read_all(path: &PathBuf) -> std::io::Result<Vec<u8>> {
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

/// Messages of `/dev/kmsg` records; continuation lines (` KEY=value`
/// dictionary entries) are dropped.
pub fn parse_kmsg(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.split_once(';').map(|(_, message)| message.to_string()))
        .collect()
}

/// How a disk shows up in kernel messages: `[sda]`, `scsi host0:`,
/// `sd 0:0:0:0:`, and its USB port `usb 2-2:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogNames {
    pub disk: String,
    pub scsi_host: Option<String>,
    pub scsi_address: Option<String>,
    pub usb_port: Option<String>,
}

impl LogNames {
    /// Reads the names from the disk's sysfs device path
    /// (`…/usb2/2-2/2-2:1.0/host0/target0:0:0/0:0:0:0`).
    pub fn of_disk(host: &Host, disk: &str) -> LogNames {
        let device = std::fs::canonicalize(host.sys(&format!("block/{disk}/device")));
        let components: Vec<String> = device
            .map(|p| {
                p.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let host_index = components.iter().position(|c| {
            c.strip_prefix("host")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        LogNames {
            disk: disk.to_string(),
            scsi_host: host_index.map(|i| components[i].clone()),
            scsi_address: host_index.and_then(|_| components.last().cloned()),
            usb_port: host_index
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| components[i].split_once(':'))
                .map(|(port, _)| port.to_string()),
        }
    }

    fn mentions(&self, line: &str) -> bool {
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
}

/// The lines that show the uas driver giving up on a command or resetting
/// the device: `uas_eh_abort_handler`, `uas_eh_device_reset_handler`, and
/// the USB reset that follows.
pub fn uas_resets<'a>(lines: &'a [String], names: &LogNames) -> Vec<&'a str> {
    let usb_reset = names
        .usb_port
        .as_ref()
        .map(|port| format!("usb {port}: reset"));
    lines
        .iter()
        .filter(|line| {
            (line.contains("uas_eh_") && names.mentions(line))
                || usb_reset
                    .as_ref()
                    .is_some_and(|r| line.contains(r.as_str()))
        })
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "6,820,2441110,-;scsi host0: uas\n\
        4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n \
        SUBSYSTEM=scsi\n\
        6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n\
        6,1203,81345000,-;usb 2-2: reset SuperSpeed USB device number 2 using xhci_hcd\n\
        6,1204,81400000,-;scsi host1: uas_eh_device_reset_handler start\n";

    fn sda() -> LogNames {
        LogNames {
            disk: "sda".into(),
            scsi_host: Some("host0".into()),
            scsi_address: Some("0:0:0:0".into()),
            usb_port: Some("2-2".into()),
        }
    }

    #[test]
    fn parses_records_and_skips_dictionary_lines() {
        let lines = parse_kmsg(LOG);
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], "scsi host0: uas");
        assert!(lines.iter().all(|l| !l.contains("SUBSYSTEM")));
    }

    #[test]
    fn attributes_resets_to_the_disk_they_concern() {
        let lines = parse_kmsg(LOG);
        let resets = uas_resets(&lines, &sda());
        assert_eq!(resets.len(), 3, "{resets:?}");
        assert!(resets.iter().all(|l| !l.contains("host1")));
        let other = LogNames {
            disk: "sdb".into(),
            scsi_host: Some("host1".into()),
            ..LogNames::default()
        };
        assert_eq!(uas_resets(&lines, &other).len(), 1);
    }

    #[test]
    fn names_come_from_the_sysfs_device_path() {
        let host = Host::with_root(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4-migrated"),
        );
        assert_eq!(LogNames::of_disk(&host, "sda"), sda());
    }
}
