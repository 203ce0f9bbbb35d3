//! The tree copier on real ext4 filesystems (loop-mounted image files):
//! a torture tree with every kind of entry and attribute is copied, and
//! `rsync -naHAXc --itemize-changes --numeric-ids` (the reference for a
//! faithful copy) must find nothing left to do. Needs root, losetup,
//! mkfs.ext4, rsync, setfacl (acl) and setcap (libcap2-bin). Without them
//! the tests are skipped, except when CI=true, where they fail. A source
//! that fails (a garbled directory block, a read failing half-way through
//! a file) must cost the target nothing.

use crate::common::{ext4_blocks_of as blocks_of, tool_output as run, Loop};
use pimigrate::copy::{self, Cancelled, CopyOptions, CopyStats};
use pimigrate::system::usage::Exclusion;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Tools the tests run, and the Debian package of each.
const TOOLS: &[(&str, &str)] = &[
    ("losetup", "mount"),
    ("mkfs.ext4", "e2fsprogs"),
    ("debugfs", "e2fsprogs"),
    ("rsync", "rsync"),
    ("setfacl", "acl"),
    ("getfattr", "attr"),
    ("setcap", "libcap2-bin"),
];

/// Whether the tests can run here. On CI a missing prerequisite fails the
/// test instead of quietly skipping it.
fn prerequisites_met() -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::Uid::effective().is_root() {
        missing.push("root".to_string());
    }
    for (tool, package) in TOOLS {
        let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|dir| Path::new(dir).join(tool).exists());
        if !found {
            missing.push(format!("{tool} (Debian package {package})"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("copy fidelity tests need: {}", missing.join(", "));
    }
    eprintln!("skipped: copy fidelity tests need {}", missing.join(", "));
    false
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

/// A fresh ext4 in an image file under /var/tmp, loop-attached and
/// mounted. Dropping it unmounts and detaches; the directory is deleted
/// only when the unmount worked, so a failure never deletes through a
/// mount point into a filesystem still attached.
struct Ext4 {
    dir: PathBuf,
    mount: PathBuf,
    device: Option<Loop>,
    mounted: bool,
}

impl Ext4 {
    fn new(size_mib: u64) -> Ext4 {
        Ext4::build(size_mib, false)
    }

    /// With `direct_io`, the loop device reads its image with O_DIRECT, so
    /// a read past the image's end (the image cut short after the attach)
    /// fails with EIO, as a bad sector does, instead of reading zeros.
    fn build(size_mib: u64, direct_io: bool) -> Ext4 {
        let dir = tempfile::Builder::new()
            .prefix("pimigrate-copy-")
            .tempdir_in("/var/tmp")
            .expect("temporary directory in /var/tmp")
            .keep();
        let mount = dir.join("mnt");
        fs::create_dir(&mount).unwrap();
        let mut ext4 = Ext4 {
            dir,
            mount,
            device: None,
            mounted: false,
        };
        let image = ext4.dir.join("fs.img");
        fs::File::create(&image)
            .unwrap()
            .set_len(size_mib << 20)
            .unwrap();
        run(
            "mkfs.ext4",
            &[
                os("-q"),
                os("-F"),
                os("-E"),
                os("nodiscard"),
                image.as_os_str(),
            ],
        );
        let device = if direct_io {
            let device = run(
                "losetup",
                &[
                    os("-f"),
                    os("--show"),
                    os("--direct-io=on"),
                    image.as_os_str(),
                ],
            );
            Loop {
                device: device.trim().to_string(),
            }
        } else {
            Loop::attach(&image, None, false)
        };
        run("mount", &[os(&device.device), ext4.mount.as_os_str()]);
        ext4.device = Some(device);
        ext4.mounted = true;
        ext4
    }

    fn path(&self) -> &Path {
        &self.mount
    }

    fn device(&self) -> &str {
        &self.device.as_ref().expect("attached").device
    }

    fn image(&self) -> PathBuf {
        self.dir.join("fs.img")
    }

    /// Unmounts, runs `change` on the device, and mounts again: ext4 then
    /// reads its blocks from the device anew.
    fn remounted(&mut self, change: impl FnOnce(&str)) {
        run("umount", &[self.mount.as_os_str()]);
        self.mounted = false;
        change(self.device());
        run("mount", &[os(self.device()), self.mount.as_os_str()]);
        self.mounted = true;
    }

    // statvfs's c_ulong is u32 on armhf, where the ARM lane runs this.
    #[allow(clippy::useless_conversion)]
    fn block_size(&self) -> u64 {
        u64::from(
            nix::sys::statvfs::statvfs(&self.mount)
                .unwrap()
                .block_size(),
        )
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        if self.mounted {
            let unmounted = Command::new("umount")
                .arg(&self.mount)
                .status()
                .is_ok_and(|s| s.success());
            if !unmounted {
                eprintln!(
                    "could not unmount {}: leaving {} in place",
                    self.mount.display(),
                    self.dir.display()
                );
                // Never detached under a mount.
                std::mem::forget(self.device.take());
                return;
            }
        }
        // Detached only after the unmount worked.
        drop(self.device.take());
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A mount made by a test, unmounted on drop.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path) -> Mount {
        run(
            "mount",
            &[
                os("-t"),
                os("tmpfs"),
                os("-o"),
                os("size=8m"),
                os("tmpfs"),
                at.as_os_str(),
            ],
        );
        Mount(at.to_path_buf())
    }

    /// A tmpfs with a size limit and no memory used until written.
    fn tmpfs_of(at: &Path, size: &str) -> Mount {
        let size = format!("size={size}");
        run(
            "mount",
            &[
                os("-t"),
                os("tmpfs"),
                os("-o"),
                os(&size),
                os("tmpfs"),
                at.as_os_str(),
            ],
        );
        Mount(at.to_path_buf())
    }

    fn bind(from: &Path, at: &Path) -> Mount {
        run("mount", &[os("--bind"), from.as_os_str(), at.as_os_str()]);
        Mount(at.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// 64-bit times on every architecture, so the tree's times are what the
/// test says on armhf too.
fn set_times(path: &Path, atime: (i64, i64), mtime: (i64, i64)) {
    pimigrate::sys64::set_times(pimigrate::sys64::TimesOf::Path(path), atime, mtime).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Builds every kind of entry the copy must keep below `root`.
fn build_torture_tree(root: &Path) {
    let p = |rel: &str| root.join(rel);
    for dir in ["a", "b/c", "links", "nodes", "odd", "sparse", "acl", "live"] {
        fs::create_dir_all(p(dir)).unwrap();
    }
    // Regular files: empty, small, larger than one copy chunk.
    fs::write(p("empty"), b"").unwrap();
    fs::write(p("a/small"), b"hello\n").unwrap();
    let big: Vec<u8> = (0..(12u32 << 20))
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    fs::write(p("a/big"), &big).unwrap();

    // Hard links across directories (three names) and a pair.
    fs::write(p("a/linked"), b"one inode, three names").unwrap();
    fs::hard_link(p("a/linked"), p("b/c/linked-too")).unwrap();
    fs::hard_link(p("a/linked"), p("links/third")).unwrap();
    fs::write(p("links/pair-1"), b"pair").unwrap();
    fs::hard_link(p("links/pair-1"), p("b/pair-2")).unwrap();

    // Symlinks: relative, absolute, dangling, to a directory; one owned.
    std::os::unix::fs::symlink("../a/small", p("links/relative")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", p("links/absolute")).unwrap();
    std::os::unix::fs::symlink("nowhere/at/all", p("links/dangling")).unwrap();
    std::os::unix::fs::symlink("../b", p("links/to-dir")).unwrap();
    std::os::unix::fs::lchown(p("links/dangling"), Some(777), Some(888)).unwrap();

    // Device nodes, FIFO, socket.
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    mknod(
        &p("nodes/null"),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o666),
        makedev(1, 3),
    )
    .unwrap();
    mknod(
        &p("nodes/loop200"),
        SFlag::S_IFBLK,
        Mode::from_bits_truncate(0o660),
        makedev(7, 200),
    )
    .unwrap();
    nix::unistd::mkfifo(&p("nodes/fifo"), Mode::from_bits_truncate(0o620)).unwrap();
    drop(std::os::unix::net::UnixListener::bind(p("nodes/socket")).unwrap());
    std::os::unix::fs::chown(p("nodes/loop200"), Some(0), Some(6)).unwrap();

    // Odd owners (no passwd entry) and modes, setuid with a capability.
    fs::write(p("odd/owned"), b"x").unwrap();
    std::os::unix::fs::chown(p("odd/owned"), Some(4242), Some(4343)).unwrap();
    fs::write(p("odd/no-permissions"), b"x").unwrap();
    chmod(&p("odd/no-permissions"), 0o000);
    fs::write(p("odd/ping"), b"\x7fELF pretend").unwrap();
    std::os::unix::fs::chown(p("odd/ping"), Some(0), Some(4343)).unwrap();
    chmod(&p("odd/ping"), 0o4755);
    run("setcap", &[os("cap_net_raw+ep"), p("odd/ping").as_os_str()]);
    fs::write(p("odd/setgid"), b"x").unwrap();
    std::os::unix::fs::chown(p("odd/setgid"), Some(1000), Some(50)).unwrap();
    chmod(&p("odd/setgid"), 0o2711);
    fs::create_dir(p("odd/sticky")).unwrap();
    chmod(&p("odd/sticky"), 0o1777);
    fs::create_dir(p("odd/locked")).unwrap();
    fs::write(p("odd/locked/inside"), b"x").unwrap();
    chmod(&p("odd/locked"), 0o500);

    // Extended attributes in every namespace, on files, dirs and a link.
    xattr::set(p("a/small"), "user.comment", b"kept").unwrap();
    xattr::set(p("a/small"), "trusted.overlay", b"\x00\x01binary").unwrap();
    xattr::set(p("a/small"), "security.pimigrate", b"label").unwrap();
    xattr::set(p("b"), "user.on-a-dir", b"yes").unwrap();
    xattr::set(p("links/relative"), "trusted.on-a-link", b"link").unwrap();

    // POSIX ACLs: an access ACL on a file, a default ACL on a directory.
    fs::write(p("acl/file"), b"x").unwrap();
    run(
        "setfacl",
        &[os("-m"), os("u:1234:rwx,g:55:r"), p("acl/file").as_os_str()],
    );
    run(
        "setfacl",
        &[os("-d"), os("-m"), os("g:55:rx"), p("acl").as_os_str()],
    );

    // Sparse: 1 GiB with 4 KiB of data in the middle; a leading hole only.
    let mut sparse = fs::File::create(p("sparse/mostly-hole")).unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        sparse.seek(SeekFrom::Start(512 << 20)).unwrap();
        sparse.write_all(&[0xab; 4096]).unwrap();
    }
    sparse.set_len(1 << 30).unwrap();
    let tail = fs::File::create(p("sparse/all-hole")).unwrap();
    tail.set_len(64 << 20).unwrap();

    // Names: 255 bytes, not UTF-8.
    fs::write(root.join("n".repeat(255)), b"long name").unwrap();
    fs::write(root.join(OsStr::from_bytes(b"caf\xe9")), b"latin-1").unwrap();
    fs::create_dir(root.join(OsStr::from_bytes(b"\xff\xfe dir"))).unwrap();
    fs::write(
        root.join(OsStr::from_bytes(b"\xff\xfe dir/\x01\x7f")),
        b"ctl",
    )
    .unwrap();

    // 200 levels of nesting.
    let mut deep = p("deep");
    for _ in 0..200 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("bottom"), b"deep").unwrap();

    // Things the exclusions leave out.
    fs::create_dir_all(p("scratch/sub")).unwrap();
    fs::write(p("scratch/sub/junk"), b"junk").unwrap();
    chmod(&p("scratch"), 0o1777);
    fs::create_dir_all(p("var")).unwrap();
    fs::write(p("var/swap"), vec![0u8; 1 << 20]).unwrap();
    fs::write(p("var/swapper"), b"not the swap file").unwrap();

    // Files that change during and after the copy.
    fs::write(p("live/growing.log"), b"start\n").unwrap();
    fs::write(p("live/same-size"), b"AAAA").unwrap();
    fs::write(p("live/vanishes"), b"bye").unwrap();
    fs::write(p("live/mode-changes"), b"m").unwrap();

    // Times to the nanosecond, on a file, a link and directories (last,
    // since creating entries moves a directory's mtime).
    set_times(
        &p("a/small"),
        (1_111_111_111, 123_456_789),
        (1_222_222_222, 987_654_321),
    );
    set_times(&p("links/dangling"), (1_000_000_000, 1), (1_000_000_000, 2));
    set_times(&p("b/c"), (1_300_000_000, 5), (1_300_000_000, 6));
    set_times(&p("odd/locked"), (1_400_000_000, 7), (1_400_000_000, 8));
}

fn exclusions() -> Vec<Exclusion> {
    vec![
        Exclusion::new("/lost+found", false, "mkfs makes one"),
        Exclusion::new("/var/swap", false, "swap file"),
        Exclusion::new("/scratch", true, "temporary files"),
    ]
}

/// The same exclusions as rsync filter rules.
const RSYNC_EXCLUDES: &[&str] = &[
    "--exclude=/lost+found",
    "--exclude=/var/swap",
    "--exclude=/scratch/*",
];

/// What rsync would still change to make `target` a faithful copy of
/// `source`: one itemized line per entry, nothing when the copy is exact.
fn rsync_differences(source: &Path, target: &Path) -> Vec<String> {
    let mut args: Vec<&OsStr> = vec![os("-naHAXcx"), os("--itemize-changes"), os("--numeric-ids")];
    args.extend(RSYNC_EXCLUDES.iter().map(|e| os(e)));
    let source = format!("{}/", source.display());
    let target = format!("{}/", target.display());
    args.push(os(&source));
    args.push(os(&target));
    run("rsync", &args)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn options(checksum: bool) -> CopyOptions {
    CopyOptions {
        exclusions: exclusions(),
        one_file_system: true,
        checksum,
        threads: 2,
        changed_since: None,
    }
}

fn no_progress(_: &CopyStats) {}

#[test]
fn torture_tree_is_copied_faithfully_and_the_second_pass_catches_changes() {
    if !prerequisites_met() {
        return;
    }
    let source_fs = Ext4::new(512);
    let target_fs = Ext4::new(512);
    let source = source_fs.path().join("root");
    let target = target_fs.path().join("root");
    fs::create_dir(&source).unwrap();
    build_torture_tree(&source);
    // A lost+found of the target's own, which no pass may delete.
    fs::create_dir_all(target.join("lost+found")).unwrap();
    fs::write(target.join("lost+found/#12"), b"target's own").unwrap();

    // The log grows while the copy runs: each progress report appends.
    let growing = source.join("live/growing.log");
    let appended = std::cell::Cell::new(0);
    let grow = |_: &CopyStats| {
        use std::io::Write;
        let mut log = fs::OpenOptions::new().append(true).open(&growing).unwrap();
        writeln!(log, "line {}", appended.get()).unwrap();
        appended.set(appended.get() + 1);
    };
    let source_times = times_of(&source);
    let cancel = AtomicBool::new(false);
    let first = copy::copy_tree(&source, &target, &options(false), &cancel, &grow).unwrap();
    assert!(
        appended.get() >= 1,
        "progress is reported at least at the end"
    );
    assert!(first.errors.is_empty(), "{:#?}", first.errors);
    assert_eq!(
        first.hardlinks, 3,
        "two extra names of `linked`, one of the pair"
    );
    assert_eq!(first.specials, 4);
    assert_eq!(first.symlinks, 4);
    assert_eq!(first.excluded, 2, "var/swap, scratch/sub");

    // Before rsync, whose reading moves atimes (relatime) on both sides.
    check_what_rsync_does_not(&source, &target, &source_times);

    // Everything but the log (changed during the copy) is already exact.
    let after_first = rsync_differences(&source, &target);
    assert!(
        after_first
            .iter()
            .all(|l| l.contains("live/growing.log") || l.ends_with(" live/")),
        "{after_first:#?}"
    );
    assert!(after_first.iter().any(|l| l.contains("live/growing.log")));

    // More changes between the passes: same size and mtime but other
    // bytes (only a checksum sees it), a vanished file, a new one, a mode.
    let same_size = source.join("live/same-size");
    let before = fs::symlink_metadata(&same_size).unwrap();
    fs::write(&same_size, b"BBBB").unwrap();
    set_times(
        &same_size,
        (before.atime(), before.atime_nsec()),
        (before.mtime(), before.mtime_nsec()),
    );
    fs::remove_file(source.join("live/vanishes")).unwrap();
    fs::write(source.join("live/new"), b"new").unwrap();
    chmod(&source.join("live/mode-changes"), 0o640);

    let quick =
        copy::second_pass(&source, &target, &options(false), &cancel, &no_progress).unwrap();
    assert!(quick.errors.is_empty(), "{:#?}", quick.errors);
    assert_eq!(quick.deleted, 1, "live/vanishes");
    let after_quick = rsync_differences(&source, &target);
    assert_eq!(
        after_quick,
        vec![">fc........ live/same-size".to_string()],
        "size and mtime checks miss only the same-size rewrite"
    );

    let thorough =
        copy::second_pass(&source, &target, &options(true), &cancel, &no_progress).unwrap();
    assert!(thorough.errors.is_empty(), "{:#?}", thorough.errors);
    assert_eq!(thorough.files, 1, "only live/same-size is copied again");
    assert_eq!(rsync_differences(&source, &target), Vec::<String>::new());
    assert_eq!(
        fs::read(target.join("lost+found/#12")).unwrap(),
        b"target's own",
        "excluded target entries survive the second pass"
    );
}

/// Entries whose atime and mtime (to the nanosecond) the test checks.
/// rsync -a compares neither atimes nor, on every version, nanoseconds.
const TIMED: &[&str] = &[
    "a/small",
    "links/dangling",
    "b/c",
    "odd/locked",
    "a/big",
    "acl",
];

type Times = Vec<(i64, i64, i64, i64)>;

fn times_of(root: &Path) -> Times {
    TIMED
        .iter()
        .map(|rel| {
            let m = fs::symlink_metadata(root.join(rel)).unwrap();
            (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec())
        })
        .collect()
}

/// What rsync's comparison does not look at: atimes and nanoseconds (as
/// the source had them before the copy read it: reading a symlink or a
/// directory moves its atime), holes, and what the exclusions left.
fn check_what_rsync_does_not(source: &Path, target: &Path, source_times: &Times) {
    assert_eq!(&times_of(target), source_times, "times of {TIMED:?}");
    for rel in ["sparse/mostly-hole", "sparse/all-hole"] {
        let s = fs::symlink_metadata(source.join(rel)).unwrap();
        let t = fs::symlink_metadata(target.join(rel)).unwrap();
        assert_eq!(s.len(), t.len());
        assert!(
            t.blocks() <= s.blocks() + 16,
            "{rel}: {} blocks, source {}",
            t.blocks(),
            s.blocks()
        );
    }
    assert_eq!(
        xattr::get(target.join("odd/ping"), "security.capability").unwrap(),
        xattr::get(source.join("odd/ping"), "security.capability").unwrap(),
    );
    assert_eq!(
        fs::symlink_metadata(target.join("odd/ping"))
            .unwrap()
            .mode()
            & 0o7777,
        0o4755
    );
    let linked = fs::metadata(target.join("a/linked")).unwrap();
    assert_eq!(linked.nlink(), 3);
    assert_eq!(
        fs::metadata(target.join("links/third")).unwrap().ino(),
        linked.ino()
    );
    assert!(!target.join("var/swap").exists());
    assert!(target.join("var/swapper").exists());
    let scratch = fs::symlink_metadata(target.join("scratch")).unwrap();
    assert_eq!(
        scratch.mode() & 0o7777,
        0o1777,
        "contents_only keeps the directory"
    );
    assert_eq!(fs::read_dir(target.join("scratch")).unwrap().count(), 0);
}

#[test]
fn nested_mounts_are_not_entered_and_hidden_files_are_reached_through_a_bind_mount() {
    if !prerequisites_met() {
        return;
    }
    let source_fs = Ext4::new(64);
    let target_fs = Ext4::new(64);
    let root = source_fs.path();
    fs::create_dir_all(root.join("proc")).unwrap();
    fs::create_dir_all(root.join("hidden")).unwrap();
    fs::write(
        root.join("hidden/under-the-mount"),
        b"only a bind mount shows me",
    )
    .unwrap();
    fs::write(root.join("etc-hostname"), b"pi\n").unwrap();
    let _proc = Mount::tmpfs(&root.join("proc"));
    fs::write(root.join("proc/cpuinfo"), b"not ours").unwrap();
    let _hidden = Mount::tmpfs(&root.join("hidden"));

    // Copying the mounted tree: mount points become empty directories.
    let direct = target_fs.path().join("direct");
    let cancel = AtomicBool::new(false);
    let opts = CopyOptions::default();
    let stats = copy::copy_tree(root, &direct, &opts, &cancel, &no_progress).unwrap();
    assert!(stats.errors.is_empty(), "{:#?}", stats.errors);
    assert_eq!(stats.mount_points, 2);
    assert!(direct.join("proc").is_dir());
    assert_eq!(fs::read_dir(direct.join("proc")).unwrap().count(), 0);
    assert!(!direct.join("hidden/under-the-mount").exists());
    assert!(direct.join("etc-hostname").exists());

    // Through a plain bind mount of the root, what the mounts hide is
    // copied: the copier's part of "reach files under mount points".
    let bind = source_fs.dir.join("bind");
    fs::create_dir(&bind).unwrap();
    let _bind = Mount::bind(root, &bind);
    let through_bind = target_fs.path().join("through-bind");
    let stats = copy::copy_tree(&bind, &through_bind, &opts, &cancel, &no_progress).unwrap();
    assert!(stats.errors.is_empty(), "{:#?}", stats.errors);
    assert_eq!(stats.mount_points, 0);
    assert_eq!(
        fs::read(through_bind.join("hidden/under-the-mount")).unwrap(),
        b"only a bind mount shows me"
    );
    assert!(!through_bind.join("proc/cpuinfo").exists());

    // Without one_file_system the mounted contents are copied too.
    let everything = target_fs.path().join("everything");
    let all = CopyOptions {
        one_file_system: false,
        ..CopyOptions::default()
    };
    copy::copy_tree(root, &everything, &all, &cancel, &no_progress).unwrap();
    assert!(everything.join("proc/cpuinfo").exists());
}

#[test]
fn a_cancelled_copy_is_completed_by_the_second_pass() {
    if !prerequisites_met() {
        return;
    }
    let source_fs = Ext4::new(512);
    let target_fs = Ext4::new(512);
    let source = source_fs.path().join("root");
    let target = target_fs.path().join("root");
    for d in 0..20 {
        let dir = source.join(format!("dir{d}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            fs::write(
                dir.join(format!("file{f}")),
                format!("{d}/{f}\n").repeat(50),
            )
            .unwrap();
        }
    }
    let big: Vec<u8> = (0..(96u32 << 20)).map(|i| (i % 253) as u8).collect();
    fs::write(source.join("dir7/big"), &big).unwrap();

    let cancel = AtomicBool::new(false);
    let copied = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(30));
            cancel.store(true, Ordering::Relaxed);
        });
        copy::copy_tree(&source, &target, &options(false), &cancel, &no_progress)
    });
    match copied {
        Err(err) => assert!(err.is::<Cancelled>(), "{err:#}"),
        Ok(_) => eprintln!("the copy finished before the cancel request"),
    }
    let not_cancelled = AtomicBool::new(false);
    let stats = copy::second_pass(
        &source,
        &target,
        &options(false),
        &not_cancelled,
        &no_progress,
    )
    .unwrap();
    assert!(stats.errors.is_empty(), "{:#?}", stats.errors);
    assert_eq!(rsync_differences(&source, &target), Vec::<String>::new());
}

