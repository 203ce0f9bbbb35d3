//! What `status` says in each situation a person can come back to.

use super::*;
use crate::apply::trial_outcome::Outcome;
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
            "did not come up: the Pi was back on the SD card 85 s after the trial reboot"
        ),
        "{said}"
    );
    assert!(said.contains("nothing was committed"), "{said}");
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
