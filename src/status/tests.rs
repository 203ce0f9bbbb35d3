//! What `status` says in each situation a person can come back to.

use super::*;
use crate::apply::trial_outcome::Outcome;
use crate::check::Finding;
use crate::plan::{Options, TrialChoice};

const MIGRATED_AT: u64 = 1_800_000_000;

/// A journal of a root-only move on the pi4 fixture, every step done (or
/// `done` only), with a trial when `trial`.
fn journal(trial: bool, auto_commit: bool, done: &[Step]) -> Journal {
    let (_host, system) = crate::system::inspect_fixture("pi4");
    let mut options = Options::new("/dev/sda");
    options.trial = if trial {
        TrialChoice::Always
    } else {
        TrialChoice::Never
    };
    options.auto_commit = auto_commit;
    options.seed = Some(7);
    let plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
    let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
    journal.done = done.to_vec();
    journal.updated = MIGRATED_AT;
    journal
}

const ALL: &[Step] = &[
    Step::Partitioned,
    Step::Formatted,
    Step::Copied,
    Step::TargetEdited,
    Step::SourceBootEdited,
];

fn facts(journal: Journal) -> Facts {
    Facts {
        journal: Some(journal),
        now: MIGRATED_AT + 3600,
        booted: Some(MIGRATED_AT - 600),
        ..Facts::default()
    }
}

fn outcome(kind: Outcome, at: u64, reason: &str, details: &[&str]) -> TrialOutcome {
    TrialOutcome {
        schema: crate::apply::trial_outcome::OUTCOME_SCHEMA.into(),
        outcome: kind,
        at,
        target: "/dev/sda".into(),
        reason: reason.into(),
        details: details.iter().map(|d| d.to_string()).collect(),
        for_trial: None,
    }
}

#[test]
fn no_journal_is_nothing_to_say() {
    let status = assess(&Facts::default());
    assert_eq!(status.stage, Stage::None);
    assert_eq!(login_text(&status), "");
    assert!(text(&status).contains("no migration here"));
}

#[test]
fn a_migration_still_running_says_so_and_where_to_follow_it() {
    let mut f = facts(journal(true, false, &[Step::Partitioned, Step::Formatted]));
    f.running = true;
    f.log = Some("/var/log/pimigrate/migrate-20270115T080000Z.log".into());
    let status = assess(&f);
    assert_eq!(status.stage, Stage::Running);
    let headline = status.headline.clone().unwrap();
    assert!(
        headline.contains("migrating to /dev/sda right now (so far: formatted)"),
        "{headline}"
    );
    assert!(login_text(&status).contains("tail -f /var/log/pimigrate/migrate-20270115T080000Z.log"));
}

#[test]
fn a_migration_that_stopped_says_how_its_log_ended_and_what_to_do() {
    let mut f = facts(journal(true, false, &[Step::Partitioned, Step::Formatted]));
    f.log_end = Some(LogEnd::Open);
    let status = assess(&f);
    assert_eq!(status.stage, Stage::Stopped);
    let headline = status.headline.clone().unwrap();
    assert!(headline.contains("killed, or the power went"), "{headline}");
    assert!(text(&status).contains("migrate --resume"));
    // Where the Pi stands, in the words a failed migrate ends with.
    assert!(
        text(&status).contains("the Pi still boots from its SD card, which is unchanged"),
        "{}",
        text(&status)
    );
    f.log_end = Some(LogEnd::Error("the target /dev/sda is gone".into()));
    assert!(assess(&f)
        .headline
        .unwrap()
        .contains("it failed: the target /dev/sda is gone"));
}

#[test]
fn a_committed_trial_is_news_for_a_week() {
    let mut j = journal(true, true, ALL);
    j.committed = Some(MIGRATED_AT + 120);
    let mut f = facts(j);
    f.runs_target = true;
    f.outcome = Some(outcome(
        Outcome::Committed,
        MIGRATED_AT + 120,
        "every check passed",
        &[],
    ));
    let status = assess(&f);
    assert_eq!(status.stage, Stage::Committed);
    assert_eq!(
        status.headline.as_deref(),
        Some(
            "the trial of /dev/sda came up and was committed at 2027-01-15 08:02 UTC by itself \
             (--auto-commit: every check passed)"
        )
    );
    assert!(status.news);
    f.now = MIGRATED_AT + 8 * 86_400;
    assert_eq!(login_text(&assess(&f)), "");
}