#[test]
fn a_full_target_fails_the_copy_with_the_path_and_errno() {
    if !prerequisites_met() {
        return;
    }
    let source_fs = Ext4::new(128);
    let target_fs = Ext4::new(16);
    let data: Vec<u8> = (0..(40u32 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(source_fs.path().join("too-big"), &data).unwrap();
    let cancel = AtomicBool::new(false);
    let err = copy::copy_tree(
        source_fs.path(),
        &target_fs.path().join("root"),
        &CopyOptions::default(),
        &cancel,
        &no_progress,
    )
    .unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("too-big"), "{message}");
    assert!(message.contains("copy data"), "{message}");
    let copy_error = err
        .downcast_ref::<copy::CopyError>()
        .expect("a CopyError inside");
    assert_eq!(copy_error.errno, Some(libc::ENOSPC));
}

/// 32-bit regression (armhf): a time past January 2038 went through a
/// 32-bit time_t when the copy set it and came out as 1903, with no error;
/// a file of 2 GiB or more needs 64-bit offsets to keep its holes and its
/// tail.
#[test]
fn a_file_dated_2040_and_a_sparse_file_past_2_gib_are_copied_exactly() {
    if !prerequisites_met() {
        return;
    }
    let source_fs = Ext4::new(64);
    let target_fs = Ext4::new(64);
    let source = source_fs.path().join("root");
    let target = target_fs.path().join("root");
    fs::create_dir(&source).unwrap();
    // 2040-01-01 and 2100-02-03 (UTC), to the nanosecond.
    let in_2040 = (2_208_988_800, 123_456_789);
    let in_2100 = (4_105_468_800, 987_654_321);
    fs::write(source.join("dated-2040"), b"from the future").unwrap();
    set_times(&source.join("dated-2040"), in_2100, in_2040);
    std::os::unix::fs::symlink("dated-2040", source.join("link-2040")).unwrap();
    set_times(&source.join("link-2040"), in_2040, in_2040);

    // 3 GiB apparent, two small extents: at the start and past 2 GiB.
    let tail_at = (5u64 << 29) + 12_345; // 2.5 GiB and a bit
    let big = source.join("sparse-3g");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = fs::File::create(&big).unwrap();
        file.write_all(b"head").unwrap();
        file.seek(SeekFrom::Start(tail_at)).unwrap();
        file.write_all(b"tail past 2 GiB").unwrap();
        file.set_len(3 << 30).unwrap();
    }
    set_times(&big, in_2040, in_2040);
    set_times(&source, in_2040, in_2040);

    let stats = copy::copy_tree(
        &source,
        &target,
        &options(false),
        &AtomicBool::new(false),
        &no_progress,
    )
    .unwrap();
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);

    let time = |path: &Path, which: fn(&fs::Metadata) -> (i64, i64)| {
        which(&fs::symlink_metadata(path).unwrap())
    };
    let mtime = |m: &fs::Metadata| (m.mtime(), m.mtime_nsec());
    let atime = |m: &fs::Metadata| (m.atime(), m.atime_nsec());
    assert_eq!(time(&target.join("dated-2040"), mtime), in_2040);
    assert_eq!(time(&target.join("dated-2040"), atime), in_2100);
    assert_eq!(time(&target.join("link-2040"), mtime), in_2040);
    assert_eq!(time(&target, mtime), in_2040);
    assert_eq!(time(&target.join("sparse-3g"), mtime), in_2040);

    let copied = target.join("sparse-3g");
    let meta = fs::metadata(&copied).unwrap();
    assert_eq!(meta.len(), 3 << 30);
    // Holes stay holes: a few blocks, not 3 GiB (the image is 64 MiB).
    assert!(meta.blocks() * 512 < 1 << 20, "{} blocks", meta.blocks());
    let mut bytes = vec![0u8; 15];
    {
        use std::os::unix::fs::FileExt;
        let file = fs::File::open(&copied).unwrap();
        file.read_exact_at(&mut bytes, tail_at).unwrap();
        assert_eq!(&bytes, b"tail past 2 GiB");
        file.read_exact_at(&mut bytes[..4], 0).unwrap();
        assert_eq!(&bytes[..4], b"head");
        file.read_exact_at(&mut bytes[..4], (2 << 30) + 7).unwrap();
        assert_eq!(&bytes[..4], &[0; 4]);
    }

    // Changed since: the second pass writes a new copy beside the old one
    // and renames it into place, holes kept as well.
    {
        use std::os::unix::fs::FileExt;
        let file = fs::OpenOptions::new().write(true).open(&big).unwrap();
        file.write_all_at(b"HEAD", 0).unwrap();
    }
    let stats = copy::second_pass(
        &source,
        &target,
        &options(false),
        &AtomicBool::new(false),
        &no_progress,
    )
    .unwrap();
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    assert_eq!(stats.files, 1);
    let meta = fs::metadata(&copied).unwrap();
    assert_eq!(meta.len(), 3 << 30);
    assert!(meta.blocks() * 512 < 1 << 20, "{} blocks", meta.blocks());
    {
        use std::os::unix::fs::FileExt;
        let file = fs::File::open(&copied).unwrap();
        file.read_exact_at(&mut bytes, tail_at).unwrap();
        assert_eq!(&bytes, b"tail past 2 GiB");
        file.read_exact_at(&mut bytes[..4], 0).unwrap();
        assert_eq!(&bytes[..4], b"HEAD");
    }
}

