//! The ranking, the formula and the warnings on synthetic reports: an A1
//! SD card, a cheap USB flash drive, USB SSDs behind good and bad bridges.

use super::formula::{self, gain};
use super::freshness::Freshness;
use super::warnings::Usb3Ports;
use super::*;
use crate::bench::grade::AppClass;
use crate::bench::report::StoredReport;
use crate::bench::sample::{SampleReport, Speeds, FLASH_STICK, PI4, SD_A1, USB_SSD};
use crate::bench::suite::SuiteParams;

const NOW: u64 = 1_800_000_000;

fn identity(name: &str, serial: &str, usb: Option<(&str, &str, u32)>) -> DeviceIdentity {
    DeviceIdentity {
        name: name.into(),
        path: format!("/dev/{name}").into(),
        vendor: Some("Vendor".into()),
        model: Some(format!("Model {name}")),
        serial: Some(serial.into()),
        transport: if usb.is_some() { "usb" } else { "mmc" }.into(),
        size_bytes: 128_000_000_000,
        logical_sector_size: 512,
        rotational: false,
        removable: false,
        usb: usb.map(|(id, driver, speed)| UsbIdentity {
            id: id.into(),
            driver: Some(driver.into()),
            speed_mbps: Some(speed),
            manufacturer: None,
            product: None,
        }),
    }
}

/// A standard-suite report as `bench` writes it (the shared test builder);
/// `writes: false` is a raw device read only.
fn report(device: &DeviceIdentity, s: Speeds, writes: bool, unix_time: u64) -> Report {
    let sample = SampleReport::new(format!("{unix_time}-{}-1", device.name), unix_time)
        .device(device.clone());
    let sample = if writes {
        sample
    } else {
        sample.raw_device_reads()
    };
    sample.speeds(s).build()
}

fn drive(identity: DeviceIdentity, speeds: Option<Speeds>, writes: bool) -> Drive {
    Drive {
        evidence: speeds.map(|s| Evidence {
            report: report(&identity, s, writes, NOW - 3_600),
            origin: Origin::Reused,
        }),
        unmeasured_reason: speeds.is_none().then(|| "no report".to_string()),
        identity,
        uses: Vec::new(),
        notes: Vec::new(),
    }
}

fn sd_card() -> Drive {
    drive(identity("mmcblk0", "0x8a3c2f11", None), Some(SD_A1), true)
}

fn stick() -> Drive {
    drive(
        identity("sdb", "STICK1", Some(("0781:5567", "usb-storage", 480))),
        Some(FLASH_STICK),
        true,
    )
}

fn ssd(name: &str, bridge: &str) -> Drive {
    drive(
        identity(name, &format!("SSD-{name}"), Some((bridge, "uas", 5000))),
        Some(USB_SSD),
        true,
    )
}

fn setting() -> Setting {
    Setting {
        baseline_name: "your SD card".into(),
        usb3_ports: Usb3Ports::Yes,
        now: NOW,
    }
}

fn run(candidates: &[Drive]) -> Recommendation {
    recommend(&sd_card(), candidates, Vec::new(), &setting()).unwrap()
}

fn entry<'a>(rec: &'a Recommendation, name: &str) -> &'a Entry {
    rec.ranking
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{name} not ranked"))
}

fn codes(entry: &Entry) -> Vec<&'static str> {
    entry.warnings.iter().map(|w| w.code).collect()
}

fn warning<'a>(entry: &'a Entry, code: &str) -> &'a Warning {
    entry
        .warnings
        .iter()
        .find(|w| w.code == code)
        .unwrap_or_else(|| panic!("no {code} warning on {}: {:?}", entry.name, entry.warnings))
}

