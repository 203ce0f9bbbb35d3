//! A full move on Pis with the EEPROM bootloader, planned on copies of the
//! Pi 4 and Pi 5 fixture machines with what varies set per test: the
//! bootloader's date (device tree), its running config (a stand-in
//! `rpi-eeprom-config` on PATH printing it, as the real one prints it), a
//! pending update on the boot partition, `vcmailbox`. Checks the route the
//! trial takes, the config's diffs, the hand-over and the refusals.

use crate::common;

use common::*;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// What `rpi-eeprom-config` prints for the real Pi 4 image of 2026-05-17
/// (testbed/data/rpi-eeprom).
pub(crate) const PI4_CONFIG: &str =
    "[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\nPOWER_OFF_ON_HALT=0\nNET_INSTALL_AT_POWER_ON=1\n";
/// ... and for the Pi 5 image of 2026-05-26.
pub(crate) const PI5_CONFIG: &str =
    "[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\nNET_INSTALL_AT_POWER_ON=1\n";

/// The real bootloader images and the official tools.
fn rpi_eeprom() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testbed/data/rpi-eeprom")
}

pub(crate) const PI4_IMAGE: &str = "firmware-2711/pieeprom-2026-05-17.bin";
const PI5_IMAGE: &str = "firmware-2712/pieeprom-2026-05-26.bin";

/// `base` (in testbed/data/rpi-eeprom) with `config`, built by the
/// official tool into `out`, as rpi-eeprom-update stages it.
fn image_with(base: &str, config: &str, out: &std::path::Path) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bootconf.txt");
    std::fs::write(&conf, config).unwrap();
    let status = std::process::Command::new("python3")
        .arg(rpi_eeprom().join("rpi-eeprom-config"))
        .arg("--config")
        .arg(&conf)
        .arg("--out")
        .arg(out)
        .arg(rpi_eeprom().join(base))
        .status()
        .unwrap();
    assert!(status.success(), "the official rpi-eeprom-config");
}

/// 2026-05-17 and 2023-01-01, as `chosen/bootloader/build-timestamp`.
const NEW_BOOTLOADER: u32 = 1_778_976_000;
pub(crate) const OLD_BOOTLOADER: u32 = 1_672_531_200;

/// A fixture machine copied to a temporary directory, and a directory of
/// stand-in tools for PATH.
pub(crate) struct Machine {
    root: tempfile::TempDir,
    pub(crate) tools: tempfile::TempDir,
}

