//! Each check after the move, decided from facts: the "pi4-migrated"
//! fixture machine (a root-only move to /dev/sda) as committed, with one
//! fact changed a test.

use super::*;
use crate::bootcfg::eeprom::{BootOrder, EepromEdit};
use crate::check::Level;
use crate::plan::{BootloaderPlan, EepromChange, EepromTakesEffect, Handover};
use crate::system::kernel_events::parse_kmsg;
use crate::system::mounts::DevNo;
use crate::system::pi::PiFamily;

const COMMITTED: u64 = 1_800_000_000;

/// The root-only move the fixture shows, its every step done.
fn journal() -> Journal {
    let mut journal = crate::verify::test_journal::pi4_root_only();
    journal.committed = Some(COMMITTED);
    journal
}

fn migrated() -> System {
    crate::system::inspect_fixture("pi4-migrated").1
}

fn facts<'a>(system: &'a System, journal: &Journal) -> Facts<'a> {
    let mut facts = Facts::read(system, journal, COMMITTED).expect("reading the facts");
    facts.now = COMMITTED + 86_400;
    facts
}

fn finding(findings: &[Finding], code: &str) -> Finding {
    findings
        .iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code} finding: {findings:#?}"))
        .clone()
}

#[test]
fn the_move_as_committed_is_ok_and_every_code_is_known() {
    let system = migrated();
    let findings = checks(&facts(&system, &journal()));
    for f in &findings {
        assert_eq!(f.level, Level::Ok, "{f:#?}");
        assert!(f.fix.is_empty(), "{f:#?}");
        assert!(CODES.contains(&f.code), "{} is not in CODES", f.code);
    }
    let codes: Vec<&str> = findings.iter().map(|f| f.code).collect();
    assert_eq!(
        codes,
        [
            "booted-from",
            "ids-unique",
            "boot-mount",
            "kernel-modules",
            "disk-errors"
        ],
        "a root-only move on a Pi 4 without vcgencmd: no boot order, no power facts"
    );
    assert!(findings[0]
        .message
        .contains("/dev/sda1 (PARTUUID=2f4a9c17-01)"));
}

#[test]
fn a_boot_of_the_sd_cards_old_root_says_so_and_what_started_it() {
    let mut system = migrated();
    system.source.running_root_devno = Some(DevNo {
        major: 179,
        minor: 2,
    });
    let f = booted::booted_from(&facts(&system, &journal()));
    assert_eq!(f.level, Level::Failure);
    assert!(
        f.message.starts_with(
            "this boot runs / from /dev/mmcblk0p2, the SD card's root, the system the move left behind; \
             the committed drive's root is PARTUUID=2f4a9c17-01 on /dev/sda1"
        ),
        "{}",
        f.message
    );
    assert!(f.fix[0].contains("/boot/firmware/cmdline.txt must say root=PARTUUID=2f4a9c17-01"));
    assert!(f.fix[1].contains("copy what you need over"));
    // The committed drive gone: its cable and its power.
    system.disks.retain(|d| d.name != "sda");
    let f = booted::booted_from(&facts(&system, &journal()));
    assert!(
        f.message.ends_with("PARTUUID=2f4a9c17-01, not attached"),
        "{}",
        f.message
    );
    assert!(f.fix[0].starts_with("the committed drive is not attached"));
}

#[test]
fn a_clone_of_the_new_drive_is_named_with_both_partitions() {
    let mut system = migrated();
    let stick = system.disks.iter_mut().find(|d| d.name == "sdb").unwrap();
    stick.partitions[0].partuuid = Some("2f4a9c17-01".into());
    let findings = checks(&facts(&system, &journal()));
    let ids = finding(&findings, "ids-unique");
    assert_eq!(ids.level, Level::Failure);
    assert_eq!(ids.devices, ["/dev/sda1", "/dev/sdb1"]);
    assert!(
        ids.fix[0].contains("detach the other disk"),
        "{:?}",
        ids.fix
    );
    // The running root is one of them: it booted from the drive.
    assert_eq!(finding(&findings, "booted-from").level, Level::Ok);
}