#[test]
fn a_trial_that_failed_its_checks_says_why_and_what_next() {
    let mut j = journal(true, true, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let mut f = facts(j);
    f.booted = Some(MIGRATED_AT + 200);
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    f.outcome = Some(TrialOutcome {
        for_trial: Some(MIGRATED_AT + 10),
        ..outcome(
            Outcome::ChecksFailed,
            MIGRATED_AT + 150,
            "a check failed (ids-unique)",
            &["ids-unique: PARTUUID=2f4a9c17-01 names /dev/sda1 and /dev/sdb1"],
        )
    });
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialFailed);
    let said = login_text(&status);
    assert!(
        said.contains(
            "the trial of /dev/sda came up at 2027-01-15 08:02 UTC but a check failed (ids-unique)"
        ),
        "{said}"
    );
    assert!(said.contains("the Pi is back on the SD card"), "{said}");
    assert!(said.contains("names /dev/sda1 and /dev/sdb1"), "{said}");
    assert!(said.contains("sudo pimigrate rollback"), "{said}");
    // A record of another trial reboot is about another trial, whatever
    // its own clock said (a Pi 4 without the network dates its early boot
    // wrongly).
    let mut older = f.clone();
    older.outcome.as_mut().unwrap().for_trial = Some(MIGRATED_AT - 500);
    assert_eq!(assess(&older).stage, Stage::TrialDidNotComeUp);
    let mut early_clock = f.clone();
    early_clock.outcome.as_mut().unwrap().at = MIGRATED_AT - 3000;
    assert_eq!(assess(&early_clock).stage, Stage::TrialFailed);
}

#[test]
fn a_trial_that_left_no_record_is_said_as_what_is_known() {
    let mut j = journal(true, false, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let mut f = facts(j);
    f.booted = Some(MIGRATED_AT + 95);
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialDidNotComeUp);
    let said = text(&status);
    assert!(
        said.contains(
            "did not come up: the Pi came back to the SD card by itself, 85 s after the trial reboot"
        ),
        "{said}"
    );
    assert!(said.contains("nothing was committed"), "{said}");
    assert!(said.contains("the new drive gone from under it"), "{said}");
    assert!(said.contains("is not attached now"), "{said}");
    f.target_attached = true;
    assert!(text(&assess(&f)).contains("/dev/sda is attached now"));
    // A boot whose clock starts before the trial reboot (no RTC, no
    // network yet) is still after it: the seconds are left out.
    f.booted = Some(MIGRATED_AT - 100);
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialDidNotComeUp);
    assert!(status
        .headline
        .unwrap()
        .contains("back on the SD card after the trial reboot at"),);
    assert_eq!(status.trial_return, None);
}

