//! The ARM lane: a Raspberry Pi 3 Model B (QEMU's `raspi3b`) and a Pi 4
//! Model B (QEMU 10's `raspi4b`) booting
//! Debian bookworm arm64 laid out like Raspberry Pi OS, raspi-firmware's
//! files on the SD card's FAT partition, pimigrate built for arm64. What
//! the x86 guest cannot show: the Pi's own device tree (model, what it can
//! boot from, the trial-boot flag as the firmware sets it), its SD and USB
//! controllers and their drivers, Debian's
//! raspi-firmware regenerating cmdline.txt, and an arm64 binary on the
//! oldest glibc it must start on.

use super::unattended::chain::{hands_off_in_trial, Chain, During, WHAT_IT_SAYS};
use super::unattended::matrix::{FSTAB, FSTAB_UNIT};
use super::{Lane, Scenario};
use crate::host::fat;
use crate::host::image::{ArmImage, ImageSet};
use crate::host::mbr::Partition;
use crate::machine::card_channel;
use crate::machine::pimigrate_bin::{self, IDS_UNIQUE};
use crate::machine::power::{CutAt, PowerCuts, Root};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::qemu::Board;
use crate::machine::rig::UNTIMED_SD;
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Boot, Bus, Ending, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The model string of QEMU's raspi3b device tree (upstream Linux's
/// bcm2837-rpi-3-b.dts), as the kernel prints it and pimigrate reads it.
const PI3_MODEL: &str = "Raspberry Pi 3 Model B";

/// The USB disk behind dwc2: bulk-only mass storage, the guest's `sda`.
const USB_SERIAL: &str = "TB-USB";

/// A Pi with the ARM image's SD card and a blank 4 GiB USB disk.
fn raspi(name: &str, board: Board) -> Result<Rig> {
    let image = ArmImage::ensure()?;
    Setup::new(name, &image.image)
        .board(board)
        .sd_profile(UNTIMED_SD)
        .blank("usb", Bus::UsbStorage, 4 << 30, "usb-ssd")
        .build()
}

/// The model string of QEMU's raspi4b's device tree (upstream Linux's
/// bcm2711-rpi-4-b.dts).
const PI4_MODEL: &str = "Raspberry Pi 4 Model B";
/// What the trial says on its console once it committed itself.
const COMMITTED: &str = "came up and was committed";

/// A job snippet for a trial boot: once the trial's check has run, power
/// off (from a transient unit: the agent's own processes end with it).
const POWER_OFF_ONCE_CHECKED: &str = r#"
systemd-run --no-block --unit tb-power-off-after-check bash -c '
    unit=pimigrate-trial-check.service
    until [ "$(systemctl show -p ExecMainExitTimestampMonotonic --value $unit)" != 0 ]; do sleep 2; done
    sleep 2
    systemctl poweroff'
"#;

/// The kernel named the machine `model` from its device tree.
fn model_logged(boot: &Boot, model: &str) -> Result<()> {
    let console = boot.record.console();
    ensure!(
        console.contains(&format!("Machine model: {model}")),
        "boot {}: the console does not say \"Machine model: {model}\" (see {})",
        boot.number,
        boot.record.serial_log.display()
    );
    Ok(())
}

/// Job lines: the model the device tree gives, and the CPU.
const MODEL_PROBE: &str = r#"
echo "dt_model=$(tr -d '\000' </proc/device-tree/model)"
echo "machine=$(uname -m)"
"#;

/// Before the move, in pi3-root-only's first boot: `pimigrate devices
/// --json` into the share, flushed to the card (the boot ends in a power
/// cut, and the card carries the share back).
const DEVICES_JSON: &str = r#"
pimigrate devices --json >"$TESTBED/out/devices.json"
sync
"#;

/// The first boot's `devices --json`: the model, what a Pi 3 can boot
/// from, the SD card as the source on the SoC's sdhost controller and the
/// USB disk behind dwc2 as a candidate.
fn devices_named(pi: &Pi) -> Result<()> {
    let path = pi.share().dir.join("out/devices.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the guest left no {}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON: {text}", path.display()))?;
    check_devices(&doc).with_context(|| format!("pimigrate devices --json said:\n{text}"))
}

