//! Where a migration stands and how it ended, for somebody who was not
//! watching: `pimigrate status`, the login message (`status --login`, run
//! by the package's update-motd.d snippet), and a line in `devices`.
//!
//! Read-only: the state directory (the journal, the trial's own record,
//! the lock a running pimigrate holds), the newest migration log, and this
//! boot. What a trial that never reached its system could not record is
//! said as what it is: it came back without a record, this long after the
//! trial reboot. How long that took says whether the trial's own resets
//! brought it back ([`TrialReturn`]): a trial back later than the longest
//! of them was reset by something pimigrate did not plan, most likely a
//! power cycle, and `status` says so.
//!
//! Once the migration is in force (its trial committed, or a move without
//! a trial rebooted into), the check after the move
//! (`crate::verify::drift`) runs too: what drifted is news at login, with
//! its fix, and `status --check` ([`check`]) is the same check for a
//! timer or a monitoring system. The login message makes the check itself
//! rather than reading what the daily timer found: it inspects the system
//! for the stage anyway (the bootloader's config included), the check adds
//! a read of the kernel log, one `vcgencmd` and one look under a mount
//! point, and a saved result would still name a drift after its fix, and
//! could not be written while a sync holds the state lock for hours.

use crate::apply::log::{self, LogEnd};
use crate::apply::trial_outcome::TrialOutcome;
use crate::check::{Finding, Level};
use crate::host::Host;
use crate::plan::trial_guard::TRIAL_BOOT_DEADLINE_SECONDS;
use crate::state::journal::{Journal, Step};
use crate::system::System;
use crate::verify::expected::Expected;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub const STATUS_SCHEMA: &str = "pimigrate.status/1";

/// How long a committed trial is news at login.
const NEWS_FOR_SECONDS: u64 = 7 * 86_400;

/// Where things stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// No migration journal.
    None,
    /// A pimigrate command holds the state lock right now.
    Running,
    /// A migration stopped before its end, and nothing runs it.
    Stopped,
    /// Migrated without a trial boot.
    Migrated,
    /// Migrated; the trial boot has not run yet.
    TrialPending,
    /// This boot is the trial.
    InTrial,
    /// The trial came up, then failed its checks (or stopped in emergency
    /// mode) and rebooted: nothing committed.
    TrialFailed,
    /// The Pi came back on the SD card after the trial reboot, and the
    /// trial left no record.
    TrialDidNotComeUp,
    /// The trial was committed.
    Committed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub schema: &'static str,
    pub stage: Stage,
    /// What matters most, in a line (none: nothing to say).
    pub headline: Option<String>,
    /// What else to know or do, line by line.
    pub lines: Vec<String>,
    /// Worth saying at login.
    pub news: bool,
    /// The migration's target, as its plan names it.
    pub target: Option<String>,
    /// The trial's own record, when it is about the latest trial.
    pub trial: Option<TrialOutcome>,
    /// The newest migration log.
    pub log: Option<PathBuf>,
    /// How long the SD card's system took to come back from a trial that
    /// failed, and whether the trial's own resets account for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trial_return: Option<TrialReturn>,
    /// The check after the move, once the migration is in force here
    /// (empty before, and where it could not be made).
    pub checks: Vec<Finding>,
    /// The stage itself is news at login (`news` also counts a drift).
    #[serde(skip)]
    pub stage_news: bool,
}

/// The check after the move, made once the migration is in force.
#[derive(Debug, Clone)]
pub struct AfterMove {
    /// Since when the migration is in force (Unix seconds): its commit,
    /// or a move without a trial's end.
    pub since: u64,
    /// The findings, or why the check could not be made.
    pub checks: Result<Vec<Finding>, String>,
}

/// How long after the trial reboot this boot of the SD card's system
/// began, against the longest a failed trial's own resets take
/// ([`TrialGuard::longest_return_seconds`]).
///
/// [`TrialGuard::longest_return_seconds`]: crate::plan::trial_guard::TrialGuard::longest_return_seconds
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrialReturn {
    /// Seconds from the trial reboot to the start of this boot.
    pub after_seconds: u64,
    /// The longest the trial's own resets take to bring the SD card's
    /// system back.
    pub within_seconds: u64,
    /// Back within that: the trial reset itself. Later: something
    /// pimigrate did not plan reset the Pi (a power cycle), or the Pi was
    /// started again since.
    pub by_itself: bool,
}