/// 32-bit regression (armhf): the plain statvfs counts blocks in 32 bits
/// and fails past 16 TiB (4 KiB blocks). A 20 TiB tmpfs costs nothing
/// until written and has 5,368,709,120 blocks of 4 KiB.
#[test]
fn a_filesystem_over_16_tib_reports_its_size() {
    if !prerequisites_met() {
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let _mount = Mount::tmpfs_of(dir.path(), "20t");
    let space = pimigrate::sys64::filesystem_space(dir.path()).unwrap();
    assert_eq!(space.total_bytes(), 20 << 40, "{space:?}");
    assert!(space.blocks > u64::from(u32::MAX), "{space:?}");
    assert!(space.available_bytes() > 16 << 40, "{space:?}");
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A standby lost a whole directory to a garbled directory block on the
/// source: ext4 fails its listing with EBADMSG ("Bad message"), the copier
/// took that for an empty directory, and the second pass (that of every
/// sync, of migrate and of --resume) deleted the 40 files the target held
/// there. Now they stay, untouched, and the error names the directory.
#[test]
fn a_garbled_directory_block_on_the_source_costs_the_target_nothing() {
    if !prerequisites_met() {
        return;
    }
    let mut source_fs = Ext4::new(64);
    let target_fs = Ext4::new(64);
    let source = source_fs.path().join("root");
    let target = target_fs.path().join("root");
    let keep = source.join("srv/keep");
    fs::create_dir_all(&keep).unwrap();
    for i in 0..40 {
        fs::write(keep.join(format!("file{i:02}")), format!("kept {i}\n")).unwrap();
    }
    fs::write(source.join("srv/other"), b"other\n").unwrap();
    let cancel = AtomicBool::new(false);
    let first = copy::copy_tree(&source, &target, &options(false), &cancel, &no_progress).unwrap();
    assert!(first.errors.is_empty(), "{:#?}", first.errors);
    let copied = names_in(&target.join("srv/keep"));
    assert_eq!(copied.len(), 40);
    let before = fs::metadata(target.join("srv/keep")).unwrap();

    // Changed since, as a sync finds it: a file added under srv/keep, and
    // one elsewhere, which the pass must still copy.
    fs::write(keep.join("added"), b"added\n").unwrap();
    fs::write(source.join("srv/other"), b"other, changed\n").unwrap();
    // Garbage over the directory's blocks, written through the device
    // while the filesystem is unmounted, so that ext4 reads it anew.
    let block_size = source_fs.block_size();
    source_fs.remounted(|device| {
        let blocks = blocks_of(device, "root/srv/keep");
        let garbage: Vec<u8> = (0..block_size).map(|i| (i * 131 % 251) as u8).collect();
        let disk = fs::OpenOptions::new().write(true).open(device).unwrap();
        for block in blocks {
            std::os::unix::fs::FileExt::write_all_at(&disk, &garbage, block * block_size).unwrap();
        }
        disk.sync_all().unwrap();
    });
    let listed: Result<Vec<_>, _> = fs::read_dir(&keep).unwrap().collect();
    assert_eq!(
        listed.as_ref().err().and_then(|e| e.raw_os_error()),
        Some(libc::EBADMSG),
        "ext4 fails the garbled directory's listing: {listed:?}"
    );

    let stats =
        copy::second_pass(&source, &target, &options(false), &cancel, &no_progress).unwrap();
    let shown = stats.errors_shown(10);
    assert_eq!(stats.error_count, 1, "{shown}");
    assert_eq!(stats.errors[0].path, keep, "{shown}");
    assert_eq!(stats.errors[0].errno, Some(libc::EBADMSG), "{shown}");
    assert!(
        shown.contains("srv/keep: list directory: Bad message"),
        "{shown}"
    );
    assert_eq!(stats.deleted, 0);
    assert_eq!(
        names_in(&target.join("srv/keep")),
        copied,
        "all 40 are kept"
    );
    for i in 0..40 {
        assert_eq!(
            fs::read(target.join(format!("srv/keep/file{i:02}"))).unwrap(),
            format!("kept {i}\n").as_bytes()
        );
    }
    let after = fs::metadata(target.join("srv/keep")).unwrap();
    assert_eq!(
        (after.mode(), after.mtime(), after.mtime_nsec()),
        (before.mode(), before.mtime(), before.mtime_nsec()),
        "nor is its metadata changed"
    );
    assert_eq!(
        fs::read(target.join("srv/other")).unwrap(),
        b"other, changed\n",
        "the rest of the tree is copied"
    );
}

/// A changed file whose read fails half-way with EIO (its second half
/// lies past the end of the image its loop device reads with direct I/O:
/// the device fails those reads as it would a bad sector's). The second
/// pass used to truncate the target's copy before reading the source; now
/// it writes a new copy beside it and never renames it in, so the target
/// keeps its old bytes, in the same inode, and the error names the file.
#[test]
fn a_file_whose_read_fails_half_way_keeps_its_copy_on_the_target() {
    if !prerequisites_met() {
        return;
    }
    let mut source_fs = Ext4::build(64, true);
    let target_fs = Ext4::new(64);
    let name = source_fs.device().trim_start_matches("/dev/").to_string();
    let dio = fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap();
    assert_eq!(
        dio.trim(),
        "1",
        "the loop device reads its image with direct I/O"
    );
    let source = source_fs.path().join("root");
    let target = target_fs.path().join("root");
    fs::create_dir_all(source.join("etc")).unwrap();
    fs::write(source.join("etc/small"), b"small\n").unwrap();
    let old: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(source.join("victim"), &old).unwrap();
    let cancel = AtomicBool::new(false);
    let first = copy::copy_tree(&source, &target, &options(false), &cancel, &no_progress).unwrap();
    assert!(first.errors.is_empty(), "{:#?}", first.errors);
    let inode = fs::metadata(target.join("victim")).unwrap().ino();

    // A new version, written last: its blocks are the filesystem's last.
    let new: Vec<u8> = (0..(8u32 << 20)).map(|i| (i % 241) as u8).collect();
    fs::write(source.join("victim.new"), &new).unwrap();
    fs::rename(source.join("victim.new"), source.join("victim")).unwrap();
    fs::write(source.join("etc/small"), b"small, changed\n").unwrap();
    let block_size = source_fs.block_size();
    let mut blocks = Vec::new();
    // Remounted: nothing of the file stays cached, it is read from the device.
    source_fs.remounted(|device| blocks = blocks_of(device, "root/victim"));
    let middle = blocks[blocks.len() / 2];
    assert!(
        blocks[blocks.len() / 2..].iter().all(|&b| b >= middle),
        "the second half of the file is not at the end of its blocks: {blocks:?}"
    );
    // The image ends in the middle of the file; the device keeps its size.
    fs::OpenOptions::new()
        .write(true)
        .open(source_fs.image())
        .unwrap()
        .set_len(middle * block_size)
        .unwrap();

    let stats =
        copy::second_pass(&source, &target, &options(false), &cancel, &no_progress).unwrap();
    let shown = stats.errors_shown(10);
    assert_eq!(stats.error_count, 1, "{shown}");
    assert_eq!(stats.errors[0].path, source.join("victim"), "{shown}");
    assert_eq!(stats.errors[0].operation, "copy data", "{shown}");
    assert_eq!(stats.errors[0].errno, Some(libc::EIO), "{shown}");
    let kept = fs::metadata(target.join("victim")).unwrap();
    assert_eq!(kept.ino(), inode, "the same inode");
    assert!(
        fs::read(target.join("victim")).unwrap() == old,
        "its old bytes"
    );
    assert_eq!(
        names_in(&target),
        ["etc", "victim"].map(String::from),
        "no temporary file is left"
    );
    assert_eq!(
        fs::read(target.join("etc/small")).unwrap(),
        b"small, changed\n"
    );
}
