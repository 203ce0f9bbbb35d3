//! The flow on fixture machines, answered by a script.

use super::*;
use crate::ui::{Answer, ScriptedUi};
use crate::units::TIB;
use std::collections::BTreeMap;
use std::path::Path;

fn machine(name: &str) -> (Host, System) {
    crate::system::inspect_fixture(name)
}

fn wizard<'a>(
    host: &'a Host,
    system: &'a System,
    settings: &'a Settings,
    ui: &'a ScriptedUi,
) -> Wizard<'a> {
    Wizard {
        system,
        host,
        ui,
        settings,
    }
}

/// Settings a person starting `pimigrate wizard --no-bench` has.
fn no_bench() -> Settings {
    Settings {
        benchmarks: Benchmarks::Skip,
        seed: Some(7),
        ..Settings::default()
    }
}

fn run(
    host: &Host,
    system: &System,
    settings: &Settings,
    answers: Vec<Answer>,
) -> (WizardEnd, ScriptedUi) {
    let ui = ScriptedUi::new(answers);
    let outcome = wizard(host, system, settings, &ui)
        .run()
        .expect("the wizard failed");
    (outcome, ui)
}

/// Every file under `root` with its contents: what "nothing was written"
/// is checked against.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.expect("walking the fixture"))
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let contents = std::fs::read(e.path()).unwrap_or_default();
            (e.path().to_path_buf(), contents)
        })
        .collect()
}

#[test]
fn pi4_offers_the_ssd_with_its_reason_and_goes_to_the_typed_confirmation() {
    let (host, system) = machine("pi4");
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,            // the target
            Answer::Default,            // root only
            Answer::Yes,                // trial boot
            Answer::Type("sda".into()), // the confirmation
        ],
    );
    assert!(matches!(outcome, WizardEnd::Rehearsed), "{outcome:?}");
    let target = ui
        .prompt_containing("Which disk")
        .expect("no target question");
    assert_eq!(
        target.items.len(),
        1,
        "only sda can take it: {:?}",
        target.items
    );
    assert!(
        target.items[0].starts_with("/dev/sda"),
        "{:?}",
        target.items
    );
    // Items fit an 80-column terminal next to dialoguer's marker; the
    // reasons are said above the question.
    assert!(
        target.items.iter().all(|i| i.chars().count() <= 76),
        "{:?}",
        target.items
    );
    let transcript = ui.transcript();
    for expected in [
        "Disks that can take the system",
        "USB 3 link (5000 Mbit/s), free to take the system",
        "What will not happen",
        "/dev/mmcblk0",
        "runs the system now",
        "cannot take it: in use: sdb1 is mounted at /media/pi/STICK; unmount it first \
         (e.g. `sudo umount /media/pi/STICK`)",
        "In short:",
        "/dev/sda is erased and gets an MBR partition table with 465.8 GiB root",
        "is copied onto it; the SD card is only read",
        "cmdline.pimigrate.txt and /tryboot.txt are added; cmdline.txt",
        "PARTUUID (in the printout below): the ID a partition carries",
        "Trial boot (the firmware's \"tryboot\")",
        "The plan in full:",
        "cannot take it: read-only",
        "can boot from USB: a full move lets you take the SD card out",
        "Plan: root-only move",
        "--- a/etc/fstab",
        "Trial boot",
        "Rehearsal over",
    ] {
        assert!(
            transcript.contains(expected),
            "missing {expected:?} in:\n{transcript}"
        );
    }
    assert!(
        ui.prompt_containing("partition table").is_none(),
        "a 500 GB disk needs no table question"
    );
    assert_eq!(ui.unused_answers(), 0);
}

#[test]
fn a_wrong_name_writes_nothing() {
    let (host, system) = machine("pi4");
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,
            Answer::Default,
            Answer::Default,
            Answer::Type("sdb".into()),
        ],
    );
    assert!(matches!(outcome, WizardEnd::NotConfirmed), "{outcome:?}");
    assert!(ui
        .transcript()
        .contains("Not confirmed; nothing was written."));
}

