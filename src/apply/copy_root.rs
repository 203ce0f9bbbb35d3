//! The copy step: the source root (through its read-only bind mount) onto
//! the new root filesystem, then a second pass for what changed meanwhile.

use super::executor::ApplyContext;
use crate::copy::{copy_tree, second_pass, CopyOptions, CopyStats};
use crate::plan::Plan;
use anyhow::{bail, Result};
use std::path::Path;

/// How many failed entries an error message names.
const ERRORS_SHOWN: usize = 10;

pub fn copy_root(
    source: &Path,
    target: &Path,
    plan: &Plan,
    ctx: &ApplyContext,
) -> Result<CopyStats> {
    let options = CopyOptions {
        exclusions: plan.copy.exclusions.clone(),
        checksum: plan.copy.checksum,
        ..CopyOptions::default()
    };
    let progress = |stats: &CopyStats| (ctx.copy_progress)(stats.bytes, stats.files);
    copy_tree(source, target, &options, ctx.cancel, &progress)?;
    crate::failpoint::hit("after-first-pass");
    // A live system changes while it is copied: catch up with it.
    (ctx.step)("second pass: files that changed during the copy");
    let stats = second_pass(source, target, &options, ctx.cancel, &progress)?;
    if !stats.errors.is_empty() {
        bail!(
            "{} entries could not be copied:\n{}\nthe source is unchanged; fix these and run `pimigrate migrate --resume`",
            stats.errors.len(),
            stats.errors_shown(ERRORS_SHOWN)
        );
    }
    Ok(stats)
}
