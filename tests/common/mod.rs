//! Running the real `pimigrate` binary in tests.
#![allow(dead_code)]

pub mod migration;
pub mod pty;
pub mod raspi_firmware;
pub mod standby;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn pimigrate() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pimigrate"));
    command.env_remove("PIMIGRATE_TOOLS_PATH");
    command
}

/// Puts a copy of the pimigrate under test at `to` (mode 755), to run it
/// from there. `install` writes it in a process of its own: had this test
/// process written it, another test's child forked meanwhile would hold the
/// file open for writing until its own exec, and running the copy would
/// fail with ETXTBSY ("Text file busy"). Under qemu-user that failure is
/// not even an error but the child's exit code 127 (glibc's posix_spawn
/// reports it through memory that qemu does not share).
pub fn install_pimigrate(to: &Path) {
    let status = Command::new("install")
        .args(["-m", "755", env!("CARGO_BIN_EXE_pimigrate")])
        .arg(to)
        .status()
        .expect("running install (coreutils)");
    assert!(
        status.success(),
        "install pimigrate to {}: {status}",
        to.display()
    );
}

/// Runs pimigrate against a fixture machine.
pub fn on_fixture(machine: &str, args: &[&str]) -> Output {
    let root = fixture(machine);
    pimigrate()
        .arg("--sysroot")
        .arg(&root)
        .args(args)
        .output()
        .expect("running pimigrate")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Parses stdout as JSON, with the whole output in the panic message.
pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}):\nstdout: {}\nstderr: {}",
            stdout(output),
            stderr(output)
        )
    })
}

/// A `--json` run of `command` that succeeded, with its document's schema
/// (`pimigrate.<command>/N`, N as the crate defines it).
pub fn succeeded(output: &Output, command: &str) -> serde_json::Value {
    assert_eq!(
        exit_code(output),
        0,
        "{command} failed:\n{}\n{}",
        stdout(output),
        stderr(output)
    );
    let value = json(output);
    let schema = match command {
        "sync" => pimigrate::sync::SYNC_SCHEMA.to_string(),
        _ => format!("pimigrate.{command}/1"),
    };
    assert_eq!(value["schema"], schema);
    value
}

pub fn exit_code(output: &Output) -> i32 {
    output
        .status
        .code()
        .expect("pimigrate was killed by a signal")
}

/// Tests that need root (loop devices, mounts) fail loudly in CI instead of
/// skipping; on a developer's machine without root they say why and pass.
pub fn require_root(what: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} needs root, and CI must run it"
    );
    eprintln!("skipping {what}: needs root (runs in CI)");
    false
}

/// A Pi-like root tree (the Pi 4 fixture's files) in a directory of this
/// machine's disk.
pub fn pi_tree() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pimigrate-src")
        .tempdir_in("/var/tmp")
        .unwrap();
    for part in ["etc", "boot", "var", "home", "usr", "tmp"] {
        let status = Command::new("cp")
            .arg("-a")
            .arg(fixture("pi4").join(part))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "copying the fixture tree");
    }
    dir
}

/// An image file, or the part of it from a byte offset on, on a loop
/// device; detached on drop.
/// The lock file the testbed holds shared while one of its disk images
/// is on a host loop device (testbed/src/host/attach.rs names the same path).
const HOST_IDS_LOCK: &str = "/run/lock/pimigrate-host-ids.lock";

/// A turn at the host's ids: a test whose checks want every id on the host
/// to name one device (a standby's `ids-unique`) takes it, and no other
/// such test of this binary, nor a testbed image attached on the host
/// (whose SD card carries the same signature, whose migrated root the same
/// label), runs beside it. CI runs the testbed's shared lane beside the
/// cargo tests.
pub struct IdsTurn {
    _file: nix::fcntl::Flock<std::fs::File>,
    _test: std::sync::MutexGuard<'static, ()>,
}

static IDS_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl IdsTurn {
    pub fn take() -> IdsTurn {
        let test = IDS_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(HOST_IDS_LOCK)
            .unwrap_or_else(|err| panic!("opening {HOST_IDS_LOCK}: {err}"));
        let file = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .unwrap_or_else(|(_, err)| panic!("locking {HOST_IDS_LOCK}: {err}"));
        IdsTurn {
            _file: file,
            _test: test,
        }
    }
}

pub struct Loop {
    pub device: String,
}