#[test]
fn pi3b_explains_the_one_time_change_and_still_offers_both() {
    let (host, system) = machine("pi3b");
    let (_, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![Answer::Default, Answer::Abort],
    );
    let transcript = ui.transcript();
    assert!(
        transcript.contains("cannot boot from USB without a one-time change")
            && transcript.contains("root only keeps the SD card as the boot disk"),
        "{transcript}"
    );
    let layout = ui
        .prompt_containing("What should move")
        .expect("no layout question");
    assert_eq!(layout.items.len(), 2);
    assert!(layout.items[0].starts_with("Root only"));
    assert!(layout.items[1].contains("only after the one-time USB boot setting"));
}

#[test]
fn pizero_is_only_offered_root_only() {
    let (host, system) = machine("pizero");
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![Answer::Default, Answer::Type("sda".into())],
    );
    assert!(
        matches!(outcome, WizardEnd::Rehearsed),
        "{outcome:?}\n{}",
        ui.transcript()
    );
    assert!(
        ui.prompt_containing("What should move").is_none(),
        "{:?}",
        ui.asked()
    );
    // No tryboot on a Zero: no trial question either.
    assert!(ui.prompt_containing("trial").is_none(), "{:?}", ui.asked());
    let transcript = ui.transcript();
    assert!(
        transcript.contains("cannot boot from USB: only the system (root) moves"),
        "{transcript}"
    );
    assert!(
        transcript.contains("Layout: root only (the only one this Pi can start)."),
        "{transcript}"
    );
}

#[test]
fn the_table_is_asked_only_for_a_disk_over_two_tib() {
    let (host, mut system) = machine("pi4");
    let sda = system.disks.iter_mut().find(|d| d.name == "sda").unwrap();
    sda.size_bytes = 3 * TIB;
    sda.size_human = crate::units::human_bytes(sda.size_bytes);
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,             // sda
            Answer::Pick("Full".into()), // full move: the Pi 4 boots GPT
            Answer::Pick("GPT".into()),
            Answer::Type("/dev/sda".into()),
        ],
    );
    assert!(
        matches!(outcome, WizardEnd::Rehearsed),
        "{outcome:?}\n{}",
        ui.transcript()
    );
    let table = ui
        .prompt_containing("partition table")
        .expect("no table question");
    assert_eq!(table.items.len(), 2);
    let transcript = ui.transcript();
    assert!(
        transcript.contains("more than the 2 TiB an MBR partition table can describe"),
        "{transcript}"
    );
    assert!(transcript.contains("Partition table: GPT"), "{transcript}");
}

/// A full move on a Pi 4 asks before the bootloader's config changes,
/// then whether the SD card stays in; the plan says the changes are made.
#[test]
fn a_full_move_asks_for_consent_to_change_the_boot_order() {
    let (host, mut system) = machine("pi4");
    // As rpi-eeprom-config prints it on a Pi 4.
    system.pi.eeprom_config = Some("[all]\nBOOT_UART=0\n".into());
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,             // sda
            Answer::Pick("Full".into()), // full move
            Answer::Yes,                 // change the boot order
            Answer::No,                  // take the card out after the trial
            Answer::Type("sda".into()),
        ],
    );
    assert!(
        matches!(outcome, WizardEnd::Rehearsed),
        "{outcome:?}\n{}",
        ui.transcript()
    );
    assert!(ui
        .prompt_containing("change the bootloader's boot order")
        .is_some());
    assert!(ui.prompt_containing("keep the SD card in").is_some());
    let transcript = ui.transcript();
    assert!(transcript.contains("Bootloader"), "{transcript}");
    assert!(
        transcript
            .contains("Hand-over: after `verify --commit`, shut down and take the SD card out"),
        "{transcript}"
    );
    // Unattended, consent is never assumed.
    let settings = Settings {
        target: Some("/dev/sda".into()),
        layout: Some(Layout::Full),
        yes: true,
        ..no_bench()
    };
    let (_, ui) = run(&host, &system, &settings, vec![]);
    assert!(
        ui.transcript()
            .contains("Bootloader config: shown, not changed"),
        "{}",
        ui.transcript()
    );
}