/// What [`stage`] decides from and [`assess`] words, gathered by
/// [`gather`] (and made by hand in tests).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub journal: Option<Journal>,
    /// Another pimigrate holds the state lock.
    pub running: bool,
    pub outcome: Option<TrialOutcome>,
    pub log: Option<PathBuf>,
    pub log_end: Option<LogEnd>,
    pub now: u64,
    /// When this boot began.
    pub booted: Option<u64>,
    /// This boot's id: whether it began after the journal's last write.
    pub boot_id: Option<String>,
    pub in_trial_boot: bool,
    /// This boot runs the migration's target root.
    pub runs_target: bool,
    /// The device of the SD card's root, when this boot runs it.
    pub on_old_root: Option<String>,
    /// The target disk is attached now.
    pub target_attached: bool,
    /// The check after the move, when the migration is in force.
    pub after_move: Option<AfterMove>,
}

impl Facts {
    /// This boot began after the journal's last write (unknown: no).
    pub fn rebooted_since(&self, journal: &Journal) -> bool {
        journal.rebooted_since(self.boot_id.as_deref(), self.booted) == Some(true)
    }
}

/// Reads the facts of `host` (a live system, or a tree with --sysroot),
/// the check after the move with them, the codes in `ignore` muted.
pub fn gather(host: &Host, ignore: &[String]) -> Facts {
    let system = System::inspect(host).ok();
    let mut facts = gather_on(host, system.as_ref());
    if let (Some(system), Some(journal), Some(since)) =
        (&system, &facts.journal, in_force_since(&facts))
    {
        facts.after_move = Some(AfterMove {
            since,
            checks: crate::verify::drift::run(system, journal, since, ignore)
                .map_err(|err| format!("{err:#}")),
        });
    }
    facts
}

/// Since when the migration is what this Pi should run: its trial's
/// commit (the journal's, or on the SD card's system the record the
/// commit left there), or the end of a move without a trial once the Pi
/// has rebooted after it. `None` before.
pub fn in_force_since(facts: &Facts) -> Option<u64> {
    let journal = facts.journal.as_ref()?;
    match stage(facts) {
        Stage::Committed => journal.committed.or_else(|| {
            latest_outcome(facts, journal)
                .filter(|o| o.outcome.committed())
                .map(|o| o.at)
        }),
        Stage::Migrated if facts.runs_target || facts.rebooted_since(journal) => {
            Some(journal.updated)
        }
        _ => None,
    }
}

/// [`gather`], with the system already inspected (`devices` has it).
pub fn gather_on(host: &Host, system: Option<&System>) -> Facts {
    let state_dir = host.path(&host.state_dir);
    let journal = Journal::load(&state_dir).ok().flatten();
    let log = log::newest(&host.path(&host.log_dir), "migrate");
    let mut facts = Facts {
        running: lock_held(&state_dir),
        outcome: TrialOutcome::load(&state_dir).ok().flatten(),
        log_end: log.as_deref().map(log::end_of),
        log,
        now: crate::clock::now(),
        booted: crate::verify::state::boot_time(host),
        boot_id: crate::verify::state::boot_id(host),
        ..Facts::default()
    };
    if let (Some(journal), Some(system)) = (&journal, system) {
        facts.in_trial_boot = system.pi.in_trial_boot;
        facts.runs_target = crate::state::journal::runs_from_target(system, &journal.plan);
        facts.on_old_root = Expected::from_journal(journal)
            .ok()
            .and_then(|e| crate::verify::state::running_from_old_root(system, &e));
        facts.target_attached = system
            .disks
            .iter()
            .any(|d| d.serial.is_some() && d.serial == journal.plan.target.serial)
            || system
                .disks
                .iter()
                .any(|d| d.disk_id.as_deref() == Some(journal.plan.disk.table.disk_id.as_str()));
    }
    facts.journal = journal;
    facts
}

/// Whether another process holds the state directory's lock (a running
/// migrate, sync or verify --commit).
fn lock_held(state_dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(state_dir.join("lock")) else {
        return false;
    };
    matches!(
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock),
        Err((_, nix::errno::Errno::EWOULDBLOCK))
    )
}

fn when(unix: u64) -> String {
    let text = crate::clock::rfc3339_utc(unix);
    // 2026-12-06T14:02:11Z -> 2026-12-06 14:02 UTC
    match (text.get(..10), text.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => text,
    }
}

