//! Which kernel and initramfs a boot partition starts, and which kernel
//! version that is: what the standby's `/lib/modules` must match.

use crate::bootcfg::{BootSettings, ConfigTxt, FilterContext};
use crate::system::pi::PiFamily;
use std::path::{Path, PathBuf};

/// The files the firmware loads from a boot partition, by its config.txt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootImages {
    /// The kernel's name on the boot partition, if one was found.
    pub kernel: Option<String>,
    /// The initramfs it names (`initramfs FILE` or `auto_initramfs=1`).
    pub initramfs: Option<String>,
    /// The command-line file.
    pub cmdline: String,
}

/// Reads `boot`'s config.txt as the firmware of `family` (its section
/// filter `model`) would.
pub fn boot_images(boot: &Path, family: PiFamily, model: Option<&str>) -> BootImages {
    let config = std::fs::read(boot.join("config.txt")).unwrap_or_default();
    let settings: BootSettings = ConfigTxt::parse(&config)
        .map(|c| {
            c.effective_with(&FilterContext::new(model, false), &mut |name: &str| {
                match std::fs::read(boot.join(name.trim_start_matches('/'))) {
                    Ok(bytes) => Ok(Some(bytes)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(e),
                }
            })
        })
        .unwrap_or_default();
    let prefix = settings.os_prefix.clone().unwrap_or_default();
    let kernel = match &settings.kernel {
        Some(name) => Some(format!("{prefix}{name}")),
        None => default_kernels(family, settings.arm_64bit)
            .iter()
            .map(|name| format!("{prefix}{name}"))
            .find(|name| boot.join(name).is_file()),
    };
    let auto = String::from_utf8_lossy(&config)
        .lines()
        .any(|line| line.trim().replace(' ', "") == "auto_initramfs=1");
    let initramfs = match &settings.initramfs {
        Some(initramfs) => initramfs
            .file
            .split(',')
            .next()
            .map(|name| format!("{prefix}{name}")),
        // The firmware's rule: kernel8.img -> initramfs8.
        None if auto => kernel.as_ref().map(|k| {
            k.replacen("kernel", "initramfs", 1)
                .trim_end_matches(".img")
                .to_string()
        }),
        None => None,
    };
    BootImages {
        kernel,
        initramfs,
        cmdline: settings.cmdline_file(),
    }
}

/// The firmware's kernel names when config.txt sets none, most likely first.
fn default_kernels(family: PiFamily, arm_64bit: Option<bool>) -> &'static [&'static str] {
    match (family, arm_64bit) {
        (PiFamily::Pi5, _) => &["kernel_2712.img", "kernel8.img"],
        (PiFamily::Pi4 | PiFamily::Cm4, Some(false)) => &["kernel7l.img", "kernel8.img"],
        (PiFamily::Pi4 | PiFamily::Cm4, _) => &["kernel8.img", "kernel7l.img"],
        _ => &["kernel8.img", "kernel7l.img", "kernel7.img", "kernel.img"],
    }
}

/// The kernel version an image carries: an x86 bzImage's header string,
/// or the "Linux version" banner of an uncompressed image (arm64 `Image`,
/// the Pi's kernel8.img). A compressed image gives none.
pub fn version_of(image: &[u8]) -> Option<String> {
    let word = |bytes: &[u8]| {
        let text: Vec<u8> = bytes
            .iter()
            .take_while(|b| !b.is_ascii_whitespace() && **b != 0)
            .copied()
            .collect();
        (!text.is_empty()).then(|| String::from_utf8_lossy(&text).into_owned())
    };
    if image.get(0x202..0x206) == Some(b"HdrS") {
        let offset = u16::from_le_bytes([*image.get(0x20e)?, *image.get(0x20f)?]) as usize;
        return word(image.get(0x200 + offset..)?);
    }
    let banner = b"Linux version ";
    let at = image.windows(banner.len()).position(|w| w == banner)?;
    word(&image[at + banner.len()..])
}

/// The version of `kernel` by an identical `/boot/vmlinuz-VERSION` on the
/// root filesystem at `root` (as Debian and Raspberry Pi OS keep them), or
/// by the image itself.
pub fn kernel_version(kernel: &[u8], root: &Path) -> Option<String> {
    let same_file = std::fs::read_dir(root.join("boot"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_prefix("vmlinuz-")?.to_string();
            let same_size = e.metadata().ok()?.len() == kernel.len() as u64;
            (same_size && std::fs::read(e.path()).ok()? == kernel).then_some(version)
        })
        .next();
    same_file.or_else(|| version_of(kernel))
}

/// Where the root at `root` keeps the modules of `version`, if it has them.
pub fn modules_dir(root: &Path, version: &str) -> Option<PathBuf> {
    ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|dir| root.join(dir).join(version))
        .find(|dir| dir.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_a_bzimage_header_or_the_banner() {
        let mut bz = vec![0u8; 0x400];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz[0x20e..0x210].copy_from_slice(&0x100u16.to_le_bytes());
        bz[0x300..0x300 + 20].copy_from_slice(b"6.1.0-31-amd64 (debi");
        assert_eq!(version_of(&bz).as_deref(), Some("6.1.0-31-amd64"));
        let mut image = vec![0u8; 64];
        image.extend_from_slice(b"Linux version 6.6.51+rpt-rpi-v8 (serge@raspberrypi.com)");
        assert_eq!(version_of(&image).as_deref(), Some("6.6.51+rpt-rpi-v8"));
        assert_eq!(version_of(&[0x1f, 0x8b, 8, 0]), None);
    }

    #[test]
    fn config_txt_names_the_kernel_and_initramfs_or_the_firmware_picks_them() {
        let boot = tempfile::tempdir().unwrap();
        std::fs::write(
            boot.path().join("config.txt"),
            "kernel=vmlinuz\ninitramfs initrd.img followkernel\n",
        )
        .unwrap();
        let images = boot_images(boot.path(), PiFamily::NotAPi, None);
        assert_eq!(images.kernel.as_deref(), Some("vmlinuz"));
        assert_eq!(images.initramfs.as_deref(), Some("initrd.img"));
        assert_eq!(images.cmdline, "cmdline.txt");
        std::fs::write(
            boot.path().join("config.txt"),
            "[all]\narm_64bit=1\nauto_initramfs=1\n",
        )
        .unwrap();
        std::fs::write(boot.path().join("kernel8.img"), "k").unwrap();
        let images = boot_images(boot.path(), PiFamily::Pi4, Some("pi4"));
        assert_eq!(images.kernel.as_deref(), Some("kernel8.img"));
        assert_eq!(images.initramfs.as_deref(), Some("initramfs8"));
    }
}
