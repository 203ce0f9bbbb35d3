//! The full move finished (issue 29), on the x86 guest playing a Pi 4 and
//! a Pi 5 with Raspberry Pi OS's bootloader tools (the official
//! `rpi-eeprom-config` and `rpi-eeprom-update`, our stand-ins of
//! `vcgencmd`, `vcmailbox`, `flashrom`: [`crate::firmware::pi_tools`]), every
//! pimigrate command run through `tb-as-pi`, so it reads the device tree
//! the firmware stand-in hands over.
//!
//! `pi4-full-trial`: a full move to a USB SSD with the SD card left in, a
//! one-shot boot of the SSD through the EEPROM's `[tryboot]` order, `verify
//! --commit` setting the permanent order, the next normal boot on the SSD
//! with the card still in; there the check after the move passes, then
//! finds a kernel update that missed the boot partition; a bootloader
//! update that resets BOOT_ORDER and a clone of the new drive make the
//! stale SD card boot, whose check and login message say so, and
//! `rollback` there.
//!
//! `pi5-nvme-trial`: a full move to an NVMe drive on a Pi 5 without a HAT+
//! (PCIE_PROBE=1 flashed at once), the trial through `set_reboot_order`;
//! the trial commits (the permanent order flashed), and a normal boot comes
//! up on the NVMe drive with the card still in, where `rollback` flashes
//! the EEPROM's own settings back. (Trials that fail are the unattended
//! failure matrix's, [`super::unattended`].)

use super::{Lane, Scenario};
use crate::firmware::eeprom::BootConf;
use crate::firmware::model::Model;
use crate::host::fat;
use crate::host::mbr;
use crate::machine::pimigrate_bin::{self, JOURNAL_FACTS};
use crate::machine::probe::{expect_fact, facts, PROBE};
use crate::machine::rig::{fact, Rig, Setup};
use crate::{After, Boot, Bus, Ending, ImageSet, Pi};
use anyhow::{ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// Runs a command as on the Pi the stand-in plays.
const TB: &str = "tb=\"$TESTBED/pi/bin/tb-as-pi\"";

/// What the trial's reboot runs once the job is done: pimigrate starts
/// the trial itself (a Pi 5's one-shot order first) and notes it.
const START_TRIAL: &str = "\"$TESTBED/pi/bin/tb-as-pi\" pimigrate migrate --resume --reboot";

/// Files the bootloader's update leaves on the SD card's boot partition:
/// rpi-eeprom-update's staged image and its digest, recovery.bin renamed
/// once it ran.
const UPDATE_FILES: [&str; 4] = [
    "pieeprom.upd",
    "pieeprom.sig",
    "recovery.bin",
    "RECOVERY.000",
];

/// The full migration with `--boot-order apply`, run through tb-as-pi.
fn migrate_args() -> &'static str {
    "--layout full --table mbr --boot-order apply"
}

/// The owner's own `usb-storage.quirks=` on the SD card's command line
/// (a bridge not attached), which the migration's quirk is merged into.
const OWNERS_QUIRK: &str = "usb-storage.quirks=0bda:9201:u";

/// The rule the migration writes for QEMU's usb-storage bridge, 46f4:0001.
const QEMU_BOT_RULE: &str = "/etc/udev/rules.d/60-pimigrate-trim-46f4-0001.rules";

/// What the harness writes into the SSD's new root from the SD card's
/// system before the trial, then deletes: the blocks the trial's trim
/// must give back to the host's sparse image.
const FILL_MIB: u64 = 384;

/// A job snippet: the function `disk_of SERIAL`, the disk with that serial.
const DISK_OF: &str = r#"disk_of() { echo "/dev/$(lsblk -dno NAME,SERIAL | awk -v s="$1" '$2 == s { print $1 }')"; }
"#;

/// Bytes a sparse image really takes on the host's disk.
fn allocated(image: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(image)
        .with_context(|| format!("no {}", image.display()))?
        .blocks()
        * 512)
}

/// A JSON document a job left in the share's `out/`.
fn out_json(pi: &Pi, name: &str) -> Result<serde_json::Value> {
    let path = pi.share().dir.join("out").join(name);
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: {text}", path.display()))
}

/// The trim verify made with the commit: its bytes, which must be at
/// least `at_least`.
fn trimmed(verify: &serde_json::Value, at_least: u64) -> Result<u64> {
    let trim = &verify["after_move"]["trim"];
    ensure!(
        trim["trimmed"]["outcome"] == "trimmed",
        "verify --commit did not trim the new root: {trim:#}"
    );
    let bytes = trim["trimmed"]["bytes"].as_u64().unwrap_or(0);
    ensure!(
        bytes >= at_least,
        "verify trimmed {bytes} bytes, less than {at_least}: {trim:#}"
    );
    Ok(bytes)
}

/// A job snippet: `verify ARGS --json` into `out/verify.json` and its
/// exit status as `verify_status`.
fn verify(args: &str) -> String {
    format!(
        "set +e\n\"$tb\" pimigrate verify {args} --no-bench --json > \"$TESTBED/out/verify.json\"\n\
         echo \"verify_status=$?\"\nset -e\n"
    )
}

/// The `verify.json` the last job left.
fn verify_json(pi: &Pi) -> Result<serde_json::Value> {
    let path = pi.share().dir.join("out/verify.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: {text}", path.display()))
}

