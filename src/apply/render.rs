//! How a `migrate` or a `sync` run ended, as text people read.

use super::migration::Status;
use super::standby::SyncOutcome;
use crate::state::journal::Journal;
use crate::units::binary;
use std::fmt::Write;

/// What the run did (or why there was nothing to do) and the steps that
/// come next; `quiet` leaves the steps out when nothing was done.
pub fn finished_text(journal: &Journal, status: Status, steps: &[String], quiet: bool) -> String {
    let mut out = String::new();
    let target = journal.plan.target.path.display();
    let _ = match status {
        Status::AlreadyMigrated => {
            writeln!(
                out,
                "This system already runs from {target}: nothing to do."
            )
        }
        Status::AlreadyComplete => {
            writeln!(
                out,
                "The migration to {target} is already complete: nothing to do."
            )
        }
        Status::PendingReboot => writeln!(
            out,
            "The system was already migrated to {target} and waits for a reboot: nothing to do \
             (`pimigrate rollback` first to migrate again)."
        ),
        Status::Migrated => writeln!(out, "\nDone: the system is on {target}."),
    };
    if status == Status::Migrated || !quiet {
        out.push_str("Next:\n");
        for (n, step) in steps.iter().enumerate() {
            let _ = writeln!(out, "  {}. {step}", n + 1);
        }
    }
    out
}

/// How a sync ended: what it copied, the standby's checks, and whether
/// it would boot (with how to boot it).
pub fn sync_outcome_text(outcome: &SyncOutcome, quiet: bool) -> String {
    let mut out = String::new();
    let copy = &outcome.copy;
    if !quiet {
        let _ = writeln!(
            out,
            "Copied {} files ({}), {} entries unchanged, {} removed",
            copy.files,
            binary(copy.bytes),
            copy.unchanged,
            copy.deleted
        );
        if let Some(boot) = &outcome.boot {
            let _ = writeln!(
                out,
                "Boot files: {} copied, {} unchanged, {} removed",
                boot.copied, boot.unchanged, boot.removed
            );
        }
        for check in &outcome.checks {
            let mark = if check.pass { "✓" } else { "✗" };
            let _ = writeln!(out, "  {mark} {}", check.message);
            if let Some(hint) = check.hint.as_ref().filter(|_| !check.pass) {
                let _ = writeln!(out, "      {hint}");
            }
        }
    }
    let disk = outcome.record.disk.display();
    if outcome.bootable() {
        let _ = writeln!(out, "The standby on {disk} is up to date and would boot.");
        if !quiet && !outcome.record.boot_steps.is_empty() {
            let _ = writeln!(out, "To boot it:");
            for step in &outcome.record.boot_steps {
                let _ = writeln!(out, "  {step}");
            }
        }
    } else {
        let _ = writeln!(
            out,
            "The standby on {disk} is up to date but would NOT boot: see the failed checks above."
        );
    }
    out
}
