//! Raspberry Pi OS's tools in the x86 guest ([`place`]): under
//! `$TESTBED/pi/` (not on the job's PATH, so a job sees nothing of them
//! unless it asks), `bin/tb-as-pi CMD` runs CMD as on the Pi the firmware
//! stand-in plays: /proc/device-tree and /sys/firmware/devicetree/base
//! from the share's device tree of this boot, the rpi-eeprom package's
//! /lib/firmware/raspberrypi, and a PATH with the official
//! `rpi-eeprom-config` and `rpi-eeprom-update` (vendored unchanged in
//! testbed/data/rpi-eeprom) and the testbed's own stand-ins of what they
//! call (`vcgencmd`, `vcmailbox`, `rpi-eeprom-digest`, `flashrom`,
//! `strings`; testbed/pi-tools). What the stand-ins answer and what they
//! leave for the firmware is the share's firmware channel
//! ([`crate::firmware::channel`]).

use crate::firmware::bootloader::{release_dir, release_image, rpi_eeprom_data};
use crate::firmware::eeprom::Board;
use crate::host::share::Share;
use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The testbed's own scripts for the guest (`testbed/pi-tools`).
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-tools")
}

/// The stand-ins, from [`scripts_dir`].
const STAND_INS: [&str; 6] = [
    "tb-as-pi",
    "vcgencmd",
    "vcmailbox",
    "rpi-eeprom-digest",
    "flashrom",
    "strings",
];

/// The official tools, from [`rpi_eeprom_data`], unchanged.
const OFFICIAL: [&str; 2] = ["rpi-eeprom-config", "rpi-eeprom-update"];

/// `$TESTBED/pi/` in a share.
pub fn dir(share: &Share) -> PathBuf {
    share.dir.join("pi")
}

/// Where `tb-as-pi` is in a share.
pub fn tb_as_pi(share: &Share) -> PathBuf {
    dir(share).join("bin/tb-as-pi")
}

/// Puts the tools into the share (again, replacing what was there):
/// `pi/bin/` (tb-as-pi, the stand-ins, the official tools),
/// `pi/lib-firmware-raspberrypi/bootloader-{2711,2712}/default/` (the
/// release images and recovery.bin), and what tb-as-pi mounts and links:
/// `pi/mnt/proc` (its second procfs), `pi/sys-firmware/devicetree/base`
/// (mounted on /sys/firmware, the device tree on its `base`),
/// `pi/proc-extra/device-tree` (-> /sys/firmware/devicetree/base).
pub fn place(share: &Share) -> Result<()> {
    let pi = dir(share);
    let _ = fs::remove_dir_all(&pi);
    let bin = pi.join("bin");
    for d in [
        bin.clone(),
        pi.join("mnt/proc"),
        pi.join("sys-firmware/devicetree/base"),
        pi.join("proc-extra"),
    ] {
        fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let tools = STAND_INS
        .iter()
        .map(|name| scripts_dir().join(name))
        .chain(OFFICIAL.iter().map(|name| rpi_eeprom_data().join(name)));
    for source in tools {
        let dest = bin.join(source.file_name().expect("a file name"));
        copy(&source, &dest)?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))?;
    }
    for board in [Board::Pi4, Board::Pi5] {
        let release = pi
            .join("lib-firmware-raspberrypi")
            .join(format!("bootloader-{}", board.chip()))
            .join("default");
        fs::create_dir_all(&release)
            .with_context(|| format!("cannot create {}", release.display()))?;
        let image = release_image(board);
        for source in [image, release_dir(board).join("recovery.bin")] {
            copy(
                &source,
                &release.join(source.file_name().expect("a file name")),
            )?;
        }
    }
    let link = pi.join("proc-extra/device-tree");
    std::os::unix::fs::symlink("/sys/firmware/devicetree/base", &link)
        .with_context(|| format!("cannot make the symlink {}", link.display()))
}

