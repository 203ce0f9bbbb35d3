//! The text form: a checklist, warnings with their fixes, the before/after
//! table, and on failure how to roll back.

use super::{BenchComparison, Verdict, Verification};
use std::fmt::Write;

pub fn text(v: &Verification) -> String {
    let mut out = String::new();
    if v.result == Verdict::NothingToVerify {
        let _ = writeln!(
            out,
            "Nothing to verify: {}",
            v.message.as_deref().unwrap_or("")
        );
        return out;
    }
    if let Some(target) = &v.target {
        let _ = writeln!(out, "Verifying the migration to {target}");
    }
    for check in &v.checks {
        let mark = if check.pass { "✓" } else { "✗" };
        let _ = writeln!(out, "  {mark} {}", check.message);
        if let Some(hint) = check.hint.as_ref().filter(|_| !check.pass) {
            let _ = writeln!(out, "      {hint}");
        }
    }
    if let Some(after) = &v.after_move {
        for line in [
            after
                .driver
                .as_ref()
                .map(|d| format!("Driver: {}", d.message)),
            after.trim.as_ref().map(|t| t.message.clone()),
        ]
        .into_iter()
        .flatten()
        {
            let _ = writeln!(out, "  · {line}");
        }
    }
    for line in &v.actions {
        let _ = writeln!(out, "  → {line}");
    }
    for line in &v.refused {
        let _ = writeln!(out, "  ✗ {line}");
    }
    if !v.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings (advice, not failures):");
        for warning in &v.warnings {
            let _ = writeln!(out, "  ! {}", warning.message);
            for step in &warning.fix {
                let _ = writeln!(out, "      {step}");
            }
        }
    }
    if let Some(bench) = &v.benchmark {
        out.push('\n');
        out.push_str(&table(bench));
    }
    out.push('\n');
    match v.result {
        Verdict::Pass => {
            let _ = writeln!(out, "PASS: the system runs from the migrated root.");
            if let Some(message) = &v.message {
                let _ = writeln!(out, "{message}");
            }
        }
        _ => {
            let _ = writeln!(out, "FAIL: the migration is not working as planned.");
            if !v.rollback.is_empty() {
                let _ = writeln!(out, "To go back to the SD card:");
                for step in &v.rollback {
                    let _ = writeln!(out, "  {step}");
                }
            }
        }
    }
    out
}

fn table(bench: &BenchComparison) -> String {
    let mut out = String::from("Benchmark, before and after:\n");
    let name = |r: &Option<super::ReportRef>| {
        r.as_ref().map(|r| {
            format!(
                "{} on {} ({}, {})",
                r.id,
                r.device.as_deref().unwrap_or("?"),
                r.started_at,
                r.preset
            )
        })
    };
    if let Some(before) = name(&bench.before) {
        let _ = writeln!(out, "  before: {before}");
    }
    if let Some(after) = name(&bench.after) {
        let _ = writeln!(out, "  after:  {after}");
    }
    if let Some(why) = &bench.skipped {
        let _ = writeln!(out, "  {why}");
    }
    if bench.rows.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:<18} {:>12} {:>12} {:>9}",
        "test", "before", "after", "speed-up"
    );
    for row in &bench.rows {
        let speedup = row
            .speedup
            .map(|s| format!("{s:.1}x"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {:<18} {:>7.0} {:<4} {:>7.0} {:<4} {:>9}",
            row.test, row.before, row.unit, row.after, row.unit, speedup
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Check;
    use crate::verify::Stopped;

    /// A committed trial whose benchmark then stopped: what the user must
    /// still see.
    fn committed_then(stopped: &Stopped) -> Verification {
        Verification {
            result: Verdict::Pass,
            checks: vec![Check::pass(
                "root-mounted",
                "/ is mounted from /dev/sda1".into(),
            )],
            actions: vec!["cmdline.txt now boots PARTUUID=2f4a9c17-01".into()],
            benchmark: Some(BenchComparison {
                skipped: Some(stopped.reason()),
                ..BenchComparison::default()
            }),
            ..Verification::nothing(String::new())
        }
    }

    #[test]
    fn an_interrupted_benchmark_still_shows_the_checks_and_the_commit() {
        let text = text(&committed_then(&Stopped::Interrupted));
        for line in [
            "✓ / is mounted from /dev/sda1",
            "→ cmdline.txt now boots PARTUUID=2f4a9c17-01",
            "interrupted (Ctrl-C); the test file was removed",
            "PASS",
        ] {
            assert!(text.contains(line), "{line:?} missing: {text}");
        }
    }

    #[test]
    fn a_failed_benchmark_names_the_whole_error_chain() {
        let err =
            anyhow::anyhow!("No space left on device").context("creating /pimigrate-bench.tmp");
        let v = committed_then(&Stopped::from(err));
        let text = text(&v);
        assert!(
            text.contains("failed: creating /pimigrate-bench.tmp: No space left on device"),
            "{text}"
        );
        assert!(text.contains("→ cmdline.txt now boots"), "{text}");
        // The JSON form carries the same reason.
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(
            json["benchmark"]["skipped"],
            "failed: creating /pimigrate-bench.tmp: No space left on device"
        );
        assert_eq!(
            json["actions"][0],
            "cmdline.txt now boots PARTUUID=2f4a9c17-01"
        );
    }
}
