//! `pimigrate sync` as text: the plan before it runs, and how it ended.

use super::plan::SyncPlan;
use crate::apply::standby::SyncOutcome;
use crate::plan::Layout;
use crate::units::binary;
use std::fmt::Write;

pub fn plan_text(plan: &SyncPlan, verbose: bool) -> String {
    let mut out = String::new();
    let standby = &plan.standby;
    let disk = standby.disk.path.display();
    let what = match standby.layout {
        Layout::Full => "a whole system: its own boot and root partitions",
        Layout::RootOnly => "a root partition, started from the running system's boot partition",
    };
    let _ = writeln!(out, "Standby: {disk} ({what})");
    if let Some(layout) = &plan.layout {
        let _ = writeln!(
            out,
            "  first sync: EVERYTHING ON {disk} IS ERASED; new {} table, fresh ids:",
            layout.table.kind
        );
        for (part, fs) in layout.table.partitions.iter().zip(&layout.filesystems) {
            let _ = writeln!(
                out,
                "    partition {} {:>10}  {} PARTUUID={} UUID={} LABEL={}",
                part.number,
                binary(part.size_bytes),
                fs.fstype,
                part.partuuid,
                fs.uuid,
                fs.label
            );
        }
    } else {
        let _ = writeln!(
            out,
            "  root {} (PARTUUID={}, UUID={})",
            standby.root_name(),
            standby.root.partuuid.as_deref().unwrap_or("?"),
            standby.root.uuid.as_deref().unwrap_or("?")
        );
        if let Some(boot) = &standby.boot {
            let _ = writeln!(
                out,
                "  boot {} (PARTUUID={})",
                boot.name(&standby.disk.path),
                boot.partuuid.as_deref().unwrap_or("?")
            );
        }
    }
    let _ = writeln!(
        out,
        "Copy: {} onto the standby's root; {}",
        plan.source_root.display(),
        plan.comparison
    );
    if verbose {
        for rule in &plan.exclusions {
            let _ = writeln!(out, "  leaves out {} ({})", rule.path.display(), rule.why);
        }
    }
    if let Some(boot) = &plan.boot {
        let _ = writeln!(
            out,
            "Boot files: {} onto the standby's boot partition, without {}",
            boot.from.display(),
            boot.left_out.join(", ")
        );
    }
    let _ = writeln!(out, "The standby keeps its own ids:");
    for edit in &plan.edits {
        let _ = writeln!(out, "  {} on {}:", edit.output, edit.device);
        for line in edit.diff.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    if let Some(line) = &plan.boot_command_line {
        let _ = writeln!(
            out,
            "  its command line (to boot it from the shared boot partition): {line}"
        );
    }
    let _ = writeln!(
        out,
        "Then: flush, check that the standby would boot, record the result."
    );
    if let Some(line) = plan.divergence.summary() {
        let _ = writeln!(out, "CHANGED: {line}");
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "Warning: {warning}");
    }
    out
}

pub fn outcome_text(outcome: &SyncOutcome, quiet: bool) -> String {
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
