//! The plan's after-move part on fixture machines: the Pi 4's SSD behind
//! an ASMedia uas bridge whose VPD pages say UNMAP, the Pi 5's NVMe drive
//! and its USB stick on a 3 A supply; copies of them where a test needs a
//! kernel log with resets, a bridge without Bulk-Only, or an idle stick.

use super::*;
use crate::plan::{plan, Options};
use crate::system::power::UsbBootCurrent;
use crate::system::trim::decision::{CannotTrim, TrimDecision};
use crate::system::trim::VpdNotRead;
use std::path::Path;

fn fixture(name: &str) -> System {
    crate::system::inspect_fixture(name).1
}

/// A copy of a fixture machine, changed by `change` before it is read.
fn changed(name: &str, change: impl FnOnce(&Path)) -> (tempfile::TempDir, System) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    change(dir.path());
    let system = System::inspect(&crate::host::Host::with_root(dir.path())).unwrap();
    (dir, system)
}

fn options(target: &str) -> Options {
    let mut options = Options::new(target);
    options.seed = Some(7);
    options
}

fn planned(system: &System, options: &Options) -> crate::plan::Plan {
    plan(system, options).unwrap_or_else(|r| panic!("refused: {r}"))
}

fn codes(system: &System, options: &Options) -> Vec<&'static str> {
    match plan(system, options) {
        Ok(_) => panic!("planned"),
        Err(refusal) => refusal.reasons.iter().map(|r| r.code).collect(),
    }
}

const UAS_RESETS: &str = "4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n\
    6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n\
    6,1203,81345000,-;usb 2-2: reset SuperSpeed USB device number 2 using xhci_hcd\n";

/// The Pi 4 with the kernel log's resets of its SSD appended.
fn pi4_resetting() -> (tempfile::TempDir, System) {
    changed("pi4", |root| {
        let kmsg = root.join("dev/kmsg");
        let mut log = std::fs::read_to_string(&kmsg).unwrap();
        log.push_str(UAS_RESETS);
        std::fs::write(kmsg, log).unwrap();
    })
}

fn sda_bridge(root: &Path) -> std::path::PathBuf {
    root.join(
        "sys/devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb2/2-2",
    )
}

#[test]
fn a_usb_bridge_that_passes_unmap_gets_a_rule_on_the_new_root() {
    let plan = planned(&fixture("pi4"), &options("/dev/sda"));
    let trim = &plan.after_move.trim;
    let TrimDecision::SwitchOn { rule } = &trim.decision else {
        panic!("{:?}", trim.decision)
    };
    assert_eq!(
        (rule.vendor_id.as_str(), rule.product_id.as_str()),
        ("174c", "55aa")
    );
    assert_eq!(rule.discard_max_bytes, 1 << 30);
    let file = trim.rule.as_ref().expect("the rule is written");
    assert_eq!(
        file.path,
        Path::new("/etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules")
    );
    assert_eq!(file.text, rule.text());
    assert!(file
        .diff
        .starts_with("--- /dev/null\n+++ b/etc/udev/rules.d/60-pimigrate-trim-174c-55aa.rules\n"));
    assert!(
        trim.summary
            .starts_with("TRIM: the bridge 174c:55aa passes UNMAP"),
        "{}",
        trim.summary
    );
    // No fstrim.timer in this fixture's tree: nothing to enable, said so.
    assert_eq!(trim.timer_link, None);
    assert!(
        trim.timer_note.contains("not installed"),
        "{}",
        trim.timer_note
    );
}

#[test]
fn no_trim_writes_no_rule_and_says_so() {
    let mut options = options("/dev/sda");
    options.trim = false;
    let plan = planned(&fixture("pi4"), &options);
    let trim = &plan.after_move.trim;
    assert!(matches!(trim.decision, TrimDecision::SwitchOn { .. }));
    assert_eq!(trim.rule, None);
    assert!(!trim.writes());
    assert!(
        trim.summary
            .ends_with("--no-trim: no rule is written, and TRIM stays off"),
        "{}",
        trim.summary
    );
}

#[test]
fn nvme_takes_discards_by_itself_and_gets_no_rule() {
    let mut options = options("/dev/nvme0n1");
    options.layout = Layout::Full;
    let plan = planned(&fixture("pi5"), &options);
    let trim = &plan.after_move.trim;
    assert_eq!(
        trim.decision,
        TrimDecision::AlreadyOn {
            discard_max_bytes: 2_199_023_255_040
        }
    );
    assert_eq!(trim.rule, None);
    assert!(plan.after_move.usb_quirk.is_none());
}