/// What `devices --json` must say on a Pi 3 Model B booted from its SD card
/// with a USB disk plugged in.
fn check_devices(doc: &serde_json::Value) -> Result<()> {
    let pi = &doc["pi"];
    let is = |v: &serde_json::Value, want: &str, what: &str| -> Result<()> {
        ensure!(v.as_str() == Some(want), "{what} is {v}, expected {want:?}");
        Ok(())
    };
    is(&pi["model"], PI3_MODEL, "pi.model")?;
    is(&pi["family"], "pi3", "pi.family")?;
    is(&pi["config_filter"], "pi3", "pi.config_filter")?;
    // A Pi 3B boots USB only once the one-time OTP bit is set, never
    // NVMe, and has no EEPROM bootloader, so no tryboot.
    is(&pi["can_boot"]["sd"], "yes", "pi.can_boot.sd")?;
    is(&pi["can_boot"]["usb"], "needs-otp", "pi.can_boot.usb")?;
    is(&pi["can_boot"]["nvme"], "no", "pi.can_boot.nvme")?;
    ensure!(
        pi["eeprom_bootloader"] == false && pi["tryboot_available"] == false,
        "a Pi 3 has no EEPROM bootloader and no tryboot: {pi}"
    );
    ensure!(pi["in_trial_boot"] == false, "not a trial boot: {pi}");

    let disks = doc["disks"].as_array().context("no disks array")?;
    let disk = |name: &str| {
        disks
            .iter()
            .find(|d| d["name"] == name)
            .with_context(|| format!("no disk {name} among {}", disks.len()))
    };
    let sd = disk("mmcblk0")?;
    is(&sd["transport"], "mmc", "mmcblk0's transport")?;
    is(&sd["role"], "source-root", "mmcblk0's role")?;
    is(
        &sd["controller"]["driver"],
        "sdhost-bcm2835",
        "mmcblk0's controller",
    )?;
    let usb = disk("sda")?;
    is(&usb["transport"], "usb", "sda's transport")?;
    is(&usb["serial"], USB_SERIAL, "sda's serial")?;
    is(&usb["role"], "candidate", "sda's role")?;
    is(&usb["usb"]["driver"], "usb-storage", "sda's USB driver")?;
    is(&usb["controller"]["driver"], "dwc2", "sda's controller")?;
    Ok(())
}

/// The scenario `pi3-root-only`, in [`super::all`]'s order.
pub const PI3_ROOT_ONLY: Scenario = Scenario {
    name: "pi3-root-only",
    lane: Lane::Arm,
    run: pi3_root_only,
    about: r#"ARM lane, `raspi3b`, a blank 4 GiB USB disk behind dwc2. Boot 1, before the move: the console says `Machine model: Raspberry Pi 3 Model B`, root is `mmcblk0p2`, and the arm64 `pimigrate devices --json` names the model, family `pi3`, section `pi3`, boots SD `yes`, USB `needs-otp`, NVMe `no`, no EEPROM bootloader or tryboot; `mmcblk0` (transport `mmc`) is `source-root` on controller `sdhost-bcm2835`; `sda` (serial `TB-USB`, transport `usb`, driver `usb-storage`) is a `candidate` on controller `dwc2`. Then `pimigrate migrate --no-trial` (root only: the boot files stay on the SD card, as a Pi 3 without the OTP bit needs), its power cut while held at `source-boot-written` (the swap flushed through the Pi's sdhost SD controller, the journal not told); judged as the power-cut scenarios judge a cut, and the SD card's `cmdline.txt` must be the original with the plan's PARTUUID as `root=`. Boot 2: root is `sda1` (the USB root, as cmdline.txt says), `migrate --resume --yes` exits 0, `/boot/firmware` `mmcblk0p1`, fstab names the plan's PARTUUID, every id unique, `pimigrate verify --no-bench` exits 0 with nothing but the running system; then what a kernel upgrade runs, `/etc/kernel/postinst.d` with the kernel's version (`DEB_MAINT_PARAMS=configure`, as linux-image's postinst): initramfs-tools rebuilds the initrd and raspi-firmware rewrites `config.txt` and `cmdline.txt`, which still names the USB root (from the new root's `ROOTPART`). Boot 3 from those files: root still `sda1`; `pimigrate rollback --yes`, and the Pi powers off. From the host: every file of the SD card's boot partition is byte-identical to the pristine card's, which boot 1 started, but the initrd, which the kernel hooks rebuilt and boot 3 started"#,
};