/// Where things stand, from `facts`: the stage, then its words.
pub fn assess(facts: &Facts) -> Status {
    let stage = stage(facts);
    let Words {
        headline,
        lines,
        news,
    } = words(stage, facts);
    let journal = facts.journal.as_ref();
    let trial = match stage {
        Stage::None | Stage::Running | Stage::Stopped | Stage::Migrated => None,
        // The trial's record, when it is about the latest trial.
        _ => journal.and_then(|j| latest_outcome(facts, j)).cloned(),
    };
    let checks = facts
        .after_move
        .as_ref()
        .and_then(|a| a.checks.as_ref().ok())
        .cloned()
        .unwrap_or_default();
    let drifted = crate::check::worst(&checks) > Level::Ok;
    Status {
        schema: STATUS_SCHEMA,
        stage,
        headline,
        lines,
        news: news || drifted,
        target: journal.map(target_of),
        trial,
        log: facts.log.clone(),
        trial_return: journal.and_then(|j| trial_return(stage, facts, j)),
        checks,
        stage_news: news,
    }
}

/// How long the SD card's system took to come back from a failed trial,
/// when the trial reboot's time, this boot's and the trial's guard are
/// known. A boot whose clock starts before the trial reboot (no RTC, no
/// network yet) says nothing.
fn trial_return(stage: Stage, facts: &Facts, journal: &Journal) -> Option<TrialReturn> {
    if !matches!(stage, Stage::TrialFailed | Stage::TrialDidNotComeUp) {
        return None;
    }
    let asked = journal.trial_requested?;
    let after_seconds = facts.booted.filter(|&b| b > asked)? - asked;
    let guard = journal.plan.trial_boot.as_ref()?.guard.as_ref()?;
    let within_seconds = u64::from(guard.longest_return_seconds());
    Some(TrialReturn {
        after_seconds,
        within_seconds,
        by_itself: after_seconds <= within_seconds,
    })
}

/// Where things stand, decided from `facts` alone.
pub fn stage(facts: &Facts) -> Stage {
    let Some(journal) = &facts.journal else {
        return match facts.running {
            true => Stage::Running,
            false => Stage::None,
        };
    };
    if facts.running {
        return Stage::Running;
    }
    if !finished(facts, journal) {
        return Stage::Stopped;
    }
    if journal.plan.trial_boot.is_none() {
        return Stage::Migrated;
    }
    if journal.committed.is_some() {
        return Stage::Committed;
    }
    // A one-shot boot of a new drive that was passed over starts the SD
    // card with the trial flag still set: that is not the trial.
    if facts.in_trial_boot && facts.on_old_root.is_none() {
        return Stage::InTrial;
    }
    match latest_outcome(facts, journal) {
        // The SD card's system, booted again after a committed trial.
        Some(outcome) if outcome.outcome.committed() => Stage::Committed,
        Some(_) => Stage::TrialFailed,
        // pimigrate rebooted into the trial, and the SD card's root runs:
        // the trial is over. (Not by the clock alone: a Pi 4 without the
        // network may start its boot with an older time than the last.)
        None if facts.on_old_root.is_some() && journal.trial_requested.is_some() => {
            Stage::TrialDidNotComeUp
        }
        None => Stage::TrialPending,
    }
}

/// The migration wrote all it writes, or this system runs its target.
fn finished(facts: &Facts, journal: &Journal) -> bool {
    journal.is_done(Step::SourceBootEdited) || facts.runs_target
}

/// The trial's record, when it is about the journal's latest trial.
fn latest_outcome<'a>(facts: &'a Facts, journal: &Journal) -> Option<&'a TrialOutcome> {
    facts.outcome.as_ref().filter(|o| o.is_about(journal))
}

/// The migration's target, as its plan names it.
fn target_of(journal: &Journal) -> String {
    journal.plan.target.path.display().to_string()
}

/// What `status` says at a stage.
#[derive(Debug, Default)]
struct Words {
    headline: Option<String>,
    lines: Vec<String>,
    /// Worth saying at login.
    news: bool,
}

impl Words {
    /// A headline worth saying at login, and no more lines.
    fn news(headline: String) -> Words {
        Words {
            headline: Some(headline),
            lines: Vec::new(),
            news: true,
        }
    }
}

