//! A standby's rig for the sync tests: a Pi-like tree whose boot partition
//! starts a kernel it has the modules of, a 1 GiB loop disk to be the
//! standby, and the "SD card" whose boot partition the tree's fstab names
//! (MBR signature 6c586e13), so the standby's fstab boot line names one
//! attached device. [`SourceFs`] puts the tree on a filesystem of its own
//! (ext4, for a source whose blocks a test garbles; ext3 or btrfs, for a
//! root of that type).

use super::migration::MigrationRig;
use super::{tool_output as run, LoopDisk};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel version the tree's boot partition starts and has modules of.
pub const KERNEL: &str = "6.6.51-test-v8";

/// The rig (its 1 GiB loop disk is the standby) and the "SD card" whose
/// boot partition the tree's fstab names (MBR signature 6c586e13), so
/// that the standby's fstab boot line names one attached device.
pub struct SyncRig {
    pub rig: MigrationRig,
    pub _sd: LoopDisk,
    /// Two "SD cards" with one signature at once would be the very
    /// duplicate ids the checks refuse: these tests take turns.
    pub _turn: super::IdsTurn,
}

pub fn setup() -> SyncRig {
    let turn = super::IdsTurn::take();
    let rig = MigrationRig::alone(|tree| {
        let boot = tree.join("boot/firmware");
        let mut kernel = vec![0u8; 4096];
        kernel.extend_from_slice(format!("Linux version {KERNEL} (builder@pi) #1 SMP").as_bytes());
        std::fs::write(boot.join("kernel8.img"), kernel).unwrap();
        std::fs::write(boot.join("initramfs8"), b"initramfs").unwrap();
        std::fs::create_dir_all(tree.join("usr/lib/modules").join(KERNEL).join("kernel")).unwrap();
        std::fs::create_dir_all(tree.join("var/lib/pimigrate")).unwrap();
        std::fs::create_dir_all(tree.join("srv/data/deep")).unwrap();
        for i in 0..40 {
            std::fs::write(
                tree.join(format!("srv/data/file-{i}")),
                format!("content {i}\n"),
            )
            .unwrap();
        }
        std::fs::write(tree.join("srv/data/deep/mode-only"), "same bytes\n").unwrap();
        std::fs::write(tree.join("srv/data/deep/xattr-only"), "same bytes\n").unwrap();
        // Debian's raspi-firmware, whose ROOTPART= the standby keeps its own.
        std::fs::create_dir_all(tree.join("etc/default")).unwrap();
        std::fs::write(
            tree.join("etc/default/raspi-firmware"),
            "# Debian's raspi-firmware\nROOTPART=PARTUUID=6c586e13-02\n",
        )
        .unwrap();
    });
    let sd = LoopDisk::with(
        64 << 20,
        |image| {
            let mut sfdisk = Command::new("sfdisk")
                .arg("-q")
                .arg(image)
                .stdin(std::process::Stdio::piped())
                .spawn()
                .expect("sfdisk (fdisk) is required");
            use std::io::Write;
            sfdisk
                .stdin
                .take()
                .unwrap()
                .write_all(b"label: dos\nlabel-id: 0x6c586e13\n8192,65536,c\n")
                .unwrap();
            assert!(sfdisk.wait().unwrap().success());
        },
        false,
    );
    SyncRig {
        rig,
        _sd: sd,
        _turn: turn,
    }
}

/// A tree moved onto an ext4 filesystem of its own (a loop disk) mounted
/// over the tree's own directory, so that the tree is a real filesystem
/// whose blocks a test can garble, as a dying card garbles them (a plain
/// directory on the host's disk cannot be). Declare it after the rig: it
/// is unmounted on drop (by its [`LoopDisk`]), before the rig removes the
/// directory it covers.
pub struct SourceFs {
    tree: PathBuf,
    disk: LoopDisk,
}

/// Blocks of the source saved before [`SourceFs::garble`] wrote over
/// them: (block number, bytes).
pub struct Saved {
    block_size: u64,
    blocks: Vec<(u64, Vec<u8>)>,
}

impl SourceFs {
    /// Copies `tree` (with `cp -a`) onto a new ext4 of `size` bytes and
    /// mounts that over `tree`.
    pub fn under(tree: &Path, size: u64) -> SourceFs {
        SourceFs::under_as(tree, size, "ext4")
    }

    /// [`SourceFs::under`] with a filesystem of type `fstype` (`ext3`,
    /// `btrfs`: its mkfs must be installed, and the kernel must know it).
    pub fn under_as(tree: &Path, size: u64, fstype: &str) -> SourceFs {
        let disk = LoopDisk::new(size);
        let mkfs = format!("mkfs.{fstype}");
        match fstype {
            "btrfs" => run(&mkfs, &["-q", "-f", &disk.device]),
            _ => run(&mkfs, &["-q", "-F", "-E", "nodiscard", &disk.device]),
        };
        let staging = tempfile::tempdir_in("/var/tmp").unwrap();
        let staged = staging.path().to_str().unwrap();
        run("mount", &[disk.device.as_str(), staged]);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", tree.display()))
            .arg(staging.path())
            .status()
            .unwrap();
        run("umount", &[staged]);
        assert!(copied.success(), "copying the tree onto its ext4");
        let source = SourceFs {
            tree: tree.to_path_buf(),
            disk,
        };
        source.mount();
        source
    }

    fn mount(&self) {
        run(
            "mount",
            &[self.disk.device.as_str(), self.tree.to_str().unwrap()],
        );
    }

    /// Unmounts the tree, runs `change` on its device, and mounts it
    /// again: ext4 then reads the blocks from the device anew.
    fn remounted<T>(&self, change: impl FnOnce(&str) -> T) -> T {
        run("umount", &[self.tree.to_str().unwrap()]);
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| change(&self.disk.device)));
        self.mount();
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Writes garbage over every block of `path` (from the tree's root),
    /// and returns what they held, for [`SourceFs::restore`].
    pub fn garble(&self, path: &str) -> Saved {
        self.remounted(|device| {
            let block_size = block_size(device);
            let disk = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(device)
                .unwrap();
            let garbage: Vec<u8> = (0..block_size).map(|i| (i * 131 % 251) as u8).collect();
            let blocks = super::ext4_blocks_of(device, path)
                .into_iter()
                .map(|block| {
                    let mut held = vec![0u8; block_size as usize];
                    disk.read_exact_at(&mut held, block * block_size).unwrap();
                    disk.write_all_at(&garbage, block * block_size).unwrap();
                    (block, held)
                })
                .collect();
            disk.sync_all().unwrap();
            Saved { block_size, blocks }
        })
    }

    /// Writes back what [`SourceFs::garble`] wrote over.
    pub fn restore(&self, saved: &Saved) {
        self.remounted(|device| {
            let disk = std::fs::OpenOptions::new()
                .write(true)
                .open(device)
                .unwrap();
            for (block, held) in &saved.blocks {
                disk.write_all_at(held, block * saved.block_size).unwrap();
            }
            disk.sync_all().unwrap();
        })
    }
}

/// The block size of the unmounted ext4 on `device` (dumpe2fs).
fn block_size(device: &str) -> u64 {
    let header = run("dumpe2fs", &["-h", device]);
    header
        .lines()
        .find_map(|line| line.strip_prefix("Block size:"))
        .and_then(|size| size.trim().parse().ok())
        .unwrap_or_else(|| panic!("no block size in dumpe2fs's header:\n{header}"))
}
