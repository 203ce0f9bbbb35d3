//! Named points where a test can have pimigrate killed with SIGKILL, to
//! prove that an interruption at any of them leaves a Pi that boots and a
//! migration that `--resume` finishes or `rollback` undoes.
//!
//! `PIMIGRATE_FAILPOINT=name` kills the process the first time it reaches
//! `name`; `name@N` the N-th time; `name:stop` stops it there (SIGSTOP), so
//! a test can change the world (fill the source, press Ctrl-C) before it
//! goes on; `name:error` makes the step fail there with an error, as a
//! failing mkfs or a full disk would, so a test can read what the owner is
//! told. Unset (always, outside tests), a point costs one cached lookup.

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
    "after-trim-setup",
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

/// What a power cut at each point of [`MIGRATE`] (a root-only migration
/// without a trial) leaves on the disks: the testbed's `power-cut-migrate`
/// loses the power (the guest's page cache with it) at every point marked
/// [`PowerCut::Here`] or [`PowerCut::InTheCopy`], in this order, one boot
/// each, and nowhere else. A point whose disks hold nothing a cut elsewhere
/// does not already leave says which cut and why. A unit test holds the
/// list to [`MIGRATE`], so that a new point is cut or said to be covered.
pub const MIGRATE_POWER_CUTS: &[(&str, PowerCut)] = &[
    ("before-wipe", PowerCut::SameAs {
        point: "after-table",
        why: "nothing is written to the target yet; a cut at after-table, the wipe and the table not yet flushed, can leave the same, and the resume lays the disk out again either way",
    }),
    ("after-wipe", PowerCut::SameAs {
        point: "after-table",
        why: "the wipe is not flushed before after-table, where the table is in flight as well",
    }),
    ("after-table", PowerCut::Here),
    ("after-reread", PowerCut::SameAs {
        point: "after-mkfs",
        why: "the table is flushed and journaled; after-mkfs leaves the same table with the filesystem flushed but not journaled, and the resume re-reads the table and makes the filesystem there too",
    }),
    ("after-mkfs", PowerCut::Here),
    ("after-mount", PowerCut::SameAs {
        point: "copy-file",
        why: "the new filesystem mounted, nothing copied: the cuts in the copy leave it with part of the copy, and the resume copies the whole step again either way",
    }),
    ("copy-file", PowerCut::InTheCopy),
    ("after-first-pass", PowerCut::SameAs {
        point: "copy-file",
        why: "the first pass's writes are not flushed before after-copy: a cut here is a cut in the copy",
    }),
    ("after-copy", PowerCut::SameAs {
        point: "copy-file",
        why: "the copy flushed, not yet journaled: the resume copies again onto what is there, as it does after the cut in the copy",
    }),
    ("after-target-edits", PowerCut::Here),
    ("after-trim-setup", PowerCut::SameAs {
        point: "after-target-edits",
        why: "the TRIM rule and fstrim.timer's link are flushed on the new root, not yet journaled: the resume writes them again onto what is there, as it writes them after the cut at after-target-edits",
    }),
    ("after-journal-copy", PowerCut::SameAs {
        point: "boot-backup-after-rename",
        why: "the journal names the SD card's backups before they are written, and the resume writes the journal's copy on the target again; boot-backup-after-rename leaves the same journal and boot files but for the backup, which may not have reached the card",
    }),
    ("after-unmount", PowerCut::SameAs {
        point: "boot-backup-after-rename",
        why: "everything before is flushed, and only the journal is written before the backup of cmdline.txt, where boot-backup-after-rename cuts",
    }),
    ("source-edit-start", PowerCut::SameAs {
        point: "boot-backup-after-rename",
        why: "nothing is written between here and the backup of cmdline.txt, where boot-backup-after-rename cuts",
    }),
    ("atomic-after-temp", PowerCut::SameAs {
        point: "boot-after-temp",
        why: "the journal's and the target's files are written as the boot files are (apply/atomic.rs), on ext4 rather than FAT: the cut after the boot file's flushed temporary file stands for them",
    }),
    ("atomic-after-rename", PowerCut::SameAs {
        point: "boot-after-rename",
        why: "the journal's and the target's files are renamed into place as the boot files are, on ext4 rather than FAT: the cut after the boot file's rename stands for them",
    }),
    ("backup-after-temp", PowerCut::SameAs {
        point: "after-target-edits",
        why: "the target's edits are done again by the resume until the journal records them; after-target-edits cuts with all of them flushed",
    }),
    ("backup-after-rename", PowerCut::SameAs {
        point: "after-target-edits",
        why: "the target's edits are done again by the resume until the journal records them; after-target-edits cuts with all of them flushed",
    }),
    ("boot-backup-after-temp", PowerCut::SameAs {
        point: "boot-backup-after-rename",
        why: "the backup's temporary file flushed, not renamed: the SD card holds its original files and a temporary one the firmware never reads, as after a cut at boot-backup-after-rename whose rename did not reach the card",
    }),
    ("boot-backup-after-rename", PowerCut::Here),
    ("boot-after-temp", PowerCut::Here),
    ("boot-after-rename", PowerCut::Here),
    ("source-boot-written", PowerCut::Here),
];

