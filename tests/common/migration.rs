//! What a migration on this machine needs: a Pi-like root tree, a state
//! directory and a loop-device "SSD", with the real binary run against
//! them. The host tests (`migrate_host`) and the fault tests
//! (`migrate_faults`) build on it.

use super::{pi_tree, pimigrate, Loop, LoopDisk};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Each migration labels its target's root `rootfs` unless an attached disk
/// has that label already, so rigs migrating side by side make several
/// `rootfs` disks at once. That is harmless to them, but a test whose
/// checks count every attached disk's ids (a standby's `ids-unique`) must
/// not see the others' labels: it takes its turn alone.
static LABELS: RwLock<()> = RwLock::new(());

enum Turn {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

pub struct MigrationRig {
    pub tree: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub image: PathBuf,
    pub device: String,
    _disk: LoopDisk,
    _turn: Turn,
}

impl MigrationRig {
    /// The fixture's Pi tree with `extend` run on it, and a 1 GiB target.
    pub fn new(extend: impl FnOnce(&Path)) -> MigrationRig {
        let turn = Turn::Shared(LABELS.read().unwrap_or_else(|e| e.into_inner()));
        MigrationRig::taking(turn, extend)
    }

    /// As `new`, with no other rig's disk attached while this one lives:
    /// for checks that resolve ids against every attached disk.
    pub fn alone(extend: impl FnOnce(&Path)) -> MigrationRig {
        let turn = Turn::Alone(LABELS.write().unwrap_or_else(|e| e.into_inner()));
        MigrationRig::taking(turn, extend)
    }

    fn taking(turn: Turn, extend: impl FnOnce(&Path)) -> MigrationRig {
        let tree = pi_tree();
        extend(tree.path());
        let disk = LoopDisk::new(1 << 30);
        MigrationRig {
            tree,
            state: tempfile::tempdir().unwrap(),
            image: disk.image.clone(),
            device: disk.device.clone(),
            _disk: disk,
            _turn: turn,
        }
    }

    pub fn boot(&self) -> PathBuf {
        self.tree.path().join("boot/firmware")
    }

    pub fn log_dir(&self) -> PathBuf {
        self.state.path().join("log")
    }

    /// `pimigrate ARGS` on the tree, its state and logs kept in the rig
    /// (out of this machine's /var/lib and /var/log), with a fail point
    /// (`PIMIGRATE_FAILPOINT`) if one is given.
    pub fn command(&self, args: &[&str], failpoint: Option<&str>) -> Command {
        let mut command = pimigrate();
        command
            .arg("--source-root")
            .arg(self.tree.path())
            .arg("--boot-dir")
            .arg(self.boot())
            .arg("--state-dir")
            .arg(self.state.path())
            .arg("--log-dir")
            .arg(self.log_dir())
            .args(args);
        if let Some(point) = failpoint {
            command.env(pimigrate::failpoint::ENV, point);
        }
        command
    }

    /// [`MigrationRig::command`], run to its end.
    pub fn run(&self, args: &[&str], failpoint: Option<&str>) -> Output {
        self.command(args, failpoint).output().unwrap()
    }

    /// The journal in the rig's state directory.
    pub fn journal(&self) -> Value {
        let bytes = std::fs::read(self.state.path().join("migration.json")).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    /// Mounts the target's partition starting at `start_sector`, read
    /// only, by its offset (this kernel may have no partition devices) and
    /// runs `check` on it.
    pub fn inspect_partition(&self, start_sector: u64, check: impl FnOnce(&Path)) {
        self.inspect_with(start_sector, "ro", check)
    }

    /// [`MigrationRig::inspect_partition`] for a filesystem a killed run
    /// left mounted: as a power cut would leave it on the disk, its
    /// journal not replayed (`noload`).
    pub fn inspect_after_a_cut(&self, start_sector: u64, check: impl FnOnce(&Path)) {
        self.inspect_with(start_sector, "ro,noload", check)
    }

    fn inspect_with(&self, start_sector: u64, options: &str, check: impl FnOnce(&Path)) {
        let part = Loop::attach(&self.image, Some(start_sector * 512), true);
        let mnt = tempfile::tempdir().unwrap();
        assert!(Command::new("mount")
            .args(["-o", options, &part.device])
            .arg(mnt.path())
            .status()
            .unwrap()
            .success());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(mnt.path())));
        let _ = Command::new("umount").arg(mnt.path()).status();
        drop(part);
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    }
}