#[test]
fn the_usb_ssd_is_picked_over_the_flash_stick() {
    let rec = run(&[stick(), ssd("sda", "04e8:61f5")]);
    assert_eq!(rec.schema, "pimigrate.recommend/1");
    let pick = rec.pick.as_ref().expect("a pick");
    assert_eq!(pick.path, PathBuf::from("/dev/sda"));
    assert!(pick.ready_for_migrate);
    assert_eq!(rec.ranking[0].name, "sda");
    assert_eq!(rec.ranking[0].rank, Some(1));
    assert_eq!(rec.ranking[1].name, "sdb");
    // 28000/800 = 35 and 3900/450 = 8.7: geometric mean 17.4.
    let writes = pick.random_write_gain.unwrap();
    assert!((writes - (35.0f64 * 3_900.0 / 450.0).sqrt()).abs() < 1e-9);
    assert!(
        pick.summary
            .starts_with("random 4K writes 17x faster than your SD card"),
        "{}",
        pick.summary
    );
    assert!(rec.reasons[0].contains("17x faster than your SD card"));
    assert!(rec.current_root.rank.is_none());
    assert_eq!(
        rec.current_root.figures.unwrap().app_class,
        Some(AppClass::A1)
    );
}

#[test]
fn the_wizard_table_is_the_command_text_without_its_next_step() {
    let rec = run(&[stick(), ssd("sda", "04e8:61f5")]);
    let table = render::table(&rec);
    assert!(!table.contains("Next:"), "{table}");
    assert_eq!(
        render::text(&rec),
        format!("{table}\nNext: pimigrate plan --target /dev/sda\n")
    );
    let none = run(&[stick()]);
    assert_eq!(render::text(&none), render::table(&none));
}

#[test]
fn a_flash_drive_slower_at_random_writes_is_warned_and_not_worth_it() {
    let rec = run(&[stick()]);
    let stick = entry(&rec, "sdb");
    assert!(!stick.worth_it);
    let slower = warning(stick, "slower-random-writes");
    assert!(
        slower
            .message
            .starts_with("random 4K writes 16x slower than your SD card"),
        "{}",
        slower.message
    );
    assert!(slower.message.contains("RND4K Q32 write 45 vs 800 IOPS"));
    // 45 write IOPS fail agnostics' A1 mark of 500.
    let below = warning(stick, "below-a1");
    assert!(below
        .message
        .contains("random 4K write IOPS 45 (A1 needs 500)"));
    assert!(
        stick.verdict.starts_with("not worth it"),
        "{}",
        stick.verdict
    );
}

#[test]
fn no_candidate_worth_it_is_said_plainly() {
    let rec = run(&[stick()]);
    assert!(rec.pick.is_none());
    assert!(rec.reasons[0].starts_with("no candidate is worth migrating to"));
    assert!(rec.reasons[1].starts_with("/dev/sdb: not worth it"));
    let text = render::text(&rec);
    assert!(
        text.contains("No candidate is worth migrating to."),
        "{text}"
    );

    let nothing = run(&[]);
    assert!(nothing.pick.is_none());
    assert!(nothing.reasons[0].starts_with("no candidate drive is attached"));
}

#[test]
fn a_usb2_link_is_warned_with_what_to_do() {
    let rec = run(&[stick()]);
    let usb2 = warning(entry(&rec, "sdb"), "usb2-link");
    assert!(
        usb2.message.contains("USB 2 link (480 Mbit/s"),
        "{}",
        usb2.message
    );
    assert!(usb2.hint.as_ref().unwrap().contains("blue USB 3 port"));

    let mut old_pi = setting();
    old_pi.usb3_ports = Usb3Ports::No;
    let rec = recommend(&sd_card(), &[stick()], Vec::new(), &old_pi).unwrap();
    let usb2 = warning(entry(&rec, "sdb"), "usb2-link");
    assert!(usb2.hint.as_ref().unwrap().contains("only USB 2 ports"));
    // A USB 3 link is not warned about.
    let rec = run(&[ssd("sda", "04e8:61f5")]);
    assert!(!codes(entry(&rec, "sda")).contains(&"usb2-link"));
}

#[test]
fn a_known_bad_uas_bridge_gets_the_quirk_but_is_still_picked() {
    let rec = run(&[ssd("sda", "174c:55aa")]);
    let sda = entry(&rec, "sda");
    let bridge = warning(sda, "uas-bridge-known-issues");
    assert!(bridge.message.contains("174c:55aa"), "{}", bridge.message);
    assert!(bridge.message.contains("uas"));
    let hint = bridge.hint.as_ref().unwrap();
    assert!(hint.contains("usb-storage.quirks=174c:55aa:u"), "{hint}");
    assert!(hint.contains("uas_eh_abort_handler"), "{hint}");
    assert!(hint.contains("does not apply it"), "{hint}");
    // Warned, not disqualified: the speed is real, the quirk is the cure.
    assert_eq!(rec.pick.as_ref().unwrap().name, "sda");
    assert!(rec.reasons.iter().any(|r| r.contains("174c:55aa")));
    for id in ["152d:0578", "174C:1156"] {
        assert!(bridges::known_uas_trouble(id).is_some(), "{id}");
    }
}

