//! The firmware stand-in: what a Pi's boot ROM, EEPROM bootloader and
//! `start*.elf` do before Linux runs, reduced to what a migration depends
//! on (docs/testbed/firmware.md). For a Pi 4 or 5 it runs
//! a staged EEPROM update first ([`crate::recovery`]), then follows the
//! bootloader's order ([`crate::bootloader`]: BOOT_ORDER, its `[tryboot]`
//! section, a one-shot reboot order) mode by mode, moving on only while it
//! looks for firmware; a Pi 3 follows its ROM's fixed order. On the chosen
//! disk's first FAT partition it reads `config.txt` (or `tryboot.txt` in a
//! trial boot, where the model has the EEPROM bootloader that offers one),
//! honours `[all]`, the model's own section (`[pi4]`, `[pi5]`, `[pi3]`)
//! and `[tryboot]`, `include FILE`, `os_prefix=`, `kernel=`, `initramfs`,
//! `cmdline=`, `device_tree=` and `upstream_kernel=`, and hands QEMU a
//! kernel, an initramfs, a command line and, where the partition holds
//! one, the model's device tree, with what the EEPROM bootloader tells
//! Linux under `/chosen/bootloader` ([`crate::device_tree`]).

use crate::bootloader::Bootloader;
use crate::device_tree::{self, Chosen};
use crate::disks::{Bus, Disk};
use crate::eeprom::{Board, BootMode, BootOrder};
use crate::fat;
use crate::mbr::{Mbr, Partition};
use crate::recovery::{self, Recovery};
use crate::sections::{self, Line};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The EEPROM config of a Pi 4 set up for USB/NVMe boot, which the x86
/// guest's Pi 4 starts with: SD card first, then NVMe, then USB mass
/// storage.
pub const PI4_BOOTCONF: &str = "[all]\nBOOT_ORDER=0xf461\n";

/// The Pi the stand-in plays. The x86 guest plays a Pi 4 (its disks and
/// boot order) or a Pi 5 ([`crate::Pi::play`]); QEMU's `raspi3b` machine is
/// a Pi 3 Model B, its `raspi4b` a Pi 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Pi4B,
    /// A Raspberry Pi 5: the BCM2712's bootloader, its `[pi5]` section,
    /// NVMe only where PCIe is probed (`PCIE_PROBE=1` or a HAT+).
    Pi5,
    /// With the one-time OTP setting for USB boot (`program_usb_boot_mode`):
    /// the SD card first, then USB mass storage. No EEPROM bootloader, so no
    /// tryboot, and no NVMe.
    Pi3B,
}

