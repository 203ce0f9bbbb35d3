//! The firmware stand-in: what a Pi's boot ROM and `start*.elf` do before
//! Linux runs, reduced to what a migration depends on. It picks the boot disk
//! by the [`Model`]'s boot order (a Pi 4's from BOOT_ORDER in its EEPROM
//! config, [`crate::eeprom`]), takes its first FAT partition, reads
//! `config.txt` (or `tryboot.txt` in a trial boot, where the model has the
//! EEPROM bootloader that offers one), honours `[all]`, the model's own
//! section (`[pi4]`, `[pi3]`) and `[tryboot]`, `include FILE`,
//! `os_prefix=`, `kernel=`, `initramfs`, `cmdline=`, `device_tree=` and
//! `upstream_kernel=`, and hands QEMU a kernel, an initramfs, a command line
//! and, where the partition holds one, the model's device tree, marked as
//! a trial boot as the real firmware marks it.

use crate::disks::{Bus, Disk};
use crate::eeprom::{Board, BootConf, BootMode};
use crate::fat;
use crate::mbr::{Mbr, Partition};
use crate::sections::{self, Line};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The EEPROM config of a Pi 4 set up for USB/NVMe boot, which the x86
/// guest's Pi 4 starts with: SD card first, then NVMe, then USB mass
/// storage.
pub const PI4_BOOTCONF: &str = "[all]\nBOOT_ORDER=0xf461\n";

/// The Pi the stand-in plays. The x86 guest plays a Pi 4 (its disks and
/// boot order); QEMU's `raspi3b` machine is a Pi 3 Model B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Pi4B,
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
            Model::Pi3B => "pi3",
        }
    }

    /// The disks' buses in the order a boot tries them: a Pi 3's boot ROM
    /// has a fixed order; a Pi 4 follows BOOT_ORDER in its EEPROM config
    /// (its `[tryboot]` section in a trial boot), digit by digit from the
    /// right, one pass up to the restart. USB mass storage is either
    /// kind of USB disk; a mode the stand-in does not play (network,
    /// RPIBOOT) finds nothing.
    pub fn boot_order(self, eeprom: &BootConf, tryboot: bool) -> Result<Vec<Bus>> {
        if self == Model::Pi3B {
            return Ok(vec![Bus::Sd, Bus::UsbUas, Bus::UsbStorage]);
        }
        let order = eeprom
            .boot_order(Board::Pi4, tryboot)
            .context("the EEPROM config's BOOT_ORDER")?;
        Ok(order
            .modes()
            .into_iter()
            .flat_map(|mode| match mode {
                BootMode::SdCard => &[Bus::Sd][..],
                BootMode::Nvme => &[Bus::Nvme],
                BootMode::UsbMassStorage => &[Bus::UsbUas, Bus::UsbStorage],
                _ => &[],
            })
            .copied()
            .collect())
    }

    /// Whether `reboot "0 tryboot"` makes the next boot a trial boot: only
    /// the EEPROM bootloader of the Pi 4 family (and later) keeps the flag.
    pub fn has_tryboot(self) -> bool {
        matches!(self, Model::Pi4B)
    }

    /// The device trees the firmware looks for, in order: with
    /// `upstream_kernel=1` (Debian's raspi-firmware writes it) upstream
    /// Linux's name first, then the Raspberry Pi kernel's, which the
    /// firmware falls back to.
    pub fn device_trees(self, upstream_kernel: bool) -> &'static [&'static str] {
        match (self, upstream_kernel) {
            (Model::Pi4B, _) => &["bcm2711-rpi-4-b.dtb"],
            (Model::Pi3B, true) => &["bcm2837-rpi-3-b.dtb", "bcm2710-rpi-3-b.dtb"],
            (Model::Pi3B, false) => &["bcm2710-rpi-3-b.dtb"],
        }
    }
}

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
    /// The device tree, when the boot partition has the model's (the x86
    /// guest's has none); in a trial boot it carries the tryboot flag.
    pub dtb: Option<PathBuf>,
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

