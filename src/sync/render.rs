//! `pimigrate sync`'s plan as text, before it runs (how a run ended is
//! `apply::render`'s).

use super::plan::SyncPlan;
use crate::plan::Layout;
use crate::units::binary;
use std::fmt::Write;

/// The plan: the standby (and a first sync's layout), the copy, the
/// standby's own files, then what a person must know.
pub fn plan_text(plan: &SyncPlan, verbose: bool) -> String {
    let mut out = String::new();
    standby_section(&mut out, plan);
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
    own_files_section(&mut out, plan);
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

/// Which disk, what kind of standby, and its partitions: a first sync's
/// new ones (the disk erased), or the existing ones.
fn standby_section(out: &mut String, plan: &SyncPlan) {
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
}

/// The standby's own files, as diffs, and a root-only standby's line.
fn own_files_section(out: &mut String, plan: &SyncPlan) {
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
}
