//! What stands behind the EEPROM bootloader's config, read with the
//! system's own tools (rpi-eeprom): an update staged for the next boot
//! (`pieeprom.upd` with `recovery.bin`, which `rpi-eeprom-config --edit`
//! builds on too), the release images the rpi-eeprom package installed
//! and their build times, and how `rpi-eeprom-update` writes this Pi's
//! EEPROM (staged for recovery.bin, or at once with flashrom). From these
//! the plan and the executor choose the image a change is built on, never
//! one older than the bootloader in the EEPROM ([`EepromFacts::base`]).

use crate::bootcfg::eeprom::image_build_time;
use crate::host::Host;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The update `rpi-eeprom-update` stages on a boot partition, and the
/// recovery program the boot ROM runs to write it; recovery.bin renames
/// itself once done (pieeprom.upd stays), so the two together are an
/// update not yet written.
pub const PENDING_UPDATE_FILE: &str = "pieeprom.upd";
pub const RECOVERY_FILE: &str = "recovery.bin";

/// Where `rpi-eeprom-update` reads the owner's settings (its release
/// channel, immediate updates).
pub const DEFAULTS_FILE: &str = "/etc/default/rpi-eeprom-update";

/// Whether `dir` (a real path) holds an update the boot ROM has not
/// written yet.
pub fn pending_in(dir: &Path) -> bool {
    [PENDING_UPDATE_FILE, RECOVERY_FILE]
        .iter()
        .all(|file| dir.join(file).exists())
}

/// How `rpi-eeprom-update` writes this Pi's EEPROM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EepromWrites {
    /// Staged on the SD card's boot partition (`pieeprom.upd`,
    /// `recovery.bin`) for the boot ROM to write at the next boot: a Pi 4's
    /// way, and a Pi 5's without flashrom.
    #[default]
    Staged,
    /// Written at once with flashrom through the SPI device: a Pi 5's way
    /// (a Pi 4's only where its owner turned immediate updates on).
    AtOnce { spidev: &'static str },
    /// Written into one half of an A/B EEPROM with `rpi-eeprom-ab` (a Pi 5
    /// since 2026-05-13), which pimigrate cannot read back.
    AbPartitions,
}

/// An update staged on the boot partition, not yet written.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedUpdate {
    /// The image, as a real path (`<boot>/pieeprom.upd`).
    pub image: PathBuf,
    /// Its config, as `rpi-eeprom-config IMAGE` prints it, or why it could
    /// not be read.
    pub config: Result<String, String>,
    /// Its bootloader's build time.
    pub built: Option<u64>,
}

/// A release image of the rpi-eeprom package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseImage {
    pub path: PathBuf,
    pub built: u64,
}

/// What [`read`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EepromFacts {
    /// An update staged for the next boot on the running system's boot
    /// partition: what the EEPROM will hold then.
    pub staged: Option<StagedUpdate>,
    /// The image `rpi-eeprom-update -l` names: the newest of the release
    /// channel this system follows (what a bare `rpi-eeprom-config
    /// --apply` would build on).
    pub channel_latest: Option<PathBuf>,
    /// Every release image beside it (all channels), newest first.
    pub images: Vec<ReleaseImage>,
    pub writes: EepromWrites,
}

/// Why no image may carry a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseError {
    /// Every image there is older than the bootloader in the EEPROM.
    Downgrade(String),
    /// No image, or the running bootloader's build time, could be found.
    Unknown(String),
}

/// The image a change to the bootloader's config is built on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum EepromBase {
    /// The update already staged for the next boot (its config and its
    /// bootloader), as `rpi-eeprom-config --edit` builds on it.
    Staged { built: Option<u64> },
    /// The EEPROM itself, read with flashrom when the change is made: the
    /// same bootloader, only the config changed.
    Flash,
    /// A release image of the rpi-eeprom package, as old as the running
    /// bootloader or newer.
    Release { image: PathBuf, built: u64 },
}