/// The words for `stage`, which [`stage`] decided from the same `facts`.
fn words(stage: Stage, facts: &Facts) -> Words {
    let Some(journal) = &facts.journal else {
        return match stage {
            Stage::Running => Words::news("a pimigrate command is running now".into()),
            _ => Words::default(),
        };
    };
    let said = Said::new(stage, facts, journal);
    // Each `None` below is a stage that [`stage`] does not decide from
    // these facts.
    match stage {
        Stage::None => None,
        Stage::Running => Some(said.running()),
        Stage::Stopped => Some(said.stopped()),
        Stage::Migrated => Some(said.migrated()),
        Stage::Committed => match journal.committed {
            Some(at) => Some(said.committed(at)),
            None => said.outcome.map(|o| said.committed_then_back(o)),
        },
        Stage::InTrial => Some(said.in_trial()),
        Stage::TrialFailed => said.outcome.map(|o| said.trial_failed(o)),
        Stage::TrialDidNotComeUp => journal
            .trial_requested
            .map(|asked| said.did_not_come_up(asked)),
        Stage::TrialPending => Some(said.pending()),
    }
    .unwrap_or_default()
}

/// What the words of a migration's stages are made from: its journal,
/// and the facts around it.
struct Said<'a> {
    facts: &'a Facts,
    journal: &'a Journal,
    target: String,
    /// The trial's record, when it is about the latest trial.
    outcome: Option<&'a TrialOutcome>,
    /// How long the SD card's system took to come back from it.
    back: Option<TrialReturn>,
}

