//! Scenarios: whole-machine tests, each a function that builds a [`Pi`],
//! boots it, and asserts on what the guest reports and on the disk images.
//! Add one by writing a module and listing it in [`all`].
//!
//! [`Pi`]: crate::Pi

use crate::image::ImageSet;
use anyhow::{bail, Result};
use std::collections::BTreeMap;

mod ansible;
mod ansible_rollback;
mod boot_sd;
mod copy_debian_root;
mod disk_speed;
mod fleet;
mod full_move;
mod migrate_trial;
mod pi_copy_bench;
mod pimigrate_bin;
mod power_cut;
mod profilers;
mod raspi;
mod recommend;
mod reference_migration;
mod setup;
mod sync_standby;
mod unattended;
mod unplug_mid_copy;
mod usb_boot;
mod wizard_pty;
mod wizard_story;

/// A named scenario.
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&ImageSet) -> Result<()>,
    /// Measures speed (benchmarks decide what it asserts), so it runs
    /// with no other scenario beside it; its set-up says
    /// [`setup::Setup::timed`] too, for the disks' calibrated I/O engine.
    pub alone: bool,
    /// Runs on the ARM lane's Raspberry Pi 3 (QEMU's raspi3b, the arm64
    /// image and pimigrate built for arm64) instead of the x86 guest.
    pub arm: bool,
}

/// Every scenario, in the order the suite starts them: of those that time
/// nothing the longest first (about 11 minutes down to seconds beside the
/// builds on this 2-core machine), so that the lane's two at a time end
/// together;
/// then the speed scenarios, which run alone.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "pi3-root-only",
            about: "Raspberry Pi 3 (raspi3b, arm64): devices --json names the model, USB boot after the OTP bit, the SD card on sdhost-bcm2835 as the source, the USB disk behind dwc2 as a candidate; migrate --no-trial to the USB disk behind dwc2, boot it, verify from the real device tree; the kernel's postinst hooks regenerate cmdline.txt and it still boots; rollback, the SD root boots, its boot files as before",
            run: raspi::pi3_root_only,
            alone: false,
            arm: true,
        },
        Scenario {
            name: "pi4-trial",
            about: "Raspberry Pi 4 (QEMU 10 raspi4b, arm64): migrate --trial always to the USB disk, \"0 tryboot\" boots tryboot.txt with the device tree's tryboot flag, verify --commit reads it, a normal boot on the USB root",
            run: raspi::pi4_trial,
            alone: false,
            arm: true,
        },
        Scenario {
            name: "unattended-root-only",
            about: "failures with nobody at the Pi, root-only move (--trial always --auto-commit) on one set of disks: the terminal hung up mid-copy (the migration finishes), then trials with the new root's init broken, its modules missing, a failing fstab line, a clone of the new drive plugged in, a power cut, the new drive gone; after each the harness only waits until the SD card's system runs again, which says what happened (status, the trial's record); rollback leaves the SD card as before",
            run: unattended::root_only,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "unattended-full",
            about: "failures with nobody at the Pi, full move on a Pi 4 (--trial device --auto-commit): a bootloader too old for the trial refused at plan time, its update's write cut short (recovery.bin writes it at the next boot), then trials with the new drive's boot partition broken and the new drive gone; after each the harness only waits until the SD card's system runs again and says what happened",
            run: unattended::full,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "power-cut-migrate",
            about: "power cuts at every phase of a root-only move to a USB SSD, on one set of disks: the partition table, mkfs, two random moments and a named file of the copy, after the copy, cmdline.txt's backup, its swap (temporary file, rename), the swap flushed; each boot comes up on the SD root and migrate --resume carries on, the last on the SSD, where it completes the journal; fsck finds nothing, the copy is faithful (rsync -naHAXc); verify, rollback, the SD boots with its cmdline.txt as before",
            run: power_cut::migrate,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "power-cut-trial",
            about: "migrate --trial always to NVMe (GPT), the power cut while tryboot.txt is renamed into place: the SD boots, --resume finishes; trial boot on NVMe, the power cut right after verify --commit's swap: the next normal boot is on NVMe, where verify --commit finishes",
            run: migrate_trial::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "pi4-full-trial",
            about: "a Pi 4 (the x86 guest with Raspberry Pi OS's bootloader tools): migrate --layout full --boot-order apply to a USB SSD, the SD card left in; recovery.bin writes the [tryboot] order at the next boot, migrate --resume --reboot starts the one-shot trial of the SSD, verify --commit stages the permanent order, the next normal boot is the SSD's with the card in; rollback puts the bootloader's config back and the SD card boots",
            run: full_move::pi4,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "pi5-nvme-trial",
            about: "a Pi 5 without a HAT+: migrate --layout full --boot-order apply to NVMe flashes PCIE_PROBE=1, the trial through set_reboot_order commits BOOT_ORDER=0xf416 and a normal boot comes up on NVMe with the card in, where rollback flashes the EEPROM's own settings back (read back from the flash), no update file ever on the NVMe drive",
            run: full_move::pi5,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "ansible-rollback",
            about: "examples/ansible/pimigrate.yml with a clone of the new disk plugged in for the trial boot: verify --commit fails on the duplicate PARTUUID, the playbook rolls back and boots the SD card; its boot partition as before",
            run: ansible_rollback::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "ansible",
            about: "examples/ansible/pimigrate.yml over SSH, twice: migrates to the USB SSD, trial-boots, commits; then changed=0",
            run: ansible::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "unplug-mid-copy",
            about: "USB SSD unplugged (QMP device_del) while pimigrate copies: a clear error, SD boot files untouched, the SD boots; plugged in again, migrate --resume finishes and the SSD boots",
            run: unplug_mid_copy::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "wizard-pty",
            about: "pimigrate with no arguments in an 80x24 tmux terminal, answered by reading the screen: Ctrl-C at the typed confirmation leaves the SSD blank; then through to the migration, reboot, root on the SSD",
            run: wizard_pty::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "reference-migration",
            about: "root moved to a USB SSD with sfdisk/mkfs/rsync/sed, reboot, root on sda1",
            run: reference_migration::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sync-standby",
            about: "after migrate --layout full the SD card is the standby: changes on the SSD's root synced to it (hard links, an xattr, a mode), a sync killed midway reported incomplete and completed, the SSD gone: the card boots with the changes and its own ids",
            run: sync_standby::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sd-boot",
            about:
                "bookworm SD card boots: root mmcblk0p2, /boot/firmware mmcblk0p1, SSD seen on usb",
            run: boot_sd::bookworm,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "sd-boot-bullseye",
            about: "bullseye layout boots: the boot partition mounted at /boot",
            run: boot_sd::bullseye,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "usb-boot",
            about:
                "SD card removed: the firmware boots the USB SSD; root sda2, /boot/firmware sda1",
            run: usb_boot::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: "copy-debian-root",
            about: "host only: the copier on the guest image's Debian root; rsync -naHAXc finds nothing to do",
            run: copy_debian_root::run,
            alone: false,
            arm: false,
        },
        Scenario {
            name: wizard_story::NAME,
            about: "the whole story: wizard --yes --quick --trial (SD, flash drive, SSD), trial boot, verify --commit, normal boot on the SSD, faster than the SD",
            run: wizard_story::run,
            alone: true,
            arm: false,
        },
        Scenario {
            name: "recommend",
            about: "pimigrate recommend --quick: picks the USB SSD, warns the flash drive writes slower than the SD",
            run: recommend::run,
            alone: true,
            arm: false,
        },
        Scenario {
            name: "disk-speed",
            about: "fio in the guest measures each throttled disk at its profile's speed",
            run: disk_speed::run,
            alone: true,
            arm: false,
        },
    ]
}