impl EepromFacts {
    /// The image a change is built on, for a bootloader built at
    /// `running` (the device tree's build time), or why none may be: an
    /// image older than the bootloader in the EEPROM would downgrade it.
    /// In order: the staged update (what the EEPROM holds after the next
    /// boot), the flash (written at once, read back with flashrom), the
    /// release image of the very same build, the channel's newest, the
    /// oldest of the newer ones in another channel.
    pub fn base(&self, running: Option<u64>) -> Result<EepromBase, BaseError> {
        let day = crate::clock::day;
        if let Some(staged) = &self.staged {
            return match (staged.built, running) {
                (Some(built), Some(running)) if built < running => Err(BaseError::Downgrade(format!(
                    "the bootloader update staged in {} was built {}, before the bootloader in the EEPROM ({}): \
                     a change built on it would downgrade the bootloader",
                    staged.image.display(),
                    day(built),
                    day(running)
                ))),
                (built, _) => Ok(EepromBase::Staged { built }),
            };
        }
        if matches!(self.writes, EepromWrites::AtOnce { .. }) {
            return Ok(EepromBase::Flash);
        }
        let Some(running) = running else {
            return Err(BaseError::Unknown(
                "the bootloader's build time could not be read (no chosen/bootloader/build-timestamp in the \
                 device tree), so no release image can be shown not to be older"
                    .into(),
            ));
        };
        if self.images.is_empty() {
            return Err(BaseError::Unknown(
                "rpi-eeprom-update -l named no release image (is the rpi-eeprom package installed?)".into(),
            ));
        }
        let release = |image: &ReleaseImage| EepromBase::Release {
            image: image.path.clone(),
            built: image.built,
        };
        if let Some(same) = self.images.iter().find(|i| i.built == running) {
            return Ok(release(same));
        }
        let latest = self
            .images
            .iter()
            .find(|i| Some(&i.path) == self.channel_latest.as_ref());
        if let Some(latest) = latest.filter(|i| i.built > running) {
            return Ok(release(latest));
        }
        match self.images.iter().rev().find(|i| i.built > running) {
            Some(newer) => Ok(release(newer)),
            None => Err(BaseError::Downgrade(format!(
                "every bootloader image of the rpi-eeprom package is older than the one in the EEPROM (built {}; \
                 the newest here, {}, was built {}): a change built on it would downgrade the bootloader",
                day(running),
                self.images[0].path.display(),
                day(self.images[0].built)
            ))),
        }
    }
}

/// Reads the facts for a Pi whose running system's boot partition is at
/// `boot_dir` (a view path), `pi5` telling which SPI device and defaults
/// `rpi-eeprom-update` uses.
pub fn read(host: &Host, boot_dir: Option<&Path>, pi5: bool) -> EepromFacts {
    let staged = boot_dir
        .map(|dir| host.path(dir))
        .filter(|dir| pending_in(dir))
        .map(|dir| staged_update(&dir.join(PENDING_UPDATE_FILE)));
    let channel_latest = crate::tools::which("rpi-eeprom-update")
        .and_then(|tool| Command::new(tool).arg("-l").output().ok())
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        .filter(|path| path.is_file());
    let images = channel_latest
        .as_deref()
        .map(release_images)
        .unwrap_or_default();
    EepromFacts {
        staged,
        channel_latest,
        images,
        writes: writes(host, pi5),
    }
}

/// An update staged at `image`: its config and build time.
pub fn staged_update(image: &Path) -> StagedUpdate {
    StagedUpdate {
        image: image.to_path_buf(),
        config: image_config(image),
        built: std::fs::read(image)
            .ok()
            .and_then(|bytes| image_build_time(&bytes)),
    }
}

/// The config of the image at `image`, as `rpi-eeprom-config IMAGE`
/// prints it.
pub fn image_config(image: &Path) -> Result<String, String> {
    let tool = crate::tools::which("rpi-eeprom-config")
        .ok_or("rpi-eeprom-config is not installed (sudo apt install rpi-eeprom)")?;
    image_config_with(&tool, image)
}