/// `pi3-root-only`: `migrate --no-trial` moves the root to the USB disk
/// (the boot files stay on the SD card, as a Pi 3 without the OTP bit
/// needs); the Pi boots it; `verify` passes reading the real device tree;
/// the kernel package's postinst hooks, raspi-firmware's among them,
/// regenerate cmdline.txt and the Pi still boots the USB root; `rollback`
/// puts the SD card's boot files back and the SD root boots again.
pub fn pi3_root_only(_: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = raspi("pi3-root-only", Board::Raspi3b)?;
    let scratch = pi.work.join("fat-snapshot");
    let sd_files = || -> Result<BootFiles> {
        Ok(fat::snapshot(&sd, &sd_boot, &scratch)?
            .into_iter()
            .filter(|(name, _)| !card_channel::is_channel(name))
            .collect())
    };
    let pristine = sd_files()?;

    let mut cuts = PowerCuts::new(pi, "pi3-root-only")?;
    let migration = migrate_cut_after_the_swap(&mut cuts, &pristine, &sd, &sd_boot)?;
    let mut pi = verify_then_kernel_hooks(cuts, &migration)?;

    // Boot 3: the regenerated boot files still boot the USB root; roll back.
    let rollback = format!("{PROBE}\npimigrate rollback --yes\n");
    let third = pi.run(&rollback, After::PowerOff)?;
    let out = third.job_ok()?;
    expect_fact(&facts(&out.stdout), "root", &migration.usb_root)
        .with_context(|| out.stdout.clone())?;

    // From the host, the machine off: the SD card's boot files as they
    // were, which boot 1 booted (no fourth boot: under emulation an ARM
    // boot costs about 90 CPU seconds, and it would start these same
    // bytes); the initrd is the one boot 3 started.
    let after = sd_files()?;
    // The initrd is the kernel hooks' (rebuilt in boot 2), not pimigrate's.
    let initrd = |name: &str| name.starts_with("initrd.img-");
    let diff: Vec<String> = fat::snapshot_diff(&pristine, &after)
        .into_iter()
        .filter(|d| !(initrd(d) && d.ends_with(" changed")))
        .collect();
    ensure!(
        diff.is_empty(),
        "after rollback the SD card's boot partition differs from the pristine one: {diff:?}"
    );
    Ok(())
}

/// The files on the SD card's boot partition (names and bytes), without
/// the testbed's command channel.
type BootFiles = BTreeMap<String, Vec<u8>>;

/// What pi3-root-only's migration made: the new root's PARTUUID and its
/// device in the guest.
struct RootMove {
    root_partuuid: String,
    usb_root: String,
}

