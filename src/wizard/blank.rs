//! Blank drives before the benchmarks: a new SSD has no filesystem for a
//! test file, so its writes can only be measured on the raw device, which
//! needs the person's yes (the question `recommend` asks too, see
//! [`crate::recommend::blank`]) or `--yes --target` naming that very disk,
//! which is about to be erased anyway.

use super::target::named;
use super::Wizard;
use crate::recommend::blank::{blank_candidates, consent, BlankDecision};
use crate::system::disks::Disk;
use anyhow::Result;
use std::path::PathBuf;

/// The blank drives whose writes may be measured on the raw device (none
/// when the person says no), and the others.
pub(super) fn allowed(wizard: &Wizard) -> Result<BlankDecision> {
    let blank = blank_candidates(&wizard.system.disks, false, wizard.host.is_live());
    if wizard.settings.yes && wizard.settings.bench_blank != Some(false) {
        // No note on the other blank drives: --bench-blank would not
        // change what an unattended run writes.
        return Ok(BlankDecision {
            allowed: unattended(wizard, &blank),
            declined: Vec::new(),
        });
    }
    let allowed = consent(wizard.ui, &blank, wizard.settings.bench_blank)?;
    Ok(BlankDecision::of(&blank, allowed))
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