/// A trial whose reset never came (a root that vanished froze its init
/// before `systemd.crash_reboot`) is back only after a power cycle: later
/// than the longest of its own resets, which `status` says, in its words
/// and its JSON. Within that bound it came back by itself.
#[test]
fn a_trial_back_later_than_its_own_resets_take_says_a_reset_was_not_planned() {
    let mut j = journal(true, true, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let within = j
        .plan
        .trial_boot
        .as_ref()
        .and_then(|t| t.guard.as_ref())
        .map(|g| u64::from(g.longest_return_seconds()))
        .unwrap();
    let mut f = facts(j);
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    f.target_attached = true;
    f.booted = Some(MIGRATED_AT + 10 + within);
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialDidNotComeUp);
    assert_eq!(
        status.trial_return,
        Some(TrialReturn {
            after_seconds: within,
            within_seconds: within,
            by_itself: true
        })
    );
    assert!(
        status.headline.as_deref().unwrap().contains("by itself"),
        "{status:?}"
    );
    f.booted = Some(MIGRATED_AT + 10 + within + 1);
    let status = assess(&f);
    assert!(!status.trial_return.unwrap().by_itself);
    let said = login_text(&status);
    assert!(
        said.contains(&format!(
            "pimigrate: the trial of /dev/sda did not come up, and the Pi came back to the SD card only \
             after a reset pimigrate did not plan (most likely a power cycle), {} s after the trial reboot \
             at 2027-01-15 08:00 UTC; nothing was committed\n",
            within + 1
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("back within {within} s; this took longer")),
        "{said}"
    );
    assert!(!said.contains("by itself"), "{said}");
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["trial_return"]["by_itself"], false);
    assert_eq!(json["trial_return"]["within_seconds"], within);

    // A trial that recorded its failure, then never rebooted.
    f.outcome = Some(TrialOutcome {
        for_trial: Some(MIGRATED_AT + 10),
        ..outcome(
            Outcome::ChecksFailed,
            MIGRATED_AT + 150,
            "a check failed (ids-unique)",
            &[],
        )
    });
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialFailed);
    let headline = status.headline.clone().unwrap();
    assert!(
        headline.contains("only after a reset pimigrate did not plan (most likely a power cycle)"),
        "{headline}"
    );
    assert!(
        !headline.contains("the Pi is back on the SD card"),
        "{headline}"
    );
    f.booted = Some(MIGRATED_AT + 200);
    let status = assess(&f);
    assert!(status.trial_return.unwrap().by_itself);
    assert!(login_text(&status).contains("the Pi is back on the SD card"));
    assert!(!login_text(&status).contains("did not plan"));

    // A trial whose kernel waits for its root without end: the plan said so.
    let mut j = journal(true, false, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let guard = j.plan.trial_boot.as_mut().unwrap().guard.as_mut().unwrap();
    guard.unbounded = Some("only a power cycle ends the wait".into());
    let mut f = facts(j);
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    f.booted = Some(MIGRATED_AT + 100_000);
    assert!(text(&assess(&f)).contains("the plan said so: only a power cycle ends the wait"));
}

#[test]
fn before_the_trial_and_in_it() {
    let f = facts(journal(true, true, ALL));
    let status = assess(&f);
    assert_eq!(status.stage, Stage::TrialPending);
    assert!(
        status.headline.as_deref().unwrap().contains(
            "the trial boot is next: sudo reboot \"0 tryboot\" (it checks and commits itself)"
        ),
        "{status:?}"
    );
    let mut f = f;
    f.in_trial_boot = true;
    f.runs_target = true;
    assert_eq!(assess(&f).stage, Stage::InTrial);
}

#[test]
fn a_move_without_a_trial_is_migrated() {
    let mut f = facts(journal(false, false, ALL));
    f.runs_target = true;
    let status = assess(&f);
    assert_eq!(status.stage, Stage::Migrated);
    assert!(
        !status.news,
        "the system runs from it: nothing to tell at login"
    );
}