/// The check `code` of a verify document, which must have passed.
fn passed(verify: &serde_json::Value, code: &str) -> Result<String> {
    let check = verify["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["code"] == code))
        .with_context(|| format!("verify made no {code} check: {verify:#}"))?;
    ensure!(
        check["pass"] == true,
        "verify's {code} check failed: {check:#}"
    );
    Ok(check["message"].as_str().unwrap_or_default().to_string())
}

/// Which disk and config file the firmware stand-in booted.
fn booted(boot: &Boot, disk: &str, config: &str) -> Result<()> {
    ensure!(
        boot.spec.disk == disk && boot.spec.config_file == config,
        "boot {} came from {} ({}), not {disk} ({config}); see {}",
        boot.number,
        boot.spec.disk,
        boot.spec.config_file,
        boot.record.serial_log.display()
    );
    Ok(())
}

/// A boot partition's files, names and bytes.
/// A boot partition's files: names and bytes.
type BootFiles = BTreeMap<String, Vec<u8>>;

fn boot_files(image: &Path, scratch: &Path) -> Result<BootFiles> {
    let part = mbr::partition_of(image, 1)?;
    fat::snapshot(image, &part, scratch)
}

/// The bootloader's BOOT_ORDER for a normal boot and a trial, as the
/// stand-in reads its config.
fn orders(pi: &Pi) -> Result<(String, String)> {
    let bootloader = pi.bootloader().context("the Pi has no EEPROM bootloader")?;
    let conf = BootConf::parse(bootloader.config());
    let board = bootloader.board();
    Ok((
        format!("{:#x}", conf.boot_order(board, false)?.0),
        format!("{:#x}", conf.boot_order(board, true)?.0),
    ))
}

/// The scenario `pi4-full-trial`, in [`super::all`]'s order.
pub const PI4_FULL_TRIAL: Scenario = Scenario {
    name: "pi4-full-trial",
    lane: Lane::Shared,
    run: pi4,
    about: r#"the full move on a Pi 4: the x86 guest plays a Pi 4 whose bootloader is the 2026-05-17 release with its own config (no BOOT_ORDER: SD, then USB), with Raspberry Pi OS's tools (`Pi::raspberry_pi_os_tools`), every pimigrate command through `tb-as-pi`. Its SSD is on QEMU's `usb-storage` (Bulk-Only, VID:PID 46f4:0001) with `discard=unmap` on the drive, so TRIM is off in the guest as on a Pi and a trim that reaches the disk punches holes in the host's sparse image; beside it two blank 8 GiB disks: `usb-bot` with `scsi-hd,scsi_version=2` (no VPD pages: a bridge whose UNMAP nobody can learn of) and QEMU's `usb-uas` (which offers no Bulk-Only setting). The SD card's `cmdline.txt` carries an owner's `usb-storage.quirks=0bda:9201:u`. Boot 1: `plan --json` for the SCSI-2 disk says TRIM cannot be switched on (`vpd-not-read`, `before-spc2`) and writes no rule; a uas reset is written to `/dev/kmsg` as the kernel would log it for the usb-uas disk's SCSI host, and its plan offers the usb-storage quirk from that log but refuses it (no Bulk-Only setting), and `--usb-quirk` is refused (`usb-quirk-unavailable`); then `migrate --layout full --table mbr --boot-order apply --usb-quirk` to the SSD, whose plan switches TRIM on with a udev rule for 46f4:0001 (its VPD pages asked through SG_IO) and merges the quirk into the owner's (`usb-storage.quirks=0bda:9201:u,46f4:0001:u`); `fstrim.timer`, which the image masks, is unmasked and disabled first, and the migration enables it on the new root; the journal keeps the old config; the real rpi-eeprom-update staged `pieeprom.upd`, `pieeprom.sig` and `recovery.bin` on the SD card, whose `cmdline.txt` is unchanged; the SSD has `tryboot.txt` ending `cmdline=cmdline.pimigrate.txt` and that command line with the SSD's root and `panic=10`; its `cmdline.txt` has no `panic=`; then `migrate --resume --reboot` (`After::Then`) reboots plainly, as the update waits. Boot 2 from the SD card: recovery.bin wrote the config (`RECOVERY.000`; BOOT_ORDER `0xf41`, `[tryboot]` `0xf14`; `vcgencmd bootloader_config` in the guest shows it); `verify` exits 4 naming `migrate --resume --reboot`, which reboots with `"0 tryboot"`; before that the job mounts the SSD's new root and writes and deletes a 384 MiB file there. Boot 3, the trial: the stand-in starts the SSD's `tryboot.txt`; `/proc/cmdline` has the merged quirk, the rule is on the root and the disk's `discard_max_bytes` is 1 GiB; `verify --commit` reports `fstrim.timer` enabled, names `usb-storage` as the driver, trims the new root once (at least the 384 MiB), and from the host the SSD image's allocated blocks dropped across the trial by at least half the file; it passes `boot-mode` (USB), `bootloader-config`, `trial-boot`, `ids-unique`, stages the permanent order on the SD card (mounted for it) and removes the SSD's trial files. Boot 4: recovery.bin writes `BOOT_ORDER=0xf14`; the SSD boots normally with the card in, `verify` passes, and the check after the move (`status --check`, through `tb-as-pi` as on a Pi) exits 0. Then the drifts owners report: a kernel update written while the boot partition was not mounted (`umount /boot/firmware`, a `kernel8.img` into the directory, mount it again): `status --check` exits 2 with `boot-shadowed` alone, naming the file, and `status --login` (what pam_motd runs) says it with its fix; a bootloader update that resets BOOT_ORDER: the system's `rpi-eeprom-config --apply` stages the release config on the SD card's boot partition. The host plugs in a clone of the new drive (a 64 MiB stick with the SSD's MBR). Boot 5: recovery.bin writes the release config (BOOT_ORDER `0xf41`), so the stale SD card boots, silently as owners report it; it knows of the commit by the record `verify --commit` left on its root: `status --check` exits 2 with `booted-from` (the SD card's root, the system the move left behind), `boot-order` (`0xf41`) and `ids-unique` (the clone), and the login message names all three; `rollback --yes` there finds the bootloader's settings as they were before the migration; the card's boot partition is as before but for the update files (`pieeprom.upd`, `pieeprom.sig`, `RECOVERY.000`)"#,
};

pub fn pi4(images: &ImageSet) -> Result<()> {
    let Rig {
        mut pi,
        sd,
        sd_boot,
    } = Setup::new("pi4-full-trial", &images.bookworm)
        .blank("ssd", Bus::UsbStorage, 8 << 30, "usb-ssd")
        .passing_discards()
        .blank("nounmap", Bus::UsbStorage, 8 << 30, "usb-ssd")
        .scsi_version(2)
        .blank("uas", Bus::UsbUas, 8 << 30, "usb-ssd")
        .build()?;
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    let owned = format!("{} {OWNERS_QUIRK}\n", cmdline.trim_end());
    fat::write(&sd, &sd_boot, "cmdline.txt", &owned)?;
    pi.raspberry_pi_os_tools()?;
    // A Pi 4 with its bootloader as released: its config names no
    // BOOT_ORDER, so the default, SD card then USB, applies.
    let released =
        crate::firmware::bootloader::Bootloader::release(crate::firmware::eeprom::Board::Pi4)?
            .config()
            .to_string();
    pi.bootloader_mut()?.set_config(&released);
    ensure!(orders(&pi)? == ("0xf41".into(), "0xf41".into()));
    let ssd = pi.disk("ssd")?.image.clone();
    let scratch = pi.work.join("fat-snapshot");
    let pristine = boot_files(&sd, &scratch)?;

    let root_partuuid = pi4_migrate(&mut pi, &sd, &ssd, &scratch, &pristine)?;
    pi4_start_the_trial(&mut pi, &sd, &scratch)?;
    let before_trial = allocated(&ssd)?;
    pi4_commit(&mut pi, &sd, &ssd, &scratch, &root_partuuid)?;
    let after_trial = allocated(&ssd)?;
    ensure!(
        before_trial.saturating_sub(after_trial) >= (FILL_MIB / 2) << 20,
        "the trial's trim did not reach the SSD's image: {before_trial} bytes allocated before the trial, \
         {after_trial} after"
    );
    pi4_on_the_ssd_drift(&mut pi, &sd, &scratch, &released)?;
    plug_in_a_clone(&mut pi)?;
    pi4_stale_card_rolls_back(&mut pi, &sd, &scratch, &pristine, &released)
}

/// Boot 1: the migration stages the `[tryboot]` order on the SD card; the Pi
/// 4 must reboot once for recovery.bin to write it. Returns the plan's root
/// PARTUUID.
fn pi4_migrate(
    pi: &mut Pi,
    sd: &Path,
    ssd: &Path,
    scratch: &Path,
    pristine: &BootFiles,
) -> Result<String> {
    pi.share().set_then(START_TRIAL)?;
    // The image masks fstrim.timer to keep the scenarios' boots quiet.
    // Unmasked and disabled here (as an owner who never had TRIM may have
    // it), so it is the migration's to enable on the new root: the path
    // that writes, where an enabled timer would only be copied.
    let job = format!(
        "{}systemctl unmask fstrim.timer\nsystemctl disable fstrim.timer\n{}",
        plans_of_the_other_disks(),
        migrate_job("TB-SSD", "--usb-quirk")
    );
    let boot = pi.run(&job, After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    the_other_disks_plans(pi, &f)?;
    expect_fact(&f, "trim_verdict", "switch-on")?;
    expect_fact(&f, "trim_rule", QEMU_BOT_RULE)?;
    expect_fact(
        &f,
        "trim_timer_link",
        "etc/systemd/system/timers.target.wants/fstrim.timer",
    )?;
    expect_fact(&f, "usb_quirk", &format!("{OWNERS_QUIRK},46f4:0001:u"))?;
    ensure!(
        boot.record.ending == Ending::Reboot,
        "--reboot should reboot plainly while the bootloader's update waits: {:?}; see {}",
        boot.record.ending,
        pi.share().dir.join("out/then.log").display()
    );
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    expect_fact(&f, "bootloader_saved", "true")?;
    let sd_now = boot_files(sd, scratch)?;
    for file in ["pieeprom.upd", "pieeprom.sig", "recovery.bin"] {
        ensure!(
            sd_now.contains_key(file),
            "rpi-eeprom-update staged no {file} on the SD card: {:?}",
            sd_now.keys()
        );
    }
    ensure!(
        sd_now.get("cmdline.txt") == pristine.get("cmdline.txt"),
        "a full move changed the SD card's cmdline.txt"
    );
    trial_files_on(ssd, scratch, &root_partuuid, true)?;
    ensure!(
        orders(pi)?.1 == "0xf41",
        "the update was written before its reboot"
    );
    Ok(root_partuuid)
}

/// Boot 2: recovery.bin has written the staged order; the SD card boots
/// as before. verify says the trial is to be started; pimigrate starts it.
fn pi4_start_the_trial(pi: &mut Pi, sd: &Path, scratch: &Path) -> Result<()> {
    pi.share().set_then(START_TRIAL)?;
    let job = format!(
        "{TB}\n{PROBE}{}\"$tb\" vcgencmd bootloader_config > \"$TESTBED/out/bootconf.txt\"\n{}",
        verify(""),
        fill_the_new_root()
    );
    let boot = pi.run(&job, After::Then)?;
    booted(&boot, "sd", "config.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    expect_fact(&f, "verify_status", "4")?;
    let v = verify_json(pi)?;
    ensure!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("migrate --resume --reboot")),
        "verify before the trial should say how to start it: {v:#}"
    );
    ensure!(orders(pi)? == ("0xf41".into(), "0xf14".into()));
    let bootconf = std::fs::read_to_string(pi.share().dir.join("out/bootconf.txt"))?;
    ensure!(
        bootconf.contains("[tryboot]") && bootconf.contains("BOOT_ORDER=0xf14"),
        "vcgencmd bootloader_config in the guest: {bootconf}"
    );
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate should have rebooted into the trial: {:?}",
        boot.record.ending
    );
    let sd_now = boot_files(sd, scratch)?;
    ensure!(
        sd_now.contains_key("RECOVERY.000") && !sd_now.contains_key("recovery.bin"),
        "recovery.bin did not rename itself: {:?}",
        sd_now.keys()
    );
    Ok(())
}

