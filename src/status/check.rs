//! `pimigrate status --check`: the check after the move as a report for
//! a person, the daily timer (`pimigrate-check.service`) and monitoring
//! systems: every finding with its fix, and an exit status as monitoring
//! plugins have it: 0 nothing drifted, 1 a warning, 2 a failure. Before a
//! migration is in force there is nothing to check, which is no problem:
//! 0, with the reason.

use super::{Facts, Stage, Status};
use crate::check::{worst, Finding, Level};
use crate::exit::{EXIT_CHECK_FAILURE, EXIT_CHECK_WARNING, EXIT_OK};
use anyhow::{bail, Result};
use serde::Serialize;

pub const CHECK_SCHEMA: &str = "pimigrate.check/1";

/// The check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Nothing drifted (exit 0).
    Ok,
    /// A warning and no failure (exit 1).
    Warning,
    /// A failure (exit 2).
    Failure,
    /// No migration is in force here (exit 0).
    NothingToCheck,
}

/// The `pimigrate.check/1` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub result: Verdict,
    /// Why there is nothing to check; null otherwise.
    pub message: Option<String>,
    /// The migration's target, as its plan names it.
    pub target: Option<String>,
    /// Since when the migration is in force (Unix seconds): its commit.
    pub since: Option<u64>,
    /// Every finding, in the order the checks run.
    pub checks: Vec<Finding>,
}

/// The report from what `status` gathered; an error when the check could
/// not be made at all (a journal pimigrate cannot read).
pub fn report(facts: &Facts, status: &Status) -> Result<Report> {
    let Some(after) = &facts.after_move else {
        return Ok(Report {
            schema: CHECK_SCHEMA,
            result: Verdict::NothingToCheck,
            message: Some(nothing_to_check(status)),
            target: status.target.clone(),
            since: None,
            checks: Vec::new(),
        });
    };
    let checks = match &after.checks {
        Ok(checks) => checks.clone(),
        Err(why) => bail!("the check after the move could not be made: {why}"),
    };
    let result = match worst(&checks) {
        Level::Ok => Verdict::Ok,
        Level::Warning => Verdict::Warning,
        Level::Failure => Verdict::Failure,
    };
    Ok(Report {
        schema: CHECK_SCHEMA,
        result,
        message: None,
        target: status.target.clone(),
        since: Some(after.since),
        checks,
    })
}

/// Why there is nothing to check, by stage.
fn nothing_to_check(status: &Status) -> String {
    match status.stage {
        Stage::None => "no migration here (no journal in the state directory)".into(),
        Stage::Running => "a pimigrate command is running: check again when it is done".into(),
        Stage::Migrated => "the migration is done, and the Pi has not rebooted into it yet".into(),
        Stage::Committed => "the migration's commit could not be dated".into(),
        _ => format!(
            "the migration is not committed yet ({}): `pimigrate status` says where it stands",
            status.headline.as_deref().unwrap_or("no news")
        ),
    }
}

/// The exit status: as monitoring plugins have it.
pub fn exit_code(report: &Report) -> u8 {
    match report.result {
        Verdict::Ok | Verdict::NothingToCheck => EXIT_OK,
        Verdict::Warning => EXIT_CHECK_WARNING,
        Verdict::Failure => EXIT_CHECK_FAILURE,
    }
}

/// How a finding is marked in text.
pub fn mark(level: Level) -> &'static str {
    match level {
        Level::Ok => "✓",
        Level::Warning => "!",
        Level::Failure => "✗",
    }
}

/// "2 failures, 1 warning" among the findings that count.
pub fn count(checks: &[Finding]) -> String {
    let of = |level: Level| checks.iter().filter(|c| c.counts() == level).count();
    let said = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let (failures, warnings) = (of(Level::Failure), of(Level::Warning));
    match (failures, warnings) {
        (0, 0) => "nothing drifted".into(),
        (0, w) => said(w, "warning", "warnings"),
        (f, 0) => said(f, "failure", "failures"),
        (f, w) => format!(
            "{}, {}",
            said(f, "failure", "failures"),
            said(w, "warning", "warnings")
        ),
    }
}

/// The report as text: every check, each drift with its fix, the verdict.
pub fn text(report: &Report) -> String {
    if report.result == Verdict::NothingToCheck {
        return format!(
            "Nothing to check: {}\n",
            report
                .message
                .as_deref()
                .unwrap_or("no migration in force here")
        );
    }
    let mut out = format!(
        "The check after the move to {}{}:\n",
        report.target.as_deref().unwrap_or("the new drive"),
        report
            .since
            .map(|at| format!(" (in force since {})", super::when(at)))
            .unwrap_or_default()
    );
    for finding in &report.checks {
        let muted = match finding.muted {
            true => " (muted)",
            false => "",
        };
        out.push_str(&format!(
            "  {} {}: {}{muted}\n",
            mark(finding.level),
            finding.code,
            finding.message
        ));
        if finding.level > Level::Ok {
            for step in &finding.fix {
                out.push_str(&format!("      {step}\n"));
            }
        }
    }
    let verdict = match report.result {
        Verdict::Failure => "FAILURE",
        Verdict::Warning => "WARNING",
        _ => "OK",
    };
    out.push_str(&format!("{verdict}: {}\n", count(&report.checks)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(checks: Vec<Finding>) -> Report {
        let result = match worst(&checks) {
            Level::Ok => Verdict::Ok,
            Level::Warning => Verdict::Warning,
            Level::Failure => Verdict::Failure,
        };
        Report {
            schema: CHECK_SCHEMA,
            result,
            message: None,
            target: Some("/dev/sda".into()),
            since: Some(1_800_000_000),
            checks,
        }
    }

    #[test]
    fn exits_as_a_monitoring_plugin_and_lists_every_check() {
        let ok = Finding::ok("booted-from", "/ is mounted from /dev/sda1".into());
        let warning = Finding::warning("power", "under-voltage since boot".into()).fix("a supply");
        let failure = Finding::failure("ids-unique", "duplicate ids".into()).fix("detach it");
        assert_eq!(exit_code(&report(vec![ok.clone()])), 0);
        assert_eq!(exit_code(&report(vec![ok.clone(), warning.clone()])), 1);
        let both = report(vec![ok.clone(), warning.clone(), failure.clone()]);
        assert_eq!(exit_code(&both), 2);
        assert_eq!(
            text(&both),
            "The check after the move to /dev/sda (in force since 2027-01-15 08:00 UTC):\n\
             \x20 ✓ booted-from: / is mounted from /dev/sda1\n\
             \x20 ! power: under-voltage since boot\n\
             \x20     a supply\n\
             \x20 ✗ ids-unique: duplicate ids\n\
             \x20     detach it\n\
             FAILURE: 1 failure, 1 warning\n"
        );
        let muted = report(vec![
            ok,
            Finding {
                muted: true,
                ..failure
            },
        ]);
        assert_eq!((muted.result, exit_code(&muted)), (Verdict::Ok, 0));
        assert!(text(&muted).contains("✗ ids-unique: duplicate ids (muted)\n"));
        assert!(text(&muted).ends_with("OK: nothing drifted\n"));
    }
}
