//! The firmware stand-in: what a Pi's boot ROM, EEPROM bootloader and
//! `start*.elf` do before Linux runs, reduced to what a migration depends
//! on (docs/testbed/firmware.md). For a Pi 4 or 5 it runs
//! a staged EEPROM update first ([`crate::firmware::recovery`]), then follows the
//! bootloader's order ([`crate::firmware::bootloader`]: BOOT_ORDER, its `[tryboot]`
//! section, a one-shot reboot order) mode by mode, moving on only while it
//! looks for firmware; a Pi 3 follows its ROM's fixed order. On the chosen
//! disk's first FAT partition it reads `config.txt` (or `tryboot.txt` in a
//! trial boot, where the model has the EEPROM bootloader that offers one),
//! honours `[all]`, the model's own section (`[pi4]`, `[pi5]`, `[pi3]`)
//! and `[tryboot]`, `include FILE`, `os_prefix=`, `kernel=`, `initramfs`,
//! `cmdline=`, `device_tree=` and `upstream_kernel=`, and hands QEMU a
//! kernel, an initramfs, a command line and, where the partition holds
//! one, the model's device tree, with what the EEPROM bootloader tells
//! Linux under `/chosen/bootloader` ([`crate::firmware::device_tree`]).

use crate::firmware::bootloader::Bootloader;
use crate::firmware::config_txt::{parse_config_for, Config};
use crate::firmware::device_tree::{self, Chosen};
use crate::firmware::eeprom::BootMode;
use crate::firmware::model::Model;
use crate::firmware::partition::firmware_partition;
use crate::firmware::recovery::{self, Recovery};
use crate::firmware::spec::{BootRequest, BootSpec};
use crate::host::disks::{Bus, Disk};
use crate::host::fat;
use crate::host::mbr::Partition;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

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
    let mut notes = Vec::new();
    let mut bootloader = bootloader;
    let (order, nvme_probed) = match bootloader.as_deref_mut() {
        Some(bootloader) => {
            let after_reboot;
            (tryboot, after_reboot) =
                recovery_first(bootloader, disks, request, tryboot, scratch, &mut notes)?;
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
        let Some(mut spec) = boot_in_mode(model, mode, buses, disks, tryboot, scratch, &mut tried)?
        else {
            continue;
        };
        if !tried.is_empty() {
            notes.push(format!("passed over: {}", tried.join("; ")));
        }
        spec.notes = notes;
        if let (Some(bootloader), Some(dtb)) = (bootloader.as_deref(), &spec.dtb) {
            device_tree::mark(dtb, &Chosen::of(&spec, bootloader))?;
        }
        return Ok(spec);
    }
    bail!("nothing to boot; tried: [{}]", tried.join("; "))
}

/// recovery.bin from the SD card, as the boot ROM runs it before the
/// EEPROM bootloader ([`recovery::run`]): its reset, when it wrote an
/// update, makes this a normal boot. Returns whether the boot is still a
/// trial and still follows a reboot; what it did goes to `notes`.
fn recovery_first(
    bootloader: &mut Bootloader,
    disks: &[Disk],
    request: BootRequest,
    tryboot: bool,
    scratch: &Path,
    notes: &mut Vec<String>,
) -> Result<(bool, bool)> {
    match recovery::run(bootloader, disks, &scratch.join("recovery"))? {
        Recovery::Absent => {}
        Recovery::NotApplied(note) => notes.push(note),
        Recovery::Applied(note) => {
            notes.push(note);
            return Ok((false, false));
        }
    }
    Ok((tryboot, request.after_reboot))
}

/// The boot from the first disk on `buses` (which boot mode `mode` finds)
/// with the model's firmware on its first FAT partition; `None` when none
/// has it, each disk passed over said in `tried`. A disk the firmware
/// started from but could not boot stops the boot with an error, but on a
/// Pi 3, whose ROM reads the boot files itself and moves on.
fn boot_in_mode(
    model: Model,
    mode: BootMode,
    buses: &[Bus],
    disks: &[Disk],
    tryboot: bool,
    scratch: &Path,
    tried: &mut Vec<String>,
) -> Result<Option<BootSpec>> {
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
            Ok(spec) => return Ok(Some(spec)),
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
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::eeprom::{Board, BootOrder};
    use crate::host::disks::Bus;
    use crate::host::test_disks::{
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
}