/// Boot 3: the trial, on the SSD; verify --commit stages the permanent
/// order on the SD card and removes the trial's files.
fn pi4_commit(
    pi: &mut Pi,
    sd: &Path,
    ssd: &Path,
    scratch: &Path,
    root_partuuid: &str,
) -> Result<()> {
    let job = format!("{TB}\n{PROBE}{TRIM_FACTS}{}", verify("--commit"));
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "ssd", "tryboot.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    let target = boot_target(&f)?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    expect_fact(&f, "boot_firmware", &format!("{target}1"))?;
    expect_fact(&f, "quirks_arg", &format!("{OWNERS_QUIRK},46f4:0001:u"))?;
    expect_fact(&f, "rule_present", "yes")?;
    expect_fact(&f, "discard_max", &(1u64 << 30).to_string())?;
    let v = verify_json(pi)?;
    let driver = &v["after_move"]["driver"];
    ensure!(
        driver["driver"] == "usb-storage" && driver["quirk_in_effect"] == true,
        "verify's driver line: {driver:#}"
    );
    ensure!(
        v["after_move"]["trim"]["rule"]["present"] == true
            && v["after_move"]["trim"]["fstrim_timer"]["state"] == "enabled",
        "verify's TRIM report: {:#}",
        v["after_move"]["trim"]
    );
    trimmed(&v, FILL_MIB << 20)?;
    let mode = passed(&v, "boot-mode")?;
    ensure!(mode.contains("from USB"), "{mode}");
    passed(&v, "bootloader-config")?;
    passed(&v, "trial-boot")?;
    passed(&v, "ids-unique")?;
    let actions = v["actions"].to_string();
    ensure!(
        actions.contains("staged on the SD card's boot partition"),
        "the commit's actions: {actions}"
    );
    trial_files_on(ssd, scratch, root_partuuid, false)?;
    ensure!(boot_files(sd, scratch)?.contains_key("recovery.bin"));
    Ok(())
}