#[test]
fn flags_answer_every_question() {
    let (host, system) = machine("pi4");
    let settings = Settings {
        target: Some("/dev/sda".into()),
        layout: Some(Layout::Full),
        table: Some(TableChoice::Mbr),
        trial: Some(TrialChoice::Never),
        yes: true,
        ..no_bench()
    };
    let (outcome, ui) = run(&host, &system, &settings, Vec::new());
    assert!(
        matches!(outcome, WizardEnd::Rehearsed),
        "{outcome:?}\n{}",
        ui.transcript()
    );
    assert!(ui.asked().is_empty(), "asked {:?}", ui.asked());
    let transcript = ui.transcript();
    assert!(transcript.contains("Plan: full move"));
    assert!(
        transcript.contains("Layout: full (boot and root) (from --layout)"),
        "{transcript}"
    );
    // A full move leaves the SD card's boot files alone.
    assert!(
        transcript.contains("Nothing on the SD card changes"),
        "{transcript}"
    );
}

/// With --yes, an answer taken by default says so, and names its flag.
#[test]
fn unattended_defaults_say_where_they_come_from() {
    let (host, system) = machine("pi4");
    let settings = Settings {
        target: Some("/dev/sda".into()),
        yes: true,
        ..Settings::default()
    };
    let (_, ui) = run(&host, &system, &settings, Vec::new());
    let transcript = ui.transcript();
    for line in [
        "Benchmarks: thorough (the default, as --yes asks nothing; --quick/--no-bench chooses).",
        "Layout: root only (the default, as --yes asks nothing; --layout chooses).",
        "Trial boot: yes (the default, as --yes asks nothing; --trial/--no-trial chooses).",
    ] {
        assert!(transcript.contains(line), "missing {line:?}:\n{transcript}");
    }
}

#[test]
fn backing_out_at_any_prompt_changes_nothing() {
    let (host, system) = machine("pi4");
    let before = snapshot(&host.root);
    // Benchmarks are asked about first on a terminal; without a live
    // system they cannot run, so the flow goes on without them.
    let settings = Settings {
        seed: Some(7),
        ..Settings::default()
    };
    let answers = [
        Answer::Pick("Skip".into()),
        Answer::Default,
        Answer::Default,
        Answer::Default,
        Answer::Type("sda".into()),
    ];
    for stop_at in 0..answers.len() {
        let mut script: Vec<Answer> = answers[..stop_at].to_vec();
        script.push(Answer::Abort);
        let (outcome, ui) = run(&host, &system, &settings, script);
        assert!(
            matches!(outcome, WizardEnd::Stopped),
            "prompt {stop_at}: {outcome:?}"
        );
        assert_eq!(ui.asked().len(), stop_at + 1, "prompt {stop_at}");
        assert!(
            ui.transcript().ends_with("Stopped: nothing was changed."),
            "prompt {stop_at}:\n{}",
            ui.transcript()
        );
    }
    assert_eq!(before, snapshot(&host.root), "the fixture changed");
}

/// Ctrl-C after the last question, while the source is scanned: no plan
/// and no refusal is shown, only that nothing changed.
#[test]
fn ctrl_c_while_planning_shows_no_plan() {
    let (host, system) = machine("pi4");
    let ui = ScriptedUi::new([Answer::Default, Answer::Default, Answer::Yes]).interrupt_after(3);
    let settings = no_bench();
    let outcome = wizard(&host, &system, &settings, &ui)
        .run()
        .expect("the wizard failed");
    let transcript = ui.transcript();
    assert!(matches!(outcome, WizardEnd::Stopped), "{outcome:?}");
    assert!(!transcript.contains("Plan:"), "{transcript}");
    assert!(!transcript.contains("refus"), "{transcript}");
    assert!(
        transcript.ends_with("Stopped: nothing was changed."),
        "{transcript}"
    );
    assert!(ui.prompt_containing("Type its name").is_none());
}