/// Boot 1, SD root: migrate; the power goes right after pimigrate has
/// swapped cmdline.txt and flushed it, before its journal says so. On the
/// Pi's own SD controller (sdhost) and FAT driver, the new cmdline.txt must
/// be on the card: every other byte as it was, root= the new one's.
fn migrate_cut_after_the_swap(
    cuts: &mut PowerCuts,
    pristine: &BootFiles,
    sd: &Path,
    sd_boot: &Partition,
) -> Result<RootMove> {
    let cut = cuts.cut(
        "the swap flushed",
        &format!("{}{DEVICES_JSON}", pimigrate_bin::find_disk(USB_SERIAL)),
        "pimigrate migrate --target \"$target\" --yes --no-trial",
        CutAt::point("source-boot-written"),
    )?;
    // What a Pi 3 is, read before the move: from its device tree by the
    // kernel and by the arm64 pimigrate, its controllers and drivers.
    model_logged(&cut.boot, PI3_MODEL)?;
    ensure!(
        cut.root == "/dev/mmcblk0p2",
        "the first boot came up on {}, not the SD card's root",
        cut.root
    );
    devices_named(&cuts.pi)?;
    cuts.require(Root::Target)?;
    let root_partuuid = cuts
        .plan_root_partuuid()?
        .context("no root PARTUUID in the SD card's journal")?;
    let journal = cuts.journal()?.context("no journal on the SD card")?;
    let target = journal["plan"]["target"]["path"]
        .as_str()
        .context("no target in the journal")?
        .to_string();
    let original = pristine.get("cmdline.txt").context("no cmdline.txt")?;
    let original_text = String::from_utf8_lossy(original);
    let old_root = original_text
        .split_whitespace()
        .find(|w| w.starts_with("root="))
        .context("the original cmdline.txt has no root=")?;
    let migrated = original_text.replace(old_root, &format!("root=PARTUUID={root_partuuid}"));
    let cmdline = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline == migrated,
        "the SD card's cmdline.txt after the cut is {cmdline:?}, not the migrated {migrated:?}"
    );
    cuts.settled_with(
        "migrated",
        &[
            ("cmdline.txt", migrated.into_bytes()),
            ("cmdline.txt.pimigrate-backup", original.clone()),
        ],
    );
    Ok(RootMove {
        root_partuuid,
        usb_root: format!("{target}1"),
    })
}

/// Boot 2, USB root: `migrate --resume` completes the journal, verify with
/// nothing but the running system, then what a kernel upgrade runs:
/// linux-image's postinst hands the version to every hook in
/// /etc/kernel/postinst.d (initramfs-tools rebuilds the initrd,
/// raspi-firmware copies it and rewrites config.txt and cmdline.txt from
/// /etc/default/raspi-firmware), which must keep the USB root. Ends the
/// power cuts and hands the Pi back.
fn verify_then_kernel_hooks(mut cuts: PowerCuts, migration: &RootMove) -> Result<Pi> {
    let RootMove {
        root_partuuid,
        usb_root,
    } = migration;
    let check = format!(
        r#"{}{PROBE}{IDS_UNIQUE}
echo "fstab_root=$(findmnt -s -no SOURCE /)"
set +e
pimigrate migrate --resume --yes
echo "resume_status=$?"
pimigrate verify --no-bench
echo "verify_status=$?"
set -e
kver=$(uname -r)
DEB_MAINT_PARAMS=configure run-parts --report --exit-on-error \
    --arg="$kver" --arg="/boot/vmlinuz-$kver" /etc/kernel/postinst.d
echo "regenerated=$(cat /boot/firmware/cmdline.txt)"
echo "rootpart=$(grep '^ROOTPART=' /etc/default/raspi-firmware)"
"#,
        pimigrate_bin::find_disk(USB_SERIAL)
    );
    let second = cuts.boot(&check, After::Reboot)?;
    model_logged(&second, PI3_MODEL)?;
    let out = second.job_ok()?;
    let f = facts(&out.stdout);
    // The new root's journal did not know the swap was done: resume says
    // it is, and records it.
    expect_fact(&f, "resume_status", "0").with_context(|| out.stderr.clone())?;
    let pi = cuts.finish()?;
    expect_fact(&f, "root", usb_root).with_context(|| out.stdout.clone())?;
    expect_fact(&f, "boot_firmware", "/dev/mmcblk0p1")?;
    expect_fact(&f, "fstab_root", &format!("PARTUUID={root_partuuid}"))?;
    expect_fact(&f, "verify_status", "0").with_context(|| out.stdout.clone())?;
    let regenerated = fact(&f, "regenerated")?;
    ensure!(
        regenerated
            .split_whitespace()
            .any(|w| w == format!("root=PARTUUID={root_partuuid}")),
        "raspi-firmware's hook wrote a cmdline.txt without the USB root {root_partuuid}: \
         {regenerated:?} ({})",
        fact(&f, "rootpart")?
    );
    Ok(pi)
}

/// Job lines: the trial-boot flag and the boot mode as the firmware left
/// them in the device tree (each byte of the cell, or `none`).
const TRYBOOT_PROBE: &str = r#"
dt_cell() { if [ -e "$1" ]; then od -An -tu1 "$1" | tr -s ' ' | sed 's/^ //'; else echo none; fi; }
echo "dt_tryboot=$(dt_cell /proc/device-tree/chosen/bootloader/tryboot)"
echo "dt_boot_mode=$(dt_cell /proc/device-tree/chosen/bootloader/boot-mode)"
"#;