/// Reads the boot files from `disk` into `scratch` and says how to start
/// Linux on `model`.
pub fn load(model: Model, disk: &Disk, tryboot: bool, scratch: &Path) -> Result<BootSpec> {
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
    if let (Some(dtb), true) = (&dtb, tryboot) {
        mark_trial_boot(dtb)?;
    }
    Ok(BootSpec {
        disk: disk.name.clone(),
        config_file: config_file.into(),
        tryboot,
        kernel,
        initrd,
        cmdline,
        dtb,
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

/// Marks a device tree as the firmware marks a trial boot's:
/// `/chosen/bootloader/tryboot` = 1, which `pimigrate verify` reads from
/// /proc/device-tree. fdtput (device-tree-compiler) edits the flattened
/// tree in place.
pub fn mark_trial_boot(dtb: &Path) -> Result<()> {
    fdtput(dtb, &["-c", "-p"], &["/chosen/bootloader"])?;
    fdtput(dtb, &["-t", "u"], &["/chosen/bootloader", "tryboot", "1"])
}

/// `fdtput OPTIONS DTB ARGS`.
fn fdtput(dtb: &Path, options: &[&str], args: &[&str]) -> Result<()> {
    crate::cmd::run(
        std::process::Command::new("fdtput")
            .args(options)
            .arg(dtb)
            .args(args),
    )
    .context("marking a trial boot in the device tree needs fdtput (Debian package device-tree-compiler)")?;
    Ok(())
}

/// Tries the disks in the model's boot order and boots the first one with
/// usable boot files, like the EEPROM bootloader moving on from an empty SD
/// slot. The tryboot flag counts only where the model keeps it.
pub fn select(
    model: Model,
    eeprom: &BootConf,
    disks: &[Disk],
    tryboot: bool,
    scratch: &Path,
) -> Result<BootSpec> {
    let tryboot = tryboot && model.has_tryboot();
    let mut tried = Vec::new();
    for bus in model.boot_order(eeprom, tryboot)? {
        for disk in disks.iter().filter(|d| d.bus == bus) {
            match load(model, disk, tryboot, scratch) {
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

    #[test]
    fn a_pi4_boots_in_its_eeprom_order_and_its_tryboot_section_in_a_trial() {
        let default = BootConf::parse(PI4_BOOTCONF);
        let all = [Bus::Sd, Bus::Nvme, Bus::UsbUas, Bus::UsbStorage];
        assert_eq!(Model::Pi4B.boot_order(&default, false).unwrap(), all);
        assert_eq!(Model::Pi4B.boot_order(&default, true).unwrap(), all);
        let usb_trial = BootConf::parse("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        assert_eq!(
            Model::Pi4B.boot_order(&usb_trial, false).unwrap(),
            [Bus::Sd, Bus::UsbUas, Bus::UsbStorage]
        );
        assert_eq!(
            Model::Pi4B.boot_order(&usb_trial, true).unwrap(),
            [Bus::UsbUas, Bus::UsbStorage, Bus::Sd]
        );
        // Network boot and stop find no disk; nothing after the restart.
        let odd = BootConf::parse("BOOT_ORDER=0x61f2\n");
        assert!(Model::Pi4B.boot_order(&odd, false).unwrap().is_empty());
        // A Pi 3 has no EEPROM: its ROM's order, whatever the config.
        assert_eq!(
            Model::Pi3B.boot_order(&usb_trial, true).unwrap(),
            [Bus::Sd, Bus::UsbUas, Bus::UsbStorage]
        );
        assert!(Model::Pi4B
            .boot_order(&BootConf::parse("BOOT_ORDER=usb\n"), false)
            .is_err());
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

    /// The tools the image-level tests below run: their absence fails the
    /// test in CI and skips it elsewhere, saying so.
    fn have_tools(tools: &[&str]) -> bool {
        let missing: Vec<&str> = tools
            .iter()
            .copied()
            .filter(|t| {
                std::process::Command::new("sh")
                    .args(["-c", &format!("command -v {t}")])
                    .output()
                    .map_or(true, |o| !o.status.success())
            })
            .collect();
        if missing.is_empty() {
            return true;
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run this test, but {missing:?} are missing (testbed/run.sh --packages installs them)"
        );
        eprintln!("skipping: {missing:?} not installed (testbed/run.sh --packages installs them)");
        false
    }

    /// A device tree as dtc compiles it from `source`.
    fn compile_dtb(dir: &Path, name: &str, source: &str) -> PathBuf {
        let dts = dir.join(format!("{name}.dts"));
        let dtb = dir.join(name);
        std::fs::write(&dts, source).unwrap();
        crate::cmd::run(
            std::process::Command::new("dtc")
                .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
                .arg(&dtb)
                .arg(&dts),
        )
        .unwrap();
        dtb
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

    /// A 64 MiB MBR disk image, its one partition FAT32 holding `files`.
    fn boot_disk(dir: &Path, bus: Bus, files: &[(&str, &Path)]) -> Disk {
        let image = dir.join("disk.img");
        let sh =
            |script: &str| crate::cmd::run(std::process::Command::new("sh").args(["-c", script]));
        sh(&format!(
            "truncate -s 64M {img} && echo 'start=2048, type=c' | sfdisk -q {img} && \
             mkfs.vfat -F 32 --offset 2048 {img} 129024 >/dev/null",
            img = image.display()
        ))
        .unwrap();
        let part = crate::mbr::partition_of(&image, 1).unwrap();
        for (name, source) in files {
            crate::cmd::run(
                std::process::Command::new("mcopy")
                    .env("MTOOLS_SKIP_CHECK", "1")
                    .arg("-i")
                    .arg(format!("{}@@{}", image.display(), part.offset()))
                    .arg(source)
                    .arg(format!("::/{name}")),
            )
            .unwrap();
        }
        Disk {
            name: "sd".into(),
            bus,
            profile: crate::profiles::Profile::named("sd-unthrottled").unwrap(),
            image,
        }
    }

    /// The boot files of a Debian arm64 system on a Pi: its config.txt
    /// (upstream_kernel=1), a kernel, cmdline.txt, a tryboot.txt, and both
    /// device tree names of the Pi 3 and the Pi 4's.
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

    const IMAGE_TOOLS: &[&str] = &[
        "dtc",
        "fdtput",
        "fdtget",
        "sfdisk",
        "mkfs.vfat",
        "mcopy",
        "mdir",
    ];

    /// An SD card with [`debian_boot_files`] in a folder that lives as long
    /// as it; None where the tools are missing (outside CI).
    fn debian_sd_card() -> Option<(tempfile::TempDir, Disk)> {
        if !have_tools(IMAGE_TOOLS) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let files = debian_boot_files(dir.path());
        let files: Vec<(&str, &Path)> = files.iter().map(|(n, p)| (*n, p.as_path())).collect();
        let disk = boot_disk(dir.path(), Bus::Sd, &files);
        Some((dir, disk))
    }

    /// The Pi 3 boots with upstream Linux's device tree when config.txt
    /// says upstream_kernel=1, and has no tryboot: a trial boot's flag
    /// leaves it on config.txt, with an unmarked device tree.
    #[test]
    fn a_pi3_loads_the_upstream_device_tree_and_ignores_tryboot() {
        let Some((dir, disk)) = debian_sd_card() else {
            return;
        };
        let spec = select(
            Model::Pi3B,
            &pi4_default(),
            &[disk],
            true,
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
    /// as the firmware does (`/chosen/bootloader/tryboot` = 1), so
    /// `pimigrate verify` finds the trial boot in /proc/device-tree.
    #[test]
    fn a_pi4_trial_boot_marks_the_device_tree() {
        let Some((dir, disk)) = debian_sd_card() else {
            return;
        };
        let scratch = dir.path().join("scratch");
        let trial = select(
            Model::Pi4B,
            &pi4_default(),
            std::slice::from_ref(&disk),
            true,
            &scratch,
        )
        .unwrap();
        assert_eq!(trial.config_file, "tryboot.txt");
        assert!(trial.cmdline.contains("5eed0000-02"), "{}", trial.cmdline);
        let dtb = trial.dtb.expect("the Pi 4's device tree was not loaded");
        assert_eq!(tryboot_flag(&dtb).as_deref(), Some("1"));
        // The next normal boot gets a fresh, unmarked copy.
        let normal = select(Model::Pi4B, &pi4_default(), &[disk], false, &scratch).unwrap();
        assert_eq!(normal.config_file, "config.txt");
        assert_eq!(tryboot_flag(normal.dtb.as_deref().unwrap()), None);
    }

    fn pi4_default() -> BootConf {
        BootConf::parse(PI4_BOOTCONF)
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
        let usb_trial = BootConf::parse("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        let trial = select(Model::Pi4B, &usb_trial, &disks, true, &scratch).unwrap();
        assert_eq!(
            (trial.disk.as_str(), trial.config_file.as_str()),
            ("ssd", "tryboot.txt")
        );
        let normal = select(Model::Pi4B, &usb_trial, &disks, false, &scratch).unwrap();
        assert_eq!(
            (normal.disk.as_str(), normal.config_file.as_str()),
            ("sd", "config.txt")
        );
        let default_trial = select(Model::Pi4B, &pi4_default(), &disks, true, &scratch).unwrap();
        assert_eq!(default_trial.disk, "sd");
    }

    #[test]
    fn os_prefix_is_read() {
        assert_eq!(parse_config("os_prefix=new/\n", false).os_prefix, "new/");
    }
}