impl Loop {
    pub fn attach(image: &Path, offset: Option<u64>, read_only: bool) -> Loop {
        let mut losetup = Command::new("losetup");
        losetup.args(["-f", "--show"]);
        if read_only {
            losetup.arg("-r");
        }
        if let Some(offset) = offset {
            losetup.args(["-o", &offset.to_string()]);
        }
        let output = losetup
            .arg(image)
            .output()
            .expect("losetup (util-linux) is required");
        assert!(
            output.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let device = String::from_utf8(output.stdout).unwrap().trim().to_string();
        Loop { device }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// A sparse image file on a loop device. On drop, the loop devices a
/// migration put on top of it (one per partition) are unmounted and
/// detached, then the disk itself.
pub struct LoopDisk {
    pub device: String,
    pub image: PathBuf,
    // Detached after `drop` took what sits on top of it away.
    attached: Loop,
    _dir: tempfile::TempDir,
}

impl LoopDisk {
    pub fn new(size: u64) -> LoopDisk {
        LoopDisk::with(size, |_| {}, false)
    }

    /// `setup` writes into the image before it is attached.
    pub fn with(size: u64, setup: impl FnOnce(&Path), read_only: bool) -> LoopDisk {
        let dir = tempfile::Builder::new()
            .prefix("pimigrate-target")
            .tempdir_in("/var/tmp")
            .unwrap();
        LoopDisk::in_dir(dir, size, setup, read_only)
    }

    /// The image in `dir` (removed with the disk).
    pub fn in_dir(
        dir: tempfile::TempDir,
        size: u64,
        setup: impl FnOnce(&Path),
        read_only: bool,
    ) -> LoopDisk {
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(size)
            .unwrap();
        setup(&image);
        let attached = Loop::attach(&image, None, read_only);
        LoopDisk {
            device: attached.device.clone(),
            image,
            attached,
            _dir: dir,
        }
    }

    pub fn path(&self) -> &str {
        &self.device
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let on_top: Vec<String> = pimigrate::apply::loopparts::backed_by(Path::new(&self.device))
            .unwrap_or_default()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for line in mounts.lines() {
            let source = line
                .split(" - ")
                .nth(1)
                .and_then(|rest| rest.split(' ').nth(1))
                .unwrap_or("");
            if source == self.device || on_top.iter().any(|d| d == source) {
                if let Some(point) = line.split(' ').nth(4) {
                    let _ = Command::new("umount").arg(point).status();
                }
            }
        }
        for name in on_top {
            let _ = Command::new("losetup").args(["-d", &name]).status();
        }
        debug_assert_eq!(self.attached.device, self.device);
    }
}

/// Every file in a boot directory, name and bytes, sorted: to compare the
/// boot files before and after.
pub fn boot_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// A disk image nobody wrote to still has a blank first MiB (no table, no
/// superblock).
pub fn assert_first_mib_blank(image: &Path) {
    let mut head = vec![0u8; 1 << 20];
    std::io::Read::read_exact(&mut std::fs::File::open(image).unwrap(), &mut head).unwrap();
    assert!(
        head.iter().all(|&b| b == 0),
        "{} was written to",
        image.display()
    );
}

/// Every entry below `dir` but those `skip` names: path, mode, mtime,
/// ctime and a regular file's bytes, sorted; for "nothing here changed".
pub fn snapshot(
    dir: &Path,
    skip: impl Fn(&Path) -> bool,
) -> Vec<(PathBuf, u32, i64, i64, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt;
    let mut entries: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| !skip(e.path()))
        .map(|e| {
            let meta = e.path().symlink_metadata().unwrap();
            let bytes = if meta.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            (
                e.path().to_path_buf(),
                meta.mode(),
                meta.mtime(),
                meta.ctime(),
                bytes,
            )
        })
        .collect();
    entries.sort();
    entries
}

/// What `program ARGS` printed on stdout; it must succeed (else its
/// stderr in the panic message).
pub fn tool_output<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    program: &str,
    args: &[S],
) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("running {program}: {err}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The blocks of `path` (relative to the filesystem's root) on the
/// unmounted ext4 on `device`, in file order, as debugfs lists them: what
/// the tests garble to make a directory unreadable, as a dying disk does.
pub fn ext4_blocks_of(device: &str, path: &str) -> Vec<u64> {
    let listed = tool_output("debugfs", &["-R", &format!("blocks /{path}"), device]);
    let blocks: Vec<u64> = listed
        .split_whitespace()
        .map(|b| {
            b.parse()
                .unwrap_or_else(|_| panic!("debugfs said {listed}"))
        })
        .collect();
    assert!(!blocks.is_empty(), "debugfs found no blocks of {path}");
    blocks
}

/// Writes `journal` into the state directory `dir` as pimigrate writes it:
/// through the one writer, which holds the directory's lock.
pub fn save_journal(dir: &Path, journal: &mut pimigrate::state::journal::Journal) {
    let lock = pimigrate::apply::state::StateLock::acquire(dir).unwrap();
    lock.save_journal(journal, dir).unwrap();
}

/// What the owner reads when a run that writes stops with an error: its
/// last two lines say where the Pi stands and the command that goes on
/// (`pimigrate::apply::standing`), and no Rust Debug text is anywhere in
/// it. Returns the two lines' words and the command, the first one the
/// second line quotes.
pub fn told(what: &str, said: &str) -> (String, String, String) {
    use pimigrate::apply::standing::{NEXT, WHERE};
    let lines: Vec<&str> = said.trim_end().lines().collect();
    assert!(lines.len() >= 3, "{what}: no cause and standing:\n{said}");
    let stands = lines[lines.len() - 2]
        .strip_prefix(&format!("  {WHERE}"))
        .unwrap_or_else(|| panic!("{what}: no '{WHERE}' line at the end:\n{said}"));
    let next = lines[lines.len() - 1]
        .strip_prefix(&format!("  {NEXT}"))
        .unwrap_or_else(|| panic!("{what}: no '{NEXT}' line at the end:\n{said}"));
    assert!(
        said.matches(WHERE).count() == 1,
        "{what}: the standing twice:\n{said}"
    );
    let command = next
        .split('`')
        .nth(1)
        .filter(|c| c.starts_with("sudo pimigrate ") || c.starts_with("pimigrate "))
        .unwrap_or_else(|| panic!("{what}: no command goes on:\n{said}"));
    for debug in [
        "Os {", "Custom {", "kind: ", "Some(", "None)", "Error {", "code: ",
    ] {
        assert!(
            !said.contains(debug),
            "{what}: Debug text ({debug}) reached the owner:\n{said}"
        );
    }
    (stands.to_string(), next.to_string(), command.to_string())
}