/// The scenario `pi4-trial`, in [`super::all`]'s order.
pub const PI4_TRIAL: Scenario = Scenario {
    name: "pi4-trial",
    lane: Lane::Arm,
    run: pi4_trial,
    about: r#"ARM lane, QEMU 10's `raspi4b` (device tree fitted, `src/machine/raspi4b.rs`), a blank USB disk behind dwc2, the unattended matrix's ARM case. Boot 1: `pimigrate migrate --trial always --auto-commit`: `cmdline.txt` unchanged, `tryboot.txt` written; an fstab line that fails put on the new root; the agent reboots with `"0 tryboot"`. Boot 2 reads `tryboot.txt` (the console says `Machine model: Raspberry Pi 4 Model B`), its systemd stops in emergency mode, records why (on the SD card's root too) and reboots by itself; boot 3, the SD card's system: `status` says `trial-failed`, the record names `mnt-tbbroken.mount`; mended, `"0 tryboot"` again. Boot 4, the trial: the guest reads the flag in /proc/device-tree as `0 0 0 1`, boot mode `0 0 0 1` (the SD card's firmware), root `sda1` with the plan's PARTUUID; then the trial checks and commits itself and says so on the console, and a transient unit the job started (`systemd-run`: the agent's own processes end with it) powers the Pi off once the check has run, so the disks hold ext4's journal applied: `cmdline.txt` names the USB root without the trial's words, `tryboot.txt` is gone, and both roots hold the record `committed`"#,
};

/// `pi4-trial`: on a Pi 4 (QEMU 10's raspi4b) `migrate --trial always
/// --auto-commit` moves the root to the USB disk and reboots with "0
/// tryboot"; the firmware stand-in boots tryboot.txt and sets
/// `/chosen/bootloader/tryboot` in the device tree as the real firmware
/// does. The unattended matrix's ARM case
/// ([`super::unattended`]): the first trial meets an fstab line that
/// fails; its systemd goes to emergency mode, which in the trial records
/// why (on the SD card's root too) and reboots; the harness only waits
/// until the SD card's system runs again, which says what happened and
/// mends it. The second trial comes up, the flag read from
/// /proc/device-tree with no stand-in of pimigrate's own, and checks and
/// commits itself: cmdline.txt then names the USB root, and both roots
/// hold the trial's record.
pub fn pi4_trial(_: &ImageSet) -> Result<()> {
    let Rig { pi, sd, sd_boot } = raspi("pi4-trial", Board::Raspi4b)?;
    let usb = pi.disk("usb")?.image.clone();
    let mut chain = Chain::new(pi, "pi4-trial");
    chain.in_trial = format!(
        "{MODEL_PROBE}{TRYBOOT_PROBE}{}",
        crate::machine::pimigrate_bin::ROOT_PARTUUID
    );
    let (root_partuuid, usb_root) = migrate_for_a_broken_trial(&mut chain, &sd, &sd_boot)?;
    the_trial_stops_in_emergency_mode(&mut chain)?;
    the_trial_commits_itself(&mut chain, &root_partuuid, &usb_root)?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={root_partuuid} "))
            && !cmdline.contains("pimigrate.trial"),
        "the committed cmdline.txt: {cmdline:?}"
    );
    ensure!(
        !fat::exists(&sd, &sd_boot, "tryboot.txt")?,
        "tryboot.txt is still on the SD card after the commit"
    );
    // The trial's record, on the new root and on the SD card's.
    for (image, number, whose) in [(&usb, 1, "the USB root"), (&sd, 2, "the SD card's root")] {
        let record =
            crate::host::inspect::ext4_read(image, number, "/var/lib/pimigrate/trial-outcome.json")
                .with_context(|| format!("no trial record on {whose}"))?;
        ensure!(
            record.contains("\"outcome\": \"committed\""),
            "the trial record on {whose}: {record}"
        );
    }
    Ok(())
}