/// A full move that kept the SD card as the fallback: the commit set
/// BOOT_ORDER=0xf14 on a Pi 4.
fn full_move(handover: Handover) -> Journal {
    let mut journal = journal();
    let change = |edits: Vec<EepromEdit>, purpose: &str| EepromChange {
        edits,
        config: String::new(),
        diff: String::new(),
        purpose: purpose.into(),
    };
    journal.plan.bootloader = Some(BootloaderPlan {
        trial: None,
        reason: String::new(),
        target_mode: 4,
        reboot_order: None,
        current: None,
        current_from: Default::default(),
        base: None,
        at_migrate: Some(change(
            vec![EepromEdit::TrialBootOrder(BootOrder::parse("0xf14"))],
            "the trial's order",
        )),
        handover,
        power: None,
        at_commit: Some(change(
            vec![EepromEdit::BootOrder(BootOrder::parse("0xf14"))],
            "the new drive first",
        )),
        consent: true,
        takes_effect: EepromTakesEffect::NextReboot,
    });
    journal
}

#[test]
fn boot_order_read_back_must_still_try_the_new_drive_first() {
    let full = full_move(Handover::BootOrder);
    let mut system = migrated();
    let order = |system: &System| booted::boot_order(&facts(system, &full)).unwrap();

    system.pi.eeprom_config = Some("[all]\nBOOT_UART=0\nBOOT_ORDER=0xf14\n".into());
    let f = order(&system);
    assert_eq!(f.level, Level::Ok, "{f:#?}");
    // Another mode after the new drive is still the new drive first.
    system.pi.eeprom_config = Some("[all]\nBOOT_ORDER=0xf164\n".into());
    assert_eq!(order(&system).level, Level::Ok);

    // A bootloader update's release config: no BOOT_ORDER, so SD first.
    system.pi.eeprom_config = Some("[all]\nBOOT_UART=0\nWAKE_ON_GPIO=1\n".into());
    let f = order(&system);
    assert_eq!(f.level, Level::Failure);
    assert!(
        f.message.starts_with(
            "BOOT_ORDER is 0xf41 (SD, USB, restart): it no longer tries the new drive (USB) first, as the commit set it (0xf14)"
        ),
        "{}",
        f.message
    );
    assert!(
        f.fix[0].contains("set BOOT_ORDER=0xf14 under [all]")
            && f.fix[0].contains("reboot with the SD card in"),
        "{:?}",
        f.fix
    );

    // Right now, but an update staged for the next boot resets it.
    system.pi.eeprom_config = Some("[all]\nBOOT_ORDER=0xf14\n".into());
    system.pi.eeprom.staged = Some(crate::system::bootloader::StagedUpdate {
        image: "/boot/firmware/pieeprom.upd".into(),
        config: Ok("[all]\nBOOT_UART=0\n".into()),
        built: None,
    });
    let f = order(&system);
    assert_eq!(f.level, Level::Failure);
    assert!(
        f.message.starts_with("the bootloader update staged for the next boot (/boot/firmware/pieeprom.upd) sets BOOT_ORDER 0xf41"),
        "{}",
        f.message
    );
    assert!(f.fix[1].contains("rpi-eeprom-update -r"));

    // Unreadable: a warning that says how to read it.
    system.pi.eeprom_config = None;
    let f = order(&system);
    assert_eq!(f.level, Level::Warning);
    assert!(f.fix[0].contains("sudo apt install rpi-eeprom"));

    // The owner takes the card out: BOOT_ORDER was never the move's.
    let card_out = full_move(Handover::RemoveCard);
    assert_eq!(booted::boot_order(&facts(&system, &card_out)), None);
    // A root-only move sets no order either.
    assert_eq!(booted::boot_order(&facts(&system, &journal())), None);
}

#[test]
fn the_boot_directory_must_be_mounted_where_the_firmware_read() {
    let journal = journal();
    let mut system = migrated();
    // The firmware read SD partition 1: /boot/firmware is mounted from it.
    system.pi.boot_mode = Some(1);
    let mut f = facts(&system, &journal);
    f.firmware_partition = Some(1);
    let ok = boot_files::boot_mount(&f).unwrap();
    assert_eq!(ok.level, Level::Ok, "{ok:#?}");
    assert!(ok
        .message
        .contains("SD partition 1, where the firmware started this boot"));
    // It started from the USB drive's partition 1 instead.
    system.pi.boot_mode = Some(4);
    let mut f = facts(&system, &journal);
    f.firmware_partition = Some(1);
    let wrong = boot_files::boot_mount(&f).unwrap();
    assert_eq!(wrong.level, Level::Failure);
    assert!(
        wrong
            .message
            .starts_with("/boot/firmware is mounted from /dev/mmcblk0p1, not from USB partition 1"),
        "{}",
        wrong.message
    );
    // Not mounted at all: updates go into the root's directory.
    system
        .mounts
        .mounts
        .retain(|m| m.mountpoint != std::path::Path::new("/boot/firmware"));
    let none = boot_files::boot_mount(&facts(&system, &journal)).unwrap();
    assert_eq!(none.level, Level::Failure);
    assert!(none.message.starts_with("/boot/firmware is not mounted"));
    assert!(none.fix[0].starts_with("sudo mount /boot/firmware"));
}

