//! Where the Pi stands when a run that writes stops with an error, and the
//! command that goes on from there: decided in this one place, from what
//! the state files say was done (the migration's journal, the standby's
//! record) and from what the run was writing when it stopped ([`Writing`],
//! which the writers put on their errors). `migrate`, the wizard, `sync`,
//! `verify --commit` and `rollback` end every error with its two lines
//! ([`attach`]), as a refusal ends with what to do.

use crate::plan::{EditSite, Layout, Plan};
use crate::state::journal::{Journal, Step};
use std::fmt;
use std::path::Path;

/// How the first of the two lines begins.
pub const WHERE: &str = "Where the Pi stands: ";
/// How the second begins.
pub const NEXT: &str = "Next: ";

/// Where the Pi stands, and the command that goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Standing {
    /// What boots now, and what the disks hold.
    pub pi: String,
    /// The command that goes on, with what it does.
    pub next: String,
}

impl fmt::Display for Standing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "  {WHERE}{}\n  {NEXT}{}", self.pi, self.next)
    }
}

/// What a run was writing, besides the disk it lays out, when an error
/// stopped it: the writers put it on their errors as context, so the
/// standing can say what those writes leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writing {
    /// The bootloader's config (rpi-eeprom-config): a migration's change,
    /// a commit's hand-over, or rollback putting the old one back.
    Bootloader,
    /// The SD card's boot files: a migration's last step, or rollback's
    /// restore.
    SdCardBootFiles,
    /// The run's change is made (a commit's new cmdline.txt or hand-over,
    /// a rollback's restore); its leftovers and the journal were being
    /// tidied up.
    Tidying,
}

impl fmt::Display for Writing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Writing::Bootloader => "changing the bootloader's config",
            Writing::SdCardBootFiles => "writing the SD card's boot files",
            Writing::Tidying => "tidying up",
        })
    }
}

impl Writing {
    /// What `err` says it stopped writing, if anything.
    pub fn of(err: &anyhow::Error) -> Option<Writing> {
        err.downcast_ref::<Writing>().copied()
    }
}

/// An error that stopped a run which writes, ending with where the Pi
/// stands and what goes on.
#[derive(Debug)]
pub struct Stopped {
    error: anyhow::Error,
    pub standing: Standing,
}

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}\n{}", self.error, self.standing)
    }
}

impl std::error::Error for Stopped {}

/// `err` ending with the standing `decide` makes of what it was writing;
/// left as it is when it says so already, and when it does not stop a run
/// (a usage error, which shows the usage; a run that needs root; the
/// person's own stop).
pub fn attach(
    err: anyhow::Error,
    decide: impl FnOnce(Option<Writing>) -> Standing,
) -> anyhow::Error {
    let not_ours = err.downcast_ref::<Stopped>().is_some()
        || err.downcast_ref::<clap::Error>().is_some()
        || err.downcast_ref::<crate::ui::confirm::YesRequired>().is_some()
        // A run that needs root has not begun; its one line names the
        // command to run.
        || err.downcast_ref::<crate::privilege::NeedsRoot>().is_some()
        || crate::ui::is_aborted(&err);
    if not_ours {
        return err;
    }
    let standing = decide(Writing::of(&err));
    Stopped {
        error: err,
        standing,
    }
    .into()
}

/// The command this process was started as, with sudo: what "run it
/// again" runs.
pub fn this_command() -> String {
    crate::privilege::sudo_command(&crate::privilege::this_command_line(), &[])
}

const RESUME: &str = "`sudo pimigrate migrate --resume`";
const ROLLBACK: &str = "`sudo pimigrate rollback`";

/// Nothing was written: run `again` once the cause is fixed.
pub fn nothing_written(again: &str) -> Standing {
    Standing {
        pi: "nothing was written, so the Pi boots as it did before this command".into(),
        next: format!("fix the cause above, then run `{again}` again"),
    }
}