/// [`image_config`] with the tool at `tool`.
pub fn image_config_with(tool: &Path, image: &Path) -> Result<String, String> {
    let out = Command::new(tool)
        .arg(image)
        .output()
        .map_err(|e| format!("running {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`rpi-eeprom-config {}` failed ({}): {}",
            image.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The release images in the folder of `latest` and in the other release
/// folders beside it (`default`, `latest`, ...), newest first.
pub fn release_images(latest: &Path) -> Vec<ReleaseImage> {
    let Some(channel) = latest.parent() else {
        return Vec::new();
    };
    let size = std::fs::metadata(latest).map(|m| m.len()).ok();
    let folders: Vec<PathBuf> = channel
        .parent()
        .and_then(|root| std::fs::read_dir(root).ok())
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_else(|| vec![channel.to_path_buf()]);
    let mut images: Vec<ReleaseImage> = folders
        .iter()
        .filter_map(|folder| std::fs::read_dir(folder).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("pieeprom-") && name.ends_with(".bin")
        })
        .filter(|path| std::fs::metadata(path).ok().map(|m| m.len()) == size)
        .filter_map(|path| {
            let built = image_build_time(&std::fs::read(&path).ok()?)?;
            Some(ReleaseImage { path, built })
        })
        .collect();
    images.sort_by(|a, b| b.built.cmp(&a.built).then(a.path.cmp(&b.path)));
    images.dedup_by(|a, b| a.path == b.path);
    images
}

/// How `rpi-eeprom-update` will write: at once where it uses flashrom (a
/// Pi 5 by default, a Pi 4 whose owner set `RPI_EEPROM_IMMEDIATE_UPDATE=1`)
/// and flashrom and the SPI device are there; through `rpi-eeprom-ab` on
/// a Pi 5 with an A/B EEPROM; staged otherwise.
fn writes(host: &Host, pi5: bool) -> EepromWrites {
    let spidev = if pi5 {
        "/dev/spidev10.0"
    } else {
        "/dev/spidev0.0"
    };
    let defaults = std::fs::read_to_string(host.path(DEFAULTS_FILE)).unwrap_or_default();
    let immediate = std::env::var("RPI_EEPROM_IMMEDIATE_UPDATE")
        .ok()
        .or_else(|| shell_default(&defaults, "RPI_EEPROM_IMMEDIATE_UPDATE"))
        .map(|v| v.trim() == "1")
        .unwrap_or(pi5);
    if !immediate {
        return EepromWrites::Staged;
    }
    let ab_disabled = shell_default(&defaults, "AB_EEPROM").is_some_and(|v| v.trim() == "0");
    if pi5 && !ab_disabled {
        if let Some(ab) = crate::tools::which("rpi-eeprom-ab") {
            let in_use = Command::new(ab)
                .arg("spi-check")
                .output()
                .is_ok_and(|o| o.status.success());
            if in_use {
                return EepromWrites::AbPartitions;
            }
        }
    }
    if crate::tools::which("flashrom").is_some() && host.path(spidev).exists() {
        EepromWrites::AtOnce { spidev }
    } else {
        EepromWrites::Staged
    }
}

/// The last `KEY=value` assignment of a shell defaults file, its quotes
/// taken off.
fn shell_default(text: &str, key: &str) -> Option<String> {
    text.lines().rev().find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        line.strip_prefix(key)?.strip_prefix('=').map(|v| {
            v.split('#')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches(|c| c == '"' || c == '\'')
                .to_string()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(path: &str, built: u64) -> ReleaseImage {
        ReleaseImage {
            path: PathBuf::from(path),
            built,
        }
    }

    fn facts(images: Vec<ReleaseImage>, latest: &str) -> EepromFacts {
        EepromFacts {
            channel_latest: Some(PathBuf::from(latest)),
            images,
            ..EepromFacts::default()
        }
    }

    #[test]
    fn the_base_is_never_older_than_the_bootloader_in_the_eeprom() {
        let all = vec![
            image("/fw/latest/pieeprom-2026-09-23.bin", 300),
            image("/fw/default/pieeprom-2026-05-17.bin", 200),
            image("/fw/latest/pieeprom-2026-04-14.bin", 150),
            image("/fw/default/pieeprom-2025-02-11.bin", 100),
        ];
        let latest = "/fw/default/pieeprom-2026-05-17.bin";
        let release = |path: &str, built| EepromBase::Release {
            image: PathBuf::from(path),
            built,
        };
        // The very build the EEPROM runs, wherever it is.
        assert_eq!(
            facts(all.clone(), latest).base(Some(150)),
            Ok(release("/fw/latest/pieeprom-2026-04-14.bin", 150))
        );
        // Else the channel's newest, as rpi-eeprom-config --apply takes it.
        assert_eq!(
            facts(all.clone(), latest).base(Some(120)),
            Ok(release(latest, 200))
        );
        // A bootloader newer than the channel's newest: the closest newer
        // one of another channel, never the channel's older one.
        assert_eq!(
            facts(all.clone(), latest).base(Some(250)),
            Ok(release("/fw/latest/pieeprom-2026-09-23.bin", 300))
        );
        let Err(BaseError::Downgrade(err)) = facts(all.clone(), latest).base(Some(400)) else {
            panic!("not a downgrade refusal")
        };
        assert!(err.contains("downgrade"), "{err}");
        assert!(facts(all, latest).base(None).is_err());
        assert!(facts(Vec::new(), latest).base(Some(1)).is_err());
    }

    #[test]
    fn a_staged_update_or_the_flash_comes_first() {
        let mut f = facts(vec![image("/fw/default/a.bin", 500)], "/fw/default/a.bin");
        f.staged = Some(StagedUpdate {
            image: PathBuf::from("/boot/firmware/pieeprom.upd"),
            config: Ok(String::new()),
            built: Some(200),
        });
        assert_eq!(
            f.base(Some(200)),
            Ok(EepromBase::Staged { built: Some(200) })
        );
        let Err(BaseError::Downgrade(err)) = f.base(Some(300)) else {
            panic!("not a downgrade refusal")
        };
        assert!(
            err.contains("pieeprom.upd") && err.contains("downgrade"),
            "{err}"
        );
        f.staged = None;
        f.writes = EepromWrites::AtOnce {
            spidev: "/dev/spidev10.0",
        };
        assert_eq!(f.base(Some(900)), Ok(EepromBase::Flash));
    }

    #[test]
    fn defaults_read_as_the_shell_reads_them() {
        let text = "# comment\nFIRMWARE_RELEASE_STATUS=\"latest\"\nRPI_EEPROM_IMMEDIATE_UPDATE=1\nexport RPI_EEPROM_IMMEDIATE_UPDATE='0' # off\n";
        assert_eq!(
            shell_default(text, "RPI_EEPROM_IMMEDIATE_UPDATE").as_deref(),
            Some("0")
        );
        assert_eq!(
            shell_default(text, "FIRMWARE_RELEASE_STATUS").as_deref(),
            Some("latest")
        );
        assert_eq!(shell_default(text, "AB_EEPROM"), None);
    }

    /// The real release images of testbed/data/rpi-eeprom, read as
    /// rpi-eeprom-update reads them.
    #[test]
    fn the_real_images_build_times_are_read() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/data/rpi-eeprom");
        let pi4 = data.join("firmware-2711/pieeprom-2026-05-17.bin");
        let images = release_images(&pi4);
        assert_eq!(images, vec![image(pi4.to_str().unwrap(), 1_779_045_198)]);
        let pi5 = data.join("firmware-2712/pieeprom-2026-05-26.bin");
        assert_eq!(release_images(&pi5)[0].built, 1_779_807_685);
    }
}