/// Boot 1, SD root: migrate with a trial that commits itself; an fstab
/// line on the new root that fails; the agent reboots into the trial.
/// cmdline.txt stays as it was, tryboot.txt is written. Returns the plan's
/// root PARTUUID and the USB root's device.
fn migrate_for_a_broken_trial(
    chain: &mut Chain,
    sd: &Path,
    sd_boot: &Partition,
) -> Result<(String, String)> {
    let pristine = fat::read(sd, sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    chain.pi.boot_limit = std::time::Duration::from_secs(20 * 60);
    let job = format!(
        "{}{}",
        crate::machine::rig::migrate_job(USB_SERIAL, "--trial always --auto-commit"),
        FSTAB.make.job_lines()
    );
    let boot = chain.pi.run(&job, After::Tryboot)?;
    let f = facts(&boot.job_ok()?.stdout);
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    let usb_root = format!("{}1", fact(&f, "target")?);
    ensure!(
        fat::read(sd, sd_boot, "cmdline.txt")?.as_deref() == Some(pristine.as_str()),
        "a trial migration changed cmdline.txt before the trial"
    );
    ensure!(
        fat::exists(sd, sd_boot, "tryboot.txt")?,
        "no tryboot.txt on the SD card after a trial migration"
    );
    Ok((root_partuuid.to_string(), usb_root))
}

/// Boots 2 and 3: the trial stops in emergency mode and reboots by itself;
/// the SD card's system says so and mends the line.
fn the_trial_stops_in_emergency_mode(chain: &mut Chain) -> Result<()> {
    let back = chain.failed_trial(
        "an fstab line that fails, in a Pi 4 trial (its real tryboot flag)",
        &[
            "stopped in emergency mode",
            &format!("Machine model: {PI4_MODEL}"),
        ],
        During::Nothing,
        &format!("{WHAT_IT_SAYS}{}", FSTAB.mend.job_lines()),
        After::Tryboot,
    )?;
    let trial = &back.boots[0];
    ensure!(
        trial.spec.tryboot && trial.spec.config_file == "tryboot.txt",
        "the boot after \"0 tryboot\" was not a trial boot: {:?}",
        trial.spec
    );
    expect_fact(&back.facts, "stage", "trial-failed")?;
    expect_fact(&back.facts, "record", "emergency")?;
    let reason = fact(&back.facts, "record_reason")?;
    ensure!(reason.contains(FSTAB_UNIT), "the record: {reason}");
    Ok(())
}

/// Boot 4: the trial comes up; the job reads the flag, then the trial
/// checks itself and commits. A unit the job starts (outside the agent's,
/// which ends first) powers the Pi off cleanly once the check has run, so
/// the disks hold the records with ext4's journal applied.
fn the_trial_commits_itself(chain: &mut Chain, root_partuuid: &str, usb_root: &str) -> Result<()> {
    let then_power_off = format!("{}{POWER_OFF_ONCE_CHECKED}", chain.in_trial);
    chain
        .pi
        .share()
        .set_job(&hands_off_in_trial(&then_power_off), After::Stay)?;
    let trial = chain.pi.boot_through_faults(&mut |_, _| false)?;
    model_logged(&trial, PI4_MODEL)?;
    ensure!(
        trial.spec.tryboot && trial.spec.config_file == "tryboot.txt",
        "the second trial: {:?}",
        trial.spec
    );
    ensure!(
        trial.record.console().contains(COMMITTED) && trial.record.ending == Ending::PowerOff,
        "the trial did not commit itself, then power off ({:?}); see {}",
        trial.record.ending,
        trial.record.serial_log.display()
    );
    let out = trial.job_ok()?;
    let f = facts(&out.stdout);
    expect_fact(&f, "in_trial", "1")?;
    expect_fact(&f, "dt_model", PI4_MODEL)?;
    expect_fact(&f, "dt_tryboot", "0 0 0 1")?;
    // The firmware came from the SD card (boot mode 1), the root is USB.
    expect_fact(&f, "dt_boot_mode", "0 0 0 1")?;
    expect_fact(&f, "root", usb_root).with_context(|| out.stdout.clone())?;
    expect_fact(&f, "root_partuuid", root_partuuid)?;
    Ok(())
}
