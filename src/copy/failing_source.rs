//! Tests: a source that fails to read costs the target nothing. Each read
//! the copier makes of the source (a directory's listing, an entry's stat,
//! a file's open and its data half-way through) is made to fail in turn,
//! with and without worker threads, and the target must keep what it had
//! for that entry and everything below it, while the error names it. The
//! same on real ext4, with a garbled directory block and a device that
//! fails mid-file, is in tests/copy_fidelity.rs.

use super::faults::{self, Op};
use super::replace::is_temporary;
use super::{copy_tree, second_pass, CopyOptions, CopyStats};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

struct Trees {
    _dir: tempfile::TempDir,
    source: PathBuf,
    target: PathBuf,
}

/// A source with `keep/` holding 40 files, a hard-linked pair and a
/// plain file, copied to the target.
fn copied(threads: usize) -> Trees {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (source, target) = (dir.path().join("s"), dir.path().join("t"));
    std::fs::create_dir_all(source.join("keep/deeper")).unwrap();
    for i in 0..40 {
        std::fs::write(source.join(format!("keep/file{i}")), format!("kept {i}")).unwrap();
    }
    std::fs::write(source.join("keep/deeper/inner"), "inner").unwrap();
    std::fs::write(source.join("plain"), "old bytes").unwrap();
    std::fs::write(source.join("linked"), "old linked").unwrap();
    std::fs::hard_link(source.join("linked"), source.join("linked-too")).unwrap();
    std::fs::write(source.join("other"), "other").unwrap();
    copy_tree(
        &source,
        &target,
        &options(threads, None),
        &AtomicBool::new(false),
        &|_| {},
    )
    .unwrap();
    Trees {
        _dir: dir,
        source,
        target,
    }
}

fn options(threads: usize, changed_since: Option<i64>) -> CopyOptions {
    CopyOptions {
        threads,
        changed_since,
        ..CopyOptions::default()
    }
}

fn pass(trees: &Trees, threads: usize) -> CopyStats {
    second_pass(
        &trees.source,
        &trees.target,
        &options(threads, None),
        &AtomicBool::new(false),
        &|_| {},
    )
    .unwrap()
}

