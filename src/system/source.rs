//! The system being moved: where its root and boot files are, which devices
//! hold them, and how its boot files name those devices.

use crate::bootcfg::{
    BootSettings, Cmdline, ConfigTxt, DeviceSpec, FilterContext, Fstab, FstabError,
};
use crate::host::Host;
use crate::system::disks::Disk;
use crate::system::mounts::{DevNo, MountTable};
use crate::system::pi::PiInfo;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A boot file as read: where it is, its bytes, and what they mean, or why
/// they could not be understood.
#[derive(Debug, Clone)]
pub struct BootFile<T> {
    /// View path, e.g. `/boot/firmware/cmdline.txt`.
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub parsed: Result<T, BootFileError>,
}

/// Why the system's boot files cannot be used, as a plan or `verify`
/// shows it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootFileError {
    /// Neither `ROOT/boot/firmware` nor `ROOT/boot` holds them.
    #[error(
        "no boot directory found: neither {root}/boot/firmware nor {root}/boot is mounted or \
         holds cmdline.txt; mount the boot partition or pass --boot-dir"
    )]
    NoBootDir { root: String },
    #[error("cannot read {}: {error}", path.display())]
    Unreadable { path: PathBuf, error: String },
    /// Read, but its contents are not what the parser takes: its reason.
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

impl<T> BootFile<T> {
    pub fn ok(&self) -> Option<&T> {
        self.parsed.as_ref().ok()
    }
}

#[derive(Debug, Clone)]
pub struct Source {
    /// The root filesystem to copy, as a view path (`/` on a running Pi).
    pub root_dir: PathBuf,
    /// The filesystem holding `root_dir`, from the mount table.
    pub root_devno: Option<DevNo>,
    /// The type of the filesystem mounted at `root_dir` (`ext4`, `btrfs`),
    /// from the mount table: what the root is, whatever its boot files
    /// say. `None` when `root_dir` is a directory of a filesystem mounted
    /// above it (an unpacked tree), which is not the root's own.
    pub root_fstype: Option<String>,
    /// The running system's own `/`: never a target, even when planning
    /// the move of a mounted image.
    pub running_root_devno: Option<DevNo>,
    /// The directory with config.txt and cmdline.txt, found in the mount
    /// table (`/boot/firmware` on bookworm, `/boot` before), or given.
    pub boot_dir: Option<PathBuf>,
    pub boot_devno: Option<DevNo>,
    /// False when the boot files sit in a plain directory of the root
    /// filesystem (the boot partition is not mounted).
    pub boot_is_mounted: bool,
    pub fstab: Result<BootFile<Fstab>, BootFileError>,
    pub config_txt: Option<BootFile<ConfigTxt>>,
    pub cmdline: Result<BootFile<Cmdline>, BootFileError>,
}

/// How one boot file names one device, and which devices that matches.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    /// `/etc/fstab (/)`, `cmdline.txt root=`.
    pub place: String,
    pub spec: DeviceSpec,
    /// Every attached partition that the spec matches: exactly one is right.
    pub matches: Vec<String>,
}

const BOOT_DIR_CANDIDATES: [&str; 2] = ["boot/firmware", "boot"];

