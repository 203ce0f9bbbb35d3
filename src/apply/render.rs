//! How a `migrate` run ended, as text people read.

use super::journal::Journal;
use super::migration::Status;
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
