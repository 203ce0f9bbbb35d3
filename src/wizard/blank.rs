//! Blank drives before the benchmarks: a new SSD has no filesystem for a
//! test file, so its writes can only be measured on the raw device, which
//! needs the person's yes (or `--yes --target` naming that very disk,
//! which is about to be erased anyway).

use super::intro::{product_name, shown_disks};
use super::target::named;
use super::Wizard;
use crate::recommend::blank::is_blank;
use crate::system::disks::{Disk, Role};
use anyhow::Result;
use std::path::PathBuf;

/// The blank drives whose writes may be measured on the raw device (none
/// when the person says no).
pub(super) fn allowed(wizard: &Wizard) -> Result<Vec<PathBuf>> {
    let blank = blank_candidates(wizard);
    if blank.is_empty() || wizard.settings.bench_blank == Some(false) {
        return Ok(Vec::new());
    }
    if wizard.settings.yes {
        return Ok(unattended(wizard, &blank));
    }
    let names = names(&blank);
    wizard.ui.say(&format!(
        "Blank drive(s): {}: no partition table, no filesystem, nothing on them. A test file \
         needs a filesystem, so their writes (what makes a Pi feel slow) can only be measured \
         by writing test data onto the drive itself; measured by reads alone, a drive cannot \
         be recommended.",
        describe(&blank)
    ));
    let measure = if wizard.settings.bench_blank == Some(true) {
        wizard.ui.say(&format!(
            "Measuring the writes of {names} (from --bench-blank)."
        ));
        true
    } else {
        wizard.ui.confirm(
            &format!(
                "Measure the writes of the blank drive(s) {names} too? Test data is written over \
                 them; they hold no partition or filesystem"
            ),
            true,
        )?
    };
    Ok(if measure {
        blank.iter().map(|d| d.path.clone()).collect()
    } else {
        Vec::new()
    })
}

/// Unattended, only the disk `--target` names is written: no one agreed
/// to anything else.
fn unattended(wizard: &Wizard, blank: &[&Disk]) -> Vec<PathBuf> {
    let Some(wanted) = &wizard.settings.target else {
        return Vec::new();
    };
    let Some(target) = blank.iter().find(|d| named(d, wanted)) else {
        return Vec::new();
    };
    wizard.ui.say(&format!(
        "{} is blank: its writes are measured on the drive itself, which --yes --target \
         erases anyway (--no-bench-blank: reads only).",
        target.path.display()
    ));
    vec![target.path.clone()]
}

/// Candidates with nothing on them. blkid is asked only on the running
/// system: an inspected tree's device nodes are not this machine's.
fn blank_candidates<'a>(wizard: &Wizard<'a>) -> Vec<&'a Disk> {
    let live = wizard.host.is_live();
    shown_disks(wizard)
        .filter(|d| d.role == Role::Candidate && is_blank(d, live))
        .collect()
}

fn names(disks: &[&Disk]) -> String {
    let paths: Vec<String> = disks.iter().map(|d| d.path.display().to_string()).collect();
    paths.join(", ")
}

fn describe(disks: &[&Disk]) -> String {
    let each: Vec<String> = disks
        .iter()
        .map(|d| {
            format!(
                "{} ({}, {})",
                d.path.display(),
                product_name(d),
                d.size_human
            )
        })
        .collect();
    each.join(", ")
}