impl Source {
    pub fn inspect(host: &Host, mounts: &MountTable, pi: &PiInfo) -> Source {
        let root_dir = host.source_root.clone();
        let root_mount = mounts.containing(&root_dir);
        let boot_dir = host
            .boot_dir
            .clone()
            .or_else(|| find_boot_dir(host, mounts, &root_dir));
        let boot_mount = boot_dir.as_deref().and_then(|dir| mounts.containing(dir));
        let boot_is_mounted = match (&boot_dir, boot_mount) {
            (Some(dir), Some(mount)) => mount.mountpoint == *dir,
            _ => false,
        };
        let config_txt = boot_dir
            .as_deref()
            .map(|dir| dir.join("config.txt"))
            .filter(|path| host.path(path).exists())
            .map(|path| load(host, &path, |bytes| Ok(ConfigTxt::parse(bytes)?)));
        // Includes (Ubuntu's syscfg.txt) may name another cmdline= file.
        let settings = match (&config_txt, &boot_dir) {
            (Some(file), Some(dir)) => file
                .ok()
                .map(|config| {
                    config.effective_with(
                        &FilterContext {
                            model: pi.config_filter.map(str::to_string),
                            tryboot: false,
                        },
                        &mut include_reader(host, dir),
                    )
                })
                .unwrap_or_default(),
            _ => BootSettings::default(),
        };
        let cmdline = match &boot_dir {
            Some(dir) => Ok(load(host, &dir.join(cmdline_name(&settings)), |bytes| {
                let cmdline = Cmdline::parse(bytes)?;
                cmdline.root()?;
                Ok(cmdline)
            })),
            None => Err(BootFileError::NoBootDir {
                root: root_dir
                    .display()
                    .to_string()
                    .trim_end_matches('/')
                    .to_string(),
            }),
        };
        let fstab_path = root_dir.join("etc/fstab");
        let fstab = Ok(load(host, &fstab_path, |bytes| {
            let fstab = Fstab::parse(bytes)?;
            // No `/` line is how Arch Linux ARM ships it: the kernel mounts
            // root from root=. Two `/` lines are a mistake to fix.
            match fstab.root() {
                Ok(_) | Err(FstabError::NoRootEntry) => Ok(fstab),
                Err(err) => Err(err.into()),
            }
        }));
        Source {
            root_devno: root_mount.map(|m| m.devno),
            root_fstype: root_mount
                .filter(|m| m.mountpoint == root_dir)
                .map(|m| m.fstype.clone()),
            running_root_devno: mounts.at(Path::new("/")).map(|m| m.devno),
            root_dir,
            // Boot files in a plain directory of the root filesystem have no
            // boot partition of their own.
            boot_devno: boot_mount.filter(|_| boot_is_mounted).map(|m| m.devno),
            boot_is_mounted,
            boot_dir,
            fstab,
            config_txt,
            cmdline,
        }
    }

    /// The boot settings config.txt gives this model in a normal boot.
    pub fn boot_settings(&self, pi: &PiInfo, tryboot: bool) -> BootSettings {
        self.config_txt
            .as_ref()
            .and_then(|c| c.ok())
            .map(|config| {
                config.effective(&FilterContext {
                    model: pi.config_filter.map(str::to_string),
                    tryboot,
                })
            })
            .unwrap_or_default()
    }

    /// The root and boot references of fstab and cmdline.txt, each resolved
    /// against every attached disk.
    pub fn references(&self, disks: &[Disk]) -> Vec<Reference> {
        let mut refs = Vec::new();
        if let Some(fstab) = self.fstab.as_ref().ok().and_then(|f| f.ok()) {
            let entries = [fstab.root().ok(), fstab.boot()];
            for entry in entries.into_iter().flatten() {
                if let Ok(spec) = entry.device_spec() {
                    refs.push(Reference {
                        place: format!("/etc/fstab ({})", entry.mountpoint),
                        matches: resolve(&spec, disks),
                        spec,
                    });
                }
            }
        }
        if let Ok(file) = &self.cmdline {
            if let Some(spec) = file.ok().and_then(|c| c.root().ok()) {
                refs.push(Reference {
                    place: format!("{} root=", file.path.display()),
                    matches: resolve(&spec, disks),
                    spec,
                });
            }
        }
        refs
    }
}

/// Reads files named by `include` from the boot directory `boot_dir` (a
/// view path), as the firmware finds them on the boot partition.
pub fn include_reader<'a>(
    host: &'a Host,
    boot_dir: &'a Path,
) -> impl FnMut(&str) -> std::io::Result<Option<Vec<u8>>> + 'a {
    move |name: &str| {
        let relative = Path::new(name.trim_start_matches('/'));
        if relative
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name} is not a plain name on the boot partition"),
            ));
        }
        match std::fs::read(host.path(boot_dir.join(relative))) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }
}

fn cmdline_name(settings: &BootSettings) -> String {
    settings.cmdline_file()
}

/// What a parser of a boot file says is wrong with it.
type ParseError = Box<dyn std::error::Error>;

fn load<T>(
    host: &Host,
    view: &Path,
    parse: impl Fn(&[u8]) -> Result<T, ParseError>,
) -> BootFile<T> {
    match std::fs::read(host.path(view)) {
        Ok(bytes) => BootFile {
            path: view.to_path_buf(),
            parsed: parse(&bytes).map_err(|reason| BootFileError::Invalid {
                path: view.to_path_buf(),
                reason: reason.to_string(),
            }),
            bytes,
        },
        Err(err) => BootFile {
            path: view.to_path_buf(),
            bytes: Vec::new(),
            parsed: Err(BootFileError::Unreadable {
                path: view.to_path_buf(),
                error: err.to_string(),
            }),
        },
    }
}