/// A job snippet defining `check NAME`: the check after the move
/// (`status --check --json` into `out/check-NAME.json`, its exit status
/// as `check_NAME`) and the login message as pam_motd has it run
/// (`status --login` into `out/login-NAME.txt`), both through tb-as-pi.
const CHECK: &str = r#"
check() {
    set +e
    "$tb" pimigrate status --check --json > "$TESTBED/out/check-$1.json"
    echo "check_$1=$?"
    "$tb" pimigrate status --login > "$TESTBED/out/login-$1.txt"
    set -e
}
"#;

/// What `check NAME` left: its exit status (a fact), its document's
/// failures, the document and the login message.
struct Checked {
    failures: Vec<String>,
    report: serde_json::Value,
    login: String,
}

fn checked(pi: &Pi, f: &BTreeMap<String, String>, name: &str, code: &str) -> Result<Checked> {
    expect_fact(f, &format!("check_{name}"), code)?;
    let out = pi.share().dir.join("out");
    let path = out.join(format!("check-{name}.json"));
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    let report: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: {text}", path.display()))?;
    let failures = report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["level"] == "failure")
        .filter_map(|c| c["code"].as_str().map(str::to_string))
        .collect();
    let login = std::fs::read_to_string(out.join(format!("login-{name}.txt")))?;
    Ok(Checked {
        failures,
        report,
        login,
    })
}