#[test]
fn files_hidden_under_the_mount_point_and_a_kernel_without_modules() {
    let system = migrated();
    let journal = journal();
    let mut f = facts(&system, &journal);
    assert_eq!(
        boot_files::hidden(&f),
        None,
        "a fixture's boot directory is no mount point here"
    );
    f.hidden = Hidden::Entries(vec!["kernel8.img".into(), "initramfs8".into()]);
    let hidden = boot_files::hidden(&f).unwrap();
    assert_eq!(hidden.level, Level::Failure);
    assert!(
        hidden.message.starts_with(
            "2 files hide under /boot/firmware's mount point, on the root filesystem, where the firmware never reads: kernel8.img, initramfs8"
        ),
        "{}",
        hidden.message
    );
    assert!(hidden.fix[0].contains("apt install --reinstall"));
    assert!(hidden.fix[1].contains(
        "sudo mount --bind / /mnt && sudo rm -r /mnt/boot/firmware/kernel8.img /mnt/boot/firmware/initramfs8"
    ));
    f.hidden = Hidden::Entries(Vec::new());
    assert_eq!(boot_files::hidden(&f).unwrap().level, Level::Ok);
    f.hidden = Hidden::Unreadable("looking under a mount point takes root".into());
    assert_eq!(boot_files::hidden(&f).unwrap().level, Level::Warning);

    // The fixture's kernel has its modules.
    assert_eq!(f.kernel_release.as_deref(), Some("6.6.51+rpt-rpi-v8"));
    assert_eq!(boot_files::modules(&f).unwrap().level, Level::Ok);
    f.modules_present = false;
    let modules = boot_files::modules(&f).unwrap();
    assert_eq!(modules.level, Level::Failure);
    f.kernel_release = None;
    assert_eq!(boot_files::modules(&f), None, "no release known");
    assert!(modules.message.starts_with(
        "the running kernel 6.6.51+rpt-rpi-v8 has no modules (no /lib/modules/6.6.51+rpt-rpi-v8)"
    ));
}

#[test]
fn the_drives_resets_warn_and_its_io_errors_fail() {
    let system = migrated();
    let journal = journal();
    let mut f = facts(&system, &journal);
    f.kernel_log.records.extend(parse_kmsg(
        "4,1201,81234567,-;sd 0:0:0:0: [sda] tag#7 uas_eh_abort_handler 0 uas-tag 2 inflight: CMD OUT\n\
         6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n\
         6,1203,81345000,-;usb 2-2: reset SuperSpeed USB device number 2 using xhci_hcd\n",
    ));
    let resets = disk::errors(&f).unwrap();
    assert_eq!(resets.level, Level::Warning);
    assert!(
        resets.message.starts_with(
            "since boot, the kernel logged 1 uas abort, 1 uas reset, 1 USB reset for /dev/sda"
        ),
        "{}",
        resets.message
    );
    assert!(
        resets.fix[0].contains("sudo pimigrate verify --apply-quirk")
            && resets.fix[0].contains("usb-storage.quirks=174c:55aa:u"),
        "{:?}",
        resets.fix
    );
    f.kernel_log.records.extend(parse_kmsg(
        "3,1300,90000000,-;I/O error, dev sda, sector 1234 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2\n",
    ));
    let errors = disk::errors(&f).unwrap();
    assert_eq!(errors.level, Level::Failure);
    assert!(errors.fix[0].starts_with("back up what matters now"));
    f.kernel_log.unreadable = Some("/dev/kmsg: Permission denied".into());
    assert_eq!(disk::errors(&f).unwrap().level, Level::Warning);
}