impl<'a> Said<'a> {
    fn new(stage: Stage, facts: &'a Facts, journal: &'a Journal) -> Said<'a> {
        Said {
            facts,
            journal,
            target: target_of(journal),
            outcome: latest_outcome(facts, journal),
            back: trial_return(stage, facts, journal),
        }
    }

    /// The lines that say a failed trial came back only after a reset
    /// pimigrate did not plan (none when it came back by itself, or when
    /// it cannot be told).
    fn unplanned_reset(&self, back: TrialReturn) -> Vec<String> {
        if back.by_itself {
            return Vec::new();
        }
        let mut lines = vec![format!(
            "a failed trial's own resets bring the SD card's system back within {} s; this took longer, so \
             the trial stopped where none of them reached and someone power-cycled the Pi (or the Pi was \
             started again since)",
            back.within_seconds
        )];
        let unbounded = self
            .journal
            .plan
            .trial_boot
            .as_ref()
            .and_then(|t| t.guard.as_ref())
            .and_then(|g| g.unbounded.as_deref());
        if let Some(unbounded) = unbounded {
            lines.push(format!("the plan said so: {unbounded}"));
        }
        lines
    }

    fn last_step(&self) -> &'static str {
        self.journal
            .done
            .iter()
            .max()
            .map(|s| s.name())
            .unwrap_or("nothing written yet")
    }

    fn updated(&self) -> String {
        when(self.journal.updated)
    }

    /// How to start the trial (again).
    fn retry(&self) -> &'static str {
        match self
            .journal
            .plan
            .bootloader
            .as_ref()
            .is_some_and(|b| b.trial == Some(crate::plan::TrialRoute::Device))
        {
            true => "sudo pimigrate migrate --resume --reboot",
            false => "sudo reboot \"0 tryboot\"",
        }
    }

    fn auto_commit(&self) -> bool {
        let trial = self.journal.plan.trial_boot.as_ref();
        trial
            .and_then(|t| t.guard.as_ref())
            .is_some_and(|g| g.auto_commit)
    }

    fn running(&self) -> Words {
        let (target, last_step) = (&self.target, self.last_step());
        let mut words = Words::news(match finished(self.facts, self.journal) {
            false => format!("pimigrate is migrating to {target} right now (so far: {last_step})"),
            true => format!("pimigrate is running now (the migration to {target} is done; a check, commit or sync runs)"),
        });
        if let Some(log) = &self.facts.log {
            words
                .lines
                .push(format!("follow it: tail -f {}", log.display()));
        }
        words
    }

    fn stopped(&self) -> Words {
        let (target, last_step) = (&self.target, self.last_step());
        let ended = match &self.facts.log_end {
            Some(LogEnd::Error(error)) => format!("it failed: {error}"),
            Some(LogEnd::Open) => {
                "its log ends without an end: it was killed, or the power went".to_string()
            }
            _ => "it was interrupted".to_string(),
        };
        let mut words = Words::news(format!(
            "the migration to {target} stopped before it finished (done: {last_step}); {ended}"
        ));
        // Where the Pi stands, as a failed migrate said it; a run that
        // was killed may have been writing the SD card's boot files when
        // the journal names what it would write there.
        let standing = crate::apply::standing::after_a_stop(self.journal);
        words.lines.push(standing.pi);
        words.lines.push(standing.next);
        if let Some(log) = &self.facts.log {
            words.lines.push(format!("its log: {}", log.display()));
        }
        words
    }

    fn migrated(&self) -> Words {
        let (facts, target, updated) = (self.facts, &self.target, self.updated());
        let rebooted_since = facts.rebooted_since(self.journal);
        let headline = match (facts.runs_target, &facts.on_old_root) {
            (true, _) => format!("migrated to {target} at {updated}; this system runs from it"),
            (false, Some(old)) if rebooted_since => format!(
                "migrated to {target} at {updated}, but this boot runs the SD card's root {old}: `sudo pimigrate verify` says why"
            ),
            _ => format!("migrated to {target} at {updated}; reboot to start it"),
        };
        Words {
            news: facts.now.saturating_sub(self.journal.updated) < NEWS_FOR_SECONDS
                && !facts.runs_target,
            ..Words::news(headline)
        }
    }

    fn committed(&self, at: u64) -> Words {
        let how = match self.outcome {
            // Every commit leaves a record; the trial's own check, only
            // with --auto-commit.
            Some(o) if o.outcome.committed() && self.auto_commit() => {
                " by itself (--auto-commit: every check passed)"
            }
            _ => "",
        };
        Words {
            news: self.facts.now.saturating_sub(at) < NEWS_FOR_SECONDS,
            ..Words::news(format!(
                "the trial of {} came up and was committed at {}{how}",
                self.target,
                when(at)
            ))
        }
    }

    /// The SD card's system, booted again after a committed trial.
    fn committed_then_back(&self, outcome: &TrialOutcome) -> Words {
        Words::news(format!(
            "the trial of {} came up and was committed at {}; this boot runs the SD card's system again",
            self.target,
            when(outcome.at)
        ))
    }

    fn in_trial(&self) -> Words {
        let target = &self.target;
        Words::news(match self.auto_commit() {
            true => format!(
                "this is the trial boot of {target}: it checks itself once up, then commits or goes back to the SD card"
            ),
            false => format!(
                "this is the trial boot of {target}: `sudo pimigrate verify --commit` makes it permanent"
            ),
        })
    }

    fn trial_failed(&self, outcome: &TrialOutcome) -> Words {
        let (target, at, reason) = (&self.target, when(outcome.at), &outcome.reason);
        let headline = match (&self.facts.on_old_root, self.back) {
            (Some(_), Some(back)) if !back.by_itself => format!(
                "the trial of {target} came up at {at} but {reason}, and the Pi came back to the SD card only \
                 after a reset pimigrate did not plan (most likely a power cycle), {} s after the trial reboot; \
                 nothing was committed",
                back.after_seconds
            ),
            (Some(_), _) => format!(
                "the trial of {target} came up at {at} but {reason}: it rebooted without committing; the Pi is \
                 back on the SD card; nothing was committed"
            ),
            (None, _) => format!(
                "the trial of {target} came up at {at} but {reason}: it rebooted without committing; nothing \
                 was committed"
            ),
        };
        let mut words = Words::news(headline);
        words
            .lines
            .extend(outcome.details.iter().map(|d| format!("  {d}")));
        if let Some(back) = self.back {
            words.lines.extend(self.unplanned_reset(back));
        }
        words.lines.push(format!(
            "fix what it names and try again ({}), or undo the migration: sudo pimigrate rollback",
            self.retry()
        ));
        words
    }

    /// No record of the trial asked for at `asked`, and the SD card's root
    /// runs.
    fn did_not_come_up(&self, asked: u64) -> Words {
        let (target, retry, at) = (&self.target, self.retry(), when(asked));
        let headline = match (self.back, self.facts.booted.filter(|&b| b > asked)) {
            (Some(back), _) if back.by_itself => format!(
                "the trial of {target} did not come up: the Pi came back to the SD card by itself, {} s after \
                 the trial reboot at {at}, and nothing was committed",
                back.after_seconds
            ),
            (Some(back), _) => format!(
                "the trial of {target} did not come up, and the Pi came back to the SD card only after a reset \
                 pimigrate did not plan (most likely a power cycle), {} s after the trial reboot at {at}; \
                 nothing was committed",
                back.after_seconds
            ),
            // A trial without a guard (an older plan): the time alone.
            (None, Some(booted)) => format!(
                "the trial of {target} did not come up: the Pi was back on the SD card {} s after the trial \
                 reboot at {at}, and nothing was committed",
                booted - asked
            ),
            (None, None) => format!(
                "the trial of {target} did not come up: the Pi was back on the SD card after the trial reboot \
                 at {at}, and nothing was committed"
            ),
        };
        let mut words = Words::news(headline);
        if let Some(back) = self.back {
            words.lines.extend(self.unplanned_reset(back));
        }
        words.lines.push(format!(
            "the trial left no record, so it ended before its system was up or without its root: the kernel \
             or the initramfs found no root within its bound, a kernel panic, the new drive gone from under \
             it, a boot that did not reach its target within {TRIAL_BOOT_DEADLINE_SECONDS} s, or a power cut"
        ));
        words.lines.push(match self.facts.target_attached {
            true => format!("{target} is attached now: `sudo pimigrate verify` and `dmesg` may say more"),
            false => format!(
                "{target} is not attached now: most likely the trial found no root (a cable, the power of a \
                 bus-powered drive)"
            ),
        });
        words.lines.push(format!(
            "try again once it is seen by `pimigrate devices` ({retry}), or undo: sudo pimigrate rollback"
        ));
        words
    }

    fn pending(&self) -> Words {
        let (facts, target, retry) = (self.facts, &self.target, self.retry());
        let rebooted_since = facts.rebooted_since(self.journal);
        match &facts.on_old_root {
            // No trial was asked for (else it did not come up).
            Some(old) if rebooted_since => {
                let mut words = Words::news(format!(
                    "migrated to {target} at {}; this boot runs the SD card's root {old}: the trial has not run, or did \
                     not come up",
                    self.updated()
                ));
                words.lines.push(format!(
                    "start the trial: {retry}; `sudo pimigrate verify` says more"
                ));
                words
            }
            _ if facts.runs_target => Words::news(format!(
                "this system runs from {target}, and its trial is not committed: sudo pimigrate verify --commit"
            )),
            _ => Words::news(format!(
                "migrated to {target} at {}; the trial boot is next: {retry}{}",
                self.updated(),
                match self.auto_commit() {
                    true => " (it checks and commits itself)",
                    false => "",
                }
            )),
        }
    }
}