/// The one error of `stats`: on `path`, with `errno`.
fn names_only(stats: &CopyStats, path: &Path, errno: i32) -> String {
    let shown = stats.errors_shown(10);
    assert_eq!(stats.error_count, 1, "{shown}");
    assert_eq!(stats.errors[0].path, path, "{shown}");
    assert_eq!(stats.errors[0].errno, Some(errno), "{shown}");
    assert!(shown.contains(&path.display().to_string()), "{shown}");
    stats.errors[0].operation.clone()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn no_temporary_files(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(!is_temporary(&name), "{name:?} left in {}", dir.display());
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// A garbled directory block (EBADMSG) used to read as an empty directory,
/// and the second pass deleted all 40 files of the target's copy.
#[test]
fn a_directory_that_cannot_be_listed_keeps_its_target_untouched() {
    for threads in [0, 2] {
        let trees = copied(threads);
        let keep = trees.source.join("keep");
        // Changes the pass would carry over if it could read them.
        std::fs::remove_file(keep.join("file3")).unwrap();
        std::fs::write(keep.join("new"), "new").unwrap();
        std::fs::set_permissions(&keep, std::fs::Permissions::from_mode(0o750)).unwrap();
        std::fs::write(trees.source.join("other"), "other, changed").unwrap();
        let before = std::fs::metadata(trees.target.join("keep")).unwrap();
        faults::inject(&keep, Op::List, libc::EBADMSG);

        let stats = pass(&trees, threads);
        let operation = names_only(&stats, &keep, libc::EBADMSG);
        assert_eq!(operation, "list directory");
        let kept = names_in(&trees.target.join("keep"));
        assert_eq!(kept.len(), 41, "40 files and deeper/ stay: {kept:?}");
        assert!(kept.contains(&"file3".to_string()));
        assert!(!kept.contains(&"new".to_string()));
        assert_eq!(
            std::fs::read(trees.target.join("keep/deeper/inner")).unwrap(),
            b"inner"
        );
        let after = std::fs::metadata(trees.target.join("keep")).unwrap();
        assert_eq!(after.mode(), before.mode(), "its metadata is not touched");
        assert_eq!(after.mtime_nsec(), before.mtime_nsec());
        assert_eq!(
            std::fs::read(trees.target.join("other")).unwrap(),
            b"other, changed",
            "the rest of the copy goes on"
        );
        assert_eq!(stats.deleted, 0);

        // The disk is good again: the next pass completes the copy.
        faults::clear(&keep);
        let stats = pass(&trees, threads);
        assert_eq!(stats.error_count, 0, "{}", stats.errors_shown(10));
        assert!(!trees.target.join("keep/file3").exists());
        assert_eq!(mode(&trees.target.join("keep")), 0o750);
    }
}

/// A source directory that replaced a file, and cannot be listed: the
/// target's file stays.
#[test]
fn an_unlistable_directory_does_not_replace_the_entry_under_its_name() {
    let trees = copied(0);
    let plain = trees.source.join("plain");
    std::fs::remove_file(&plain).unwrap();
    std::fs::create_dir(&plain).unwrap();
    faults::inject(&plain, Op::List, libc::EIO);
    let stats = pass(&trees, 0);
    names_only(&stats, &plain, libc::EIO);
    assert_eq!(
        std::fs::read(trees.target.join("plain")).unwrap(),
        b"old bytes"
    );
}

/// A read failing half-way used to leave the target truncated: the second
/// pass opened it with O_TRUNC before reading the source.
#[test]
fn a_file_whose_read_fails_half_way_keeps_its_previous_copy() {
    for threads in [0, 2] {
        let trees = copied(threads);
        let plain = trees.source.join("plain");
        std::fs::write(&plain, "new and longer bytes").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before = std::fs::metadata(trees.target.join("plain")).unwrap();
        faults::inject(&plain, Op::Read, libc::EIO);

        let stats = pass(&trees, threads);
        assert_eq!(names_only(&stats, &plain, libc::EIO), "copy data");
        let target = trees.target.join("plain");
        assert_eq!(std::fs::read(&target).unwrap(), b"old bytes");
        let after = std::fs::metadata(&target).unwrap();
        assert_eq!(after.ino(), before.ino(), "the same inode, untouched");
        assert_eq!(after.mode(), before.mode());
        assert_eq!(
            (after.mtime(), after.mtime_nsec()),
            (before.mtime(), before.mtime_nsec())
        );
        no_temporary_files(&trees.target);

        faults::clear(&plain);
        let stats = pass(&trees, threads);
        assert_eq!(stats.error_count, 0, "{}", stats.errors_shown(10));
        assert_eq!(std::fs::read(&target).unwrap(), b"new and longer bytes");
        assert_eq!(mode(&target), 0o640);
        no_temporary_files(&trees.target);
    }
}

/// Both names of a hard-linked file whose read fails keep the old bytes,
/// still as one inode; once readable, both get the new bytes, as one inode.
#[test]
fn a_hard_linked_file_whose_read_fails_keeps_every_name() {
    let trees = copied(2);
    let (a, b) = (trees.source.join("linked"), trees.source.join("linked-too"));
    std::fs::write(&a, "new linked bytes").unwrap();
    faults::inject(&a, Op::Read, libc::EIO);
    faults::inject(&b, Op::Read, libc::EIO);
    let stats = pass(&trees, 2);
    assert_eq!(stats.error_count, 2, "{}", stats.errors_shown(10));
    let (ta, tb) = (trees.target.join("linked"), trees.target.join("linked-too"));
    for name in [&ta, &tb] {
        assert_eq!(std::fs::read(name).unwrap(), b"old linked");
    }
    assert_eq!(
        std::fs::metadata(&ta).unwrap().ino(),
        std::fs::metadata(&tb).unwrap().ino()
    );

    faults::clear(&a);
    faults::clear(&b);
    let stats = pass(&trees, 2);
    assert_eq!(stats.error_count, 0, "{}", stats.errors_shown(10));
    for name in [&ta, &tb] {
        assert_eq!(std::fs::read(name).unwrap(), b"new linked bytes");
    }
    let (ma, mb) = (
        std::fs::metadata(&ta).unwrap(),
        std::fs::metadata(&tb).unwrap(),
    );
    assert_eq!((ma.ino(), ma.nlink()), (mb.ino(), 2));
}

/// With checksums, a same-size same-mtime file whose compare fails keeps
/// its copy; one that differs is replaced whole.
#[test]
fn a_checksum_pass_whose_read_fails_keeps_the_copy() {
    let trees = copied(2);
    let plain = trees.source.join("plain");
    let mtime = std::fs::metadata(&plain).unwrap().modified().unwrap();
    std::fs::write(&plain, "new bytes").unwrap(); // the same size
    std::fs::File::options()
        .write(true)
        .open(&plain)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    faults::inject(&plain, Op::Read, libc::EIO);
    let checksum = CopyOptions {
        checksum: true,
        threads: 2,
        ..CopyOptions::default()
    };
    let run = || {
        second_pass(
            &trees.source,
            &trees.target,
            &checksum,
            &AtomicBool::new(false),
            &|_| {},
        )
        .unwrap()
    };
    let stats = run();
    assert_eq!(names_only(&stats, &plain, libc::EIO), "compare contents");
    assert_eq!(
        std::fs::read(trees.target.join("plain")).unwrap(),
        b"old bytes"
    );
    faults::clear(&plain);
    assert_eq!(run().error_count, 0);
    assert_eq!(
        std::fs::read(trees.target.join("plain")).unwrap(),
        b"new bytes"
    );
    no_temporary_files(&trees.target);
}

/// An entry whose stat fails (a directory here, with all below it) or
/// which is gone when the copy reaches it (ENOENT after the listing named
/// it), and a file that cannot be opened: each keeps its target entry.
#[test]
fn an_entry_whose_stat_or_open_fails_or_that_vanished_keeps_its_target() {
    for threads in [0, 2] {
        let trees = copied(threads);
        let keep = trees.source.join("keep");
        std::fs::remove_file(keep.join("file1")).unwrap();
        faults::inject(&keep, Op::Stat, libc::EIO);
        let stats = pass(&trees, threads);
        assert_eq!(names_only(&stats, &keep, libc::EIO), "stat");
        assert!(trees.target.join("keep/file1").exists());
        faults::clear(&keep);

        let other = trees.source.join("other");
        faults::inject(&other, Op::Stat, libc::ENOENT);
        let stats = pass(&trees, threads);
        names_only(&stats, &other, libc::ENOENT);
        assert_eq!(stats.vanished, 1);
        assert_eq!(stats.deleted, 1, "keep/file1, readable again");
        assert!(
            trees.target.join("other").exists(),
            "listed, then gone: kept"
        );
        faults::clear(&other);

        std::fs::write(&other, "changed other").unwrap();
        for (errno, vanished) in [(libc::EACCES, 0), (libc::ENOENT, 1)] {
            faults::inject(&other, Op::Open, errno);
            let stats = pass(&trees, threads);
            names_only(&stats, &other, errno);
            assert_eq!(stats.vanished, vanished);
            assert_eq!(std::fs::read(trees.target.join("other")).unwrap(), b"other");
            faults::clear(&other);
        }
        no_temporary_files(&trees.target);
    }
}

/// A pass over settled directories (`changed_since`) meets an unreadable
/// directory the same way.
#[test]
fn a_settled_directory_that_cannot_be_listed_is_left_alone() {
    let trees = copied(2);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let deeper = trees.source.join("keep/deeper");
    std::fs::write(deeper.join("inner"), "inner, changed").unwrap();
    faults::inject(&deeper, Op::List, libc::EBADMSG);
    let stats = second_pass(
        &trees.source,
        &trees.target,
        &options(2, Some(since)),
        &AtomicBool::new(false),
        &|_| {},
    )
    .unwrap();
    names_only(&stats, &deeper, libc::EBADMSG);
    assert_eq!(
        std::fs::read(trees.target.join("keep/deeper/inner")).unwrap(),
        b"inner"
    );
    assert_eq!(names_in(&trees.target.join("keep")).len(), 41);
}

/// The first pass names what it could not read too.
#[test]
fn a_first_copy_names_an_unlistable_directory_and_an_unreadable_file() {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (source, target) = (dir.path().join("s"), dir.path().join("t"));
    std::fs::create_dir_all(source.join("bad")).unwrap();
    std::fs::write(source.join("bad/f"), "f").unwrap();
    std::fs::write(source.join("broken"), "x".repeat(10_000)).unwrap();
    std::fs::write(source.join("fine"), "fine").unwrap();
    faults::inject(&source.join("bad"), Op::List, libc::EBADMSG);
    faults::inject(&source.join("broken"), Op::Read, libc::EIO);
    let stats = copy_tree(
        &source,
        &target,
        &options(2, None),
        &AtomicBool::new(false),
        &|_| {},
    )
    .unwrap();
    let shown = stats.errors_shown(10);
    assert_eq!(stats.error_count, 2, "{shown}");
    assert!(shown.contains("/s/bad: list directory"), "{shown}");
    assert!(shown.contains("/s/broken: copy data"), "{shown}");
    assert_eq!(std::fs::read(target.join("fine")).unwrap(), b"fine");
}

/// A directory gone between its parent's listing and its own: in a first
/// copy only counted (the target has nothing to keep), in a second pass
/// named, with the target's copy kept.
#[test]
fn a_directory_gone_before_its_listing_is_named_where_the_target_keeps_it() {
    for threads in [0, 2] {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        std::fs::create_dir_all(source.join("gone")).unwrap();
        std::fs::write(source.join("gone/f"), "f").unwrap();
        faults::inject(&source.join("gone"), Op::List, libc::ENOENT);
        let first = copy_tree(
            &source,
            &target,
            &options(threads, None),
            &AtomicBool::new(false),
            &|_| {},
        )
        .unwrap();
        assert_eq!(first.error_count, 0, "{}", first.errors_shown(10));
        assert_eq!(first.vanished, 1);
        assert!(!target.join("gone").exists());

        faults::clear(&source.join("gone"));
        let trees = Trees {
            _dir: dir,
            source,
            target,
        };
        pass(&trees, threads);
        assert!(trees.target.join("gone/f").exists());
        faults::inject(&trees.source.join("gone"), Op::List, libc::ENOENT);
        let stats = pass(&trees, threads);
        names_only(&stats, &trees.source.join("gone"), libc::ENOENT);
        assert!(trees.target.join("gone/f").exists());
    }
}