impl Model {
    /// The config.txt section filter naming this model.
    fn section(self) -> &'static str {
        match self {
            Model::Pi4B => "pi4",
            Model::Pi5 => "pi5",
            Model::Pi3B => "pi3",
        }
    }

    /// The board of its EEPROM bootloader; None for a Pi 3, whose boot
    /// ROM reads the SD card (and USB, after the OTP bit) itself.
    pub fn board(self) -> Option<Board> {
        match self {
            Model::Pi4B => Some(Board::Pi4),
            Model::Pi5 => Some(Board::Pi5),
            Model::Pi3B => None,
        }
    }

    /// The bootloader a Pi of this model starts with: a Pi 5's release
    /// image as it ships; the x86 guest's Pi 4 the release image run with
    /// [`PI4_BOOTCONF`], a Pi 4 set up for USB and NVMe boot; a Pi 3 none.
    pub fn bootloader(self) -> Result<Option<Bootloader>> {
        Ok(match self {
            Model::Pi4B => {
                let mut pi4 = Bootloader::release(Board::Pi4)?;
                pi4.set_config(PI4_BOOTCONF);
                Some(pi4)
            }
            Model::Pi5 => Some(Bootloader::release(Board::Pi5)?),
            Model::Pi3B => None,
        })
    }

    /// The disks' buses a boot mode finds. USB mass storage is either
    /// kind of USB disk.
    fn buses(mode: BootMode) -> &'static [Bus] {
        match mode {
            BootMode::SdCard => &[Bus::Sd],
            BootMode::Nvme => &[Bus::Nvme],
            BootMode::UsbMassStorage => &[Bus::UsbUas, Bus::UsbStorage],
            _ => &[],
        }
    }

    /// The boot modes in the order a boot tries them: a Pi 3's boot ROM
    /// has a fixed order; a Pi 4 or 5 follows its bootloader's order
    /// ([`Bootloader::boot_order`]), digit by digit from the right, one
    /// pass up to the restart or the stop.
    fn modes(self, order: Option<BootOrder>) -> Vec<BootMode> {
        match order {
            Some(order) => order.modes(),
            None => vec![BootMode::SdCard, BootMode::UsbMassStorage],
        }
    }

    /// The file whose presence makes a FAT partition one this model's
    /// bootloader boots from, where it has one: a Pi 4's loads the GPU
    /// firmware, `start4.elf`; a Pi 5's (which has no GPU firmware) needs
    /// `config.txt` (PI-FACTS, "Boot order and trial boots").
    fn firmware_file(self) -> Option<&'static str> {
        match self {
            Model::Pi4B => Some("start4.elf"),
            Model::Pi5 => Some("config.txt"),
            Model::Pi3B => None,
        }
    }

    /// How the device tree names the Pi: its `model`, its `compatible`
    /// list (NUL-separated) and its board revision code
    /// (`/system/linux,revision`, which rpi-eeprom-update reads).
    pub fn identity(self) -> (&'static str, &'static str, u32) {
        match self {
            Model::Pi4B => (
                "Raspberry Pi 4 Model B Rev 1.4",
                "raspberrypi,4-model-b\0brcm,bcm2711\0",
                0x00c0_3114,
            ),
            Model::Pi5 => (
                "Raspberry Pi 5 Model B Rev 1.0",
                "raspberrypi,5-model-b\0brcm,bcm2712\0",
                0x00c0_4170,
            ),
            Model::Pi3B => (
                "Raspberry Pi 3 Model B Rev 1.2",
                "raspberrypi,3-model-b\0brcm,bcm2837\0",
                0x00a0_2082,
            ),
        }
    }

    /// Whether `reboot "0 tryboot"` makes the next boot a trial boot: only
    /// the EEPROM bootloader of the Pi 4 family (and later) keeps the flag.
    pub fn has_tryboot(self) -> bool {
        self.board().is_some()
    }

    /// The device trees the firmware looks for, in order: with
    /// `upstream_kernel=1` (Debian's raspi-firmware writes it) upstream
    /// Linux's name first, then the Raspberry Pi kernel's, which the
    /// firmware falls back to.
    pub fn device_trees(self, upstream_kernel: bool) -> &'static [&'static str] {
        match (self, upstream_kernel) {
            (Model::Pi4B, _) => &["bcm2711-rpi-4-b.dtb"],
            (Model::Pi5, _) => &["bcm2712-rpi-5-b.dtb"],
            (Model::Pi3B, true) => &["bcm2837-rpi-3-b.dtb", "bcm2710-rpi-3-b.dtb"],
            (Model::Pi3B, false) => &["bcm2710-rpi-3-b.dtb"],
        }
    }
}

/// What a boot starts from: the one-shot requests of the boot before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootRequest {
    /// `reboot "0 tryboot"` asked for a trial boot.
    pub tryboot: bool,
    /// The boot before ended in a reboot or a panic's reset (not a
    /// power-off or a power cut), so a reboot order it set is still there.
    pub after_reboot: bool,
}

/// What the firmware decided to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    /// Name of the disk the boot files came from.
    pub disk: String,
    /// The boot mode that found it (SD card, USB mass storage, NVMe).
    pub boot_mode: BootMode,
    /// The number of the partition the firmware read (its first FAT one).
    pub partition: u32,
    /// `config.txt` or `tryboot.txt`.
    pub config_file: String,
    pub tryboot: bool,
    pub kernel: PathBuf,
    pub initrd: Option<PathBuf>,
    pub cmdline: String,
    /// The device tree, when the boot partition has the model's (the x86
    /// guest's has none), with the EEPROM bootloader's `/chosen/bootloader`
    /// (the tryboot flag among it) where the model has one.
    pub dtb: Option<PathBuf>,
    /// What the bootloader did before it loaded these files, for the
    /// boot's log (`boot-NN.firmware.txt`).
    pub notes: Vec<String>,
}

