//! A failure of the matrix as data ([`Breakage`]): what breaks a trial,
//! what the SD card's system must say once it is back, and what mends it;
//! and the one loop that runs a layout's failures in turn on one
//! [`Chain`] ([`Chain::run_matrix`]). The rows are in [`super::matrix`].

use super::chain::{said_at_login, Back, Chain, During, WHAT_IT_SAYS};
use crate::machine::pimigrate_bin;
use crate::machine::probe::expect_fact;
use crate::machine::rig::fact;
use crate::{After, Ending};
use anyhow::{ensure, Context, Result};
use std::time::Duration;

/// One failure: made before (or during) a trial, which must then fail in
/// its own way and leave the Pi to come back to the SD card's system by
/// itself; that system says what happened, and the next boot's job mends it.
pub(in crate::scenarios) struct Breakage {
    /// What fails, as the tally and the errors name it.
    pub what: &'static str,
    /// How the trial is broken.
    pub make: Make,
    /// What the consoles of the boots between the trial and the SD card's
    /// system must say (what reset the Pi).
    pub signs: &'static [&'static str],
    /// What the SD card's system must say once it is back.
    pub report: Report,
    /// How it is mended once the SD card's system is back.
    pub mend: Mend,
}

/// How a trial is broken.
pub(in crate::scenarios) enum Make {
    /// Job lines the SD card's system runs on the new drive, in the job of
    /// the boot before the trial: the previous failure's (after its mend),
    /// or for a layout's first failure the job that starts the first trial
    /// ([`Make::job_lines`]).
    OnTheDrive(Place, &'static str),
    /// What the harness does to the machine between two boots, before the
    /// trial (a disk plugged in or pulled).
    Machine(fn(&mut Chain) -> Result<()>),
    /// The power cut during the trial, once its console shows these words.
    PowerCutAt(&'static str),
    /// The new drive pulled out during the trial (QMP `device_del`), once
    /// its console shows the words `when`; the machine runs on. The boots
    /// after have it plugged in again, as each starts the machine afresh.
    /// `in_trial`: job lines the trial boot runs first (hands off all the
    /// same: they only set the scene), none when empty.
    UnplugAt {
        when: &'static str,
        in_trial: &'static str,
    },
}

/// The new drive, as the chains name it.
pub(super) const NEW_DRIVE: &str = "ssd";

/// How soon after its drive was pulled a trial must have reset itself:
/// systemd's reboot without the root (`systemd.crash_reboot`, 10 s) or a
/// kernel panic (`panic=10`), and the emulated guest's way there under
/// load. Well short of the trial's 600 s boot deadline, which would reset
/// it too, but is not what should.
pub(super) const RESET_AFTER_UNPLUG: Duration = Duration::from_secs(180);

/// How a failure is mended once the SD card's system is back.
pub(in crate::scenarios) enum Mend {
    /// Nothing to mend: what comes next does not mind it.
    Nothing,
    /// Job lines the SD card's system runs on the new drive, in the job
    /// that says what happened.
    OnTheDrive(Place, &'static str),
    /// What the harness does to the machine once the SD card's system has
    /// said what happened.
    Machine(fn(&mut Chain) -> Result<()>),
}

/// Where on the new drive the SD card's system breaks or mends something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::scenarios) enum Place {
    /// The new root, mounted at `$new` (the journal's plan names its
    /// PARTUUID).
    NewRoot,
    /// The new drive's boot partition (a full move's), the drive found by
    /// this serial, mounted at /run/tb-new-boot.
    NewBoot(&'static str),
}

/// Mounts the new root (the journal's plan names its PARTUUID) at `$new`;
/// [`UNMOUNT_NEW_ROOT`] unmounts it.
const MOUNT_NEW_ROOT: &str = r#"
new=/run/tb-new-root
mkdir -p "$new"
mount "/dev/disk/by-partuuid/$(jq -r '.plan.table.partitions[] | select(.role == "root") | .partuuid' /var/lib/pimigrate/migration.json)" "$new"
"#;
const UNMOUNT_NEW_ROOT: &str = "umount \"$new\"\n";

impl Place {
    /// The job lines that mount it.
    fn mount(self) -> String {
        match self {
            Place::NewRoot => MOUNT_NEW_ROOT.to_string(),
            Place::NewBoot(serial) => format!(
                "{}mkdir -p /run/tb-new-boot\nmount \"${{target}}1\" /run/tb-new-boot\n",
                pimigrate_bin::find_disk(serial)
            ),
        }
    }

    /// The job line that unmounts it.
    fn unmount(self) -> &'static str {
        match self {
            Place::NewRoot => UNMOUNT_NEW_ROOT,
            Place::NewBoot(_) => "umount /run/tb-new-boot\n",
        }
    }

    /// `lines` run there, each ended by a newline, between its mount and
    /// its unmount.
    fn job(self, lines: &[&str]) -> String {
        let lines: String = lines.iter().map(|l| format!("{l}\n")).collect();
        format!("{}{lines}{}", self.mount(), self.unmount())
    }
}

impl Make {
    /// The job lines that make it from the SD card's system; empty when the
    /// harness makes it.
    pub fn job_lines(&self) -> String {
        match self {
            Make::OnTheDrive(place, lines) => place.job(&[lines]),
            Make::Machine(_) | Make::PowerCutAt(_) | Make::UnplugAt { .. } => String::new(),
        }
    }
}

impl Mend {
    /// The job lines that mend it from the SD card's system; empty when the
    /// harness mends it, or nothing does.
    pub fn job_lines(&self) -> String {
        match self {
            Mend::OnTheDrive(place, lines) => place.job(&[lines]),
            Mend::Nothing | Mend::Machine(_) => String::new(),
        }
    }
}

/// The job lines back on the SD card after a failure: `mend` it, then
/// `make` the next, in one mount where both are in the same place.
fn mend_then_make(mend: &Mend, make: Option<&Make>) -> String {
    match (mend, make) {
        (Mend::OnTheDrive(here, mend), Some(Make::OnTheDrive(there, make))) if here == there => {
            here.job(&[mend, make])
        }
        _ => format!(
            "{}{}",
            mend.job_lines(),
            make.map_or(String::new(), Make::job_lines)
        ),
    }
}

/// The job of the SD card's system once back from `breakage`: say what
/// happened, mend it and make `next`, whose trial `job/then.sh` starts;
/// after the last, `ending`, and the Pi powers off.
fn back_job(breakage: &Breakage, next: Option<&Breakage>, ending: &str) -> (String, After) {
    let (ending, after) = match next {
        Some(_) => ("", After::Then),
        None => (ending, After::PowerOff),
    };
    let lines = mend_then_make(&breakage.mend, next.map(|n| &n.make));
    (format!("{WHAT_IT_SAYS}{lines}{ending}"), after)
}

/// What the SD card's system must say once it is back from a failure.
#[derive(Clone, Copy)]
pub(in crate::scenarios) struct Report {
    /// `pimigrate status`'s stage.
    stage: &'static str,
    /// Another stage it may say instead (a failure whose moment decides
    /// whether the trial could still record it).
    or_stage: Option<&'static str>,
    /// The trial's record's outcome (`none`: it left none).
    record: Option<&'static str>,
    /// What the record's reason must name (a unit, a check).
    reason_names: Option<&'static str>,
    /// What the login message (`pimigrate status --login`) must say.
    login: &'static [&'static str],
    /// Anything else the failure shows, checked last.
    also: Option<fn(&Back) -> Result<()>>,
}

impl Report {
    /// `pimigrate status` says this stage; nothing else is asked.
    pub const fn stage(stage: &'static str) -> Report {
        Report {
            stage,
            or_stage: None,
            record: None,
            reason_names: None,
            login: &[],
            also: None,
        }
    }