#[test]
fn no_candidate_means_nothing_to_do() {
    let (host, mut system) = machine("pi4");
    system
        .disks
        .retain(|d| d.role != crate::system::disks::Role::Candidate);
    let (outcome, ui) = run(&host, &system, &no_bench(), Vec::new());
    assert!(matches!(outcome, WizardEnd::NothingToDo), "{outcome:?}");
    assert!(ui.transcript().contains("No disk can take the system"));
}

/// The last screen tells the person how to check the move after the
/// reboot, trial or not, and never offers a flag the wizard does not have.
#[test]
fn next_steps_always_end_with_a_check_and_a_way_back() {
    let (_host, system) = machine("pi4");
    for trial in [TrialChoice::Never, TrialChoice::Always] {
        let mut options = Options::new("/dev/sda");
        options.trial = trial;
        options.seed = Some(7);
        let plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
        let steps =
            crate::apply::migration::next_steps(&plan, crate::plan::render::Purpose::Wizard);
        let verifies: Vec<&String> = steps
            .iter()
            .filter(|s| s.contains("sudo pimigrate verify"))
            .collect();
        assert_eq!(verifies.len(), 1, "{trial:?}: {steps:?}");
        assert!(
            steps
                .last()
                .is_some_and(|s| s.contains("pimigrate rollback")),
            "{trial:?}: {steps:?}"
        );
        assert!(
            steps.iter().all(|s| !s.contains("--reboot")),
            "{trial:?}: {steps:?}"
        );
    }
}

/// The pizero fixture's sda has no table and no filesystem: a new SSD.
fn blank_allowance(settings: &Settings, answers: Vec<Answer>) -> (Vec<PathBuf>, ScriptedUi) {
    let (host, system) = machine("pizero");
    let ui = ScriptedUi::new(answers);
    let allowed = blank::allowed(&wizard(&host, &system, settings, &ui))
        .expect("deciding on blank drives")
        .allowed;
    (allowed, ui)
}

fn quick_bench() -> Settings {
    Settings {
        benchmarks: Benchmarks::Quick,
        ..no_bench()
    }
}

#[test]
fn a_blank_drive_is_measured_with_writes_once_the_person_agrees() {
    let (allowed, ui) = blank_allowance(&quick_bench(), vec![Answer::Default]);
    assert_eq!(allowed, vec![PathBuf::from("/dev/sda")]);
    let asked = ui
        .prompt_containing("Measure the writes of the blank drive(s) /dev/sda too?")
        .expect("no blank-drive question");
    assert!(asked.prompt.contains("Test data is written over them"));
    assert!(ui.transcript().contains("Blank drive(s): /dev/sda ("));
    let (allowed, _) = blank_allowance(&quick_bench(), vec![Answer::No]);
    assert!(allowed.is_empty(), "no means reads only: {allowed:?}");
}

#[test]
fn blank_drive_flags_answer_the_question() {
    let yes = Settings {
        bench_blank: Some(true),
        ..quick_bench()
    };
    let (allowed, ui) = blank_allowance(&yes, Vec::new());
    assert_eq!(allowed, vec![PathBuf::from("/dev/sda")]);
    assert!(ui.asked().is_empty(), "{:?}", ui.asked());
    assert!(ui.transcript().contains("(from --bench-blank)"));
    let no = Settings {
        bench_blank: Some(false),
        ..quick_bench()
    };
    let (allowed, ui) = blank_allowance(&no, Vec::new());
    assert!(allowed.is_empty() && ui.asked().is_empty());
}

