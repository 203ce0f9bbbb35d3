//! How a trial boot ended, written by the trial itself (`pimigrate trial`;
//! a commit by `verify --commit` alike) where the owner will look: the
//! trial system's state directory, and the SD card's, whose root partition
//! the trial mounts for the moment (it is attached, and no system has it
//! mounted: the trial runs the new root).
//! So whichever system runs next, `pimigrate status`, `verify`, `devices`
//! and the login message say what happened.
//!
//! A trial that never reaches userspace writes nothing; the SD system then
//! knows only that it came back after the trial reboot without a record,
//! which `pimigrate status` says as it is.

use super::atomic;
use super::mount::{mount_device, Mounted};
use crate::state::journal::Journal;
use crate::system::source::resolve;
use crate::system::System;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const OUTCOME_FILE: &str = "trial-outcome.json";
pub const OUTCOME_SCHEMA: &str = "pimigrate.trial-outcome/1";

/// How the trial ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// It came up, every check passed, and it was committed.
    Committed,
    /// It came up, and a check failed: not committed, rebooted.
    ChecksFailed,
    /// systemd went to emergency mode: rebooted.
    Emergency,
    /// systemd went to rescue mode: rebooted.
    Rescue,
    /// The check itself could not run to its end: not committed, rebooted.
    Error,
}

impl Outcome {
    pub fn committed(self) -> bool {
        self == Outcome::Committed
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialOutcome {
    pub schema: String,
    pub outcome: Outcome,
    /// When it was recorded (Unix seconds).
    pub at: u64,
    /// The new drive, as the plan names it (`/dev/sda`).
    pub target: String,
    /// Why, in a sentence.
    pub reason: String,
    /// The failed checks, or the units that failed, one a line.
    #[serde(default)]
    pub details: Vec<String>,
    /// The trial it is about: the SD card journal's `trial_requested` when
    /// the record was written (none: started by hand, or the SD card's
    /// journal could not be read).
    #[serde(default)]
    pub for_trial: Option<u64>,
}

impl TrialOutcome {
    pub fn new(outcome: Outcome, journal: &Journal, reason: impl Into<String>) -> TrialOutcome {
        TrialOutcome {
            schema: OUTCOME_SCHEMA.to_string(),
            outcome,
            at: crate::clock::now(),
            target: journal.plan.target.path.display().to_string(),
            reason: reason.into(),
            details: Vec::new(),
            for_trial: None,
        }
    }

    /// Whether this record is about `journal`'s latest trial. Trials are
    /// told apart by the time pimigrate rebooted into them, as the SD
    /// card's journal has it, never by the record's own time (a Pi without
    /// a clock dates its early boot wrongly). A journal that does not know
    /// when its trial was requested (a copy on the new root, made before;
    /// a trial started by hand) takes the record as it is.
    pub fn is_about(&self, journal: &Journal) -> bool {
        match (self.for_trial, journal.trial_requested) {
            (_, None) => true,
            (Some(record), Some(latest)) => record == latest,
            (None, Some(_)) => false,
        }
    }

    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(OUTCOME_FILE)
    }

    /// The record in `state_dir`, if there is one (an unreadable one is
    /// an error: it is evidence, and must not vanish silently).
    pub fn load(state_dir: &Path) -> Result<Option<TrialOutcome>> {
        let path = TrialOutcome::path(state_dir);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .with_context(|| format!("reading the trial's record {}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn save(&self, state_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(state_dir)
            .with_context(|| format!("creating {}", state_dir.display()))?;
        let bytes = serde_json::to_vec_pretty(self).context("encoding the trial's record")?;
        atomic::replace(&TrialOutcome::path(state_dir), &bytes, atomic::FILE)
    }
}

/// Records `outcome` in the running system's state directory and in the SD
/// card's; returns what was done, line by line. Each is best effort (in
/// emergency mode the root may still be read-only; the card may be gone),
/// and says why when it could not be made; it fails only when neither was.
/// The record names the trial it is about by the SD card journal's
/// `trial_requested`, read there: a Pi without a clock of its own (a Pi 4
/// before the network is up) cannot date it reliably.
pub fn record(
    system: &System,
    journal: &Journal,
    mut outcome: TrialOutcome,
) -> Result<(TrialOutcome, Vec<String>)> {
    let sd = sd_root(system, journal);
    if let Ok((_, dir, _)) = &sd {
        outcome.for_trial = Journal::load(dir)
            .ok()
            .flatten()
            .and_then(|j| j.trial_requested);
    }
    let host = &system.host;
    let own = host.path(&host.state_dir);
    let mut done = vec![match outcome.save(&own) {
        Ok(()) => format!("recorded in {}", TrialOutcome::path(&own).display()),
        Err(err) => format!("not recorded on this system: {err:#}"),
    }];
    let on_sd = sd.and_then(|(mounted, dir, device)| {
        outcome.save(&dir)?;
        mounted.sync()?;
        mounted.unmount()?;
        Ok(format!(
            "recorded on the SD card's root {} too, for its system to say at its next boot",
            device.display()
        ))
    });
    match on_sd {
        Ok(line) => done.push(line),
        Err(err) => {
            if done[0].starts_with("not recorded") {
                bail!("{}; nor on the SD card: {err:#}", done[0]);
            }
            done.push(format!(
                "not recorded on the SD card: {err:#}; this system's record is the only one"
            ))
        }
    }
    Ok((outcome, done))
}

/// The SD card's root partition (the migration's source), mounted for the
/// moment, its state directory in it, and its device.
fn sd_root(system: &System, journal: &Journal) -> Result<(Mounted, PathBuf, PathBuf)> {
    if !system.host.is_live() {
        // The devices an inspected tree names are this machine's only by
        // coincidence: never mount one of them.
        bail!("this is an inspected tree (--sysroot), whose devices are not mounted");
    }
    let spec = &journal.plan.source.root_spec;
    let device = match resolve(spec, &system.disks).as_slice() {
        [one] => PathBuf::from(one),
        [] => bail!("its root partition ({spec}) is not attached"),
        many => bail!("its root partition ({spec}) matches {}", many.join(", ")),
    };
    let running = system
        .source
        .running_root_devno
        .and_then(|devno| crate::system::disks::device_name(&system.disks, devno));
    if running.as_deref() == Some(device.to_string_lossy().as_ref()) {
        bail!(
            "{} is the running root, not the SD card's",
            device.display()
        );
    }
    let mounted = mount_device(&device, "ext4", "sd-root")
        .with_context(|| format!("mounting the SD card's root {}", device.display()))?;
    let state_dir = mounted.path().join(
        system
            .host
            .state_dir
            .strip_prefix("/")
            .unwrap_or(&system.host.state_dir),
    );
    Ok((mounted, state_dir, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(TrialOutcome::load(dir.path()).unwrap(), None);
        let record = TrialOutcome {
            schema: OUTCOME_SCHEMA.into(),
            outcome: Outcome::ChecksFailed,
            at: 1_800_000_000,
            target: "/dev/sda".into(),
            reason: "a check failed".into(),
            details: vec!["ids-unique: PARTUUID 2f4a9c17-01 names /dev/sda1 and /dev/sdb1".into()],
            for_trial: Some(1_799_999_000),
        };
        record.save(dir.path()).unwrap();
        assert_eq!(TrialOutcome::load(dir.path()).unwrap(), Some(record));
        std::fs::write(TrialOutcome::path(dir.path()), "{").unwrap();
        assert!(TrialOutcome::load(dir.path()).is_err());
    }
}
