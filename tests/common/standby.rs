//! A standby's rig for the sync tests: a Pi-like tree whose boot partition
//! starts a kernel it has the modules of, a 1 GiB loop disk to be the
//! standby, and the "SD card" whose boot partition the tree's fstab names
//! (MBR signature 6c586e13), so the standby's fstab boot line names one
//! attached device.

use super::migration::MigrationRig;
use super::LoopDisk;
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
