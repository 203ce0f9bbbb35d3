//! The mount table (`/proc/self/mountinfo`) and active swap (`/proc/swaps`).

use crate::host::Host;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A block device number, `major:minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DevNo {
    pub major: u32,
    pub minor: u32,
}

impl DevNo {
    /// Parses sysfs' and mountinfo's `8:1`.
    pub fn parse(text: &str) -> Option<DevNo> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNo {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// From a `st_rdev`/`st_dev` value, the way glibc splits it.
    pub fn from_raw(raw: u64) -> DevNo {
        DevNo {
            major: nix::sys::stat::major(raw) as u32,
            minor: nix::sys::stat::minor(raw) as u32,
        }
    }
}

impl std::fmt::Display for DevNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mount {
    pub devno: DevNo,
    /// The path inside the filesystem that is mounted (not `/` for bind mounts).
    pub fs_root: PathBuf,
    pub mountpoint: PathBuf,
    pub fstype: String,
    pub source: String,
    pub options: String,
}

#[derive(Debug, Clone, Default)]
pub struct MountTable {
    pub mounts: Vec<Mount>,
}

/// Undoes mountinfo's octal escapes (`\040` for a space and so on).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|b| (b'0'..=b'7').contains(b)));
        match escape {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl MountTable {
    pub fn read(host: &Host) -> Result<MountTable> {
        let path = host.proc("self/mountinfo");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the mount table {}", path.display()))?;
        Ok(MountTable::parse(&text))
    }

    /// Parses mountinfo; lines that do not have its shape are passed over,
    /// since the kernel never writes them and we only read.
    pub fn parse(text: &str) -> MountTable {
        let mounts = text
            .lines()
            .filter_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let left: Vec<&str> = left.split(' ').collect();
                let right: Vec<&str> = right.split(' ').collect();
                if left.len() < 6 || right.len() < 2 {
                    return None;
                }
                Some(Mount {
                    devno: DevNo::parse(left[2])?,
                    fs_root: PathBuf::from(unescape(left[3])),
                    mountpoint: PathBuf::from(unescape(left[4])),
                    options: left[5].to_string(),
                    fstype: right[0].to_string(),
                    source: unescape(right[1]),
                })
            })
            .collect();
        MountTable { mounts }
    }

    /// The mount a path lives on: the longest mountpoint that is a prefix of
    /// it, the last one mounted when several stack on one directory.
    pub fn containing(&self, path: &Path) -> Option<&Mount> {
        self.mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| path.starts_with(&m.mountpoint))
            .max_by_key(|(index, m)| (m.mountpoint.components().count(), *index))
            .map(|(_, m)| m)
    }

    /// The mount exactly at `mountpoint` (the topmost when stacked).
    pub fn at(&self, mountpoint: &Path) -> Option<&Mount> {
        self.mounts
            .iter()
            .rev()
            .find(|m| m.mountpoint == mountpoint)
    }

    pub fn of_device(&self, devno: DevNo) -> impl Iterator<Item = &Mount> {
        self.mounts.iter().filter(move |m| m.devno == devno)
    }

    /// Mountpoints strictly below `dir` that belong to another filesystem
    /// than `dir` itself: what a one-filesystem copy does not descend into.
    pub fn other_filesystems_below(&self, dir: &Path) -> Vec<PathBuf> {
        let own = self.containing(dir).map(|m| m.devno);
        let mut out: Vec<PathBuf> = self
            .mounts
            .iter()
            .filter(|m| m.mountpoint != dir && m.mountpoint.starts_with(dir))
            .filter(|m| Some(m.devno) != own || m.fs_root != Path::new("/"))
            .map(|m| m.mountpoint.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// An active swap area from `/proc/swaps`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Swap {
    pub path: PathBuf,
    pub kind: String,
}

pub fn read_swaps(host: &Host) -> Result<Vec<Swap>> {
    let path = host.proc("swaps");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(err).with_context(|| format!("reading active swap from {}", path.display()))
        }
    };
    Ok(parse_swaps(&text))
}

pub fn parse_swaps(text: &str) -> Vec<Swap> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let path = unescape(fields.next()?);
            let kind = fields.next()?.to_string();
            Some(Swap {
                path: PathBuf::from(path),
                kind,
            })
        })
        .collect()
}

/// Private directory for pimigrate's mount points (0700, root only).
pub const RUN_DIR: &str = "/run/pimigrate";

/// A mount point pimigrate made under [`RUN_DIR`] for a run that is gone
/// (killed, or ended by a stalled disk): the next run unmounts it
/// (`apply::mount::clean_up_stale_mounts`), so it does not count as the
/// disk in use.
pub fn is_stale(point: &Path) -> bool {
    point.parent() == Some(Path::new(RUN_DIR)) && owner_is_gone(point)
}

fn owner_is_gone(point: &Path) -> bool {
    let name = point
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse::<u32>().ok())
    {
        Some(pid) => {
            pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 179:2 / / rw,noatime - ext4 /dev/mmcblk0p2 rw
29 27 179:1 / /boot/firmware rw,relatime - vfat /dev/mmcblk0p1 rw,fmask=0022
30 27 8:1 / /media/pi/My\\040Disk rw - ext4 /dev/sda1 rw
31 27 179:2 /srv /mnt/bind rw - ext4 /dev/mmcblk0p2 rw
";

    #[test]
    fn parses_mountinfo_with_escapes() {
        let table = MountTable::parse(MOUNTINFO);
        assert_eq!(table.mounts.len(), 5);
        let disk = table.at(Path::new("/media/pi/My Disk")).unwrap();
        assert_eq!(disk.devno, DevNo { major: 8, minor: 1 });
        assert_eq!(disk.source, "/dev/sda1");
    }

    #[test]
    fn finds_the_mount_holding_a_path() {
        let table = MountTable::parse(MOUNTINFO);
        let boot = table
            .containing(Path::new("/boot/firmware/cmdline.txt"))
            .unwrap();
        assert_eq!(boot.devno.to_string(), "179:1");
        let root = table.containing(Path::new("/etc/fstab")).unwrap();
        assert_eq!(root.devno.to_string(), "179:2");
    }

    #[test]
    fn lists_other_filesystems_and_bind_mounts_below_root() {
        let table = MountTable::parse(MOUNTINFO);
        let others = table.other_filesystems_below(Path::new("/"));
        let names: Vec<_> = others.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            ["/boot/firmware", "/media/pi/My Disk", "/mnt/bind", "/proc"]
        );
    }

    #[test]
    fn parses_swaps() {
        let swaps = parse_swaps(
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/var/swap  file  102396  0  -2\n/dev/sda3 partition 1048572 0 -3\n",
        );
        assert_eq!(swaps.len(), 2);
        assert_eq!(swaps[1].path, PathBuf::from("/dev/sda3"));
        assert_eq!(swaps[1].kind, "partition");
    }

    #[test]
    fn ignores_malformed_lines() {
        assert!(MountTable::parse("garbage\n\n1 2 3\n").mounts.is_empty());
    }
}