#[test]
fn other_uas_bridges_get_only_the_advice_to_watch_the_log() {
    let rec = run(&[ssd("sda", "04e8:61f5")]);
    let sda = entry(&rec, "sda");
    assert!(!codes(sda).contains(&"uas-bridge-known-issues"));
    let note = warning(sda, "uas-bridge");
    assert!(note.hint.as_ref().unwrap().contains("uas_eh_abort_handler"));
    assert!(note
        .hint
        .as_ref()
        .unwrap()
        .contains("usb-storage.quirks=04e8:61f5:u"));
    // usb-storage is not uas: nothing to say.
    assert!(!codes(entry(&run(&[stick()]), "sdb"))
        .iter()
        .any(|c| c.starts_with("uas")));
}

#[test]
fn a_drive_read_but_not_written_is_ranked_by_its_known_gain_and_never_picked() {
    let reads_only = drive(
        identity("sdc", "RAW", Some(("04e8:61f5", "uas", 5000))),
        Some(USB_SSD),
        false,
    );
    let rec = run(std::slice::from_ref(&reads_only));
    let sdc = entry(&rec, "sdc");
    assert!(!sdc.worth_it && rec.pick.is_none());
    assert!(sdc.gain.as_ref().unwrap().partial);
    let unknown = warning(sdc, "writes-not-measured");
    assert!(unknown
        .hint
        .as_ref()
        .unwrap()
        .contains("pimigrate bench --destructive /dev/sdc"));
    let rec = run(&[reads_only, ssd("sda", "04e8:61f5"), stick()]);
    let order: Vec<&str> = rec.ranking.iter().map(|e| e.name.as_str()).collect();
    // The stick is slower than the SD card; the SSD read alone is faster
    // at what was measured: the stick comes last.
    assert_eq!(order, ["sda", "sdc", "sdb"]);
}

/// What issue 18 found: a blank SSD read but not written, a hard disk
/// slower than the SD card and a flash stick, and the hard disk was
/// number 1 in the table. The order must follow the gains the table
/// shows, drives slower than the current root after the faster ones,
/// unmeasured ones last, and the text must say which gains are of reads
/// alone.
#[test]
fn the_table_order_follows_the_gains_shown() {
    let hard_disk = Speeds {
        q32: (300.0, 250.0),
        q1: (120.0, 110.0),
        seq: (120.0, 110.0),
    };
    let disk = drive(
        identity("sdc", "HDD", Some(("152d:0578", "uas", 5000))),
        Some(hard_disk),
        true,
    );
    let blank_ssd = drive(
        identity("sda", "SSD", Some(("04e8:61f5", "uas", 5000))),
        Some(USB_SSD),
        false,
    );
    let unmeasured = drive(
        identity("sdd", "X", Some(("04e8:61f5", "uas", 5000))),
        None,
        false,
    );
    let rec = run(&[disk, unmeasured, stick(), blank_ssd]);
    let order: Vec<&str> = rec.ranking.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(order, ["sda", "sdc", "sdb", "sdd"]);
    let gains: Vec<f64> = rec
        .ranking
        .iter()
        .filter_map(|e| e.gain.as_ref().map(|g| g.combined))
        .collect();
    assert!(gains.windows(2).all(|w| w[0] >= w[1]), "{gains:?}");
    assert!(gains[0] > 1.0 && gains[1] < 1.0, "{gains:?}");
    assert!(rec.pick.is_none(), "reads alone never make a pick");
    let text = render::text(&rec);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("/dev/{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .to_string()
    };
    assert!(row("sda").trim_start().starts_with("1 "), "{text}");
    assert!(
        row("sda").ends_with(" rd"),
        "a gain of reads alone says so: {text}"
    );
    assert!(row("sdd").ends_with("unknown"), "{text}");
    assert!(!row("sdc").ends_with(" rd"), "{text}");
}

