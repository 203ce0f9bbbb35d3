//! The cached pristine SD card images, built by `testbed/image/build-image.sh`.
//! The script owns the cache key (a hash of the recipe folder), so every
//! checkout on the machine finds the same images.

use crate::host::cmd;
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The recipe folder of this checkout.
pub fn recipe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("image")
}

/// The two pristine images and what the build recorded about them. Never
/// boot these directly: copy them (see [`crate::host::disks::Disk::copy_of`]).
#[derive(Debug, Clone)]
pub struct ImageSet {
    pub dir: PathBuf,
    pub kernel_version: String,
    /// Raspberry Pi OS bookworm layout: boot partition at `/boot/firmware`.
    pub bookworm: PathBuf,
    pub bookworm_signature: String,
    /// Bullseye layout: boot partition at `/boot`.
    pub bullseye: PathBuf,
    pub bullseye_signature: String,
}

impl ImageSet {
    /// Builds the images if the cache lacks them (a few minutes, needs root
    /// and the Debian mirror), otherwise just finds them.
    pub fn ensure() -> Result<ImageSet> {
        ImageSet::open(&build_or_find(&recipe_dir().join("build-image.sh"))?)
    }

    /// The images in an existing cache folder.
    pub fn open(dir: &Path) -> Result<ImageSet> {
        let get = metadata(dir)?;
        Ok(ImageSet {
            dir: dir.to_path_buf(),
            kernel_version: get("KERNEL_VERSION")?,
            bookworm: dir.join(get("BOOKWORM_IMAGE")?),
            bookworm_signature: get("BOOKWORM_SIGNATURE")?,
            bullseye: dir.join(get("BULLSEYE_IMAGE")?),
            bullseye_signature: get("BULLSEYE_SIGNATURE")?,
        })
    }
}

/// The ARM lane's pristine SD card, built by
/// `testbed/image-arm64/build-image.sh`: Debian bookworm arm64 laid out
/// like Raspberry Pi OS, raspi-firmware's files on its FAT partition.
#[derive(Debug, Clone)]
pub struct ArmImage {
    pub dir: PathBuf,
    pub kernel_version: String,
    pub image: PathBuf,
    /// The card's MBR disk signature: its partitions are
    /// PARTUUID=<signature>-01 and -02.
    pub signature: String,
}

impl ArmImage {
    /// Builds the image if the cache lacks it (about 12 minutes under
    /// qemu-user, needs root and the Debian mirror), otherwise finds it.
    pub fn ensure() -> Result<ArmImage> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("image-arm64/build-image.sh");
        let dir = build_or_find(&script)?;
        let get = metadata(&dir)?;
        Ok(ArmImage {
            kernel_version: get("KERNEL_VERSION")?,
            image: dir.join(get("IMAGE")?),
            signature: get("SIGNATURE")?,
            dir,
        })
    }
}

/// Runs an image recipe (`build-image.sh`), which builds the image unless
/// the cache has it and prints its folder last.
fn build_or_find(script: &Path) -> Result<PathBuf> {
    let out = cmd::stdout(Command::new("bash").arg(script).stderr(Stdio::inherit()))
        .with_context(|| format!("cannot build the testbed image with {}", script.display()))?;
    let dir = out
        .lines()
        .last()
        .with_context(|| format!("{} printed no image folder", script.display()))?;
    Ok(PathBuf::from(dir.trim()))
}

/// What a recipe recorded about its image (`image.env`, `KEY=value`
/// lines): a lookup that fails naming the missing key.
fn metadata(dir: &Path) -> Result<impl Fn(&str) -> Result<String>> {
    let meta = dir.join("image.env");
    let text = std::fs::read_to_string(&meta).with_context(|| {
        format!(
            "cannot read {}: run its build-image.sh again",
            meta.display()
        )
    })?;
    let vars: HashMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Ok(move |k: &str| {
        vars.get(k)
            .cloned()
            .with_context(|| format!("{} lacks {k}", meta.display()))
    })
}