/// Settings that matter here, after section filtering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub kernel: String,
    pub initramfs: Option<String>,
    pub cmdline: String,
    pub os_prefix: String,
    /// `device_tree=`: a device tree file other than the model's own.
    pub device_tree: Option<String>,
    /// `upstream_kernel=1`: upstream Linux's device tree names first.
    pub upstream_kernel: bool,
}

impl Default for Config {
    fn default() -> Self {
        // What the firmware assumes when config.txt says nothing.
        Config {
            kernel: "kernel8.img".into(),
            initramfs: None,
            cmdline: "cmdline.txt".into(),
            os_prefix: String::new(),
            device_tree: None,
            upstream_kernel: false,
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

/// [`parse_config_with`] as the firmware of `model` reads it: its own
/// section filter matches instead of `[pi4]`.
pub fn parse_config_for(
    model: Model,
    text: &str,
    tryboot: bool,
    read: &mut dyn FnMut(&str) -> Option<String>,
) -> Config {
    let mut parser = Parser {
        cfg: Config::default(),
        active: true,
        tryboot,
        model,
    };
    parser.feed(text, read, 0);
    parser.cfg
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
    parse_config_for(Model::Pi4B, text, tryboot, read)
}

struct Parser {
    cfg: Config,
    active: bool,
    tryboot: bool,
    model: Model,
}

impl Parser {
    fn feed(&mut self, text: &str, read: &mut dyn FnMut(&str) -> Option<String>, depth: usize) {
        for line in sections::lines(text) {
            let line = match line {
                Line::Section(filter) => {
                    self.active = sections::applies(filter, self.model.section(), self.tryboot);
                    continue;
                }
                Line::Setting(_) if !self.active => continue,
                Line::Setting(line) => line,
            };
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
                    "device_tree" => self.cfg.device_tree = Some(value),
                    "upstream_kernel" => self.cfg.upstream_kernel = value == "1",
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

/// The partition `model`'s bootloader would start the firmware from on
/// `disk`: its first FAT partition, holding the model's firmware file
/// ([`Model::firmware_file`]). `Ok(Err(why))` when the disk has none, where
/// the bootloader moves on to the next device or mode.
pub fn firmware_partition(model: Model, disk: &Disk) -> Result<Result<Partition, String>> {
    let image = &disk.image;
    let Some(mbr) = Mbr::read(image)? else {
        return Ok(Err("no partition table".into()));
    };
    let Some(part) = mbr.partitions.into_iter().find(Partition::is_fat) else {
        return Ok(Err("no FAT partition".into()));
    };
    if let Some(file) = model.firmware_file() {
        if !fat::exists(image, &part, file)? {
            return Ok(Err(format!(
                "no {file} on its FAT partition {}",
                part.number
            )));
        }
    }
    Ok(Ok(part))
}

/// Reads the boot files from partition `part` of `disk`, which `mode`
/// found, into `scratch` and says how to start Linux on `model`. Any error
/// is a boot that stopped: the firmware has started from there.
pub fn load(
    model: Model,
    disk: &Disk,
    mode: BootMode,
    part: Partition,
    tryboot: bool,
    scratch: &Path,
) -> Result<BootSpec> {
    let image = &disk.image;
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
    let mut cfg = parse_config_for(model, &text, tryboot, &mut |name| {
        fat::read(image, &part, name).ok().flatten()
    });
    // upstream_kernel=1 means os_prefix=upstream/ unless config.txt sets
    // one, and the firmware drops that prefix when the kernel is not there.
    if cfg.upstream_kernel
        && cfg.os_prefix.is_empty()
        && fat::exists(image, &part, &format!("upstream/{}", cfg.kernel))?
    {
        cfg.os_prefix = "upstream/".into();
    }
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
    let tryboot = config_file == "tryboot.txt";
    let dtb = load_device_tree(model, &cfg, image, &part, scratch)?;
    Ok(BootSpec {
        disk: disk.name.clone(),
        boot_mode: mode,
        partition: part.number,
        config_file: config_file.into(),
        tryboot,
        kernel,
        initrd,
        cmdline,
        dtb,
        notes: Vec::new(),
    })
}

/// Copies the device tree the firmware would load into `scratch`: the one
/// `device_tree=` names, else the model's own by the names it tries. None
/// when the partition has none of them (the x86 guest's never has).
fn load_device_tree(
    model: Model,
    cfg: &Config,
    image: &Path,
    part: &Partition,
    scratch: &Path,
) -> Result<Option<PathBuf>> {
    let names: Vec<String> = match &cfg.device_tree {
        Some(name) => vec![name.clone()],
        None => model
            .device_trees(cfg.upstream_kernel)
            .iter()
            .map(|n| format!("{}{n}", cfg.os_prefix))
            .collect(),
    };
    let path = scratch.join("dtb");
    for name in names {
        if fat::exists(image, part, &name)? {
            fat::copy_out(image, part, &name, &path)
                .with_context(|| format!("cannot load the device tree {name}"))?;
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// Runs a staged EEPROM update first, as the boot ROM runs recovery.bin
/// from the SD card ([`recovery::run`]; its reset makes this a normal
/// boot), then tries the boot modes in the model's boot order and boots
/// the first disk with the model's firmware on its first FAT partition, as
/// the EEPROM bootloader moves on from an empty SD slot, a disk without a
/// FAT partition or one without `start4.elf` (a Pi 5: `config.txt`). Once the
/// firmware has started from a disk there is no moving on: a missing
/// kernel, initramfs or command line stops the boot with an error naming
/// the disk (a Pi 3's ROM, which reads the files itself, moves on). The
/// tryboot flag counts only where the model keeps it; the bootloader (None
/// for a Pi 3) gives the order, takes a pending reboot order and says
/// whether a Pi 5 probes PCIe for NVMe.
pub fn select(
    model: Model,
    bootloader: Option<&mut Bootloader>,
    disks: &[Disk],
    request: BootRequest,
    scratch: &Path,
) -> Result<BootSpec> {
    let mut tryboot = request.tryboot && model.has_tryboot();
    let mut after_reboot = request.after_reboot;
    let mut notes = Vec::new();
    let mut bootloader = bootloader;
    let (order, nvme_probed) = match bootloader.as_deref_mut() {
        Some(bootloader) => {
            match recovery::run(bootloader, disks, &scratch.join("recovery"))? {
                Recovery::Absent => {}
                Recovery::NotApplied(note) => notes.push(note),
                Recovery::Applied(note) => {
                    notes.push(note);
                    (tryboot, after_reboot) = (false, false);
                }
            }
            let (order, why) = bootloader.boot_order(tryboot, after_reboot)?;
            notes.push(format!("boot order: {why}"));
            (Some(order), bootloader.probes_nvme(tryboot))
        }
        None => (None, false),
    };
    let mut tried = Vec::new();
    for mode in model.modes(order) {
        let buses = match mode {
            BootMode::Restart => break,
            BootMode::Stop => bail!(
                "BOOT_ORDER stops (e) before anything booted; tried: [{}]",
                tried.join("; ")
            ),
            BootMode::Network | BootMode::Other(_) => {
                tried.push(format!("{}: not played by the testbed", mode.name()));
                continue;
            }
            BootMode::Nvme if !nvme_probed => {
                tried.push("NVMe: PCIe not probed (no PCIE_PROBE=1, no HAT+)".to_string());
                continue;
            }
            mode => Model::buses(mode),
        };
        let mut found = false;
        for disk in disks.iter().filter(|d| buses.contains(&d.bus)) {
            found = true;
            let part = match firmware_partition(model, disk)? {
                Ok(part) => part,
                Err(why) => {
                    tried.push(format!("{}: {why}", disk.name));
                    continue;
                }
            };
            let number = part.number;
            match load(model, disk, mode, part, tryboot, scratch) {
                Ok(mut spec) => {
                    if !tried.is_empty() {
                        notes.push(format!("passed over: {}", tried.join("; ")));
                    }
                    spec.notes = notes;
                    if let (Some(bootloader), Some(dtb)) = (bootloader.as_deref(), &spec.dtb) {
                        device_tree::mark(dtb, &Chosen::of(&spec, bootloader))?;
                    }
                    return Ok(spec);
                }
                // A Pi 3's ROM reads the boot files itself and moves on.
                Err(e) if model == Model::Pi3B => tried.push(format!("{}: {e:#}", disk.name)),
                Err(e) => {
                    return Err(e.context(format!(
                        "the firmware started from disk {} ({}, partition {number}) and stopped \
                         there, as a Pi does once its firmware runs",
                        disk.name,
                        mode.name()
                    )))
                }
            }
        }
        if !found {
            tried.push(format!("{}: no device", mode.name()));
        }
    }
    bail!("nothing to boot; tried: [{}]", tried.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_disks::{
        blank_disk, boot_disk, compile_dtb, disk_with, have_tools, BOOTS, IMAGE_TOOLS,
    };

    /// A Pi 4's bootloader running `config`.
    fn pi4(config: &str) -> Bootloader {
        let mut pi4 = Bootloader::release(Board::Pi4).unwrap();
        pi4.set_config(config);
        pi4
    }

    fn pi4_default() -> Bootloader {
        Model::Pi4B.bootloader().unwrap().unwrap()
    }

    /// A trial boot after `reboot "0 tryboot"`.
    const TRIAL: BootRequest = BootRequest {
        tryboot: true,
        after_reboot: true,
    };

    /// A boot after a power cycle.
    const POWER_ON: BootRequest = BootRequest {
        tryboot: false,
        after_reboot: false,
    };

    #[test]
    fn a_pi4_boots_in_its_eeprom_order_and_its_tryboot_section_in_a_trial() {
        use BootMode::*;
        let modes = |bootloader: &mut Bootloader, tryboot| {
            let (order, _) = bootloader.boot_order(tryboot, false).unwrap();
            Model::Pi4B.modes(Some(order))
        };
        let all = [SdCard, Nvme, UsbMassStorage, Restart];
        assert_eq!(modes(&mut pi4_default(), false), all);
        assert_eq!(modes(&mut pi4_default(), true), all);
        let mut usb_trial = pi4("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        assert_eq!(
            modes(&mut usb_trial, false),
            [SdCard, UsbMassStorage, Restart]
        );
        assert_eq!(
            modes(&mut usb_trial, true),
            [UsbMassStorage, SdCard, Restart]
        );
        // A Pi 3 has no EEPROM: its ROM's order.
        assert_eq!(Model::Pi3B.modes(None), [SdCard, UsbMassStorage]);
        assert_eq!(Model::buses(UsbMassStorage), [Bus::UsbUas, Bus::UsbStorage]);
        assert!(pi4("BOOT_ORDER=usb\n").boot_order(false, false).is_err());
    }

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

    /// A config.txt with both models' sections, as Debian's raspi-firmware
    /// writes `[pi4]` settings before `[all]` with `upstream_kernel=1`.
    const BOTH_MODELS: &str = "[pi4]\nkernel=pi4.img\ndevice_tree=pi4.dtb\n[pi3]\nkernel=pi3.img\n\
        [all]\nupstream_kernel=1\ninitramfs initrd.img followkernel\n";

    #[test]
    fn each_model_reads_its_own_section() {
        let pi3 = parse_config_for(Model::Pi3B, BOTH_MODELS, false, &mut |_| None);
        assert_eq!(pi3.kernel, "pi3.img");
        assert_eq!(pi3.device_tree, None);
        assert!(pi3.upstream_kernel);
        let pi4 = parse_config_for(Model::Pi4B, BOTH_MODELS, false, &mut |_| None);
        assert_eq!(pi4.kernel, "pi4.img");
        assert_eq!(pi4.device_tree.as_deref(), Some("pi4.dtb"));
        assert_eq!(pi4, parse_config(BOTH_MODELS, false));
    }

    /// `fdtget -t u DTB /chosen/bootloader tryboot`, or None without it.
    fn tryboot_flag(dtb: &Path) -> Option<String> {
        let out = std::process::Command::new("fdtget")
            .args(["-t", "u"])
            .arg(dtb)
            .args(["/chosen/bootloader", "tryboot"])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The boot files of a Debian arm64 system on a Pi: its config.txt
    /// (upstream_kernel=1), a kernel, cmdline.txt, a tryboot.txt, the Pi
    /// 4's GPU firmware (by name), and both device tree names of the Pi 3
    /// and the Pi 4's.
    fn debian_boot_files(dir: &Path) -> Vec<(&'static str, PathBuf)> {
        let text = |name: &str, contents: &str| {
            let path = dir.join(name);
            std::fs::write(&path, contents).unwrap();
            path
        };
        let tree =
            |model: &str| format!("/dts-v1/;\n/ {{ model = \"{model}\"; chosen {{ }}; }};\n");
        vec![
            (
                "config.txt",
                text("config.txt", "[all]\nupstream_kernel=1\nkernel=vmlinuz\n"),
            ),
            (
                "tryboot.txt",
                text(
                    "tryboot.txt",
                    "[all]\nupstream_kernel=1\nkernel=vmlinuz\ncmdline=trial.txt\n",
                ),
            ),
            (
                "cmdline.txt",
                text(
                    "cmdline.txt",
                    "console=ttyAMA0,115200 root=PARTUUID=0c0ffee0-02 rootwait\n",
                ),
            ),
            (
                "trial.txt",
                text(
                    "trial.txt",
                    "console=ttyAMA0,115200 root=PARTUUID=5eed0000-02 rootwait\n",
                ),
            ),
            (
                "vmlinuz",
                text("vmlinuz", "not a kernel, only its name matters here"),
            ),
            (
                "start4.elf",
                text(
                    "start4.elf",
                    "not the Pi 4's GPU firmware, only its name matters",
                ),
            ),
            (
                "bcm2837-rpi-3-b.dtb",
                compile_dtb(dir, "upstream-pi3", &tree("upstream Pi 3")),
            ),
            (
                "bcm2710-rpi-3-b.dtb",
                compile_dtb(dir, "downstream-pi3", &tree("downstream Pi 3")),
            ),
            (
                "bcm2711-rpi-4-b.dtb",
                compile_dtb(dir, "pi4", &tree("Pi 4")),
            ),
        ]
    }

    /// An SD card with [`debian_boot_files`] in a folder that lives as long
    /// as it; None where the tools are missing (outside CI).
    fn debian_sd_card() -> Option<(tempfile::TempDir, Disk)> {
        if !have_tools(IMAGE_TOOLS) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let files = debian_boot_files(dir.path());
        let files: Vec<(&str, &Path)> = files.iter().map(|(n, p)| (*n, p.as_path())).collect();
        let disk = boot_disk(dir.path(), "sd", Bus::Sd, &files);
        Some((dir, disk))
    }

    /// The Pi 3 boots with upstream Linux's device tree when config.txt
    /// says upstream_kernel=1, and has no tryboot: a trial boot's flag
    /// leaves it on config.txt, with no /chosen/bootloader (it has no
    /// EEPROM bootloader).
    #[test]
    fn a_pi3_loads_the_upstream_device_tree_and_ignores_tryboot() {
        let Some((dir, disk)) = debian_sd_card() else {
            return;
        };
        let spec = select(
            Model::Pi3B,
            None,
            &[disk],
            TRIAL,
            &dir.path().join("scratch"),
        )
        .unwrap();
        assert_eq!(spec.config_file, "config.txt");
        assert!(spec.cmdline.contains("0c0ffee0-02"), "{}", spec.cmdline);
        let dtb = spec.dtb.expect("the Pi 3's device tree was not loaded");
        let model = std::fs::read(&dtb).unwrap();
        assert!(
            model.windows(13).any(|w| w == b"upstream Pi 3"),
            "the firmware did not prefer bcm2837-rpi-3-b.dtb"
        );
        assert_eq!(tryboot_flag(&dtb), None);
    }

    /// The Pi 4's trial boot reads tryboot.txt and marks its device tree
    /// as the firmware does (`/chosen/bootloader/tryboot` = 1, 0 in a
    /// normal boot), so `pimigrate verify` finds the trial boot in
    /// /proc/device-tree.
    #[test]
    fn a_pi4_trial_boot_marks_the_device_tree() {
        let Some((dir, disk)) = debian_sd_card() else {
            return;
        };
        let scratch = dir.path().join("scratch");
        let trial = select(
            Model::Pi4B,
            Some(&mut pi4_default()),
            std::slice::from_ref(&disk),
            TRIAL,
            &scratch,
        )
        .unwrap();
        assert_eq!(trial.config_file, "tryboot.txt");
        assert!(trial.cmdline.contains("5eed0000-02"), "{}", trial.cmdline);
        let dtb = trial.dtb.expect("the Pi 4's device tree was not loaded");
        assert_eq!(tryboot_flag(&dtb).as_deref(), Some("1"));
        // The next normal boot gets a fresh copy, its flag 0.
        let normal = select(
            Model::Pi4B,
            Some(&mut pi4_default()),
            &[disk],
            POWER_ON,
            &scratch,
        )
        .unwrap();
        assert_eq!(normal.config_file, "config.txt");
        assert_eq!(
            tryboot_flag(normal.dtb.as_deref().unwrap()).as_deref(),
            Some("0")
        );
    }

    /// With `[tryboot] BOOT_ORDER=0xf14` a trial boot starts the USB disk
    /// (with its tryboot.txt), and the boots either side the SD card; the
    /// default order starts the SD card in a trial too.
    #[test]
    fn a_pi4_trial_boot_follows_the_eeprom_tryboot_order_to_the_usb_disk() {
        let Some((dir, sd)) = debian_sd_card() else {
            return;
        };
        let usb = Disk {
            name: "ssd".into(),
            bus: Bus::UsbUas,
            ..sd.clone()
        };
        let disks = [sd, usb];
        let scratch = dir.path().join("scratch");
        let mut usb_trial = pi4("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        let trial = select(Model::Pi4B, Some(&mut usb_trial), &disks, TRIAL, &scratch).unwrap();
        assert_eq!(
            (trial.disk.as_str(), trial.config_file.as_str()),
            ("ssd", "tryboot.txt")
        );
        let normal = select(
            Model::Pi4B,
            Some(&mut usb_trial),
            &disks,
            POWER_ON,
            &scratch,
        )
        .unwrap();
        assert_eq!(
            (normal.disk.as_str(), normal.config_file.as_str()),
            ("sd", "config.txt")
        );
        let default_trial = select(
            Model::Pi4B,
            Some(&mut pi4_default()),
            &disks,
            TRIAL,
            &scratch,
        )
        .unwrap();
        assert_eq!(default_trial.disk, "sd");
    }

    /// BOOT_ORDER 0xf461 moves on from an SD card whose FAT has no
    /// start4.elf and from a blank NVMe drive to the USB disk; the log
    /// says what it passed over.
    #[test]
    fn the_bootloader_moves_on_while_it_looks_for_firmware() {
        if !have_tools(IMAGE_TOOLS) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let no_firmware: Vec<(&str, &str)> = BOOTS
            .iter()
            .copied()
            .filter(|(n, _)| *n != "start4.elf")
            .collect();
        let disks = [
            disk_with(dir.path(), "sd", Bus::Sd, &no_firmware),
            blank_disk(dir.path(), "nvme", Bus::Nvme),
            disk_with(dir.path(), "usb", Bus::UsbStorage, BOOTS),
        ];
        let spec = select(
            Model::Pi4B,
            Some(&mut pi4_default()),
            &disks,
            POWER_ON,
            &dir.path().join("scratch"),
        )
        .unwrap();
        assert_eq!((spec.disk.as_str(), spec.partition), ("usb", 1));
        assert_eq!(spec.boot_mode, BootMode::UsbMassStorage);
        let notes = spec.notes.join("\n");
        assert!(
            notes.contains("sd: no start4.elf") && notes.contains("nvme: no partition table"),
            "{notes}"
        );
    }

    /// Once start4.elf is found the firmware runs: a kernel missing there
    /// stops the boot, though the USB disk behind it would boot.
    #[test]
    fn a_boot_stops_where_the_firmware_started() {
        if !have_tools(IMAGE_TOOLS) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let no_kernel: Vec<(&str, &str)> = BOOTS
            .iter()
            .copied()
            .filter(|(n, _)| *n != "vmlinuz")
            .collect();
        let disks = [
            disk_with(dir.path(), "sd", Bus::Sd, &no_kernel),
            disk_with(dir.path(), "usb", Bus::UsbUas, BOOTS),
        ];
        let scratch = dir.path().join("scratch");
        let err = select(
            Model::Pi4B,
            Some(&mut pi4_default()),
            &disks,
            POWER_ON,
            &scratch,
        )
        .unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("started from disk sd (SD card, partition 1) and stopped")
                && err.contains("kernel vmlinuz"),
            "{err}"
        );
        // `e` stops where `f` would have gone round to the USB disk.
        let sd_only = [
            disk_with(dir.path(), "sd2", Bus::Sd, &[("config.txt", "")]),
            disks[1].clone(),
        ];
        let err = select(
            Model::Pi4B,
            Some(&mut pi4("BOOT_ORDER=0x4e1\n")),
            &sd_only,
            POWER_ON,
            &scratch,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("stops (e)"), "{err:#}");
        let spec = select(
            Model::Pi4B,
            Some(&mut pi4("BOOT_ORDER=0xf41\n")),
            &sd_only,
            POWER_ON,
            &scratch,
        )
        .unwrap();
        assert_eq!(spec.disk, "usb");
    }

    /// A Pi 5 boots from a FAT partition with config.txt, and finds an
    /// NVMe drive only where PCIe is probed: PCIE_PROBE=1 or a HAT+.
    #[test]
    fn a_pi5_finds_nvme_only_where_pcie_is_probed() {
        if !have_tools(IMAGE_TOOLS) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let no_config: Vec<(&str, &str)> = BOOTS
            .iter()
            .copied()
            .filter(|(n, _)| *n != "config.txt")
            .collect();
        let disks = [
            disk_with(dir.path(), "sd", Bus::Sd, BOOTS),
            disk_with(dir.path(), "nvme", Bus::Nvme, BOOTS),
            disk_with(dir.path(), "usb", Bus::UsbUas, &no_config),
        ];
        let scratch = dir.path().join("scratch");
        let boot = |config: &str, hat: bool| {
            let mut pi5 = Model::Pi5.bootloader().unwrap().unwrap();
            pi5.set_config(config);
            if hat {
                pi5.attach_hat_plus("Raspberry Pi M.2 HAT+").unwrap();
            }
            select(Model::Pi5, Some(&mut pi5), &disks, POWER_ON, &scratch).unwrap()
        };
        let unprobed = boot("BOOT_ORDER=0xf146\n", false);
        assert_eq!(unprobed.disk, "sd");
        let notes = unprobed.notes.join("\n");
        assert!(
            notes.contains("NVMe: PCIe not probed") && notes.contains("usb: no config.txt"),
            "{notes}"
        );
        let probed = boot("BOOT_ORDER=0xf146\nPCIE_PROBE=1\n", false);
        assert_eq!(
            (probed.disk.as_str(), probed.boot_mode),
            ("nvme", BootMode::Nvme)
        );
        assert_eq!(boot("BOOT_ORDER=0xf146\n", true).disk, "nvme");
    }

    /// A Pi 5's trial of another drive: `vcmailbox 0x0003808b 4 4 0xf16`
    /// then `reboot "0 tryboot"` boots the NVMe drive's tryboot.txt once;
    /// the reset after it (a panicking trial) is back on BOOT_ORDER, the
    /// SD card first.
    #[test]
    fn a_pi5_reboot_order_trials_the_nvme_drive_once() {
        if !have_tools(IMAGE_TOOLS) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut nvme_files = BOOTS.to_vec();
        nvme_files.extend([
            ("tryboot.txt", "kernel=vmlinuz\ncmdline=trial.txt\n"),
            ("trial.txt", "root=/dev/nvme0n1p2 rootwait\n"),
        ]);
        let disks = [
            disk_with(dir.path(), "sd", Bus::Sd, BOOTS),
            disk_with(dir.path(), "nvme", Bus::Nvme, &nvme_files),
        ];
        let scratch = dir.path().join("scratch");
        let mut pi5 = Model::Pi5.bootloader().unwrap().unwrap();
        pi5.attach_hat_plus("Raspberry Pi M.2 HAT+").unwrap();
        pi5.set_reboot_order(BootOrder(0xf16));
        let trial = select(Model::Pi5, Some(&mut pi5), &disks, TRIAL, &scratch).unwrap();
        assert_eq!(
            (
                trial.disk.as_str(),
                trial.config_file.as_str(),
                trial.boot_mode
            ),
            ("nvme", "tryboot.txt", BootMode::Nvme)
        );
        assert_eq!(trial.cmdline, "root=/dev/nvme0n1p2 rootwait");
        assert!(
            trial.notes[0].contains("set_reboot_order 0xf16"),
            "{:?}",
            trial.notes
        );
        let reset = BootRequest {
            tryboot: false,
            after_reboot: true,
        };
        let after = select(Model::Pi5, Some(&mut pi5), &disks, reset, &scratch).unwrap();
        assert_eq!((after.disk.as_str(), after.tryboot), ("sd", false));
    }

    #[test]
    fn os_prefix_is_read() {
        assert_eq!(parse_config("os_prefix=new/\n", false).os_prefix, "new/");
    }
}