impl Machine {
    pub(crate) fn copy_of(name: &str) -> Machine {
        let root = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", fixture(name).display()))
            .arg(root.path())
            .status()
            .unwrap();
        assert!(status.success(), "copying the {name} fixture");
        Machine {
            root,
            tools: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn path(&self, inside: &str) -> PathBuf {
        self.root.path().join(inside.trim_start_matches('/'))
    }

    pub(crate) fn bootloader_built(self, when: u32) -> Machine {
        let file = self.path("proc/device-tree/chosen/bootloader/build-timestamp");
        std::fs::write(file, when.to_be_bytes()).unwrap();
        self
    }

    /// A stand-in `program` printing `output`.
    pub(crate) fn tool(self, program: &str, output: &str) -> Machine {
        let script = self.tools.path().join(program);
        std::fs::write(&script, format!("#!/bin/sh\ncat <<'EOF'\n{output}EOF\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        self
    }

    /// rpi-eeprom-config printing `config` as the config the bootloader
    /// started with; given an image, the official tool reads it.
    pub(crate) fn eeprom(self, config: &str) -> Machine {
        let script = self.tools.path().join("rpi-eeprom-config");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh
[ $# -gt 0 ] && exec python3 '{}' \"$@\"\ncat <<'EOF'\n{config}EOF\n",
                rpi_eeprom().join("rpi-eeprom-config").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        self
    }

    /// rpi-eeprom-update naming `image` (in testbed/data/rpi-eeprom) as
    /// its release channel's newest (`-l`).
    pub(crate) fn release(self, image: &str) -> Machine {
        let path = rpi_eeprom().join(image);
        self.tool("rpi-eeprom-update", &format!("{}\n", path.display()))
    }

    pub(crate) fn file(self, inside: &str, contents: &str) -> Machine {
        std::fs::write(self.path(inside), contents).unwrap();
        self
    }

    pub(crate) fn run(&self, args: &[&str]) -> std::process::Output {
        let path = format!(
            "{}:{}",
            self.tools.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        pimigrate()
            .arg("--sysroot")
            .arg(self.root.path())
            .args(args)
            .env("PATH", path)
            .output()
            .unwrap()
    }

    fn plan(&self, args: &[&str]) -> Value {
        let mut all = vec!["plan", "--json", "--seed", "42", "--layout", "full"];
        all.extend_from_slice(args);
        let output = self.run(&all);
        assert_eq!(exit_code(&output), 0, "plan refused: {}", stdout(&output));
        json(&output)
    }

    fn refused(&self, args: &[&str]) -> Vec<String> {
        let mut all = vec!["plan", "--json", "--layout", "full"];
        all.extend_from_slice(args);
        let output = self.run(&all);
        assert_eq!(exit_code(&output), 3, "not refused: {}", stdout(&output));
        let refusal = json(&output);
        refusal["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["code"].as_str().unwrap().to_string())
            .collect()
    }
}

fn edits<'a>(plan: &'a Value, site: &str) -> Vec<&'a Value> {
    plan["edits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["site"] == site)
        .collect()
}

fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

pub(crate) fn pi4() -> Machine {
    Machine::copy_of("pi4")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom(PI4_CONFIG)
        .release(PI4_IMAGE)
}

#[test]
fn a_pi4_with_consent_boots_the_new_drive_once_through_a_tryboot_order() {
    let p = pi4().plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    let b = &p["bootloader"];
    assert_eq!(b["trial"], "device");
    assert_eq!(b["target_mode"], 4);
    assert_eq!(b["consent"], true);
    assert_eq!(b["takes_effect"], "next-reboot");
    assert_eq!(b["handover"], "boot-order");
    assert_eq!(
        b["at_migrate"]["config"],
        format!("{PI4_CONFIG}[tryboot]\nBOOT_ORDER=0xf14\n")
    );
    assert!(text(&b["at_migrate"]["diff"]).contains("+[tryboot]\n+BOOT_ORDER=0xf14"));
    assert_eq!(
        b["at_commit"]["config"],
        format!("{PI4_CONFIG}BOOT_ORDER=0xf14\n")
    );
    assert_eq!(b["current"], PI4_CONFIG);
    // The trial's files are the new drive's: nothing on the SD card.
    assert!(edits(&p, "source-boot").is_empty());
    assert_eq!(p["trial_boot"]["site"], "target-boot");
    assert_eq!(p["trial_boot"]["tryboot_file"], "/tryboot.txt");
    let on_target = edits(&p, "target-boot");
    let trial = on_target
        .iter()
        .find(|e| e["output"] == "/cmdline.pimigrate.txt")
        .expect("the trial's command line on the new boot partition");
    let sig = text(&p["table"]["disk_id"]);
    let added = text(&trial["diff"]);
    assert!(
        added.contains(&format!("root=PARTUUID={sig}-02")) && added.contains(" panic=10"),
        "{added}"
    );
    // cmdline.txt of the new drive has no panic=: only the trial resets.
    let normal = on_target
        .iter()
        .find(|e| e["output"] == "/cmdline.txt")
        .unwrap();
    assert!(!text(&normal["diff"]).contains("panic="));
    // The plan shows it all to a person, as diffs.
    let output = pimigrate_text(&pi4(), &["--target", "/dev/sda", "--boot-order", "apply"]);
    for needle in [
        "Bootloader",
        "Trial: the new drive boots once",
        "+[tryboot]",
        "+BOOT_ORDER=0xf14",
        "recovery.bin writes it at the next reboot",
        "`pimigrate rollback` puts the settings changed back",
        "never older than the bootloader in the EEPROM",
    ] {
        assert!(
            output.contains(needle),
            "{needle:?} missing from:\n{output}"
        );
    }
}

fn pimigrate_text(machine: &Machine, args: &[&str]) -> String {
    let mut all = vec!["plan", "--layout", "full"];
    all.extend_from_slice(args);
    let output = machine.run(&all);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn devices_shows_the_bootloader_the_pi_reports() {
    let output = pi4().run(&["devices"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).contains(
            "Bootloader: built 2026-05-17, BOOT_ORDER 0xf41 (SD, USB, restart), started this boot from SD"
        ),
        "{}",
        stdout(&output)
    );
    let output = pi4().run(&["devices", "--json"]);
    let pi = &json(&output)["pi"];
    assert_eq!(pi["bootloader_config"], PI4_CONFIG);
    assert_eq!(pi["boot_mode"], 1);
    assert_eq!(pi["bootloader_built"], NEW_BOOTLOADER);
}

#[test]
fn without_consent_the_trial_starts_the_sd_cards_kernel_and_nothing_is_changed() {
    let p = pi4().plan(&["--target", "/dev/sda"]);
    let b = &p["bootloader"];
    assert_eq!(b["trial"], "kernel-from-sd");
    assert_eq!(b["consent"], false);
    assert_eq!(b["handover"], "remove-card");
    assert!(
        text(&b["reason"]).contains("--boot-order apply"),
        "{}",
        b["reason"]
    );
    assert!(b["at_migrate"].is_null() && b["at_commit"].is_null());
    // The SD card gets the trial's files beside an untouched cmdline.txt.
    let sd = edits(&p, "source-boot");
    assert_eq!(sd.len(), 1);
    assert_eq!(sd[0]["output"], "/cmdline.pimigrate.txt");
    assert!(text(&sd[0]["diff"]).contains(" panic=10"));
    assert_eq!(p["trial_boot"]["site"], "source-boot");
    let output = pimigrate_text(&pi4(), &["--target", "/dev/sda"]);
    assert!(output.contains("take the SD card out"), "{output}");
}

#[test]
fn an_old_bootloader_gets_a_kernel_trial_and_says_why() {
    let machine = Machine::copy_of("pi4")
        .bootloader_built(OLD_BOOTLOADER)
        .eeprom(PI4_CONFIG)
        .release(PI4_IMAGE);
    let p = machine.plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    let b = &p["bootloader"];
    assert_eq!(b["trial"], "kernel-from-sd");
    let reason = text(&b["reason"]);
    assert!(
        reason.contains("2023-01-01") && reason.contains("2024-05-17"),
        "{reason}"
    );
    // No [tryboot] section; the hand-over still sets USB first.
    assert!(b["at_migrate"].is_null());
    assert_eq!(
        b["at_commit"]["config"],
        format!("{PI4_CONFIG}BOOT_ORDER=0xf14\n")
    );
    // Asked for a device trial, it refuses with the reason.
    assert_eq!(
        machine.refused(&["--target", "/dev/sda", "--trial", "device"]),
        ["device-trial-unavailable"]
    );
    // --no-trial with consent hands over at once.
    let direct = machine.plan(&[
        "--target",
        "/dev/sda",
        "--boot-order",
        "apply",
        "--no-trial",
    ]);
    assert!(direct["trial_boot"].is_null());
    assert_eq!(
        direct["bootloader"]["at_migrate"]["config"],
        format!("{PI4_CONFIG}BOOT_ORDER=0xf14\n")
    );
}

#[test]
fn changes_to_the_bootloader_are_refused_with_a_way_out() {
    // No rpi-eeprom-config at all.
    let bare = Machine::copy_of("pi4").bootloader_built(NEW_BOOTLOADER);
    assert_eq!(
        bare.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["eeprom-tool-missing"]
    );
    let output = bare.run(&[
        "plan",
        "--layout",
        "full",
        "--target",
        "/dev/sda",
        "--boot-order",
        "apply",
    ]);
    assert!(
        stderr(&output).contains("sudo apt install rpi-eeprom"),
        "{}",
        stderr(&output)
    );
    // An update staged for the next boot that cannot be read: pieeprom.upd
    // and the recovery.bin that writes it. Once written, recovery.bin has
    // renamed itself and the old pieeprom.upd is no matter.
    let written = pi4()
        .file("/boot/firmware/pieeprom.upd", "an update")
        .file("/boot/firmware/RECOVERY.000", "ran");
    written.plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    let pending = written.file("/boot/firmware/recovery.bin", "to run");
    assert_eq!(
        pending.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["bootloader-config-unreadable"]
    );
    // The boot order as the hand-over, without consent to change it.
    assert_eq!(
        pi4().refused(&["--target", "/dev/sda", "--handover", "boot-order"]),
        ["handover-needs-consent"]
    );
    // A device trial is a full move's.
    let output = pi4().run(&[
        "plan", "--json", "--target", "/dev/sda", "--trial", "device",
    ]);
    assert_eq!(exit_code(&output), 3);
    assert!(stdout(&output).contains("device-trial-unavailable"));
}

/// A Pi 5 whose rpi-eeprom-update writes at once: flashrom and the SPI
/// device are there.
pub(crate) fn pi5() -> Machine {
    let machine = Machine::copy_of("pi5")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom(PI5_CONFIG)
        .release(PI5_IMAGE)
        .tool("flashrom", "")
        .tool(
            "vcmailbox",
            "0x0000001c 0x80000000 0x0003808b 0x00000004 0x80000004 0x00000f16 0x00000000\n",
        );
    std::fs::create_dir_all(machine.path("/dev")).unwrap();
    machine.file("/dev/spidev10.0", "")
}

#[test]
fn a_pi5_nvme_trial_uses_set_reboot_order_and_pcie_probe() {
    let p = pi5().plan(&["--target", "/dev/nvme0n1", "--boot-order", "apply"]);
    let b = &p["bootloader"];
    assert_eq!(b["trial"], "device");
    assert_eq!(b["target_mode"], 6);
    assert_eq!(b["reboot_order"], "0xf16");
    assert_eq!(b["takes_effect"], "at-once");
    assert_eq!(
        b["at_migrate"]["config"],
        format!("{PI5_CONFIG}PCIE_PROBE=1\n")
    );
    assert!(text(&b["at_migrate"]["purpose"]).contains("PCIE_PROBE=1"));
    assert_eq!(
        b["at_commit"]["config"],
        format!("{}PCIE_PROBE=1\n", PI5_CONFIG.replace("0xf461", "0xf416"))
    );
    assert_eq!(b["base"]["from"], "flash");
    // Without flashrom rpi-eeprom-update stages a Pi 5's update too, for
    // the next reboot.
    let staged = pi5();
    std::fs::remove_file(staged.tools.path().join("flashrom")).unwrap();
    let p = staged.plan(&["--target", "/dev/nvme0n1", "--boot-order", "apply"]);
    assert_eq!(p["bootloader"]["takes_effect"], "next-reboot");
    assert_eq!(p["bootloader"]["base"]["from"], "release");
    // With a HAT+ the bootloader finds the drive by itself: no change, and
    // no consent needed for the one-shot order.
    let hat = pi5();
    std::fs::create_dir_all(hat.path("/proc/device-tree/hat")).unwrap();
    let hat = hat.file("/proc/device-tree/hat/product", "M.2 HAT+\0");
    let p = hat.plan(&["--target", "/dev/nvme0n1"]);
    assert_eq!(p["bootloader"]["trial"], "device");
    assert!(p["bootloader"]["at_migrate"].is_null());
    assert_eq!(p["bootloader"]["handover"], "remove-card");
}

#[test]
fn a_pi5_without_consent_or_vcmailbox_falls_back_to_the_kernel_trial() {
    let p = pi5().plan(&["--target", "/dev/nvme0n1"]);
    assert_eq!(p["bootloader"]["trial"], "kernel-from-sd");
    assert!(text(&p["bootloader"]["reason"]).contains("PCIE_PROBE=1"));
    let no_mailbox = Machine::copy_of("pi5")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom(&format!("{PI5_CONFIG}PCIE_PROBE=1\n"))
        .release(PI5_IMAGE);
    let p = no_mailbox.plan(&["--target", "/dev/nvme0n1", "--boot-order", "apply"]);
    assert_eq!(p["bootloader"]["trial"], "kernel-from-sd");
    assert!(text(&p["bootloader"]["reason"]).contains("vcmailbox"));
    // PCIE_PROBE already on: the device trial needs no change before it.
    let probed = no_mailbox.tool("vcmailbox", "ok\n");
    let p = probed.plan(&["--target", "/dev/nvme0n1"]);
    assert_eq!(p["bootloader"]["trial"], "device");
    assert!(p["bootloader"]["at_migrate"].is_null());
}

/// The owner's own settings, staged for the next boot and not yet written.
const OWNERS: &str = "[all]\nBOOT_UART=1\nWAKE_ON_GPIO=0\nPOWER_OFF_ON_HALT=1\n\
                      NET_INSTALL_AT_POWER_ON=1\nSD_BOOT_MAX_RETRIES=3\n";

#[test]
fn a_staged_update_is_the_config_the_change_is_made_on() {
    // rpi-eeprom-config --edit left the owner's settings staged on the SD
    // card; the bootloader still runs with the image's own.
    let machine = pi4();
    image_with(
        PI4_IMAGE,
        OWNERS,
        &machine.path("/boot/firmware/pieeprom.upd"),
    );
    std::fs::copy(
        rpi_eeprom().join("firmware-2711/recovery.bin"),
        machine.path("/boot/firmware/recovery.bin"),
    )
    .unwrap();
    let p = machine.plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    let b = &p["bootloader"];
    assert_eq!(b["current_from"], "staged");
    assert_eq!(b["current"], OWNERS);
    assert_eq!(b["base"]["from"], "staged");
    assert_eq!(b["base"]["built"], 1_779_045_198u64);
    // Only the plan's settings change; the owner's stay.
    assert_eq!(
        b["at_migrate"]["config"],
        format!("{OWNERS}[tryboot]\nBOOT_ORDER=0xf14\n")
    );
    assert_eq!(
        b["at_migrate"]["edits"],
        serde_json::json!([{"setting": "[tryboot] BOOT_ORDER", "value": "0xf14"}])
    );
    assert_eq!(
        b["at_commit"]["config"],
        format!("{OWNERS}BOOT_ORDER=0xf14\n")
    );
    assert_eq!(
        b["at_commit"]["edits"],
        serde_json::json!([
            {"setting": "[tryboot] BOOT_ORDER", "value": null},
            {"setting": "BOOT_ORDER", "value": "0xf14"}
        ])
    );
    // Without one, the change is built on the release image of the
    // running bootloader's build or newer.
    let p = pi4().plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    assert_eq!(p["bootloader"]["current_from"], "running");
    assert_eq!(p["bootloader"]["base"]["from"], "release");
    assert_eq!(
        p["bootloader"]["base"]["image"],
        rpi_eeprom().join(PI4_IMAGE).display().to_string()
    );
}

#[test]
fn an_image_older_than_the_bootloader_in_the_eeprom_is_refused() {
    // The bootloader was built after the package's newest image: applying
    // a config onto that image would downgrade it.
    let newer = Machine::copy_of("pi4")
        .bootloader_built(1_790_000_000)
        .eeprom(PI4_CONFIG)
        .release(PI4_IMAGE);
    assert_eq!(
        newer.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["bootloader-downgrade"]
    );
    let output = newer.run(&[
        "plan",
        "--layout",
        "full",
        "--target",
        "/dev/sda",
        "--boot-order",
        "apply",
    ]);
    assert!(
        stderr(&output).contains("downgrade") && stderr(&output).contains("apt install rpi-eeprom"),
        "{}",
        stderr(&output)
    );
    // Shown only, nothing is built: no refusal.
    newer.plan(&["--target", "/dev/sda"]);
    // No release image at all: said so.
    let none = Machine::copy_of("pi4")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom(PI4_CONFIG);
    assert_eq!(
        none.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["bootloader-image-unknown"]
    );
}

#[test]
fn a_board_filtered_boot_order_is_changed_where_the_pi_reads_it() {
    // [all] tries USB first, but a Pi 4 follows its own section: SD first.
    let config = "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf14\n[pi4]\nBOOT_ORDER=0xf41\n";
    let machine = Machine::copy_of("pi4")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom(config)
        .release(PI4_IMAGE);
    let p = machine.plan(&["--target", "/dev/sda", "--boot-order", "apply"]);
    assert_eq!(p["boot_order"]["current"], "0xf41");
    let b = &p["bootloader"];
    assert_eq!(
        b["at_migrate"]["config"],
        format!("{config}[all]\n[tryboot]\nBOOT_ORDER=0xf14\n")
    );
    assert_eq!(
        b["at_commit"]["config"],
        "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf14\n[pi4]\nBOOT_ORDER=0xf14\n"
    );
    // An order under a filter pimigrate cannot evaluate is refused.
    let serial = Machine::copy_of("pi4")
        .bootloader_built(NEW_BOOTLOADER)
        .eeprom("[all]\nBOOT_ORDER=0xf41\n[0x1234abcd]\nBOOT_ORDER=0xf14\n")
        .release(PI4_IMAGE);
    assert_eq!(
        serial.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["bootloader-order-conditional"]
    );
}

#[test]
fn compute_modules_are_refused_at_plan_time_with_a_way_out() {
    let cm4 = pi4().file(
        "/proc/device-tree/model",
        "Raspberry Pi Compute Module 4 Rev 1.0\0",
    );
    assert_eq!(
        cm4.refused(&["--target", "/dev/sda", "--boot-order", "apply"]),
        ["compute-module-bootloader"]
    );
    // Shown only, the move goes ahead and the card comes out.
    let p = cm4.plan(&["--target", "/dev/sda"]);
    assert_eq!(p["bootloader"]["handover"], "remove-card");
    let cm5 = pi5().file(
        "/proc/device-tree/model",
        "Raspberry Pi Compute Module 5 Rev 1.0\0",
    );
    assert_eq!(
        cm5.refused(&["--target", "/dev/nvme0n1", "--boot-order", "apply"]),
        ["compute-module-bootloader"]
    );
}

#[test]
fn taking_the_card_out_still_takes_the_trial_order_out_of_the_eeprom() {
    let p = pi4().plan(&[
        "--target",
        "/dev/sda",
        "--boot-order",
        "apply",
        "--handover",
        "remove-card",
    ]);
    let b = &p["bootloader"];
    assert_eq!(b["handover"], "remove-card");
    assert!(text(&b["at_migrate"]["config"]).contains("[tryboot]"));
    assert_eq!(
        b["at_commit"]["edits"],
        serde_json::json!([{"setting": "[tryboot] BOOT_ORDER", "value": null}])
    );
    assert_eq!(b["at_commit"]["config"], PI4_CONFIG);
}