    /// Or this stage.
    pub const fn or_stage(self, stage: &'static str) -> Report {
        Report {
            or_stage: Some(stage),
            ..self
        }
    }

    /// The trial's record says this outcome.
    pub const fn record(self, outcome: &'static str) -> Report {
        Report {
            record: Some(outcome),
            ..self
        }
    }

    /// The trial's record's reason names this.
    pub const fn reason_names(self, name: &'static str) -> Report {
        Report {
            reason_names: Some(name),
            ..self
        }
    }

    /// The login message says each of `words`.
    pub const fn login(self, words: &'static [&'static str]) -> Report {
        Report {
            login: words,
            ..self
        }
    }

    /// And `check` passes.
    pub const fn also(self, check: fn(&Back) -> Result<()>) -> Report {
        Report {
            also: Some(check),
            ..self
        }
    }

    fn check(&self, chain: &Chain, back: &Back) -> Result<()> {
        match self.or_stage {
            Some(other) if fact(&back.facts, "stage")? == other => {}
            _ => expect_fact(&back.facts, "stage", self.stage)?,
        }
        if let Some(outcome) = self.record {
            expect_fact(&back.facts, "record", outcome)?;
        }
        if let Some(name) = self.reason_names {
            let reason = fact(&back.facts, "record_reason")?;
            ensure!(
                reason.contains(name),
                "the record's reason does not name {name}: {reason}"
            );
        }
        if !self.login.is_empty() {
            said_at_login(chain, self.login)?;
        }
        if let Some(also) = self.also {
            also(back)?;
        }
        Ok(())
    }
}

