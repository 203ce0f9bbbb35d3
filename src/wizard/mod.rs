//! The guided migration: `pimigrate` on a terminal, or `pimigrate wizard`.
//!
//! A sequence of small steps, each taking what is known so far and the
//! [`Ui`]. Every decision is made by the code the subcommands use
//! (`System::inspect`, the recommend ranking, the planner, the executor);
//! the steps only explain and ask. Every question has a flag
//! ([`Settings`]), so the same flow runs unattended.
//!
//! Nothing is written before the person types the target's name: backing
//! out of any prompt (Esc, Ctrl-C) ends the flow with "nothing was changed".

mod apply;
mod benchmarks;
mod blank;
mod intro;
mod layout;
mod summary;
mod table;
mod target;
#[cfg(test)]
mod tests;

use crate::host::Host;
use crate::plan::{BootOrderChoice, HandoverChoice, Layout, Options, TableChoice, TrialChoice};
use crate::state::journal::Journal;
use crate::system::System;
use crate::ui::{is_aborted, Aborted, Ui};
use anyhow::Result;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// The answers given up front (flags); `None` means "ask".
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub target: Option<PathBuf>,
    pub layout: Option<Layout>,
    pub table: Option<TableChoice>,
    pub benchmarks: Benchmarks,
    /// Whether blank drives' writes are measured on the raw device; `None`
    /// asks (unattended: only the target's).
    pub bench_blank: Option<bool>,
    pub trial: Option<TrialChoice>,
    /// A full move: whether the bootloader's config may be changed.
    pub boot_order: Option<BootOrderChoice>,
    /// A full move: what `verify --commit` hands over.
    pub handover: Option<HandoverChoice>,
    /// Reboot (into the trial) once migrated; `None` asks (unattended: no).
    pub reboot: Option<bool>,
    /// The trial checks itself and commits, or goes back to the SD card.
    pub auto_commit: bool,
    /// TRIM left off (`--no-trim`); by default it is switched on where
    /// the new drive's bridge passes it.
    pub no_trim: bool,
    /// The usb-storage quirk for the new drive's bridge; `None` asks when
    /// the plan offers it (unattended: no).
    pub usb_quirk: Option<bool>,
    /// `PSU_MAX_CURRENT` to write (a Pi 5 booting from USB).
    pub psu_max_current: Option<u32>,
    /// Ask nothing: every open question takes its default, and the target
    /// is erased without typing its name (an explicit target is required).
    pub yes: bool,
    /// Makes the plan's random ids reproducible.
    pub seed: Option<u64>,
}

/// Whether and how the drives are measured before the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Benchmarks {
    /// Ask (unattended: the standard suite).
    #[default]
    Ask,
    Standard,
    Quick,
    Skip,
}

/// How the flow ended.
#[derive(Debug)]
pub enum WizardEnd {
    /// The migration ran; the journal says what was done.
    Migrated(Box<Journal>),
    /// The person backed out (Esc, Ctrl-C) or typed the wrong name:
    /// nothing was written.
    Stopped,
    /// Ctrl-C during the migration: it stopped at its next step, and
    /// `migrate --resume` carries on (what was said).
    Interrupted,
    NotConfirmed,
    /// The planner refused; every reason was shown.
    Refused,
    /// Nothing to do: no disk can take the system, or an earlier
    /// migration is pending.
    NothingToDo,
    /// An inspected tree (`--sysroot`): the flow stops where writing would
    /// begin.
    Rehearsed,
}

/// What the steps share.
pub struct Wizard<'a> {
    pub system: &'a System,
    pub host: &'a Host,
    pub ui: &'a dyn Ui,
    pub settings: &'a Settings,
}

impl Wizard<'_> {
    /// Runs the whole flow. Backing out anywhere before the first write
    /// ends it with a message that nothing was changed.
    pub fn run(&self) -> Result<WizardEnd> {
        match self.steps() {
            Err(err) if is_aborted(&err) => {
                self.ui.say("\nStopped: nothing was changed.");
                Ok(WizardEnd::Stopped)
            }
            other => other,
        }
    }

    fn steps(&self) -> Result<WizardEnd> {
        intro::what_happens(self);
        if let Some(outcome) = intro::earlier_migration(self)? {
            return Ok(outcome);
        }
        intro::show_disks(self);
        let recommendation = benchmarks::compare(self)?;
        self.stop_if_interrupted()?;
        let Some(target) = target::choose(self, recommendation.as_ref())? else {
            return Ok(WizardEnd::NothingToDo);
        };
        let layout = layout::choose(self, target)?;
        let table = table::choose(self, target, layout)?;
        let trial = apply::choose_trial(self, layout)?;
        let (boot_order, handover) = apply::choose_bootloader(self, layout)?;
        let mut options = Options::new(&target.path);
        options.layout = layout;
        options.table = table;
        options.trial = trial;
        options.boot_order = boot_order;
        options.handover = handover;
        options.auto_commit = self.settings.auto_commit;
        options.seed = self.settings.seed;
        options.trim = !self.settings.no_trim;
        options.usb_quirk = apply::choose_usb_quirk(self, target)?;
        options.psu_max_current = self.settings.psu_max_current;
        let Some(plan) = apply::make_plan(self, &options)? else {
            return Ok(WizardEnd::Refused);
        };
        self.stop_if_interrupted()?;
        if !apply::confirmed(self, &plan)? {
            self.ui.say("Not confirmed; nothing was written.");
            return Ok(WizardEnd::NotConfirmed);
        }
        apply::migrate(self, plan)
    }

    /// Ctrl-C while no prompt was open (scanning, benchmarking).
    fn stop_if_interrupted(&self) -> Result<()> {
        if self.ui.interrupted().load(Ordering::SeqCst) {
            return Err(Aborted.into());
        }
        Ok(())
    }

    /// Where an answer the person was not asked came from, for the line
    /// that states it: the flag, or `--yes` taking the default.
    fn not_asked(&self, flag: &str, given: bool) -> String {
        if given {
            format!(" (from {flag})")
        } else if self.settings.yes {
            format!(" (the default, as --yes asks nothing; {flag} chooses)")
        } else {
            String::new()
        }
    }

    /// An answer from the flags, else from `ask`; unattended runs take
    /// `default` without asking.
    fn answer<T>(
        &self,
        given: Option<T>,
        default: T,
        ask: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        match given {
            Some(value) => Ok(value),
            None if self.settings.yes => Ok(default),
            None => ask(),
        }
    }
}