#[test]
fn under_voltage_now_fails_earlier_or_heat_warns() {
    let system = migrated();
    let journal = journal();
    let mut f = facts(&system, &journal);
    assert_eq!(power::power(&f), None, "no vcgencmd, no kernel message");
    let level = |f: &mut Facts, raw: &str| {
        f.throttled = Some(crate::system::power::Throttled::parse(raw));
        power::power(f).unwrap()
    };
    assert_eq!(level(&mut f, "throttled=0x0").level, Level::Ok);
    let now = level(&mut f, "throttled=0x50005");
    assert_eq!(now.level, Level::Failure);
    assert!(now.fix[0].contains("official power supply"));
    assert_eq!(level(&mut f, "throttled=0x50000").level, Level::Warning);
    let heat = level(&mut f, "throttled=0x80008");
    assert_eq!(heat.level, Level::Warning);
    assert!(
        heat.message.contains("throttled for heat"),
        "{}",
        heat.message
    );
    // Without vcgencmd, the kernel's own message.
    f.throttled = None;
    f.kernel_log.records.extend(parse_kmsg(
        "4,1400,95000000,-;hwmon hwmon1: Undervoltage detected!\n",
    ));
    assert_eq!(power::power(&f).unwrap().level, Level::Warning);
}

#[test]
fn a_pi_5_booting_its_usb_root_at_600_ma_warns() {
    let mut system = migrated();
    system.pi.family = PiFamily::Pi5;
    system.pi.config_filter = Some("pi5");
    let journal = journal();
    let mut f = facts(&system, &journal);
    f.supply.max_current_ma = Some(3000);
    let limited = power::usb_current(&f).unwrap();
    assert_eq!(limited.level, Level::Warning);
    assert!(
        limited.message.contains("600 mA") && limited.message.ends_with("the root is on /dev/sda")
    );
    assert!(limited
        .fix
        .iter()
        .any(|s| s.contains("PSU_MAX_CURRENT=5000")));
    f.supply.max_current_ma = Some(5000);
    assert_eq!(power::usb_current(&f).unwrap().level, Level::Ok);
    // A Pi 4 has no such limit.
    let pi4 = migrated();
    assert_eq!(power::usb_current(&facts(&pi4, &journal)), None);
}

#[test]
fn a_standby_older_than_two_of_its_timers_periods_warns() {
    let system = migrated();
    let journal = journal();
    let mut f = facts(&system, &journal);
    let mut record = crate::state::standby::tests_support::sample();
    record.state = crate::state::standby::SyncState::Complete;
    record.complete_at = Some(f.now - 3 * 86_400);
    f.standby = Some(record.clone());
    assert_eq!(
        standby::age(&f),
        None,
        "no timer: synced by hand, never late"
    );
    f.sync_schedule = Some("daily".into());
    let late = standby::age(&f).unwrap();
    assert_eq!(late.level, Level::Warning);
    assert_eq!(
        late.message,
        "the standby on /dev/mmcblk0 was last synced completely 3 d ago, though pimigrate-sync.timer runs daily"
    );
    f.sync_schedule = Some("weekly".into());
    assert_eq!(standby::age(&f).unwrap().level, Level::Ok);
    record.state = crate::state::standby::SyncState::Failed;
    record.error = Some("the standby stopped answering".into());
    record.complete_at = None;
    record.last_complete = None;
    f.standby = Some(record);
    let failed = standby::age(&f).unwrap();
    assert!(
        failed.message.ends_with("has never been synced completely, though pimigrate-sync.timer runs weekly; the last sync failed: the standby stopped answering"),
        "{}",
        failed.message
    );
}

#[test]
fn the_sync_timers_schedule_is_its_drop_ins() {
    let dir = tempfile::tempdir().unwrap();
    let host = crate::host::Host::with_root(dir.path());
    assert_eq!(standby::schedule(&host), None, "not enabled");
    let etc = dir.path().join("etc/systemd/system");
    std::fs::create_dir_all(etc.join("timers.target.wants")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/lib/systemd/system/pimigrate-sync.timer",
        etc.join("timers.target.wants/pimigrate-sync.timer"),
    )
    .unwrap();
    assert_eq!(standby::schedule(&host).as_deref(), Some("daily"));
    std::fs::create_dir_all(etc.join("pimigrate-sync.timer.d")).unwrap();
    std::fs::write(
        etc.join("pimigrate-sync.timer.d/50-pimigrate.conf"),
        crate::sync::timer::units::timer_drop_in("*-*-* 03:00").unwrap(),
    )
    .unwrap();
    assert_eq!(standby::schedule(&host).as_deref(), Some("*-*-* 03:00"));
}
