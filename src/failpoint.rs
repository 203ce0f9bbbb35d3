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

/// Every point, in the order a migration reaches them, for tests to walk.
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
];

/// `verify --commit`'s point: the SD card's cmdline.txt starts the new root,
/// the trial's files and the journal are not yet tidied up.
pub const COMMIT_AFTER_SWAP: &str = "commit-after-swap";

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