/// Unattended, only the disk about to be erased is written to.
#[test]
fn unattended_only_the_blank_target_is_measured_with_writes() {
    let unattended = |target: &str| Settings {
        target: Some(target.into()),
        yes: true,
        ..quick_bench()
    };
    let (allowed, ui) = blank_allowance(&unattended("sda"), Vec::new());
    assert_eq!(allowed, vec![PathBuf::from("/dev/sda")]);
    assert!(ui.asked().is_empty(), "{:?}", ui.asked());
    assert!(ui.transcript().contains("/dev/sda is blank"));
    let (allowed, _) = blank_allowance(&unattended("/dev/mmcblk0"), Vec::new());
    assert!(allowed.is_empty(), "{allowed:?}");
    let refused = Settings {
        bench_blank: Some(false),
        ..unattended("/dev/sda")
    };
    let (allowed, _) = blank_allowance(&refused, Vec::new());
    assert!(allowed.is_empty(), "--no-bench-blank wins: {allowed:?}");
}

#[test]
fn esc_at_the_blank_drive_question_stops_with_nothing_changed() {
    let (host, system) = machine("pizero");
    let before = snapshot(&host.root);
    let (outcome, ui) = run(&host, &system, &quick_bench(), vec![Answer::Abort]);
    assert!(matches!(outcome, WizardEnd::Stopped), "{outcome:?}");
    assert_eq!(ui.asked().len(), 1, "{:?}", ui.asked());
    assert!(ui.asked()[0].prompt.contains("blank drive"));
    assert!(ui.transcript().ends_with("Stopped: nothing was changed."));
    assert_eq!(before, snapshot(&host.root), "the fixture changed");
}

#[test]
fn a_drive_with_a_partition_table_is_not_asked_about() {
    let (host, system) = machine("pi4");
    let (_, ui) = run(
        &host,
        &system,
        &quick_bench(),
        vec![
            Answer::Default,
            Answer::Default,
            Answer::Default,
            Answer::Abort,
        ],
    );
    assert!(
        ui.prompt_containing("blank").is_none(),
        "pi4's sda has a partition: {:?}",
        ui.asked()
    );
}

/// A Pi 4 whose SSD's bridge reset on uas since boot (the kernel log).
fn pi4_resetting() -> (tempfile::TempDir, Host, System) {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let kmsg = dir.path().join("dev/kmsg");
    let mut log = std::fs::read_to_string(&kmsg).unwrap();
    log.push_str("6,1202,81234600,-;scsi host0: uas_eh_device_reset_handler start\n");
    std::fs::write(&kmsg, log).unwrap();
    let host = Host::with_root(dir.path());
    let system = System::inspect(&host).unwrap();
    (dir, host, system)
}

#[test]
fn the_usb_quirk_is_asked_when_the_plan_would_offer_it() {
    let (_dir, host, system) = pi4_resetting();
    let (outcome, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,            // the target
            Answer::Default,            // root only
            Answer::Yes,                // trial boot
            Answer::Yes,                // the quirk
            Answer::Type("sda".into()), // the confirmation
        ],
    );
    assert!(matches!(outcome, WizardEnd::Rehearsed), "{outcome:?}");
    let question = ui
        .prompt_containing("Move it to usb-storage")
        .expect("the quirk's question")
        .prompt;
    assert!(
        question.contains("174c:55aa") && question.contains("1 uas reset"),
        "{question}"
    );
    let transcript = ui.transcript();
    assert!(
        transcript.contains("usb-storage.quirks=174c:55aa:u panic=10"),
        "{transcript}"
    );
    // Unattended, nothing is set without --usb-quirk, and it says so.
    let settings = Settings {
        target: Some("/dev/sda".into()),
        yes: true,
        ..no_bench()
    };
    let (_, ui) = run(&host, &system, &settings, vec![]);
    let transcript = ui.transcript();
    assert!(
        transcript.contains("USB bridge 174c:55aa: left on uas (the default"),
        "{transcript}"
    );
    assert!(!transcript.contains("usb-storage.quirks=174c:55aa:u panic=10"));
    // A quiet bridge is not asked about.
    let (host, system) = machine("pi4");
    let (_, ui) = run(
        &host,
        &system,
        &no_bench(),
        vec![
            Answer::Default,
            Answer::Default,
            Answer::Yes,
            Answer::Type("sda".into()),
        ],
    );
    assert!(ui.prompt_containing("usb-storage").is_none());
}