/// The message of the finding `code` in a check's document.
fn finding(report: &serde_json::Value, code: &str) -> String {
    report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["code"] == code)
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Boot 4: recovery.bin writes BOOT_ORDER=0xf14; the SSD boots with the SD
/// card still in, and verify passes. The check after the move finds
/// nothing; then what owners report happens to it: a kernel update written
/// while the boot partition was not mounted (the check fails naming it,
/// and so does the login message), and a bootloader update that resets
/// BOOT_ORDER to the release config, staged on the SD card's boot partition
/// for recovery.bin, as the system's rpi-eeprom-config --apply stages it.
fn pi4_on_the_ssd_drift(pi: &mut Pi, sd: &Path, scratch: &Path, released: &str) -> Result<()> {
    std::fs::write(pi.share().dir.join("bootconf-release.txt"), released)?;
    let job = format!(
        "{TB}\n{PROBE}{DISK_OF}echo \"ssd=$(disk_of TB-SSD)\"\n{}{CHECK}check committed\n{}",
        verify(""),
        r#"# A kernel update written while the boot partition was not mounted.
umount /boot/firmware
echo 'a kernel the firmware never reads' > /boot/firmware/kernel8.img
mount /boot/firmware
check kernel
# A bootloader update that resets BOOT_ORDER: the release config, staged
# where the boot ROM runs recovery.bin.
mkdir -p /run/tb-sd-boot
mount /dev/mmcblk0p1 /run/tb-sd-boot
BOOTFS=/run/tb-sd-boot "$tb" rpi-eeprom-config --apply "$TESTBED/bootconf-release.txt" > "$TESTBED/out/eeprom-update.txt" 2>&1
sync
umount /run/tb-sd-boot
"#
    );
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "ssd", "config.txt")?;
    ensure!(
        orders(pi)?.0 == "0xf14",
        "the permanent order is {:?}",
        orders(pi)?
    );
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    // By its serial: with three USB disks the kernel's letters change
    // from boot to boot.
    expect_fact(&f, "root", &format!("{}2", fact(&f, "ssd")?))?;
    passed(&verify_json(pi)?, "bootloader-config")?;
    let committed = checked(pi, &f, "committed", "0")?;
    ensure!(
        committed.report["result"] == "ok",
        "the check after the commit: {:#}",
        committed.report
    );
    let kernel = checked(pi, &f, "kernel", "2")?;
    ensure!(
        kernel.failures == ["boot-shadowed"]
            && finding(&kernel.report, "boot-shadowed").contains("kernel8.img"),
        "the check after a kernel update under the mount point: {:#}",
        kernel.report
    );
    ensure!(
        kernel
            .login
            .contains("pimigrate: ✗ a file hides under /boot/firmware's mount point")
            && kernel
                .login
                .contains("pimigrate:   fix: with /boot/firmware mounted"),
        "the login message after the kernel update: {}",
        kernel.login
    );
    let update = std::fs::read_to_string(pi.share().dir.join("out/eeprom-update.txt"))?;
    ensure!(
        update.contains("EEPROM updates pending"),
        "rpi-eeprom-config --apply: {update}"
    );
    let sd_now = boot_files(sd, scratch)?;
    ensure!(
        sd_now.contains_key("pieeprom.upd") && sd_now.contains_key("recovery.bin"),
        "the update was not staged on the SD card: {:?}",
        sd_now.keys()
    );
    Ok(())
}

/// A clone of the new drive plugged in: a 64 MiB stick with its partition
/// table (its disk id, so its PARTUUIDs).
fn plug_in_a_clone(pi: &mut Pi) -> Result<()> {
    pi.attach_blank("clone", Bus::UsbStorage, 64 << 20, "usb-flash")?;
    let ssd = pi.disk("ssd")?.image.clone();
    mbr::copy_table(&ssd, &pi.disk("clone")?.image)
}

/// Boot 5: recovery.bin writes the release config, whose boot order tries
/// the SD card first: the card's old system boots, with a clone of the new
/// drive plugged in. Its check and its login message name all three (it
/// knows of the commit by the record the commit left on its root). Then
/// `rollback --yes` there: the bootloader's settings are those from
/// before the migration already, and the card's boot partition is as
/// before but for the update files.
fn pi4_stale_card_rolls_back(
    pi: &mut Pi,
    sd: &Path,
    scratch: &Path,
    pristine: &BootFiles,
    released: &str,
) -> Result<()> {
    let job = format!(
        "{TB}\n{PROBE}{CHECK}check stale\n\
         \"$tb\" vcgencmd bootloader_config > \"$TESTBED/out/bootconf.txt\"\n\
         \"$tb\" pimigrate rollback --yes > \"$TESTBED/out/rollback.txt\"\n"
    );
    let boot = pi.run(&job, After::PowerOff)?;
    booted(&boot, "sd", "config.txt")?;
    ensure!(
        orders(pi)?.0 == "0xf41",
        "the update's boot order: {:?}",
        orders(pi)?
    );
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "root", "/dev/mmcblk0p2")?;
    let stale = checked(pi, &f, "stale", "2")?;
    ensure!(
        stale.failures == ["booted-from", "boot-order", "ids-unique"],
        "the check on the SD card's system: {:#}",
        stale.report
    );
    ensure!(
        finding(&stale.report, "booted-from")
            .contains("the SD card's root, the system the move left behind")
            && finding(&stale.report, "boot-order").starts_with("BOOT_ORDER is 0xf41"),
        "{:#}",
        stale.report
    );
    for said in [
        "pimigrate: ✗ this boot runs / from /dev/mmcblk0p2, the SD card's root",
        "pimigrate: ✗ BOOT_ORDER is 0xf41",
        "pimigrate: ✗ duplicate ids",
    ] {
        ensure!(
            stale.login.contains(said),
            "the login message on the SD card's system lacks {said:?}: {}",
            stale.login
        );
    }
    let rollback = std::fs::read_to_string(pi.share().dir.join("out/rollback.txt"))?;
    ensure!(
        rollback.contains("as they were before the migration"),
        "rollback said: {rollback}"
    );
    let bootconf = std::fs::read_to_string(pi.share().dir.join("out/bootconf.txt"))?;
    ensure!(
        BootConf::parse(&bootconf) == BootConf::parse(released),
        "the bootloader's config after the update:\n{bootconf}\nbefore the migration:\n{released}"
    );
    // The SD card's boot partition: as before, but for what the
    // bootloader's updates leave there.
    let mut now = boot_files(sd, scratch)?;
    now.retain(|name, _| !UPDATE_FILES.contains(&name.as_str()));
    let diff = fat::snapshot_diff(pristine, &now);
    ensure!(
        diff.is_empty(),
        "the SD card's boot partition changed beyond the bootloader's update files: {diff:?}"
    );
    Ok(())
}