/// Whether the testbed's power-cut scenario cuts at a point
/// ([`MIGRATE_POWER_CUTS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerCut {
    /// Cut here, the first time the point is reached.
    Here,
    /// Cut here in the middle of the copy: the point is reached once for
    /// each file copied.
    InTheCopy,
    /// A cut here leaves nothing a cut at `point` does not: `why`.
    SameAs {
        point: &'static str,
        why: &'static str,
    },
}

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
    "after-trim-setup",
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

/// A point's name handed to code that hits it for its caller (the
/// replica engine's steps are `migrate`'s and `sync`'s points), a literal
/// in a call of this function, so the lists' test finds it in the source.
pub const fn point(name: &'static str) -> &'static str {
    name
}

/// What happens at the wanted point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// SIGKILL: a crash, or a power cut as far as this process knows.
    Kill,
    /// SIGSTOP, until the test sends SIGCONT.
    Stop,
    /// The step fails with an error.
    Error,
}

struct Wanted {
    name: String,
    nth: u64,
    action: Action,
    seen: AtomicU64,
}

/// `name[@N][:stop|:error]`.
fn parse(value: &str) -> Wanted {
    let (value, action) = match (value.strip_suffix(":stop"), value.strip_suffix(":error")) {
        (Some(point), _) => (point, Action::Stop),
        (_, Some(point)) => (point, Action::Error),
        _ => (value, Action::Kill),
    };
    let (name, nth) = match value.split_once('@') {
        Some((name, nth)) => (name, nth.parse().unwrap_or(1)),
        None => (value, 1),
    };
    Wanted {
        name: name.to_string(),
        nth,
        action,
        seen: AtomicU64::new(0),
    }
}

fn wanted() -> Option<&'static Wanted> {
    static WANTED: OnceLock<Option<Wanted>> = OnceLock::new();
    WANTED
        .get_or_init(|| std::env::var(ENV).ok().map(|value| parse(&value)))
        .as_ref()
}

/// Dies here, without any cleanup, stops, or fails with an error, if a
/// test asked for it; the error is the step's, as any other would be.
pub fn hit(name: &str) -> std::io::Result<()> {
    let Some(wanted) = wanted() else {
        return Ok(());
    };
    if wanted.name != name || wanted.seen.fetch_add(1, Ordering::SeqCst) + 1 != wanted.nth {
        return Ok(());
    }
    let signal = match wanted.action {
        Action::Error => return Err(injected(name)),
        Action::Stop => nix::sys::signal::Signal::SIGSTOP,
        Action::Kill => nix::sys::signal::Signal::SIGKILL,
    };
    let _ = nix::sys::signal::raise(signal);
    Ok(())
}

/// The error a point fails with when a test asks for one.
fn injected(name: &str) -> std::io::Error {
    std::io::Error::other(format!(
        "failed on purpose at the fail point {name} ({ENV})"
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_point_is_killed_stopped_or_failed_at_its_nth_hit() {
        use super::{parse, Action};
        let wanted = parse("copy-file@20");
        assert_eq!((wanted.name.as_str(), wanted.nth), ("copy-file", 20));
        assert_eq!(wanted.action, Action::Kill);
        assert_eq!(parse("after-mkfs:stop").action, Action::Stop);
        let wanted = parse("atomic-after-temp@3:error");
        assert_eq!((wanted.name.as_str(), wanted.nth), ("atomic-after-temp", 3));
        assert_eq!(wanted.action, Action::Error);
        let text = super::injected("after-mkfs").to_string();
        assert!(text.contains("after-mkfs"), "{text}");
    }

    /// Every point the source names (a `hit("...")` call, a `point("...")`
    /// handed on, or an atomic write's `after_temp`/`after_rename`) is in
    /// the lists, and every
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
            let markers = [
                "failpoint::hit(\"",
                "failpoint::point(\"",
                "after_temp: \"",
                "after_rename: \"",
            ];
            for marker in markers {
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

    /// Every point of a root-only migration is cut by the testbed's
    /// power-cut scenario, or covered by a cut that is, with the reason: a
    /// new point fails here until it is one or the other.
    #[test]
    fn every_migrate_point_is_power_cut_or_covered_by_a_cut() {
        use super::{PowerCut, MIGRATE, MIGRATE_POWER_CUTS};
        let named: Vec<&str> = MIGRATE_POWER_CUTS.iter().map(|(p, _)| *p).collect();
        assert_eq!(
            named, MIGRATE,
            "MIGRATE_POWER_CUTS names MIGRATE's points, in order"
        );
        let cut = |point: &str| {
            MIGRATE_POWER_CUTS
                .iter()
                .any(|(p, c)| *p == point && matches!(c, PowerCut::Here | PowerCut::InTheCopy))
        };
        for (point, how) in MIGRATE_POWER_CUTS {
            if let PowerCut::SameAs { point: other, why } = how {
                assert!(
                    cut(other),
                    "{point} is covered by {other}, which is not cut"
                );
                assert!(
                    !why.trim().is_empty(),
                    "{point}: covered by {other}, but why?"
                );
            }
        }
    }
}
