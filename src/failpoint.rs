//! Named points where a test can have pimigrate killed with SIGKILL, to
//! prove that an interruption at any of them leaves a Pi that boots and a
//! migration that `--resume` finishes or `rollback` undoes.
//!
//! `PIMIGRATE_FAILPOINT=name` kills the process the first time it reaches
//! `name`; `name@N` the N-th time; `name:stop` stops it there (SIGSTOP), so
//! a test can change the world (fill the source, press Ctrl-C) before it
//! goes on. Unset (always, outside tests), a point costs one cached lookup.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub const ENV: &str = "PIMIGRATE_FAILPOINT";

/// The points a root-only migration (`migrate --trial never` or
/// `always`) reaches, in order: `tests/migrate_faults.rs` kills it at each.
pub const MIGRATE: &[&str] = &[
    "before-wipe",
    "after-wipe",
    "after-table",
    "after-reread",
    "after-mkfs",
    "after-mount",
    "copy-file",
    "after-first-pass",
    "after-copy",
    "after-target-edits",
    "after-journal-copy",
    "after-unmount",
    "source-edit-start",
    "atomic-after-temp",
    "atomic-after-rename",
    "backup-after-temp",
    "backup-after-rename",
    "boot-backup-after-temp",
    "boot-backup-after-rename",
    "boot-after-temp",
    "boot-after-rename",
    "source-boot-written",
];

/// The points a full move reaches besides: its boot tree's copy onto the
/// new boot partition, and the bootloader's change (`--boot-order
/// apply`). The testbed's full-move scenarios cut there.
pub const FULL_MOVE: &[&str] = &[
    "boot-tree-after-temp",
    "boot-tree-after-rename",
    "after-bootloader",
];

/// The points a first `sync` of a full standby reaches, in order (a later
/// sync skips the layout's and the first pass's):
/// `tests/sync_faults.rs` kills it at each.
pub const SYNC: &[&str] = &[
    "atomic-after-temp",
    "atomic-after-rename",
    "sync-marked",
    "before-wipe",
    "after-wipe",
    "after-table",
    "after-reread",
    "after-mkfs",
    "sync-mounted",
    "copy-file",
    "after-first-pass",
    "sync-copied",
    "boot-tree-after-temp",
    "boot-tree-after-rename",
    "sync-edited",
    "sync-flushed",
    "sync-before-complete",
];

/// `verify --commit`'s points: the bootloader's permanent order staged or
/// written, and the SD card's cmdline.txt swapped (the trial's files and
/// the journal not yet tidied up).
pub const COMMIT: &[&str] = &["commit-after-bootloader", COMMIT_AFTER_SWAP];

/// `verify --commit`'s point: the SD card's cmdline.txt starts the new root,
/// the trial's files and the journal are not yet tidied up.
pub const COMMIT_AFTER_SWAP: &str = "commit-after-swap";

/// Every point the code has, each once: what [`MIGRATE`], [`FULL_MOVE`],
/// [`SYNC`] and [`COMMIT`] name, no more. A unit test holds it to the
/// `hit("...")` calls and the atomic writes' points in the source.
pub const POINTS: &[&str] = &[
    "before-wipe",
    "after-wipe",
    "after-table",
    "after-reread",
    "after-mkfs",
    "after-mount",
    "copy-file",
    "after-first-pass",
    "after-copy",
    "after-target-edits",
    "after-journal-copy",
    "after-unmount",
    "source-edit-start",
    "atomic-after-temp",
    "atomic-after-rename",
    "backup-after-temp",
    "backup-after-rename",
    "boot-backup-after-temp",
    "boot-backup-after-rename",
    "boot-after-temp",
    "boot-after-rename",
    "source-boot-written",
    "boot-tree-after-temp",
    "boot-tree-after-rename",
    "after-bootloader",
    "sync-marked",
    "sync-mounted",
    "sync-copied",
    "sync-edited",
    "sync-flushed",
    "sync-before-complete",
    "commit-after-bootloader",
    COMMIT_AFTER_SWAP,
];

struct Wanted {
    name: String,
    nth: u64,
    stop: bool,
    seen: AtomicU64,
}

fn wanted() -> Option<&'static Wanted> {
    static WANTED: OnceLock<Option<Wanted>> = OnceLock::new();
    WANTED
        .get_or_init(|| {
            let value = std::env::var(ENV).ok()?;
            let (value, stop) = match value.strip_suffix(":stop") {
                Some(point) => (point.to_string(), true),
                None => (value, false),
            };
            let (name, nth) = match value.split_once('@') {
                Some((name, nth)) => (name.to_string(), nth.parse().unwrap_or(1)),
                None => (value, 1),
            };
            Some(Wanted {
                name,
                nth,
                stop,
                seen: AtomicU64::new(0),
            })
        })
        .as_ref()
}

/// Dies here, without any cleanup, if a test asked for it.
pub fn hit(name: &str) {
    let Some(wanted) = wanted() else {
        return;
    };
    if wanted.name == name && wanted.seen.fetch_add(1, Ordering::SeqCst) + 1 == wanted.nth {
        let signal = if wanted.stop {
            nix::sys::signal::Signal::SIGSTOP
        } else {
            nix::sys::signal::Signal::SIGKILL
        };
        let _ = nix::sys::signal::raise(signal);
    }
}

#[cfg(test)]
mod tests {
    /// Every point the source names (a `hit("...")` call, or an atomic
    /// write's `after_temp`/`after_rename`) is in the lists, and every
    /// point in the lists is in the source: the tests that walk the lists
    /// then cut everywhere the code can be cut.
    #[test]
    fn the_lists_are_the_points_in_the_code() {
        let mut found = std::collections::BTreeSet::new();
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for entry in walkdir::WalkDir::new(&src) {
            let entry = entry.unwrap();
            if entry.path().extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).unwrap();
            for marker in ["failpoint::hit(\"", "after_temp: \"", "after_rename: \""] {
                for piece in text.split(marker).skip(1) {
                    if let Some(name) = piece.split('"').next() {
                        found.insert(name.to_string());
                    }
                }
            }
        }
        // The one point named through a constant.
        found.insert(super::COMMIT_AFTER_SWAP.to_string());
        let listed: std::collections::BTreeSet<String> =
            super::POINTS.iter().map(|p| p.to_string()).collect();
        assert_eq!(found, listed, "POINTS against the source");
        let runs: std::collections::BTreeSet<String> =
            [super::MIGRATE, super::FULL_MOVE, super::SYNC, super::COMMIT]
                .concat()
                .iter()
                .map(|p| p.to_string())
                .collect();
        assert_eq!(runs, listed, "the runs' lists against POINTS");
    }
}
