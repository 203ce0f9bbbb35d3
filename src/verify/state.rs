//! Where the system stands against its migration journal, before any check
//! runs: not rebooted yet, a trial boot that did not come up, and whether
//! `--commit` may make the trial permanent.

use super::expected::Expected;
use super::{TrialState, Verdict, Verification};
use crate::apply::trial_outcome::TrialOutcome;
use crate::check::Check;
use crate::host::Host;
use crate::state::journal::{Journal, Step};
use crate::system::disks::device_name;
use crate::system::source::resolve;
use crate::system::System;

/// The partition / is mounted from, when it is the old (source) root.
pub fn running_from_old_root(system: &System, expected: &Expected) -> Option<String> {
    let running = system
        .source
        .running_root_devno
        .and_then(|devno| device_name(&system.disks, devno))?;
    resolve(&expected.old_root_spec, &system.disks)
        .contains(&running)
        .then_some(running)
}

/// Still on the SD card's root, and either the migration did not finish
/// or there was no reboot since it did: nothing to verify yet. (Back on
/// the SD card after a reboot means the new root did not come up: that is
/// a failure, and the checks say so.)
pub fn not_yet(system: &System, journal: &Journal, expected: &Expected) -> Option<String> {
    let running = running_from_old_root(system, expected)?;
    if !journal.is_done(Step::SourceBootEdited) {
        return Some(format!(
            "the migration has not finished (still running from {running}): `sudo pimigrate migrate --resume` carries on"
        ));
    }
    let this_boot = boot_id(&system.host);
    if journal.rebooted_since(this_boot.as_deref(), boot_time(&system.host)) == Some(false) {
        let reboot = match (expected.trial.is_some(), expected.device_trial()) {
            (_, true) => "sudo pimigrate migrate --resume --reboot",
            (true, false) => "sudo reboot \"0 tryboot\"",
            (false, false) => "sudo reboot",
        };
        return Some(format!(
            "the system still runs from {running} and has not rebooted since the migration: `{reboot}`, then verify"
        ));
    }
    // A one-shot boot of the new drive is started by pimigrate (a Pi 5's
    // boot order must be set first), which records it: until then this is
    // the SD card's boot before the trial, not after a failed one.
    (expected.device_trial() && expected.trial_pending() && expected.trial_requested.is_none()).then(|| {
        format!(
            "the trial boot of the new drive has not been started (this boot runs from {running}): \
             `sudo pimigrate migrate --resume --reboot` starts it; the SD card stays the fallback. \
             If you started it by hand with reboot \"0 tryboot\" and are back on the SD card, it did not come up."
        )
    })
}

/// Rebooted since a trial migration, yet a normal boot of the SD card's
/// root: the trial boot did not come up (the firmware then falls back to
/// the SD card, as designed) or the Pi was restarted without "0 tryboot".
/// The target checks would only list symptoms of that, so the answer is
/// this one failure and what to do: roll back, or look at the target and
/// try again.
pub fn trial_did_not_run(
    system: &System,
    expected: &Expected,
    record: Option<&TrialOutcome>,
) -> Option<Verification> {
    if !expected.trial_pending() {
        return None;
    }
    // In a trial boot on the SD card's own root the trial did not run
    // either: the bootloader passed over the new drive (gone, or no
    // firmware on it) and started the SD card with the trial flag set.
    let running = running_from_old_root(system, expected)?;
    let booted = boot_time(&system.host);
    // The trial's own record, when it came up far enough to write one.
    let record = record.filter(|r| !r.outcome.committed());
    let what = match (expected.trial_requested, booted) {
        _ if record.is_some() => {
            let record = record.expect("just matched");
            let mut what = format!(
                "the trial boot came up at {} but {}, and rebooted without committing",
                crate::clock::rfc3339_utc(record.at),
                record.reason
            );
            for detail in &record.details {
                what.push_str(&format!("; {detail}"));
            }
            what
        }
        (Some(asked), Some(booted)) if booted > asked => format!(
            "the trial boot pimigrate started at {} did not come up: the Pi {} and the SD card booted as before",
            crate::clock::rfc3339_utc(asked),
            match expected.device_trial() {
                true => "reset (the trial kernel's panic=, a power cycle, or the bootloader finding no bootable new drive)",
                false => "was reset or power-cycled",
            }
        ),
        _ => "the trial boot did not come up (the firmware then boots the SD card as before) \
              or the Pi was restarted without \"0 tryboot\""
            .to_string(),
    };
    let check = Check::fail(
        "trial-boot",
        format!("this boot runs from the SD card's root {running}, not from the target: {what}"),
    )
    .devices(vec![running])
    .hint(
        "nothing was committed and the SD card's boot files were not changed; look at the target (`pimigrate devices`, `dmesg`) before trying again",
    );
    Some(Verification {
        layout: Some(expected.layout),
        trial_boot: Some(TrialState {
            active: false,
            committed_at: None,
        }),
        checks: vec![check],
        result: Verdict::Fail,
        message: Some("the trial boot did not run; the SD card still boots as before".into()),
        rollback: vec![
            "sudo pimigrate rollback --yes   (removes the trial files and puts back the bootloader's config; the SD card then boots exactly as before the migration)".into(),
            format!(
                "or, once the target is attached and seen by `pimigrate devices`, try again: {}",
                match expected.device_trial() {
                    true => "sudo pimigrate migrate --resume --reboot",
                    false => "sudo reboot \"0 tryboot\"",
                }
            ),
        ],
        ..Verification::nothing(String::new())
    })
}

/// This boot's id (/proc/sys/kernel/random/boot_id).
pub fn boot_id(host: &Host) -> Option<String> {
    crate::clock::boot_id(&host.proc(crate::clock::BOOT_ID))
}

/// `btime` of /proc/stat: when this boot began (Unix time).
pub fn boot_time(host: &Host) -> Option<u64> {
    let stat = std::fs::read_to_string(host.proc("stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Why `verify --commit` does not commit: refused, or nothing to commit.
pub enum CommitRefusal {
    Refused(String),
    NothingToDo(String),
}

pub fn commit_refusal(system: &System, expected: &Expected, passed: bool) -> Option<CommitRefusal> {
    if expected.trial.is_none() {
        return Some(CommitRefusal::NothingToDo(
            "nothing to commit: this migration changed cmdline.txt directly, without a trial boot"
                .into(),
        ));
    }
    if expected.committed.is_some() {
        return Some(CommitRefusal::NothingToDo(
            "nothing to commit: the trial boot was already made permanent".into(),
        ));
    }
    if !passed {
        return Some(CommitRefusal::Refused(
            "not committed: the checks failed, and cmdline.txt still boots the SD card".into(),
        ));
    }
    // A commit cut short after its swap: this normal boot already runs the
    // target (the checks passed), and committing again finishes the job.
    // A full move's new drive that booted by itself (the checks passed:
    // its root, its boot partition, the bootloader's boot mode) has proved
    // what its trial would have.
    let full_move_runs_alone = expected.layout == crate::plan::Layout::Full;
    if !system.pi.in_trial_boot && !expected.commit_interrupted && !full_move_runs_alone {
        return Some(CommitRefusal::Refused(
            "not committed: this is not the trial boot".into(),
        ));
    }
    None
}