/// A full move's one-shot boot of a new drive the bootloader passed over
/// starts the SD card with the trial flag still set: not the trial.
#[test]
fn the_sd_card_started_with_the_trial_flag_is_not_the_trial() {
    let mut j = journal(true, true, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let mut f = facts(j);
    f.booted = Some(MIGRATED_AT + 60);
    f.in_trial_boot = true;
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    assert_eq!(assess(&f).stage, Stage::TrialDidNotComeUp);
}

/// `facts` of `journal` (none: no journal), changed by `change`.
fn with(journal: Option<Journal>, change: impl FnOnce(&mut Facts)) -> Facts {
    let mut f = journal.map(facts).unwrap_or_default();
    change(&mut f);
    f
}

fn assert_stages(cases: Vec<(&str, Facts, Stage)>) {
    for (situation, facts, expected) in cases {
        assert_eq!(stage(&facts), expected, "{situation}");
        assert_eq!(assess(&facts).stage, expected, "{situation}");
    }
}

/// The stages up to the move's end from the facts alone, one situation
/// or two for each (the words are the tests above).
#[test]
fn the_stages_of_a_move_are_decided_from_the_facts() {
    let moved = |trial| Some(journal(trial, false, ALL));
    assert_stages(vec![
        ("no journal", with(None, |_| {}), Stage::None),
        (
            "a command holds the lock, no journal yet",
            with(None, |f| f.running = true),
            Stage::Running,
        ),
        (
            "a command holds the lock of a finished migration",
            with(moved(true), |f| f.running = true),
            Stage::Running,
        ),
        (
            "steps left, nothing runs",
            with(Some(journal(true, false, &[Step::Partitioned])), |_| {}),
            Stage::Stopped,
        ),
        (
            "the SD card's boot files not changed yet, but this runs the target",
            with(Some(journal(false, false, &[Step::Copied])), |f| {
                f.runs_target = true
            }),
            Stage::Migrated,
        ),
        (
            "no trial planned",
            with(moved(false), |_| {}),
            Stage::Migrated,
        ),
    ]);
}

/// The trial's stages from the facts alone, one situation or more for
/// each.
#[test]
fn the_stages_of_a_trial_are_decided_from_the_facts() {
    let moved = || Some(journal(true, true, ALL));
    let on_sd = |f: &mut Facts| f.on_old_root = Some("/dev/mmcblk0p2".into());
    let recorded = |kind| Some(outcome(kind, MIGRATED_AT + 120, "", &[]));
    let mut committed = journal(true, false, ALL);
    committed.committed = Some(MIGRATED_AT + 120);
    let mut asked = journal(true, false, ALL);
    asked.trial_requested = Some(MIGRATED_AT + 10);
    assert_stages(vec![
        (
            "the journal says committed",
            with(Some(committed), |_| {}),
            Stage::Committed,
        ),
        (
            "the trial's record says committed, the SD card runs",
            with(moved(), |f| {
                on_sd(f);
                f.outcome = recorded(Outcome::Committed);
            }),
            Stage::Committed,
        ),
        (
            "the trial flag, on the target",
            with(moved(), |f| {
                f.in_trial_boot = true;
                f.runs_target = true;
            }),
            Stage::InTrial,
        ),
        (
            "the trial's record says its checks failed",
            with(moved(), |f| {
                on_sd(f);
                f.outcome = recorded(Outcome::ChecksFailed);
            }),
            Stage::TrialFailed,
        ),
        (
            "a trial reboot asked, the SD card runs, no record",
            with(Some(asked), on_sd),
            Stage::TrialDidNotComeUp,
        ),
        (
            "no trial reboot asked, the SD card runs",
            with(moved(), on_sd),
            Stage::TrialPending,
        ),
        (
            "the target runs without the trial flag",
            with(moved(), |f| f.runs_target = true),
            Stage::TrialPending,
        ),
        (
            "not rebooted since",
            with(moved(), |_| {}),
            Stage::TrialPending,
        ),
    ]);
}

/// The stages no test above words: the SD card's system after a
/// committed trial, and a trial not yet run on either root.
#[test]
fn the_sd_card_after_a_committed_trial_and_a_trial_not_yet_run() {
    let mut f = facts(journal(true, true, ALL));
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    f.outcome = Some(outcome(Outcome::Committed, MIGRATED_AT + 120, "", &[]));
    let status = assess(&f);
    assert_eq!(
        status.headline.as_deref(),
        Some(
            "the trial of /dev/sda came up and was committed at 2027-01-15 08:02 UTC; this boot \
             runs the SD card's system again"
        )
    );
    assert!(status.trial.is_some());
    f.outcome = None;
    f.booted = Some(MIGRATED_AT + 60);
    let said = text(&assess(&f));
    assert_eq!(
        said,
        "migrated to /dev/sda at 2027-01-15 08:00 UTC; this boot runs the SD card's root \
         /dev/mmcblk0p2: the trial has not run, or did not come up\n\
         start the trial: sudo reboot \"0 tryboot\"; `sudo pimigrate verify` says more\n"
    );
    f.on_old_root = None;
    f.runs_target = true;
    assert_eq!(
        assess(&f).headline.as_deref(),
        Some(
            "this system runs from /dev/sda, and its trial is not committed: sudo pimigrate \
             verify --commit"
        )
    );
    let running = assess(&Facts {
        running: true,
        ..Facts::default()
    });
    assert_eq!(
        running.headline.as_deref(),
        Some("a pimigrate command is running now")
    );
    assert!(running.news && running.target.is_none());
}

#[test]
fn a_migration_is_in_force_from_its_commit_or_a_reboot_after_a_move_without_trial() {
    // Committed in the journal.
    let mut j = journal(true, false, ALL);
    j.committed = Some(MIGRATED_AT + 120);
    assert_eq!(in_force_since(&facts(j)), Some(MIGRATED_AT + 120));
    // The SD card's system knows of the commit by the record it left.
    let mut j = journal(true, false, ALL);
    j.trial_requested = Some(MIGRATED_AT + 10);
    let mut f = facts(j);
    f.on_old_root = Some("/dev/mmcblk0p2".into());
    f.outcome = Some(TrialOutcome {
        for_trial: Some(MIGRATED_AT + 10),
        ..outcome(
            Outcome::Committed,
            MIGRATED_AT + 300,
            "every check passed",
            &[],
        )
    });
    assert_eq!(stage(&f), Stage::Committed);
    assert_eq!(in_force_since(&f), Some(MIGRATED_AT + 300));
    // A trial not yet committed, or a move without one before its reboot:
    // nothing is in force yet.
    assert_eq!(in_force_since(&facts(journal(true, false, ALL))), None);
    let without_trial = facts(journal(false, false, ALL));
    assert_eq!(in_force_since(&without_trial), None);
    let rebooted = Facts {
        booted: Some(MIGRATED_AT + 60),
        ..without_trial
    };
    assert_eq!(in_force_since(&rebooted), Some(MIGRATED_AT));
}

/// A committed move, a week old, whose check found `checks`.
fn committed_with(checks: Vec<Finding>) -> Status {
    let mut j = journal(true, false, ALL);
    j.committed = Some(MIGRATED_AT);
    let mut f = facts(j);
    f.now = MIGRATED_AT + 8 * 86_400;
    f.after_move = Some(AfterMove {
        since: MIGRATED_AT,
        checks: Ok(checks),
    });
    assess(&f)
}

#[test]
fn what_drifted_is_news_at_login_with_its_fix_and_in_status() {
    let ok = Finding::ok("booted-from", "/ is mounted from /dev/sda1".into());
    let quiet = committed_with(vec![ok.clone()]);
    assert!(!quiet.news);
    assert_eq!(login_text(&quiet), "");
    assert!(text(&quiet).contains("after the move: nothing drifted (1 checks"));

    let order = Finding::failure("boot-order", "BOOT_ORDER is 0xf41".into())
        .fix("sudo rpi-eeprom-config --edit: set BOOT_ORDER=0xf14")
        .fix("then reboot");
    let heat = Finding::warning("power", "throttled for heat".into()).fix("a fan");
    let drifted = committed_with(vec![ok.clone(), heat.clone(), order.clone()]);
    assert!(drifted.news);
    assert_eq!(
        login_text(&drifted),
        "pimigrate: the move to /dev/sda has drifted: 1 failure, 1 warning\n\
         pimigrate: ✗ BOOT_ORDER is 0xf41\n\
         pimigrate:   fix: sudo rpi-eeprom-config --edit: set BOOT_ORDER=0xf14\n\
         pimigrate: ! throttled for heat\n\
         pimigrate:   fix: a fan\n\
         pimigrate: more with `pimigrate status`\n"
    );
    let said = text(&drifted);
    assert!(
        said.contains("after the move: 1 failure, 1 warning\n  ✗ BOOT_ORDER is 0xf41\n      sudo rpi-eeprom-config --edit: set BOOT_ORDER=0xf14\n      then reboot\n"),
        "{said}"
    );
    // Muted: listed in the JSON, news no more.
    let muted = committed_with(vec![
        ok,
        Finding {
            muted: true,
            ..order
        },
    ]);
    assert!(!muted.news);
    assert_eq!(login_text(&muted), "");
    assert_eq!(muted.checks.len(), 2);
}
