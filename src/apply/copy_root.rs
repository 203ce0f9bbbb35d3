//! The replica engine's root copy, for `migrate` and `sync` alike: the
//! running root, through a read-only bind mount of its filesystem alone,
//! onto the copy's root: a first pass into a new filesystem and a second
//! for what changed meanwhile, or for an existing copy (a later sync) the
//! second pass alone. A source entry that cannot be read never costs the
//! copy what it had there (the copier keeps it), and ends the copy failed,
//! naming each such entry.

use super::executor::ApplyContext;
use super::mount::bind_read_only;
use crate::copy::{copy_tree, second_pass, CopyOptions, CopyStats};
use crate::system::usage::Exclusion;
use anyhow::{bail, Result};
use serde::Serialize;
use std::path::Path;

/// How many failed entries an error message names.
const ERRORS_SHOWN: usize = 10;

/// What to copy and how to compare.
pub struct RootCopy<'a> {
    /// The running root as this process sees it.
    pub source: &'a Path,
    pub exclusions: &'a [Exclusion],
    /// Files the replica writes itself (its own fstab, ROOTPART): left
    /// out of the copy, so the copy never holds the running system's
    /// version of them, not even between two steps.
    pub own_files: &'a [&'a str],
    /// Compare every file's bytes.
    pub checksum: bool,
    /// The copy was complete at this time (Unix seconds): entries whose
    /// inode did not change since are taken as they are (see
    /// [`CopyOptions::changed_since`]).
    pub changed_since: Option<i64>,
    /// A new, empty root: a first pass, then the second.
    pub fresh: bool,
    /// What to say after the failed entries ("fix these and ...").
    pub then: &'a str,
}

/// What the copy of the root did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CopySummary {
    /// Regular files whose data was written.
    pub files: u64,
    pub bytes: u64,
    /// Entries looked at in all.
    pub entries: u64,
    /// Entries found as they were.
    pub unchanged: u64,
    /// Entries removed because the running system no longer has them.
    pub deleted: u64,
    /// How long the copy took (both passes of a first copy).
    pub seconds: f64,
}

impl CopySummary {
    /// The passes of one copy, added up.
    fn of(passes: &[&CopyStats], seconds: f64) -> CopySummary {
        let sum = |f: fn(&CopyStats) -> u64| passes.iter().map(|s| f(s)).sum();
        CopySummary {
            files: sum(|s| s.files),
            bytes: sum(|s| s.bytes),
            // The second pass looks at every entry again.
            entries: passes.last().map(|s| s.entries()).unwrap_or(0),
            unchanged: passes.last().map(|s| s.unchanged).unwrap_or(0),
            deleted: sum(|s| s.deleted),
            seconds,
        }
    }
}

/// Copies as `copy` says onto the mounted root at `target`.
pub fn copy_root(copy: &RootCopy, target: &Path, ctx: &ApplyContext) -> Result<CopySummary> {
    let source = bind_read_only(copy.source, "source-root")?;
    let mut exclusions = copy.exclusions.to_vec();
    for file in copy.own_files {
        let rule = Exclusion::new(file, false, "written by pimigrate with the copy's own ids");
        if !exclusions.contains(&rule) {
            exclusions.push(rule);
        }
    }
    let options = CopyOptions {
        exclusions,
        checksum: copy.checksum,
        changed_since: copy.changed_since,
        ..CopyOptions::default()
    };
    let progress = |stats: &CopyStats| (ctx.progress)(stats.bytes, stats.entries());
    let started = std::time::Instant::now();
    let first = match copy.fresh {
        true => {
            let first = copy_tree(source.path(), target, &options, ctx.cancel, &progress)?;
            crate::failpoint::hit("after-first-pass")?;
            // A live system changes while it is copied: catch up with it.
            (ctx.step)("second pass: files that changed during the copy");
            Some(first)
        }
        false => None,
    };
    let stats = second_pass(source.path(), target, &options, ctx.cancel, &progress)?;
    let seconds = started.elapsed().as_secs_f64();
    source.unmount()?;
    if !stats.errors.is_empty() {
        bail!(
            "{} entries could not be copied:\n{}\n{}",
            stats.error_count,
            stats.errors_shown(ERRORS_SHOWN),
            copy.then
        );
    }
    let passes: Vec<&CopyStats> = first.iter().chain([&stats]).collect();
    Ok(CopySummary::of(&passes, seconds))
}