#[test]
fn a_usb_storage_bridge_in_a_fixture_is_not_asked_and_gets_no_rule() {
    // The Pi 3's hard disk: usb-storage, so the kernel read no page, and
    // a fixture tree has no device node to ask through.
    let plan = planned(&fixture("pi3b"), &options("/dev/sda"));
    let trim = &plan.after_move.trim;
    assert!(
        matches!(
            &trim.decision,
            TrimDecision::Cannot {
                why: CannotTrim::VpdNotRead {
                    why: VpdNotRead::Failed { .. }
                }
            }
        ),
        "{:?}",
        trim.decision
    );
    assert_eq!(trim.rule, None);
}

#[test]
fn a_disabled_timer_is_enabled_on_a_full_move_and_left_alone_on_a_root_only_one() {
    let (_dir, system) = changed("pi4", |root| {
        let units = root.join("usr/lib/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join("fstrim.timer"), "[Timer]\nOnCalendar=weekly\n").unwrap();
    });
    let mut full = options("/dev/sda");
    full.layout = Layout::Full;
    let trim = planned(&system, &full).after_move.trim;
    let link = trim.timer_link.expect("a link on a full move");
    assert_eq!(
        link.target,
        Path::new("/usr/lib/systemd/system/fstrim.timer")
    );
    // Root-only: the SD card's boot partition stays mounted, and the timer
    // would trim it too.
    let trim = planned(&system, &options("/dev/sda")).after_move.trim;
    assert_eq!(trim.timer_link, None);
    assert!(
        trim.timer_note.contains("raspberrypi/linux#6349"),
        "{}",
        trim.timer_note
    );
    // --no-trim leaves it too.
    full.trim = false;
    assert_eq!(planned(&system, &full).after_move.trim.timer_link, None);
}

#[test]
fn a_quiet_uas_bridge_is_not_offered_the_quirk_but_can_be_given_it() {
    let plan = planned(&fixture("pi4"), &options("/dev/sda"));
    let quirk = plan.after_move.usb_quirk.expect("a USB bridge");
    assert_eq!(quirk.bridge, "174c:55aa");
    assert_eq!(quirk.driver.as_deref(), Some("uas"));
    assert!(!quirk.offered && quirk.evidence.is_empty());
    assert_eq!(
        quirk.argument.as_deref(),
        Some("usb-storage.quirks=174c:55aa:u")
    );
    assert_eq!(quirk.operation(), None);
    assert!(plan.warnings.iter().all(|w| !w.contains("usb-storage")));
    // With consent the new command lines get it: the trial's and so,
    // at the commit, the permanent one.
    let mut asked = options("/dev/sda");
    asked.usb_quirk = true;
    let plan = planned(&fixture("pi4"), &asked);
    let cmdline = plan
        .edits
        .iter()
        .find(|e| e.output.to_string() == "/cmdline.pimigrate.txt")
        .expect("the trial's command line");
    assert!(cmdline
        .operations
        .contains(&EditOperation::CmdlineIgnoreUas {
            usb_id: "174c:55aa".into()
        }));
    assert!(
        cmdline
            .diff
            .contains("usb-storage.quirks=174c:55aa:u panic=10"),
        "{}",
        cmdline.diff
    );
}

#[test]
fn a_bridge_the_kernel_log_shows_resetting_is_offered_the_quirk() {
    let (_dir, system) = pi4_resetting();
    let plan = planned(&system, &options("/dev/sda"));
    let quirk = plan.after_move.usb_quirk.as_ref().unwrap();
    assert!(quirk.offered);
    assert_eq!(quirk.evidence.len(), 1, "{:?}", quirk.evidence);
    assert!(
        quirk.evidence[0]
            .starts_with("had 1 uas abort (first: \"sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler"),
        "{}",
        quirk.evidence[0]
    );
    assert!(quirk.evidence[0].contains("1 uas reset") && quirk.evidence[0].contains("1 USB reset"));
    assert!(
        quirk.evidence[0].ends_with("in the kernel log since boot"),
        "{}",
        quirk.evidence[0]
    );
    assert_eq!(quirk.refused, None);
    let warning = plan
        .warnings
        .iter()
        .find(|w| w.contains("--usb-quirk"))
        .expect("the offer among the warnings");
    assert!(
        warning.contains("usb-storage.quirks=174c:55aa:u"),
        "{warning}"
    );
    // Not set without consent.
    assert!(plan
        .edits
        .iter()
        .all(|e| !e.diff.contains("usb-storage.quirks")));
}

#[test]
fn a_bridge_known_for_trouble_is_offered_the_quirk_from_the_list() {
    let (_dir, system) = changed("pi4", |root| {
        let bridge = sda_bridge(root);
        std::fs::write(bridge.join("idProduct"), "1156\n").unwrap();
    });
    let quirk = planned(&system, &options("/dev/sda"))
        .after_move
        .usb_quirk
        .unwrap();
    assert!(quirk.offered);
    assert!(
        quirk.evidence[0].contains("raspberrypi/linux#7570"),
        "{:?}",
        quirk.evidence
    );
    // The descriptors still say 174c:55aa: pimigrate reads only their
    // interface settings, which offer Bulk-Only.
    assert_eq!(
        quirk.argument.as_deref(),
        Some("usb-storage.quirks=174c:1156:u")
    );
}

#[test]
fn a_bridge_without_bulk_only_is_offered_nothing_it_could_not_survive() {
    let (_dir, system) = {
        let (dir, _) = pi4_resetting();
        // QEMU's usb-uas: one interface setting, UAS alone.
        let descriptors = crate::system::usb_modes::tests_support::descriptors(&[0x62]);
        std::fs::write(sda_bridge(dir.path()).join("descriptors"), descriptors).unwrap();
        let system = System::inspect(&crate::host::Host::with_root(dir.path())).unwrap();
        (dir, system)
    };
    let plan = planned(&system, &options("/dev/sda"));
    let quirk = plan.after_move.usb_quirk.as_ref().unwrap();
    assert!(quirk.offered);
    assert_eq!(quirk.argument, None);
    assert!(
        quirk
            .refused
            .as_deref()
            .is_some_and(|r| r.contains("no Bulk-Only setting")),
        "{:?}",
        quirk.refused
    );
    assert!(plan
        .warnings
        .iter()
        .any(|w| w.contains("cannot move it to usb-storage")));
    let mut asked = options("/dev/sda");
    asked.usb_quirk = true;
    assert_eq!(codes(&system, &asked), ["usb-quirk-unavailable"]);
}

#[test]
fn the_quirk_is_merged_into_the_owners_and_refused_past_127_characters() {
    let cmdline = |extra: &str| {
        let extra = extra.to_string();
        move |root: &Path| {
            let path = root.join("boot/firmware/cmdline.txt");
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(
                &path,
                text.replace("rootwait", &format!("rootwait {extra}")),
            )
            .unwrap();
        }
    };
    let (_dir, system) = changed("pi4", cmdline("usb-storage.quirks=152d:0578:u"));
    let mut asked = options("/dev/sda");
    asked.usb_quirk = true;
    let plan = planned(&system, &asked);
    let quirk = plan.after_move.usb_quirk.as_ref().unwrap();
    assert_eq!(
        quirk.argument.as_deref(),
        Some("usb-storage.quirks=152d:0578:u,174c:55aa:u")
    );
    assert!(plan.edits.iter().any(|e| e
        .diff
        .contains("usb-storage.quirks=152d:0578:u,174c:55aa:u")));
    let owner: Vec<String> = (0..10).map(|i| format!("1234:{i:04x}:u")).collect();
    let (_dir, system) = changed(
        "pi4",
        cmdline(&format!("usb-storage.quirks={}", owner.join(","))),
    );
    let quirk = planned(&system, &options("/dev/sda"))
        .after_move
        .usb_quirk
        .unwrap();
    assert!(
        quirk
            .refused
            .as_deref()
            .is_some_and(|r| r.contains("would be 131 characters")),
        "{:?}",
        quirk.refused
    );
    assert_eq!(codes(&system, &asked), ["usb-quirk-unavailable"]);
    // An owner's own `u` for the bridge: nothing to add.
    let (_dir, system) = changed("pi4", cmdline("usb-storage.quirks=174c:55aa:u"));
    let quirk = planned(&system, &asked).after_move.usb_quirk.unwrap();
    assert!(quirk.already && !quirk.sets());
}

#[test]
fn the_quirk_is_for_usb_bridges_only() {
    let mut asked = options("/dev/nvme0n1");
    asked.layout = Layout::Full;
    asked.usb_quirk = true;
    assert_eq!(codes(&fixture("pi5"), &asked), ["usb-quirk-unavailable"]);
}

/// The Pi 5 with its USB stick no longer swapped on, and the bootloader's
/// config as rpi-eeprom-config would print it.
fn pi5_idle_stick() -> (tempfile::TempDir, System) {
    let (dir, mut system) = changed("pi5", |root| {
        std::fs::write(
            root.join("proc/swaps"),
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        )
        .unwrap();
    });
    system.pi.eeprom_config = Some("[all]\nBOOT_UART=1\nBOOT_ORDER=0xf461\n".into());
    (dir, system)
}

#[test]
fn a_pi_5_booting_usb_on_a_3_a_supply_is_warned_and_told_how_to_lift_it() {
    let (_dir, system) = pi5_idle_stick();
    let mut full = options("/dev/sda");
    full.layout = Layout::Full;
    let plan = planned(&system, &full);
    let power = &plan.after_move.power;
    assert!(matches!(
        power.usb_boot_current,
        UsbBootCurrent::Limited { .. }
    ));
    let warning = plan
        .warnings
        .iter()
        .find(|w| w.contains("600 mA"))
        .expect("the 600 mA warning");
    assert!(warning.contains("PSU_MAX_CURRENT=5000"), "{warning}");
    assert!(warning.contains("5 A USB-PD supply"), "{warning}");
    assert_eq!(plan.bootloader.as_ref().unwrap().power, None);
    // Root-only, the bootloader reads the SD card.
    let plan = planned(&system, &options("/dev/sda"));
    assert!(matches!(
        plan.after_move.power.usb_boot_current,
        UsbBootCurrent::NotApplicable { .. }
    ));
    assert!(plan.warnings.iter().all(|w| !w.contains("600 mA")));
}

#[test]
fn psu_max_current_goes_into_the_bootloaders_changes_with_consent() {
    let (_dir, mut system) = pi5_idle_stick();
    let mut full = options("/dev/sda");
    full.layout = Layout::Full;
    full.psu_max_current = Some(5000);
    // The change must be one this Pi can make: here no image it could be
    // built on is known.
    assert_eq!(codes(&system, &full), ["bootloader-image-unknown"]);
    // A Pi 5 whose EEPROM rpi-eeprom-update writes at once (flashrom).
    system.pi.eeprom.writes = crate::system::bootloader::EepromWrites::AtOnce {
        spidev: "/dev/spidev10.0",
    };
    let plan = planned(&system, &full);
    assert_eq!(plan.after_move.power.psu_max_current, Some(5000));
    let bootloader = plan.bootloader.as_ref().unwrap();
    let change = bootloader.power.as_ref().expect("the power's change");
    assert_eq!(
        change.edits,
        [crate::bootcfg::eeprom::EepromEdit::PsuMaxCurrent(Some(
            5000
        ))]
    );
    assert!(
        change.diff.contains("+PSU_MAX_CURRENT=5000"),
        "{}",
        change.diff
    );
    // Made at the migration even without --boot-order apply, and undone
    // by rollback with the other settings.
    assert!(!bootloader.consent);
    assert_eq!(bootloader.at_migrate_made().unwrap().edits, change.edits);
    assert_eq!(bootloader.changes().count(), 1);
    let text = crate::plan::render::plan_text(
        &plan,
        crate::plan::render::Detail::Normal,
        crate::plan::render::Purpose::DryRun,
    );
    assert!(
        text.contains("Config change by the migration, for the USB current: PSU_MAX_CURRENT=5000"),
        "{text}"
    );
    // Below 5000 it lifts nothing; for NVMe there is no limit to lift.
    full.psu_max_current = Some(3000);
    assert_eq!(codes(&system, &full), ["psu-max-current-unavailable"]);
    let mut nvme = options("/dev/nvme0n1");
    nvme.layout = Layout::Full;
    nvme.psu_max_current = Some(5000);
    assert_eq!(codes(&system, &nvme), ["psu-max-current-unavailable"]);
}

#[test]
fn under_voltage_in_the_kernel_log_is_warned_about_on_any_pi() {
    let (_dir, system) = changed("pi4", |root| {
        let kmsg = root.join("dev/kmsg");
        let mut log = std::fs::read_to_string(&kmsg).unwrap();
        log.push_str("2,1400,90000000,-;hwmon hwmon1: Undervoltage detected!\n");
        std::fs::write(kmsg, log).unwrap();
    });
    let plan = planned(&system, &options("/dev/sda"));
    let warning = plan
        .after_move
        .power
        .under_voltage
        .as_deref()
        .expect("a warning");
    assert!(warning.starts_with("under-voltage since boot (the kernel log says so 1 time, first: \"hwmon hwmon1: Undervoltage detected!\")"), "{warning}");
    assert!(plan.warnings.iter().any(|w| w == warning));
    assert_eq!(
        planned(&fixture("pi4"), &options("/dev/sda"))
            .after_move
            .power
            .under_voltage,
        None
    );
}

#[test]
fn a_journal_from_before_reads_with_nothing_to_write() {
    let plan = planned(&fixture("pi4"), &options("/dev/sda"));
    let mut value = serde_json::to_value(&plan).unwrap();
    value.as_object_mut().unwrap().remove("after_move");
    let old: crate::plan::Plan = serde_json::from_value(value).unwrap();
    assert!(!old.after_move.trim.writes());
    assert!(old.after_move.usb_quirk.is_none());
    // And today's plan reads back as it was written.
    let again: crate::plan::Plan =
        serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
    assert_eq!(again.after_move.trim.rule, plan.after_move.trim.rule);
    assert_eq!(again.after_move.usb_quirk, plan.after_move.usb_quirk);
}