impl Chain {
    /// Runs `matrix`'s failures in turn, the first one made already (its
    /// job lines in the job that started the first trial): before each
    /// trial the harness does what the failure asks of it, then hands off
    /// until the SD card's system is back; there the job says what
    /// happened, mends the failure and makes the next, and `job/then.sh`
    /// starts the next trial. After the last failure the job runs `ending`
    /// and powers the Pi off. Each failure's report is checked once the
    /// harness has mended what it made; the last one's return is the Pi
    /// back on its SD card for the last time.
    pub fn run_matrix(&mut self, matrix: &[Breakage], ending: &str) -> Result<Back> {
        let mut last = None;
        for (n, breakage) in matrix.iter().enumerate() {
            let next = matrix.get(n + 1);
            let back = self.run_one(breakage, next, ending)?;
            last = Some(back);
        }
        last.context("a failure matrix with no failures")
    }

    /// One failure of the matrix, `next` the one after it (none: the last).
    fn run_one(
        &mut self,
        breakage: &Breakage,
        next: Option<&Breakage>,
        ending: &str,
    ) -> Result<Back> {
        let Breakage {
            what,
            make,
            signs,
            report,
            mend,
        } = breakage;
        if let Make::Machine(make) = make {
            make(self).with_context(|| format!("making {what}"))?;
        }
        let (during, in_trial) = match make {
            Make::PowerCutAt(words) => (During::CutAt(words), ""),
            Make::UnplugAt { when, in_trial } => (
                During::UnplugAt(when, self.pi.prepare_unplug(NEW_DRIVE)?),
                *in_trial,
            ),
            Make::OnTheDrive(..) | Make::Machine(_) => (During::Nothing, ""),
        };
        let cut = matches!(during, During::CutAt(_));
        let (job, after) = back_job(breakage, next, ending);
        let chain_in_trial = self.in_trial.clone();
        self.in_trial.push_str(in_trial);
        let back = self.failed_trial(what, signs, during, &job, after);
        self.in_trial = chain_in_trial;
        let back = back?;
        if let Mend::Machine(mend) = mend {
            mend(self).with_context(|| format!("mending {what}"))?;
        }
        if cut {
            ensure!(
                back.boots[0].record.ending == Ending::Killed,
                "the trial was not cut"
            );
        }
        if let Some(reset) = back.reset_after_unplug {
            ensure!(
                reset <= RESET_AFTER_UNPLUG,
                "after {what} the trial reset itself only {} s after the unplug (at most {} s); see {}",
                reset.as_secs(),
                RESET_AFTER_UNPLUG.as_secs(),
                back.boots[0].record.serial_log.display()
            );
        }
        report
            .check(self, &back)
            .with_context(|| format!("after {what}"))?;
        Ok(back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Breaking and mending in the same place is one mount; elsewhere or by
    /// the harness, each its own or none.
    #[test]
    fn a_mend_and_the_next_make_share_a_mount() {
        let root = Place::NewRoot;
        let both = mend_then_make(
            &Mend::OnTheDrive(root, "mend it"),
            Some(&Make::OnTheDrive(root, "break it")),
        );
        assert_eq!(
            both,
            format!("{MOUNT_NEW_ROOT}mend it\nbreak it\n{UNMOUNT_NEW_ROOT}")
        );
        let alone = mend_then_make(
            &Mend::OnTheDrive(root, "mend it"),
            Some(&Make::PowerCutAt("x")),
        );
        assert_eq!(
            alone,
            format!("{MOUNT_NEW_ROOT}mend it\n{UNMOUNT_NEW_ROOT}")
        );
        assert_eq!(mend_then_make(&Mend::Nothing, None), "");
        let boot = Make::OnTheDrive(Place::NewBoot("TB-SSD"), "mv a b").job_lines();
        assert!(boot
            .ends_with("mount \"${target}1\" /run/tb-new-boot\nmv a b\numount /run/tb-new-boot\n"));
        assert!(boot.contains("\"TB-SSD\""));
    }
}