fn copy(source: &Path, dest: &Path) -> Result<()> {
    fs::copy(source, dest)
        .map(drop)
        .with_context(|| format!("cannot copy {} to {}", source.display(), dest.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firmware::boot::select;
    use crate::firmware::bootloader::Bootloader;
    use crate::firmware::channel;
    use crate::firmware::model::Model;
    use crate::firmware::spec::{BootRequest, BootSpec};
    use crate::host::disks::{Bus, Disk};
    use crate::host::test_disks::{disk_with, have_tools, BOOTS, IMAGE_TOOLS};
    use std::process::{Command, Output};

    /// What the x86 guest's image gives tb-as-pi that this host lacks,
    /// made in a private mount namespace of the test's own, so nothing of
    /// the host changes: /usr/lib/firmware/raspberrypi to mount on (a
    /// tmpfs over the host's /usr/lib/firmware) and a /dev that may gain a
    /// node (an overlay of the host's, whose upper layer is a tmpfs).
    const AS_GUEST: &str = r#"set -eu
scratch=$1
shift
mount -t tmpfs tb-test "$scratch"
mkdir "$scratch/upper" "$scratch/work"
mount -t overlay tb-test-dev -o "lowerdir=/dev,upperdir=$scratch/upper,workdir=$scratch/work" /dev
mount -t tmpfs tb-test-firmware /usr/lib/firmware
mkdir /usr/lib/firmware/raspberrypi
exec "$@"
"#;

    /// One emulated Pi's side of the chain on the host: a share with the
    /// tools, the stand-in's channel written for a boot, and the boot
    /// partition as the guest would have it mounted (`BOOTFS`).
    struct Host {
        dir: tempfile::TempDir,
        share: Share,
        bootfs: PathBuf,
    }

    impl Host {
        fn new() -> Host {
            let dir = tempfile::tempdir().unwrap();
            let share = Share::create(dir.path().join("share")).unwrap();
            place(&share).unwrap();
            let bootfs = dir.path().join("bootfs");
            fs::create_dir_all(&bootfs).unwrap();
            for (name, contents) in BOOTS {
                fs::write(bootfs.join(name), contents).unwrap();
            }
            Host { dir, share, bootfs }
        }

        /// A `model` powered on with its SD card and one more bootable
        /// disk (`name` on `bus`): the disks, the stand-in's scratch
        /// folder, the model's bootloader, and the first boot's spec,
        /// whose channel is written.
        fn power_on(
            &self,
            model: Model,
            name: &str,
            bus: Bus,
        ) -> ([Disk; 2], PathBuf, Bootloader, BootSpec) {
            let dir = self.dir.path();
            let disks = [
                disk_with(dir, "sd", Bus::Sd, BOOTS),
                disk_with(dir, name, bus, BOOTS),
            ];
            let scratch = dir.join("scratch");
            let mut bootloader = model.bootloader().unwrap().unwrap();
            let spec = select(model, Some(&mut bootloader), &disks, POWER_ON, &scratch).unwrap();
            self.boot(model, &bootloader, &spec);
            (disks, scratch, bootloader, spec)
        }

        /// Writes the firmware channel as the harness does before a boot.
        fn boot(&self, model: Model, bootloader: &Bootloader, spec: &BootSpec) {
            channel::before_boot(&self.share, model, bootloader, spec).unwrap();
        }

        /// `tb-as-pi ARGS` as root in the guest-like namespace, with
        /// BOOTFS set and rpi-eeprom-update's backups kept in the test's
        /// folder.
        fn tb_as_pi(&self, args: &[&str]) -> Output {
            let scratch = self.dir.path().join("ns");
            fs::create_dir_all(&scratch).unwrap();
            Command::new("unshare")
                .args([
                    "--mount",
                    "--propagation",
                    "private",
                    "bash",
                    "-c",
                    AS_GUEST,
                    "as-guest",
                ])
                .arg(&scratch)
                .arg(tb_as_pi(&self.share))
                .args(args)
                .env("BOOTFS", &self.bootfs)
                .env("FIRMWARE_BACKUP_DIR", self.dir.path().join("backup"))
                .env_remove("TESTBED")
                .env_remove("TB_AS_PI")
                .output()
                .unwrap()
        }

        /// [`Host::tb_as_pi`] that must succeed; its stdout.
        fn ok(&self, args: &[&str]) -> String {
            let out = self.tb_as_pi(args);
            assert!(
                out.status.success(),
                "tb-as-pi {args:?} failed ({}):\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        }

        fn config(&self, text: &str) -> String {
            let path = self.dir.path().join("boot.conf");
            fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        }
    }

    /// The prerequisites: root (mounts), the tools the chain and the
    /// images need; missing, the test fails under CI=true and is skipped
    /// elsewhere, saying so.
    fn prerequisites() -> bool {
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run this test as root (it mounts in a private namespace)"
            );
            eprintln!("skipping: tb-as-pi's chain needs root");
            return false;
        }
        let mut tools = IMAGE_TOOLS.to_vec();
        tools.extend([
            "unshare",
            "mount",
            "python3",
            "lspci",
            "od",
            "sha256sum",
            "cmp",
            "stat",
            "mren",
        ]);
        have_tools(&tools) && Path::new("/usr/lib/firmware").is_dir()
    }

    const POWER_ON: BootRequest = BootRequest {
        tryboot: false,
        after_reboot: false,
    };

    const TRIAL: BootRequest = BootRequest {
        tryboot: true,
        after_reboot: true,
    };

    /// Copies `names` from BOOTFS onto the FAT of `disk`, as the guest's
    /// writes to its mounted boot partition land there.
    fn onto_card(bootfs: &Path, disk: &Disk, names: &[&str]) {
        let part = crate::host::mbr::partition_of(&disk.image, 1).unwrap();
        for name in names {
            crate::host::cmd::run(
                Command::new("mcopy")
                    .env("MTOOLS_SKIP_CHECK", "1")
                    .arg("-o")
                    .arg("-i")
                    .arg(format!("{}@@{}", disk.image.display(), part.offset()))
                    .arg(bootfs.join(name))
                    .arg(format!("::/{name}")),
            )
            .unwrap();
        }
    }

    /// tb-as-pi shows the Pi 4's device tree, leaves /proc as it is and
    /// sets nothing up twice; the official rpi-eeprom-config prints the
    /// running config (vcgencmd's).
    fn shows_a_pi4(host: &Host, pi4: &Bootloader) {
        let model = host.ok(&[
            "cat",
            "/proc/device-tree/model",
            "/sys/firmware/devicetree/base/chosen/bootloader/boot-mode",
        ]);
        assert_eq!(
            model.as_bytes(),
            b"Raspberry Pi 4 Model B Rev 1.4\0\0\0\0\x01"
        );
        // /proc is still /proc: itself, another process, the mounts.
        let proc = host.ok(&[
            "bash",
            "-c",
            "readlink /proc/self/exe; head -1 /proc/1/status; grep -c '^tb-as-pi /proc tmpfs' /proc/mounts",
        ]);
        assert!(
            proc.starts_with("/usr/bin/readlink\nName:") && proc.ends_with("\n1\n"),
            "{proc}"
        );
        // Idempotent: tb-as-pi inside tb-as-pi sets nothing up again.
        assert_eq!(
            host.ok(&["tb-as-pi", "cat", "/proc/device-tree/model"]),
            "Raspberry Pi 4 Model B Rev 1.4\0"
        );
        assert_eq!(host.ok(&["rpi-eeprom-config"]), pi4.config());
    }

    /// A Pi 4 end to end: tb-as-pi shows the device tree; the official
    /// rpi-eeprom-config prints the running config (vcgencmd's); `--apply`
    /// has the real rpi-eeprom-update stage pieeprom.upd, pieeprom.sig and
    /// recovery.bin; on the SD card, the next boot applies them (a normal
    /// boot), and the trial after it follows the new [tryboot] order to
    /// the USB disk; `rpi-eeprom-update -r` cancels a pending update.
    #[test]
    fn a_pi4_stages_an_update_that_the_next_boot_applies() {
        if !prerequisites() {
            return;
        }
        let host = Host::new();
        let (disks, scratch, mut pi4, _) = host.power_on(Model::Pi4B, "usb", Bus::UsbUas);

        shows_a_pi4(&host, &pi4);

        let new_config = "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf41\n\n[tryboot]\nBOOT_ORDER=0xf14\n";
        let applied = host.ok(&["rpi-eeprom-config", "--apply", &host.config(new_config)]);
        assert!(applied.contains("EEPROM updates pending"), "{applied}");
        let staged = ["pieeprom.upd", "pieeprom.sig", "recovery.bin"];
        for name in staged {
            assert!(
                host.bootfs.join(name).is_file(),
                "rpi-eeprom-update staged no {name}: {applied}"
            );
        }
        let backups = host.dir.path().join("backup");
        assert!(
            backups.read_dir().unwrap().next().is_some(),
            "no backup of the old config"
        );
        onto_card(&host.bootfs, &disks[0], &staged);

        // The reboot into a trial: recovery.bin's reset makes it normal.
        let first = select(Model::Pi4B, Some(&mut pi4), &disks, TRIAL, &scratch).unwrap();
        assert_eq!(
            (first.disk.as_str(), first.tryboot),
            ("sd", false),
            "{:?}",
            first.notes
        );
        assert_eq!(pi4.config(), new_config);
        let card = crate::host::mbr::partition_of(&disks[0].image, 1).unwrap();
        assert!(crate::host::fat::exists(&disks[0].image, &card, "RECOVERY.000").unwrap());
        assert!(!crate::host::fat::exists(&disks[0].image, &card, "recovery.bin").unwrap());
        let trial = select(Model::Pi4B, Some(&mut pi4), &disks, TRIAL, &scratch).unwrap();
        assert_eq!(trial.disk, "usb", "{:?}", trial.notes);
        let normal = select(Model::Pi4B, Some(&mut pi4), &disks, POWER_ON, &scratch).unwrap();
        assert_eq!(normal.disk, "sd");

        // Staged again, then cancelled.
        host.boot(Model::Pi4B, &pi4, &normal);
        host.ok(&[
            "rpi-eeprom-config",
            "--apply",
            &host.config("[all]\nBOOT_ORDER=0xf14\n"),
        ]);
        assert!(host.bootfs.join("pieeprom.upd").is_file());
        let cancelled = host.ok(&["rpi-eeprom-update", "-r"]);
        assert!(
            cancelled.contains("Removing temporary files"),
            "{cancelled}"
        );
        for name in staged {
            assert!(!host.bootfs.join(name).exists(), "-r left {name}");
        }
    }

    /// A Pi 5 end to end: rpi-eeprom-update finds /dev/spidev10.0 and the
    /// flashrom stand-in's chip, flashes at once and stages nothing; once
    /// the boot has ended the EEPROM runs the new config, and the next
    /// boot probes PCIe (PCIE_PROBE=1) and starts the NVMe drive first.
    /// vcmailbox's set_reboot_order goes through tb-as-pi too.
    #[test]
    fn a_pi5_flashes_at_once_and_boots_the_new_order() {
        if !prerequisites() {
            return;
        }
        let host = Host::new();
        let (disks, scratch, mut pi5, spec) = host.power_on(Model::Pi5, "nvme", Bus::Nvme);
        assert_eq!(spec.disk, "sd");
        assert_eq!(host.ok(&["rpi-eeprom-config"]), pi5.config());
        let new_config = "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf416\nPCIE_PROBE=1\n";
        let applied = host.ok(&["rpi-eeprom-config", "--apply", &host.config(new_config)]);
        assert!(
            applied.contains("UPDATE SUCCESSFUL") && applied.contains("Detected flash chip"),
            "{applied}"
        );
        for name in ["pieeprom.upd", "pieeprom.sig", "recovery.bin"] {
            assert!(
                !host.bootfs.join(name).exists(),
                "a Pi 5's flash left {name}"
            );
        }
        assert!(
            !Path::new("/dev/spidev10.0").exists(),
            "the host's /dev gained a node"
        );
        let reboot_order = host.ok(&["vcmailbox", "0x0003808b", "4", "4", "0xf14"]);
        assert!(reboot_order.contains("0x00000f14"), "{reboot_order}");
        channel::after_boot(&host.share, &mut pi5).unwrap();
        assert_eq!(pi5.config(), new_config);
        assert!(pi5.update_timestamp() > 1_700_000_000);
        assert_eq!(
            pi5.reboot_order(),
            Some(crate::firmware::eeprom::BootOrder(0xf14))
        );
        // A power-on: the reboot order is lost, the new BOOT_ORDER holds.
        let next = select(Model::Pi5, Some(&mut pi5), &disks, POWER_ON, &scratch).unwrap();
        assert_eq!(next.disk, "nvme", "{:?}", next.notes);
    }
}