/// `pimigrate status` as text: the headline, then the lines, then what
/// drifted since the move, each with its fix.
pub fn text(status: &Status) -> String {
    let mut out = String::new();
    match &status.headline {
        Some(headline) => {
            out.push_str(headline);
            out.push('\n');
        }
        None => out.push_str("no migration here (no journal in the state directory)\n"),
    }
    for line in &status.lines {
        out.push_str(line);
        out.push('\n');
    }
    if status.checks.is_empty() {
        return out;
    }
    let drifted = drifted(&status.checks);
    if drifted.is_empty() {
        out.push_str(&format!(
            "after the move: nothing drifted ({} checks; `pimigrate status --check` lists them)\n",
            status.checks.len()
        ));
        return out;
    }
    out.push_str(&format!(
        "after the move: {}\n",
        check::count(&status.checks)
    ));
    for finding in drifted {
        out.push_str(&format!(
            "  {} {}\n",
            check::mark(finding.level),
            finding.message
        ));
        for step in &finding.fix {
            out.push_str(&format!("      {step}\n"));
        }
    }
    out
}

/// The findings that count and are not ok, failures first.
fn drifted(checks: &[Finding]) -> Vec<&Finding> {
    let mut out: Vec<&Finding> = checks.iter().filter(|c| c.counts() > Level::Ok).collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.level));
    out
}

/// The login message: only news, prefixed so a person sees whose it is:
/// the stage when it is news, then each drift since the move with its
/// first step.
pub fn login_text(status: &Status) -> String {
    let mut out = String::new();
    if let (Some(headline), true) = (&status.headline, status.stage_news) {
        out.push_str(&format!("pimigrate: {headline}\n"));
        for line in &status.lines {
            out.push_str(&format!("pimigrate: {line}\n"));
        }
    }
    let drifted = drifted(&status.checks);
    if !drifted.is_empty() {
        out.push_str(&format!(
            "pimigrate: the move to {} has drifted: {}\n",
            status.target.as_deref().unwrap_or("the new drive"),
            check::count(&status.checks)
        ));
        for finding in drifted {
            out.push_str(&format!(
                "pimigrate: {} {}\n",
                check::mark(finding.level),
                finding.message
            ));
            if let Some(step) = finding.fix.first() {
                out.push_str(&format!("pimigrate:   fix: {step}\n"));
            }
        }
    }
    if !out.is_empty() {
        out.push_str("pimigrate: more with `pimigrate status`\n");
    }
    out
}

pub mod check;
pub mod timer;

#[cfg(test)]
mod tests;
