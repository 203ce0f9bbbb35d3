//! The firmware stand-in: what a Pi 4's boot ROM and `start4.elf` do before
//! Linux runs, reduced to what a migration depends on. It picks the boot disk
//! by boot order, takes its first FAT partition, reads `config.txt` (or
//! `tryboot.txt` in a trial boot), honours `[all]`/`[pi4]`/`[tryboot]`
//! sections, `include FILE`, `os_prefix=`, `kernel=`, `initramfs` and
//! `cmdline=`, and hands
//! QEMU a kernel, an initramfs and a command line.

use crate::disks::{Bus, Disk};
use crate::fat;
use crate::mbr::{Mbr, Partition};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The EEPROM `BOOT_ORDER=0xf461` of a Pi 4 set up for USB/NVMe boot: SD
/// card first, then NVMe, then USB mass storage.
pub const BOOT_ORDER: [Bus; 4] = [Bus::Sd, Bus::Nvme, Bus::UsbUas, Bus::UsbStorage];

/// What the firmware decided to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    /// Name of the disk the boot files came from.
    pub disk: String,
    /// `config.txt` or `tryboot.txt`.
    pub config_file: String,
    pub tryboot: bool,
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    pub cmdline: String,
}

/// Settings that matter here, after section filtering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub kernel: String,
    pub initramfs: Option<String>,
    pub cmdline: String,
    pub os_prefix: String,
}

impl Default for Config {
    fn default() -> Self {
        // What the firmware assumes when config.txt says nothing.
        Config {
            kernel: "kernel8.img".into(),
            initramfs: None,
            cmdline: "cmdline.txt".into(),
            os_prefix: String::new(),
        }
    }
}

/// Parses config.txt as the firmware of a Pi 4 would: lines under a section
/// filter apply only when it matches; `[all]` matches always; `[tryboot]`
/// only in a trial boot; `[pi4]` matches (we play a Pi 4); any other filter
/// (`[pi5]`, `[cm4]`, `[none]`, ...) does not. `include` lines are not
/// followed (see [`parse_config_with`]).
pub fn parse_config(text: &str, tryboot: bool) -> Config {
    parse_config_with(text, tryboot, &mut |_| None)
}

/// How deep `include` nests before the stand-in stops following it.
const MAX_INCLUDE_DEPTH: usize = 8;

/// [`parse_config`], following `include FILE` as the firmware does: FILE
/// (read from the boot partition by `read`; `None` when absent, which the
/// firmware skips) is read in place, in the section in force there, its
/// last section stays in force after it, and a later `cmdline=` (or any
/// setting) wins over an earlier one. Ubuntu's `include syscfg.txt` works
/// this way; an include under a section that does not match is skipped.
pub fn parse_config_with(
    text: &str,
    tryboot: bool,
    read: &mut dyn FnMut(&str) -> Option<String>,
) -> Config {
    let mut parser = Parser {
        cfg: Config::default(),
        active: true,
        tryboot,
    };
    parser.feed(text, read, 0);
    parser.cfg
}

struct Parser {
    cfg: Config,
    active: bool,
    tryboot: bool,
}

impl Parser {
    fn feed(&mut self, text: &str, read: &mut dyn FnMut(&str) -> Option<String>, depth: usize) {
        for raw in text.lines() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some(filter) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                self.active = match filter.trim() {
                    "all" | "pi4" => true,
                    "tryboot" => self.tryboot,
                    _ => false,
                };
                continue;
            }
            if !self.active {
                continue;
            }
            if let Some(name) = line.strip_prefix("include ") {
                if depth < MAX_INCLUDE_DEPTH {
                    if let Some(inner) = read(name.trim()) {
                        self.feed(&inner, read, depth + 1);
                    }
                }
            } else if let Some(rest) = line.strip_prefix("initramfs ") {
                // `initramfs FILE followkernel` or `initramfs FILE ADDRESS`.
                self.cfg.initramfs = rest.split_whitespace().next().map(str::to_string);
            } else if let Some((key, value)) = line.split_once('=') {
                let value = value.trim().to_string();
                match key.trim() {
                    "kernel" => self.cfg.kernel = value,
                    "cmdline" => self.cfg.cmdline = value,
                    "os_prefix" => self.cfg.os_prefix = value,
                    _ => {}
                }
            }
        }
    }
}

/// The first FAT partition of an MBR disk, the only place the firmware looks.
pub fn boot_partition(image: &Path) -> Result<Option<Partition>> {
    Ok(Mbr::read(image)?.and_then(|m| m.partitions.into_iter().find(Partition::is_fat)))
}

