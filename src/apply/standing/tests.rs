//! What the owner is told at each point a run can stop: every standing
//! names what boots and a command that goes on, and says only what the
//! state files and the error bear out.

use super::*;
use crate::plan::{Options, TrialChoice};
use crate::state::journal::Step;

/// A root-only move on the pi4 fixture, with a trial when `trial`, these
/// steps done.
fn journal(trial: bool, done: &[Step]) -> Journal {
    let (_host, system) = crate::system::inspect_fixture("pi4");
    let mut options = Options::new("/dev/sda");
    options.trial = match trial {
        true => TrialChoice::Always,
        false => TrialChoice::Never,
    };
    options.seed = Some(7);
    let plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
    let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
    journal.done = done.to_vec();
    journal
}

const COPIED: &[Step] = &[
    Step::Partitioned,
    Step::Formatted,
    Step::Copied,
    Step::TargetEdited,
];

/// Both lines there, each saying something, and a command in the second.
fn said(standing: &Standing) -> String {
    let text = standing.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with(&format!("  {WHERE}")), "{text}");
    assert!(lines[1].starts_with(&format!("  {NEXT}")), "{text}");
    assert!(standing.next.contains("pimigrate"), "{text}");
    text
}

#[test]
fn before_the_journal_nothing_was_written_and_the_same_command_goes_on() {
    let text = said(&migration(
        None,
        None,
        "sudo pimigrate migrate --target /dev/sda --yes",
        None,
    ));
    assert!(
        text.contains("nothing was written, so the Pi boots as it did"),
        "{text}"
    );
    assert!(
        text.contains("`sudo pimigrate migrate --target /dev/sda --yes` again"),
        "{text}"
    );
}

#[test]
fn a_migration_stopped_on_the_target_leaves_the_sd_card_and_resumes() {
    for (done, disk) in [
        (&[][..], "may be partly written"),
        (&COPIED[..2], "holds an unfinished copy"),
        (COPIED, "holds a complete copy that nothing starts yet"),
    ] {
        let journal = journal(false, done);
        let text = said(&migration(Some(&journal), None, "x", None));
        assert!(
            text.contains("still boots from its SD card, which is unchanged"),
            "{text}"
        );
        assert!(
            text.contains(&format!("/dev/sda {disk}")),
            "{done:?}: {text}"
        );
        assert!(text.contains("sudo pimigrate migrate --resume"), "{text}");
        assert!(text.contains("sudo pimigrate rollback"), "{text}");
    }
}

#[test]
fn a_migration_stopped_in_the_sd_cards_boot_files_says_either_version_boots() {
    let plain = journal(false, COPIED);
    let text = said(&migration(
        Some(&plain),
        Some(Writing::SdCardBootFiles),
        "x",
        None,
    ));
    assert!(
        text.contains("either its old root or the new one on /dev/sda"),
        "{text}"
    );
    assert!(!text.contains("unchanged"), "{text}");
    assert!(text.contains("--resume` finishes the last step"), "{text}");
    // A trial's files are new ones: cmdline.txt itself is not touched.
    let trial = journal(true, COPIED);
    let text = said(&migration(
        Some(&trial),
        Some(Writing::SdCardBootFiles),
        "x",
        None,
    ));
    assert!(text.contains("cmdline.txt is unchanged"), "{text}");
    assert!(
        text.contains("trial boot's files on it may be half made"),
        "{text}"
    );
}

#[test]
fn a_migration_stopped_in_the_bootloader_says_so_and_rollback_puts_it_back() {
    let journal = journal(false, COPIED);
    let text = said(&migration(
        Some(&journal),
        Some(Writing::Bootloader),
        "x",
        None,
    ));
    assert!(
        text.contains("may or may not have the migration's change"),
        "{text}"
    );
    assert!(text.contains("puts the bootloader's config back"), "{text}");
}

#[test]
fn a_finished_migration_names_its_next_step() {
    let mut done = COPIED.to_vec();
    done.push(Step::SourceBootEdited);
    let journal = journal(false, &done);
    let step = "reboot: the SD card's boot partition now starts the new root";
    let text = said(&migration(Some(&journal), None, "x", Some(step)));
    assert!(
        text.contains("complete: the SD card's boot files start the new root"),
        "{text}"
    );
    assert!(text.contains(step), "{text}");
    let trial = self::journal(true, &done);
    let text = said(&migration(Some(&trial), None, "x", None));
    assert!(
        text.contains("a normal boot still starts the SD card's system"),
        "{text}"
    );
}