/// The migration job: through tb-as-pi, then the facts the scenario needs
/// (the plan's TRIM verdict, its rule and the quirk's argument, from the
/// journal).
fn migrate_job(serial: &str, extra: &str) -> String {
    format!(
        "{}\n{TB}\n\"$tb\" pimigrate migrate --target \"$target\" --yes {} {extra}\n{JOURNAL_FACTS}\n\
         echo \"bootloader_saved=$(jq -r '.bootloader_before != null' \"$journal\")\"\n\
         echo \"trim_verdict=$(jq -r .plan.after_move.trim.decision.verdict \"$journal\")\"\n\
         echo \"trim_rule=$(jq -r '.plan.after_move.trim.rule.path // \"none\"' \"$journal\")\"\n\
         echo \"usb_quirk=$(jq -r '.plan.after_move.usb_quirk.argument // \"none\"' \"$journal\")\"\n\
         echo \"trim_timer_link=$(jq -r '.plan.after_move.trim.timer_link.link // \"none\"' \"$journal\")\"\n",
        pimigrate_bin::find_disk(serial),
        migrate_args()
    )
}

/// Boot 1's plans of the two disks that are not migrated to: the SCSI-2
/// disk, whose bridge says nothing of UNMAP, and the usb-uas disk after a
/// uas reset written to the kernel log as the kernel logs one (with
/// `--usb-quirk` too, which must be refused).
fn plans_of_the_other_disks() -> String {
    format!(
        r#"{TB}
{DISK_OF}nounmap=$(disk_of TB-NOUNMAP)
uas=$(disk_of TB-UAS)
[ -b "$nounmap" ] && [ -b "$uas" ] || {{ lsblk -o NAME,SERIAL,TRAN; exit 1; }}
set +e
"$tb" pimigrate plan --target "$nounmap" {args} --json > "$TESTBED/out/plan-nounmap.json"
echo "plan_nounmap_status=$?"
host=$(readlink -f "/sys/block/${{uas#/dev/}}/device" | tr / '\n' | grep -E '^host[0-9]+$')
echo "uas_host=$host"
echo "<4>scsi $host: uas_eh_device_reset_handler start" > /dev/kmsg
"$tb" pimigrate plan --target "$uas" {args} --json > "$TESTBED/out/plan-uas.json"
echo "plan_uas_status=$?"
"$tb" pimigrate plan --target "$uas" {args} --usb-quirk --json > "$TESTBED/out/plan-uas-quirk.json"
echo "plan_uas_quirk_status=$?"
set -e
"#,
        args = migrate_args()
    )
}

