//! `pimigrate verify`: after the reboot, is the system running from what
//! the migration built? Checks (pass/fail) from the journal's plan and the
//! running system, health warnings (advice only), and the before/after
//! benchmark comparison. Deciding is here; [`run`] keeps the order of it all.

pub mod after;
pub mod after_move;
pub mod answers;
pub mod checks;
pub mod commit;
pub mod compare;
pub mod drift;
pub mod expected;
pub mod health;
pub mod old_root;
pub mod regenerated;
pub mod render;
pub mod run;
pub mod state;
#[cfg(test)]
pub(crate) mod test_journal;

use crate::check::Check;
use crate::plan::Layout;
use serde::Serialize;

pub const VERIFY_SCHEMA: &str = "pimigrate.verify/1";

/// Advice that does not fail the verification, with the exact fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Warning {
    /// Stable: `uas-resets`, `under-voltage`, `trim-unavailable`,
    /// `fstrim-timer-off`, `swap-on-sd`, `old-root-referenced`,
    /// `kernel-log-unreadable`, `regenerated-cmdline-differs`.
    pub code: &'static str,
    pub message: String,
    /// Commands or steps, in order.
    pub fix: Vec<String>,
}

impl Warning {
    pub fn new(code: &'static str, message: String) -> Warning {
        Warning {
            code,
            message,
            fix: Vec::new(),
        }
    }

    pub fn fix(mut self, step: impl Into<String>) -> Warning {
        self.fix.push(step.into());
        self
    }
}

/// What `verify` concluded: the JSON document's `result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    NothingToVerify,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrialState {
    /// This boot read tryboot.txt.
    pub active: bool,
    /// RFC 3339 time of `verify --commit`, once made permanent.
    pub committed_at: Option<String>,
}

/// A saved benchmark report, as the comparison names it.
#[derive(Debug, Clone, Serialize)]
pub struct ReportRef {
    pub id: String,
    pub path: String,
    pub device: Option<String>,
    pub started_at: String,
    pub preset: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchComparison {
    pub before: Option<ReportRef>,
    pub after: Option<ReportRef>,
    /// Why no benchmark ran or no comparison could be made.
    pub skipped: Option<String>,
    pub rows: Vec<compare::Row>,
}

/// Why the post-migration benchmark ended before its comparison was made.
#[derive(Debug)]
pub enum Stopped {
    /// Ctrl-C (or SIGTERM/SIGHUP); the benchmark removes its test file.
    Interrupted,
    /// Any error of the benchmark: reading the saved reports, the engine,
    /// the run itself.
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Stopped {
    fn from(err: anyhow::Error) -> Stopped {
        Stopped::Failed(err)
    }
}

impl Stopped {
    /// The comparison's `skipped` text: the verification is still printed
    /// after it, so it must say what happened to the benchmark.
    pub fn reason(&self) -> String {
        match self {
            Stopped::Interrupted => "interrupted (Ctrl-C); the test file was removed".to_string(),
            Stopped::Failed(err) => format!("failed: {err:#}"),
        }
    }
}

/// The whole answer, as text and as `pimigrate.verify/1` JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub schema: &'static str,
    pub result: Verdict,
    /// Why there is nothing to verify, or what the result means.
    pub message: Option<String>,
    pub layout: Option<Layout>,
    /// The target disk, e.g. "/dev/sda (Samsung SSD 870 EVO 500GB)".
    pub target: Option<String>,
    pub trial_boot: Option<TrialState>,
    pub checks: Vec<Check>,
    /// The driver that holds the new drive, and TRIM on it.
    pub after_move: Option<after_move::AfterMoveReport>,
    pub warnings: Vec<Warning>,
    /// What --commit, --apply-quirk and --trim did.
    pub actions: Vec<String>,
    /// Why --commit or --apply-quirk was not carried out.
    pub refused: Vec<String>,
    pub benchmark: Option<BenchComparison>,
    /// On failure: how to get back to the SD card.
    pub rollback: Vec<String>,
}

impl Verification {
    pub fn nothing(message: String) -> Verification {
        Verification {
            schema: VERIFY_SCHEMA,
            result: Verdict::NothingToVerify,
            message: Some(message),
            layout: None,
            target: None,
            trial_boot: None,
            checks: Vec::new(),
            after_move: None,
            warnings: Vec::new(),
            actions: Vec::new(),
            refused: Vec::new(),
            benchmark: None,
            rollback: Vec::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

/// How to get back to the SD card after a failed verification.
pub fn rollback_advice(expected: &expected::Expected) -> Vec<String> {
    let mut steps = Vec::new();
    if expected.trial_pending() {
        steps.push("sudo reboot: a normal boot reads cmdline.txt, which still boots the SD card's root (so does a power cycle)".to_string());
        steps.push("then `sudo pimigrate rollback --yes` removes the trial files".to_string());
        return steps;
    }
    match expected.layout {
        Layout::RootOnly => {
            steps.push("sudo pimigrate rollback --yes && sudo reboot   (restores cmdline.txt from cmdline.txt.pimigrate-backup)".to_string());
            steps.push("if the Pi does not boot: on another computer, copy cmdline.txt.pimigrate-backup over cmdline.txt on the SD card's boot partition".to_string());
        }
        Layout::Full => {
            steps.push("sudo pimigrate rollback --yes, then put the SD card first in the boot order (sudo rpi-eeprom-config --edit) or unplug the target, and reboot: the SD card is unchanged".to_string());
        }
    }
    steps
}