/// Reads the boot files from `disk` into `scratch` and says how to start Linux.
pub fn load(disk: &Disk, tryboot: bool, scratch: &Path) -> Result<BootSpec> {
    let image = &disk.image;
    let part = boot_partition(image)?.with_context(|| {
        format!(
            "disk {} ({}) has no FAT partition to boot from",
            disk.name,
            image.display()
        )
    })?;
    // The flag is one-shot: a missing tryboot.txt falls back to config.txt.
    let (config_file, text) = match tryboot
        .then(|| fat::read(image, &part, "tryboot.txt"))
        .transpose()?
        .flatten()
    {
        Some(text) => ("tryboot.txt", text),
        None => {
            let text = fat::read(image, &part, "config.txt")?.with_context(|| {
                format!("no config.txt on the boot partition of {}", image.display())
            })?;
            ("config.txt", text)
        }
    };
    // Included files come from the same partition; one that cannot be
    // read is skipped, as the firmware skips a missing one.
    let cfg = parse_config_with(&text, tryboot, &mut |name| {
        fat::read(image, &part, name).ok().flatten()
    });
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;

    let kernel = scratch.join("kernel");
    let kernel_name = format!("{}{}", cfg.os_prefix, cfg.kernel);
    fat::copy_out(image, &part, &kernel_name, &kernel).with_context(|| {
        format!("{config_file} names kernel {kernel_name}, which could not be loaded")
    })?;
    let initrd = match &cfg.initramfs {
        Some(name) => {
            let path = scratch.join("initrd");
            let name = format!("{}{name}", cfg.os_prefix);
            fat::copy_out(image, &part, &name, &path).with_context(|| {
                format!("{config_file} names initramfs {name}, which could not be loaded")
            })?;
            Some(path)
        }
        None => None,
    };
    let cmdline_name = format!("{}{}", cfg.os_prefix, cfg.cmdline);
    let cmdline = fat::read(image, &part, &cmdline_name)?.with_context(|| {
        format!("{config_file} names command line file {cmdline_name}, which is missing")
    })?;
    // The firmware uses the first line only, with surrounding space dropped.
    let cmdline = cmdline.lines().next().unwrap_or("").trim().to_string();
    if cmdline.is_empty() {
        bail!("{cmdline_name} on {} is empty", image.display());
    }
    Ok(BootSpec {
        disk: disk.name.clone(),
        config_file: config_file.into(),
        tryboot: config_file == "tryboot.txt",
        kernel,
        initrd,
        cmdline,
    })
}

/// Tries the disks in [`BOOT_ORDER`] and boots the first one with usable boot
/// files, like the EEPROM bootloader moving on from an empty SD slot.
pub fn select(disks: &[Disk], tryboot: bool, scratch: &Path) -> Result<BootSpec> {
    let mut tried = Vec::new();
    for bus in BOOT_ORDER {
        for disk in disks.iter().filter(|d| d.bus == bus) {
            match load(disk, tryboot, scratch) {
                Ok(spec) => return Ok(spec),
                Err(e) => tried.push(format!("{}: {e:#}", disk.name)),
            }
        }
    }
    bail!("nothing to boot; tried: [{}]", tried.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "dtparam=audio=on\n[pi5]\nkernel=kernel_2712.img\n[pi4]\narm_boost=1\n\
        [all]\nkernel=vmlinuz # the kernel\ninitramfs initrd.img followkernel\n[tryboot]\ncmdline=cmdline-new.txt\n";

    #[test]
    fn normal_boot_ignores_tryboot_and_pi5_sections() {
        let c = parse_config(CONFIG, false);
        assert_eq!(c.kernel, "vmlinuz");
        assert_eq!(c.initramfs.as_deref(), Some("initrd.img"));
        assert_eq!(c.cmdline, "cmdline.txt");
    }

    #[test]
    fn trial_boot_applies_tryboot_section() {
        assert_eq!(parse_config(CONFIG, true).cmdline, "cmdline-new.txt");
    }

    #[test]
    fn defaults_when_empty() {
        assert_eq!(parse_config("", false), Config::default());
    }

    /// Ubuntu 20.04's layout: config.txt's cmdline= is overridden by the
    /// one in syscfg.txt, and a tryboot.txt that appends cmdline= after the
    /// includes wins over both.
    #[test]
    fn includes_are_read_in_place_and_the_last_assignment_wins() {
        let config =
            "[pi4]\nkernel=uboot_rpi_4.bin\n[pi3]\nkernel=uboot_rpi_3.bin\n[all]\narm_64bit=1\n\
            cmdline=cmdline.txt\ninclude syscfg.txt\ninclude usercfg.txt\n";
        let mut read = |name: &str| match name {
            "syscfg.txt" => Some("enable_uart=1\ncmdline=syscfg-cmdline.txt\n".to_string()),
            "usercfg.txt" => Some("# user changes\n".to_string()),
            _ => None,
        };
        let normal = parse_config_with(config, false, &mut read);
        assert_eq!(normal.cmdline, "syscfg-cmdline.txt");
        assert_eq!(normal.kernel, "uboot_rpi_4.bin");
        let tryboot = format!("{config}[all]\ncmdline=cmdline.pimigrate.txt\n");
        assert_eq!(
            parse_config_with(&tryboot, true, &mut read).cmdline,
            "cmdline.pimigrate.txt"
        );
        // Without following includes, the override would go unseen.
        assert_eq!(parse_config(config, false).cmdline, "cmdline.txt");
    }

    #[test]
    fn includes_under_other_sections_are_skipped_and_loops_end() {
        let mut read = |name: &str| match name {
            "pi5.txt" => Some("cmdline=pi5.txt\n".to_string()),
            "self.txt" => Some("include self.txt\ncmdline=deep.txt\n".to_string()),
            _ => None,
        };
        assert_eq!(
            parse_config_with("[pi5]\ninclude pi5.txt\n", false, &mut read).cmdline,
            "cmdline.txt"
        );
        assert_eq!(
            parse_config_with("include self.txt\n", false, &mut read).cmdline,
            "deep.txt"
        );
        assert_eq!(
            parse_config_with("include missing.txt\n", false, &mut read),
            Config::default()
        );
    }

    #[test]
    fn os_prefix_is_read() {
        assert_eq!(parse_config("os_prefix=new/\n", false).os_prefix, "new/");
    }
}