#[test]
fn the_pick_is_number_one_and_its_reason_names_its_gain() {
    let reads_only = drive(
        identity("sdc", "RAW", Some(("04e8:61f5", "uas", 5000))),
        Some(scaled(USB_SSD, 10.0, 1.0)),
        false,
    );
    let rec = run(&[stick(), reads_only, ssd("sda", "04e8:61f5")]);
    let pick = rec.pick.as_ref().expect("the SSD is worth it");
    assert_eq!(rec.ranking[0].path, pick.path);
    assert_eq!(rec.ranking[0].rank, Some(1));
    let shown = formula::times(pick.combined_gain);
    assert!(
        rec.reasons[0].contains(&format!("({shown} overall)")),
        "{:?}",
        rec.reasons
    );
    let text = render::text(&rec);
    let first_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap();
    assert!(
        first_row.contains("/dev/sda") && first_row.ends_with(&shown),
        "{text}"
    );
}

#[test]
fn an_unmeasured_candidate_is_listed_as_such() {
    let unmeasured = drive(
        identity("sda", "X", Some(("04e8:61f5", "uas", 5000))),
        None,
        false,
    );
    let rec = run(&[unmeasured]);
    let sda = entry(&rec, "sda");
    assert!(sda.figures.is_none() && sda.gain.is_none() && !sda.worth_it);
    assert!(codes(sda).contains(&"not-measured"));
}

#[test]
fn a_mounted_pick_must_be_unmounted_first() {
    let mut mounted = ssd("sda", "04e8:61f5");
    mounted.uses = vec!["sda1 is mounted at /media/pi/T7".into()];
    let rec = run(&[mounted]);
    let pick = rec.pick.as_ref().unwrap();
    assert!(!pick.ready_for_migrate);
    assert!(rec.reasons.iter().any(|r| r.contains("unmount it before")));
    assert!(codes(entry(&rec, "sda")).contains(&"in-use"));
}

#[test]
fn the_current_root_needs_write_figures() {
    let reads_only_root = drive(identity("mmcblk0", "SD", None), Some(SD_A1), false);
    let err = recommend(&reads_only_root, &[], Vec::new(), &setting()).unwrap_err();
    assert!(err.to_string().contains("no random write figures"), "{err}");
    let unmeasured = drive(identity("mmcblk0", "SD", None), None, false);
    assert!(recommend(&unmeasured, &[], Vec::new(), &setting()).is_err());
}

fn figures(s: Speeds) -> Figures {
    let device = identity("x", "x", None);
    Figures::from_report(&report(&device, s, true, NOW))
}

fn scaled(s: Speeds, read: f64, write: f64) -> Speeds {
    Speeds {
        q32: (s.q32.0 * read, s.q32.1 * write),
        q1: (s.q1.0 * read, s.q1.1 * write),
        seq: s.seq,
    }
}

#[test]
fn twice_as_fast_at_everything_is_exactly_worth_it() {
    let g = gain(&figures(scaled(SD_A1, 2.0, 2.0)), &figures(SD_A1)).unwrap();
    assert!((g.combined - 2.0).abs() < 1e-9);
    assert!(!g.partial);
    assert!(formula::judge(Some(&g), true, "your SD card").worth_it);
    let g = gain(&figures(scaled(SD_A1, 1.9, 1.9)), &figures(SD_A1)).unwrap();
    assert!(!formula::judge(Some(&g), true, "your SD card").worth_it);
}

#[test]
fn writes_weigh_ten_and_reads_four() {
    // Reads 10x, writes unchanged: 10^(8/28) = 1.93, not worth it.
    let g = gain(&figures(scaled(SD_A1, 10.0, 1.0)), &figures(SD_A1)).unwrap();
    assert!((g.combined - 10f64.powf(8.0 / 28.0)).abs() < 1e-9);
    assert!(!formula::judge(Some(&g), true, "x").worth_it);
    // Writes 3x, reads unchanged: 3^(20/28) = 2.19, worth it.
    let g = gain(&figures(scaled(SD_A1, 1.0, 3.0)), &figures(SD_A1)).unwrap();
    assert!((g.combined - 3f64.powf(20.0 / 28.0)).abs() < 1e-9);
    assert!(formula::judge(Some(&g), true, "x").worth_it);
}