/// Benchmarks: run by name only (`scripts/bench-pi-copy.sh`), never by
/// `run` without names, a lane, or `scripts/test.sh`. They measure and
/// print; they fail only when something broke, never on a figure.
pub fn benchmarks() -> Vec<Scenario> {
    vec![Scenario {
        name: pi_copy_bench::NAME,
        about: "benchmark: pimigrate migrate's copy and a full sync against rsync -aHAXx of the same root onto the same blank USB SSD, one boot, caches dropped, medians (PI_TESTBED_BENCH_RUNS, default 3; PI_TESTBED_BENCH_PROFILE=strace|perf adds a profiled run of each)",
        run: pi_copy_bench::run,
        alone: true,
        arm: false,
    }]
}

/// The SD card of scenarios that time nothing: QEMU's card with no
/// throttle (`testbed/profiles.tsv`), whose reads are about three times
/// those of `sd-a1` under emulation, and still below a real A1 card's. The
/// scenarios that measure or rank the card keep `sd-a1` or `sd-c10`.
pub const UNTIMED_SD: &str = "sd-unthrottled";

/// `key=value` lines of a job's output (other lines are ignored).
pub fn facts(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Asserts that fact `key` equals `want`.
pub fn expect_fact(facts: &BTreeMap<String, String>, key: &str, want: &str) -> Result<()> {
    match facts.get(key) {
        Some(v) if v == want => Ok(()),
        Some(v) => bail!("guest reports {key}={v:?}, expected {want:?}"),
        None => bail!("guest did not report {key}; facts: {facts:?}"),
    }
}

/// The guest commands every boot scenario starts with: where / and the boot
/// partition come from, and the disks as lsblk sees them.
pub const PROBE: &str = r#"
echo "root=$(findmnt -no SOURCE /)"
echo "boot_firmware=$(findmnt -no SOURCE /boot/firmware || true)"
echo "boot=$(findmnt -no SOURCE /boot || true)"
echo "cmdline=$(cat /proc/cmdline)"
lsblk -J -d -e 7,11 -o NAME,TRAN,SIZE,SERIAL,TYPE > "$TESTBED/out/lsblk.json"
"#;

/// A disk as the guest's lsblk lists it.
#[derive(Debug, Clone)]
pub struct GuestDisk {
    pub name: String,
    pub tran: Option<String>,
    pub serial: Option<String>,
    pub size: String,
}

/// Parses the `lsblk.json` that [`PROBE`] leaves in the share.
pub fn guest_disks(share: &crate::Share) -> Result<Vec<GuestDisk>> {
    use anyhow::Context;
    let path = share.dir.join("out/lsblk.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let devices = v["blockdevices"]
        .as_array()
        .with_context(|| format!("{} has no blockdevices", path.display()))?;
    let s = |d: &serde_json::Value, k: &str| d[k].as_str().map(str::to_string);
    Ok(devices
        .iter()
        .map(|d| GuestDisk {
            name: s(d, "name").unwrap_or_default(),
            tran: s(d, "tran"),
            serial: s(d, "serial"),
            size: s(d, "size").unwrap_or_default(),
        })
        .collect())
}