/// What those plans must say: no rule for a bridge nobody can ask; the
/// quirk offered from the kernel log for the uas disk, but refused, as
/// QEMU's usb-uas offers no Bulk-Only setting.
fn the_other_disks_plans(pi: &Pi, f: &BTreeMap<String, String>) -> Result<()> {
    expect_fact(f, "plan_nounmap_status", "0")?;
    let nounmap = out_json(pi, "plan-nounmap.json")?;
    let trim = &nounmap["after_move"]["trim"];
    ensure!(
        trim["decision"]["verdict"] == "cannot"
            && trim["decision"]["why"]["why"]["reason"] == "before-spc2"
            && trim["rule"].is_null(),
        "the SCSI-2 disk's TRIM: {trim:#}"
    );
    expect_fact(f, "plan_uas_status", "0")?;
    let uas = out_json(pi, "plan-uas.json")?;
    let quirk = &uas["after_move"]["usb_quirk"];
    ensure!(
        quirk["driver"] == "uas"
            && quirk["offered"] == true
            && quirk["evidence"].to_string().contains("1 uas reset")
            && quirk["refused"]
                .as_str()
                .is_some_and(|r| r.contains("no Bulk-Only setting"))
            && quirk["argument"].is_null(),
        "the usb-uas disk's quirk: {quirk:#}"
    );
    expect_fact(f, "plan_uas_quirk_status", "3")?;
    let refused = out_json(pi, "plan-uas-quirk.json")?;
    ensure!(
        refused["reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["code"] == "usb-quirk-unavailable")),
        "--usb-quirk for the usb-uas disk: {refused:#}"
    );
    Ok(())
}

/// Boot 2's last step: the SD card's system writes a file into the SSD's
/// new root and deletes it, so its blocks are free there but held in the
/// host's image until a trim gives them back.
fn fill_the_new_root() -> String {
    format!(
        r#"{DISK_OF}ssd=$(disk_of TB-SSD)
mkdir -p /mnt/newroot
mount "${{ssd}}2" /mnt/newroot
yes pimigrate-trim | head -c {FILL_MIB}M > /mnt/newroot/var/tmp/pimigrate-fill
sync
rm /mnt/newroot/var/tmp/pimigrate-fill
sync
umount /mnt/newroot
"#
    )
}

/// The trial's own view: the quirk on its command line, the rule on its
/// root, the limit the rule set on its disk.
const TRIM_FACTS: &str = r#"udevadm settle
echo "quirks_arg=$(tr ' ' '\n' < /proc/cmdline | grep '^usb-storage.quirks=' || echo none)"
echo "rule_present=$(test -f /etc/udev/rules.d/60-pimigrate-trim-46f4-0001.rules && echo yes || echo no)"
rootdisk=$(lsblk -no PKNAME "$(findmnt -no SOURCE /)")
echo "discard_max=$(cat "/sys/block/$rootdisk/queue/discard_max_bytes")"
"#;

/// The disk (`/dev/sda`, `/dev/nvme0n1p`) whose partitions root and boot are.
fn boot_target(f: &BTreeMap<String, String>) -> Result<String> {
    let root = fact(f, "root")?;
    Ok(root
        .strip_suffix('2')
        .with_context(|| format!("root {root} is not a partition 2"))?
        .to_string())
}

/// The new drive's trial files: tryboot.txt pointing at the trial's
/// command line, which starts the new root with panic=; gone after the
/// commit.
fn trial_files_on(image: &Path, scratch: &Path, root_partuuid: &str, present: bool) -> Result<()> {
    let files = boot_files(image, scratch)?;
    let text = |name: &str| {
        files
            .get(name)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    };
    if !present {
        ensure!(
            text("tryboot.txt").is_none() && text("cmdline.pimigrate.txt").is_none(),
            "the commit left the trial's files on the new drive: {:?}",
            files.keys()
        );
        return Ok(());
    }
    let tryboot = text("tryboot.txt").context("the new drive has no tryboot.txt")?;
    ensure!(
        tryboot
            .trim_end()
            .ends_with("cmdline=cmdline.pimigrate.txt"),
        "tryboot.txt: {tryboot}"
    );
    let cmdline =
        text("cmdline.pimigrate.txt").context("the new drive has no cmdline.pimigrate.txt")?;
    ensure!(
        cmdline.contains(&format!("root=PARTUUID={root_partuuid} "))
            && cmdline.contains("panic=10"),
        "the trial's command line: {cmdline}"
    );
    let normal = text("cmdline.txt").context("the new drive has no cmdline.txt")?;
    ensure!(
        !normal.contains("panic="),
        "the new drive's cmdline.txt: {normal}"
    );
    Ok(())
}

/// The scenario `pi5-nvme-trial`, in [`super::all`]'s order.
pub const PI5_NVME_TRIAL: Scenario = Scenario {
    name: "pi5-nvme-trial",
    lane: Lane::Shared,
    run: pi5,
    about: r#"the full move on a Pi 5: the x86 guest plays a Pi 5 (`Pi::play(Model::Pi5)`, the 2026-05-26 release, BOOT_ORDER `0xf461`, no HAT+) with Raspberry Pi OS's tools, a blank NVMe drive (`discard=unmap` on its drive). Boot 1: `migrate --layout full --table mbr --boot-order apply`, whose plan finds TRIM on already (NVMe: no rule, no quirk): `PCIE_PROBE=1` flashed at once (flashrom), nothing staged on the SD card; `migrate --resume --reboot` sets the one-shot order `0xf16` and reboots with `"0 tryboot"`. Boot 2, the trial, on NVMe: `verify --commit` names `nvme` as the driver, trims the new root once and reports the bytes, passes `boot-mode` (NVMe) and `bootloader-config` and flashes `BOOT_ORDER=0xf416` (rpi-eeprom-update's files on the SD card, mounted for it); boot 3, a normal boot, comes up on NVMe with the card in, `verify` passes, and `rollback --yes` flashes the settings the migration changed back (compared with the EEPROM read back with flashrom): the bootloader's config is the release one again, and the NVMe drive's boot partition never held an update file (trials that fail: [the failure matrix](#unattended))"#,
};

pub fn pi5(images: &ImageSet) -> Result<()> {
    let Rig { mut pi, sd, .. } = Setup::new("pi5-nvme-trial", &images.bookworm)
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .passing_discards()
        .build()?;
    pi.play(Model::Pi5)?;
    pi.raspberry_pi_os_tools()?;
    let released = pi
        .bootloader()
        .context("a Pi 5 has its bootloader")?
        .config()
        .to_string();
    let nvme = pi.disk("nvme")?.image.clone();
    let scratch = pi.work.join("fat-snapshot");
    ensure!(
        orders(&pi)?.0 == "0xf461",
        "a Pi 5 as released: {:?}",
        orders(&pi)?
    );

    let root_partuuid = pi5_migrate(&mut pi, &sd, &nvme, &scratch)?;
    let target = pi5_commit(&mut pi, &nvme, &scratch, &root_partuuid)?;
    pi5_on_the_nvme_drive_roll_back(&mut pi, &nvme, &scratch, &target, &released)
}

/// Boot 1: PCIE_PROBE=1 is flashed at once; pimigrate sets the one-shot
/// order 0xf16 and reboots into the trial. Returns the plan's root
/// PARTUUID.
fn pi5_migrate(pi: &mut Pi, sd: &Path, nvme: &Path, scratch: &Path) -> Result<String> {
    pi.share().set_then(START_TRIAL)?;
    let boot = pi.run(&migrate_job("TB-NVME", ""), After::Then)?;
    let f = facts(&boot.job_ok()?.stdout);
    // NVMe takes discards by itself: the same check, no rule.
    expect_fact(&f, "trim_verdict", "already-on")?;
    expect_fact(&f, "trim_rule", "none")?;
    expect_fact(&f, "usb_quirk", "none")?;
    ensure!(
        boot.record.ending == Ending::TrybootReboot,
        "pimigrate should have rebooted into the trial: {:?}; see {}",
        boot.record.ending,
        pi.share().dir.join("out/then.log").display()
    );
    let root_partuuid = fact(&f, "plan_root_partuuid")?;
    let bootloader = pi.bootloader().context("a Pi 5 has its bootloader")?;
    ensure!(
        BootConf::parse(bootloader.config()).value("PCIE_PROBE", bootloader.board(), false)
            == Some("1"),
        "PCIE_PROBE=1 was not flashed during the migration: {}",
        bootloader.config()
    );
    ensure!(
        orders(pi)?.0 == "0xf461",
        "the migration changed BOOT_ORDER"
    );
    let sd_files = boot_files(sd, scratch)?;
    ensure!(
        !sd_files.contains_key("recovery.bin") && !sd_files.contains_key("pieeprom.upd"),
        "a Pi 5's update is flashed at once, nothing is staged: {:?}",
        sd_files.keys()
    );
    trial_files_on(nvme, scratch, &root_partuuid, true)?;
    Ok(root_partuuid)
}

/// Boot 2: the trial comes up on the NVMe drive (PCIE_PROBE, the one-shot
/// order); verify --commit flashes the permanent order. (A trial that fails
/// is the unattended matrix's: `super::unattended`.) Returns the disk whose
/// partitions root and boot are.
fn pi5_commit(pi: &mut Pi, nvme: &Path, scratch: &Path, root_partuuid: &str) -> Result<String> {
    let job = format!("{TB}\n{PROBE}{}", verify("--commit"));
    let boot = pi.run(&job, After::Reboot)?;
    booted(&boot, "nvme", "tryboot.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    let target = boot_target(&f)?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    let v = verify_json(pi)?;
    ensure!(
        v["after_move"]["driver"]["driver"] == "nvme",
        "verify's driver line: {:#}",
        v["after_move"]["driver"]
    );
    trimmed(&v, 1)?;
    let mode = passed(&v, "boot-mode")?;
    ensure!(mode.contains("from NVMe"), "{mode}");
    passed(&v, "bootloader-config")?;
    ensure!(
        orders(pi)?.0 == "0xf416",
        "the permanent order: {:?}",
        orders(pi)?
    );
    trial_files_on(nvme, scratch, root_partuuid, false)?;
    Ok(target)
}

/// Boot 3: a normal boot starts the NVMe drive with the SD card in; then
/// rollback flashes the settings the migration changed back (read back from
/// the EEPROM, not from the config this boot started with).
fn pi5_on_the_nvme_drive_roll_back(
    pi: &mut Pi,
    nvme: &Path,
    scratch: &Path,
    target: &str,
    released: &str,
) -> Result<()> {
    let job = format!(
        "{TB}\n{PROBE}{}\"$tb\" pimigrate rollback --yes > \"$TESTBED/out/rollback.txt\"\n",
        verify("")
    );
    let boot = pi.run(&job, After::PowerOff)?;
    booted(&boot, "nvme", "config.txt")?;
    let f = facts(&boot.job_ok()?.stdout);
    expect_fact(&f, "verify_status", "0")?;
    expect_fact(&f, "root", &format!("{target}2"))?;
    passed(&verify_json(pi)?, "bootloader-config")?;
    let rollback = std::fs::read_to_string(pi.share().dir.join("out/rollback.txt"))?;
    ensure!(
        rollback.contains("read back from its EEPROM"),
        "rollback said: {rollback}"
    );
    let bootloader = pi.bootloader().context("a Pi 5 has its bootloader")?;
    ensure!(
        BootConf::parse(bootloader.config()) == BootConf::parse(released),
        "the bootloader's config after rollback:\n{}\nbefore the migration:\n{released}",
        bootloader.config()
    );
    // rpi-eeprom-update's files went to the SD card, never to the NVMe
    // drive, and are gone once flashed.
    let nvme_files = boot_files(nvme, scratch)?;
    ensure!(
        UPDATE_FILES.iter().all(|f| !nvme_files.contains_key(*f)),
        "bootloader update files on the NVMe drive: {:?}",
        nvme_files.keys()
    );
    Ok(())
}