/// A migration (`migrate`, the wizard) that stopped. `journal` is this
/// migration's, as the state directory holds it now (none: it was not
/// saved yet, so nothing was written); `again` is the command that
/// started it; `first_step` what a finished migration's owner does next.
pub fn migration(
    journal: Option<&Journal>,
    writing: Option<Writing>,
    again: &str,
    first_step: Option<&str>,
) -> Standing {
    let Some(journal) = journal else {
        return nothing_written(again);
    };
    let plan = &journal.plan;
    let target = plan.target.path.display();
    if journal.is_done(Step::SourceBootEdited) {
        return migrated(plan, first_step);
    }
    let change = plan
        .bootloader
        .as_ref()
        .filter(|b| b.consent)
        .and_then(|b| b.at_migrate.as_ref());
    let copied = journal.is_done(Step::TargetEdited);
    let carry_on = format!("fix the cause above, then {RESUME} carries on; {ROLLBACK} gives up");
    match writing {
        Some(Writing::SdCardBootFiles) => Standing {
            pi: match &plan.trial_boot {
                Some(trial) if trial.site == EditSite::SourceBoot => format!(
                    "the SD card's cmdline.txt is unchanged, so a normal boot starts its system as before; \
                     the trial boot's files on it may be half made ({target} holds the complete copy)"
                ),
                _ => format!(
                    "the SD card's cmdline.txt starts either its old root or the new one on {target}, which holds \
                     the complete copy: each boot file is whole, the old version or the new"
                ),
            },
            next: format!(
                "fix the cause above, then {RESUME} finishes the last step; {ROLLBACK} puts the SD card's \
                 boot files back"
            ),
        },
        Some(Writing::Bootloader) => Standing {
            pi: format!(
                "the SD card's boot files are unchanged and {target} holds the complete copy; the bootloader's \
                 config may or may not have the migration's change{}: the error above says",
                purpose(change.map(|c| c.purpose.as_str()))
            ),
            next: format!("{carry_on} and puts the bootloader's config back"),
        },
        _ => match change.filter(|_| journal.is_done(Step::BootloaderConfigured)) {
            Some(change) => Standing {
                pi: format!(
                    "the SD card's boot files are unchanged and {target} holds the complete copy; the \
                     bootloader's config has the migration's change ({})",
                    change.purpose
                ),
                next: format!("{carry_on} and puts the bootloader's config back"),
            },
            None => Standing {
                pi: format!(
                    "the Pi still boots from its SD card, which is unchanged; {}",
                    match (copied, journal.done.is_empty()) {
                        (true, _) => format!("{target} holds a complete copy that nothing starts yet"),
                        (false, false) => format!("{target} holds an unfinished copy that nothing starts"),
                        (false, true) => format!("{target} may be partly written, and nothing starts it"),
                    }
                ),
                next: carry_on,
            },
        },
    }
}

/// A migration that stopped with nothing to say what it was writing (it
/// was killed, or the power went): `pimigrate status` after the fact.
/// Once the journal names what the last step writes on the SD card, the
/// step may have begun.
pub fn after_a_stop(journal: &Journal) -> Standing {
    let sd_card_next = !journal.backups.is_empty() || !journal.created.is_empty();
    let writing = (sd_card_next && !journal.is_done(Step::SourceBootEdited))
        .then_some(Writing::SdCardBootFiles);
    migration(Some(journal), writing, "", None)
}

/// ` (PURPOSE)`, or nothing.
fn purpose(purpose: Option<&str>) -> String {
    purpose.map(|p| format!(" ({p})")).unwrap_or_default()
}

/// A migration that wrote all it writes; what stopped came after.
fn migrated(plan: &Plan, first_step: Option<&str>) -> Standing {
    let target = plan.target.path.display();
    let pi = match (plan.layout, &plan.trial_boot) {
        (_, Some(_)) => format!(
            "the migration to {target} is complete and its trial boot is ready; a normal boot still starts \
             the SD card's system"
        ),
        (Layout::RootOnly, None) => format!(
            "the migration to {target} is complete: the SD card's boot files start the new root at the next boot"
        ),
        (Layout::Full, None) => format!(
            "the migration to {target} is complete: it holds the system and its own boot files, and the SD card \
             is unchanged"
        ),
    };
    Standing {
        pi,
        next: match first_step {
            Some(step) => format!("{step} (`pimigrate status` says where it stands)"),
            None => "`pimigrate status` says what comes next".into(),
        },
    }
}

/// A sync that stopped. `standby` is the standby's disk once the sync knew
/// it; `incomplete` whether its record (as the state directory holds it
/// now) says it is not complete; `again` is the command that started it.
pub fn sync(standby: Option<&Path>, incomplete: bool, again: &str) -> Standing {
    let next = format!("fix the cause above, then `{again}` again");
    match (standby, incomplete) {
        (Some(disk), true) => Standing {
            pi: format!(
                "the running system is untouched; the standby on {} is incomplete, and marked so: do not boot \
                 from it until a sync completes",
                disk.display()
            ),
            next: format!("fix the cause above, then `{again}` completes it"),
        },
        (Some(disk), false) => Standing {
            pi: format!(
                "the running system is untouched, and so is the standby on {}: nothing was written to it",
                disk.display()
            ),
            next,
        },
        (None, _) => Standing {
            pi: "the running system is untouched, and so is any standby: nothing was written".into(),
            next,
        },
    }
}