#[test]
fn huge_reads_do_not_excuse_slower_writes() {
    // 50x reads would make any average over 2x; writes at 0.8x still lose.
    let g = gain(&figures(scaled(SD_A1, 50.0, 0.8)), &figures(SD_A1)).unwrap();
    let verdict = formula::judge(Some(&g), true, "your SD card");
    assert!(!verdict.worth_it);
    assert!(
        verdict
            .summary
            .contains("random 4K writes 1.2x slower than your SD card"),
        "{}",
        verdict.summary
    );
}

fn stored(report: Report) -> StoredReport {
    StoredReport {
        path: format!("/reports/{}.json", report.id).into(),
        report,
    }
}

fn freshness(preset: Preset) -> Freshness {
    Freshness {
        now: NOW,
        max_age_days: 30,
        preset,
        pi_model: Some(PI4.into()),
    }
}

#[test]
fn fresh_reports_are_of_the_same_drive_link_machine_and_suite() {
    let sda = identity("sda", "S6PX", Some(("174c:55aa", "uas", 5000)));
    let rules = freshness(Preset::Standard);
    let day = 86_400;
    let fresh = report(&sda, USB_SSD, true, NOW - 2 * day);
    assert_eq!(rules.why_stale(&fresh, &sda), None);

    let mut renamed = sda.clone();
    renamed.name = "sdb".into();
    renamed.path = "/dev/sdb".into();
    assert_eq!(rules.why_stale(&fresh, &renamed), None, "names may change");

    let other = identity("sda", "OTHER", Some(("174c:55aa", "uas", 5000)));
    assert_eq!(rules.why_stale(&fresh, &other).unwrap(), "another drive");

    let usb2 = identity("sda", "S6PX", Some(("174c:55aa", "uas", 480)));
    assert!(rules
        .why_stale(&fresh, &usb2)
        .unwrap()
        .contains("another link"));
    let quirked = identity("sda", "S6PX", Some(("174c:55aa", "usb-storage", 5000)));
    assert!(rules
        .why_stale(&fresh, &quirked)
        .unwrap()
        .contains("another link"));

    let old = report(&sda, USB_SSD, true, NOW - 31 * day);
    assert!(rules.why_stale(&old, &sda).unwrap().contains("31 days old"));
    let future = report(&sda, USB_SSD, true, NOW + 2 * day);
    assert!(rules.why_stale(&future, &sda).unwrap().contains("future"));

    let mut elsewhere = fresh.clone();
    elsewhere.machine.pi_model = Some("Raspberry Pi 5 Model B Rev 1.0".into());
    assert!(rules
        .why_stale(&elsewhere, &sda)
        .unwrap()
        .contains("another machine"));

    let mut quick = fresh.clone();
    quick.parameters.suite = SuiteParams::new(Preset::Quick, None, None);
    assert!(rules.why_stale(&quick, &sda).is_some());
    assert_eq!(freshness(Preset::Quick).why_stale(&quick, &sda), None);
    assert_eq!(freshness(Preset::Quick).why_stale(&fresh, &sda), None);
}

#[test]
fn the_best_fresh_report_has_writes_then_is_newest() {
    let sda = identity("sda", "S6PX", Some(("174c:55aa", "uas", 5000)));
    let reports = vec![
        stored(report(&sda, USB_SSD, true, NOW - 5_000)),
        stored(report(&sda, USB_SSD, true, NOW - 4_000)),
        stored(report(&sda, USB_SSD, false, NOW - 1_000)),
        stored(report(&sda, USB_SSD, true, NOW - 40 * 86_400)),
    ];
    let rules = freshness(Preset::Standard);
    let best = rules.best(&reports, &sda).unwrap();
    assert_eq!(best.report.unix_time, NOW - 4_000);
    let stale_only = vec![reports[3].clone()];
    assert!(rules.best(&stale_only, &sda).is_none());
    assert!(rules
        .newest_stale_reason(&stale_only, &sda)
        .unwrap()
        .contains("40 days old"));
}