/// Prefers a mounted boot partition; falls back to a directory that holds
/// the boot files (an image whose boot partition is not mounted).
fn find_boot_dir(host: &Host, mounts: &MountTable, root: &Path) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = BOOT_DIR_CANDIDATES.iter().map(|c| root.join(c)).collect();
    candidates
        .iter()
        .find(|dir| mounts.at(dir).is_some_and(|m| m.fstype == "vfat"))
        .or_else(|| candidates.iter().find(|dir| mounts.at(dir).is_some()))
        .or_else(|| {
            candidates.iter().find(|dir| {
                host.path(dir.join("cmdline.txt")).exists()
                    || host.path(dir.join("config.txt")).exists()
            })
        })
        .cloned()
}

/// What a device spec matches: a whole disk's filesystem, or a partition.
#[derive(Debug, Clone, Copy)]
pub enum Match<'a> {
    Disk(&'a Disk),
    Partition(&'a Disk, &'a crate::system::disks::Partition),
}

impl Match<'_> {
    /// Its `/dev` name, or "DISK partition N" when the kernel shows no
    /// device for the partition.
    pub fn name(&self) -> String {
        match self {
            Match::Disk(disk) => disk.path.display().to_string(),
            Match::Partition(disk, part) => part
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| format!("{} partition {}", disk.path.display(), part.number)),
        }
    }
}

/// Every partition (or whole disk) that a spec matches.
pub fn matching<'a>(spec: &DeviceSpec, disks: &'a [Disk]) -> Vec<Match<'a>> {
    let eq = |a: &Option<String>, b: &str| a.as_deref().is_some_and(|a| a.eq_ignore_ascii_case(b));
    let mut out = Vec::new();
    for disk in disks {
        if let Some(fs) = &disk.filesystem {
            let hit = match spec {
                DeviceSpec::Uuid(v) => eq(&fs.uuid, v),
                DeviceSpec::Label(v) => fs.label.as_deref() == Some(v.as_str()),
                DeviceSpec::Path(v) => disk.path == Path::new(v),
                DeviceSpec::PartUuid(_) | DeviceSpec::PartLabel(_) => false,
            };
            if hit {
                out.push(Match::Disk(disk));
            }
        }
        for part in &disk.partitions {
            let hit = match spec {
                DeviceSpec::PartUuid(v) => eq(&part.partuuid, v),
                DeviceSpec::Uuid(v) => eq(&part.uuid, v),
                DeviceSpec::Label(v) => part.label.as_deref() == Some(v.as_str()),
                DeviceSpec::PartLabel(v) => part.partlabel.as_deref() == Some(v.as_str()),
                DeviceSpec::Path(v) => part.path.as_deref() == Some(Path::new(v)),
            };
            if hit {
                out.push(Match::Partition(disk, part));
            }
        }
    }
    out
}

/// Names of every partition (or whole disk) that a spec matches.
pub fn resolve(spec: &DeviceSpec, disks: &[Disk]) -> Vec<String> {
    matching(spec, disks).iter().map(Match::name).collect()
}

/// An id and the attached devices it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdUse {
    pub spec: DeviceSpec,
    pub devices: Vec<String>,
}

impl IdUse {
    /// The one rule for ids: each names exactly one attached device. Two
    /// disks with one PARTUUID, UUID or LABEL make the kernel or systemd
    /// pick either (and none means it is not the id of what is attached).
    pub fn is_unique(&self) -> bool {
        self.devices.len() == 1
    }

    /// "PARTUUID=x on /dev/sda1 and /dev/sdb1", or that it names none.
    pub fn describe(&self) -> String {
        match self.devices.as_slice() {
            [] => format!("{} names no attached device", self.spec),
            devices => format!("{} on {}", self.spec, devices.join(" and ")),
        }
    }
}

/// What each of `specs` names among `disks`, for the rule of
/// [`IdUse::is_unique`]: `verify`'s and a standby's `ids-unique` checks and
/// `sync`'s refusal of a standby whose ids are not its own.
pub fn id_uses(specs: impl IntoIterator<Item = DeviceSpec>, disks: &[Disk]) -> Vec<IdUse> {
    specs
        .into_iter()
        .map(|spec| {
            let devices = resolve(&spec, disks);
            IdUse { spec, devices }
        })
        .collect()
}