#[test]
fn a_sync_says_whether_the_standby_is_incomplete() {
    let disk = Path::new("/dev/sdb");
    let again = "sudo pimigrate sync --target /dev/sdb";
    let text = said(&sync(Some(disk), true, again));
    assert!(text.contains("running system is untouched"), "{text}");
    assert!(text.contains("standby on /dev/sdb is incomplete"), "{text}");
    assert!(text.contains(&format!("`{again}` completes it")), "{text}");
    let text = said(&sync(Some(disk), false, again));
    assert!(text.contains("nothing was written to it"), "{text}");
    let text = said(&sync(None, false, "sudo pimigrate sync"));
    assert!(text.contains("nothing was written"), "{text}");
}

#[test]
fn a_commit_says_whether_cmdline_txt_changed() {
    let mut done = COPIED.to_vec();
    done.push(Step::SourceBootEdited);
    let journal = journal(true, &done);
    let again = "sudo pimigrate verify --commit";
    let text = said(&commit(Some(&journal), None, false, again));
    assert!(
        text.contains("not committed and nothing was changed"),
        "{text}"
    );
    let text = said(&commit(
        Some(&journal),
        Some(Writing::Tidying),
        false,
        again,
    ));
    assert!(
        text.contains("cmdline.txt starts the new root on /dev/sda"),
        "{text}"
    );
    assert!(
        text.contains("verify --commit` again finishes it"),
        "{text}"
    );
    let text = said(&commit(
        Some(&journal),
        Some(Writing::SdCardBootFiles),
        false,
        again,
    ));
    assert!(
        text.contains("it is whole, the original or the trial's"),
        "{text}"
    );
    let text = said(&commit(
        Some(&journal),
        Some(Writing::Bootloader),
        false,
        again,
    ));
    assert!(text.contains("not committed"), "{text}");
    assert!(text.contains("puts the bootloader's config back"), "{text}");
}

#[test]
fn a_rollback_says_how_far_it_got_and_goes_on_with_itself() {
    let journal = journal(false, COPIED);
    for writing in [
        None,
        Some(Writing::Bootloader),
        Some(Writing::SdCardBootFiles),
        Some(Writing::Tidying),
    ] {
        let text = said(&rollback(Some(&journal), writing));
        assert!(
            text.contains("`sudo pimigrate rollback` again"),
            "{writing:?}: {text}"
        );
    }
    let text = said(&rollback(Some(&journal), None));
    assert!(text.contains("nothing was rolled back"), "{text}");
    assert!(text.contains("SD card, which is unchanged"), "{text}");
}

/// The marker a writer puts on its error is found under any context
/// added later, and the standing then ends the error's text.
#[test]
fn the_marker_is_found_under_later_context_and_the_standing_ends_the_text() {
    let err = anyhow::anyhow!("mkfs.vfat failed")
        .context(Writing::SdCardBootFiles)
        .context("migrating to /dev/sda");
    assert_eq!(Writing::of(&err), Some(Writing::SdCardBootFiles));
    let err = attach(err, |writing| {
        assert_eq!(writing, Some(Writing::SdCardBootFiles));
        nothing_written("sudo pimigrate migrate")
    });
    let text = format!("{err:#}");
    assert!(
        text.starts_with(
            "migrating to /dev/sda: writing the SD card's boot files: mkfs.vfat failed\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("run `sudo pimigrate migrate` again"),
        "{text}"
    );
    // Attached once, whatever is added after.
    let again = attach(err.context("more"), |_| panic!("decided twice"));
    assert_eq!(format!("{again:#}").matches(WHERE).count(), 1);
    // A usage error and the person's own stop are left alone.
    // (clap's own error: the CLI's room is above this one.)
    let usage = anyhow::Error::from(clap::Error::raw(
        clap::error::ErrorKind::MissingRequiredArgument,
        "--target",
    ));
    assert!(attach(usage, |_| panic!("a usage error"))
        .downcast_ref::<clap::Error>()
        .is_some());
    let yes = anyhow::Error::from(crate::ui::confirm::YesRequired {
        subcommand: "migrate".into(),
        message: "--yes (-y) is required when not running on a terminal".into(),
    });
    assert!(attach(yes, |_| panic!("a usage error"))
        .downcast_ref::<crate::ui::confirm::YesRequired>()
        .is_some());
    let stop = anyhow::Error::from(crate::ui::Aborted);
    assert!(crate::ui::is_aborted(&attach(stop, |_| panic!("a stop"))));
}

/// After a kill, nothing says what was being written: once the journal
/// names the SD card's writes, they may have begun.
#[test]
fn after_a_stop_the_sd_cards_writes_may_have_begun_once_journaled() {
    let mut journal = journal(false, COPIED);
    let text = said(&after_a_stop(&journal));
    assert!(text.contains("SD card, which is unchanged"), "{text}");
    journal.backups.insert(
        crate::plan::PartitionPath::known("/cmdline.txt"),
        crate::plan::PartitionPath::known("/cmdline.txt.pimigrate-backup"),
    );
    let text = said(&after_a_stop(&journal));
    assert!(
        text.contains("either its old root or the new one"),
        "{text}"
    );
}