/// `verify --commit` (or `--apply-quirk`) that stopped, with the journal
/// as the state directory holds it now; `began` when that journal says a
/// commit began (its backup of cmdline.txt) and did not finish; `again`
/// is the command.
pub fn commit(
    journal: Option<&Journal>,
    writing: Option<Writing>,
    began: bool,
    again: &str,
) -> Standing {
    let Some(journal) = journal else {
        return Standing {
            pi: "nothing was changed (there is no migration journal)".into(),
            next: format!("fix the cause above, then run `{again}` again"),
        };
    };
    let plan = &journal.plan;
    let target = plan.target.path.display();
    let hand_over = plan
        .bootloader
        .as_ref()
        .filter(|b| b.consent)
        .and_then(|b| b.at_commit.as_ref());
    let committed = match plan.layout {
        Layout::RootOnly => format!(
            "the trial is committed: the SD card's cmdline.txt starts the new root on {target} at every boot \
             (the original is backed up)"
        ),
        Layout::Full => format!(
            "the trial is committed: the hand-over to {target} is made{}",
            purpose(hand_over.map(|c| c.purpose.as_str()))
        ),
    };
    let finish = "`sudo pimigrate verify --commit` again finishes it (`pimigrate status` says where it stands)";
    match writing {
        Some(Writing::Tidying) => Standing {
            pi: format!("{committed}; the trial's own files may still be there"),
            next: finish.into(),
        },
        Some(Writing::SdCardBootFiles) => Standing {
            pi: format!(
                "the commit stopped while replacing the SD card's cmdline.txt: it is whole, the original or the \
                 trial's command line that starts {target} (the original is backed up)"
            ),
            next: format!("{finish}; {ROLLBACK} gives up"),
        },
        _ if began && journal.committed.is_none() => Standing {
            pi: format!(
                "a commit began and stopped part way: the SD card's cmdline.txt is whole, the original or the \
                 trial's command line that starts {target} (the original is backed up)"
            ),
            next: format!("{finish}; {ROLLBACK} gives up"),
        },
        Some(Writing::Bootloader) => Standing {
            pi: format!(
                "the trial is not committed, and the bootloader's config may or may not have the hand-over's \
                 change{}: the error above says; the trial's files are still there",
                purpose(hand_over.map(|c| c.purpose.as_str()))
            ),
            next: format!(
                "fix the cause above, then run `sudo pimigrate verify --commit` again; {ROLLBACK} gives up and \
                 puts the bootloader's config back"
            ),
        },
        _ if journal.committed.is_some() => Standing {
            pi: committed,
            next: format!("fix the cause above, then run `{again}` again"),
        },
        _ => Standing {
            pi: "the trial is not committed and nothing was changed: a normal boot starts the SD card's system \
                 as before"
                .into(),
            next: format!(
                "fix the cause above, then run `sudo pimigrate verify --commit` again in the trial boot; \
                 {ROLLBACK} gives up"
            ),
        },
    }
}

/// `rollback` that stopped, with the journal as the state directory holds
/// it now.
pub fn rollback(journal: Option<&Journal>, writing: Option<Writing>) -> Standing {
    let again = format!("fix the cause above, then run {ROLLBACK} again");
    match writing {
        Some(Writing::Bootloader) => Standing {
            pi: "the rollback stopped while putting the bootloader's config back: it is the migration's or the \
                 old one, as the error above says; the SD card's boot files are not restored yet, and the \
                 journal that restores them is kept"
                .into(),
            next: again,
        },
        Some(Writing::SdCardBootFiles) => Standing {
            pi: "the rollback stopped part way: each of the SD card's boot files is whole, the migration's \
                 version or the original, and the journal that restores them is kept"
                .into(),
            next: format!("{again}: it restores what is left"),
        },
        Some(Writing::Tidying) => Standing {
            pi: "the SD card's boot files are restored, so it boots as before the migration; only the journal \
                 could not be retired"
                .into(),
            next: format!("{again}: it finds nothing left to restore and retires the journal"),
        },
        None => Standing {
            pi: format!(
                "nothing was rolled back: {}",
                migration(journal, None, "", None).pi
            ),
            next: again,
        },
    }
}

#[cfg(test)]
mod tests;
