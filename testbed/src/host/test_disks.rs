//! What the testbed's own tests build on the host: real FAT disk images
//! (sfdisk, mkfs.vfat, mtools), real device trees (dtc), and the check that
//! the tools for them are there (a missing one fails the test under
//! `CI=true` and skips it elsewhere, saying so).

use crate::host::disks::{Bus, Disk};
use std::path::{Path, PathBuf};

/// Whether the host tools a test runs are there: their absence fails the
/// test in CI and skips it elsewhere, saying so.
pub(crate) fn have_tools(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .output()
                .map_or(true, |o| !o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must run this test, but {missing:?} are missing (testbed/run.sh --packages installs them)"
    );
    eprintln!("skipping: {missing:?} not installed (testbed/run.sh --packages installs them)");
    false
}

/// A device tree as dtc compiles it from `source`.
pub(crate) fn compile_dtb(dir: &Path, name: &str, source: &str) -> PathBuf {
    let dts = dir.join(format!("{name}.dts"));
    let dtb = dir.join(name);
    std::fs::write(&dts, source).unwrap();
    crate::host::cmd::run(
        std::process::Command::new("dtc")
            .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
            .arg(&dtb)
            .arg(&dts),
    )
    .unwrap();
    dtb
}

/// A 64 MiB MBR disk image `name`, its one partition FAT32 holding `files`.
pub(crate) fn boot_disk(dir: &Path, name: &str, bus: Bus, files: &[(&str, &Path)]) -> Disk {
    let image = dir.join(format!("{name}.img"));
    let sh =
        |script: &str| crate::host::cmd::run(std::process::Command::new("sh").args(["-c", script]));
    sh(&format!(
        "truncate -s 64M {img} && echo 'start=2048, type=c' | sfdisk -q {img} && \
         mkfs.vfat -F 32 --offset 2048 {img} 129024 >/dev/null",
        img = image.display()
    ))
    .unwrap();
    let part = crate::host::mbr::partition_of(&image, 1).unwrap();
    for (name, source) in files {
        crate::host::cmd::run(
            std::process::Command::new("mcopy")
                .env("MTOOLS_SKIP_CHECK", "1")
                .arg("-i")
                .arg(format!("{}@@{}", image.display(), part.offset()))
                .arg(source)
                .arg(format!("::/{name}")),
        )
        .unwrap();
    }
    Disk {
        name: name.into(),
        bus,
        profile: crate::host::profiles::Profile::named("sd-unthrottled").unwrap(),
        image,
        discard: false,
        scsi_version: None,
    }
}

pub(crate) const IMAGE_TOOLS: &[&str] = &[
    "dtc",
    "fdtput",
    "fdtget",
    "sfdisk",
    "mkfs.vfat",
    "mcopy",
    "mdir",
];

/// A disk `name` on `bus` whose FAT partition holds `files` (name,
/// contents), its image in `dir`.
pub(crate) fn disk_with(dir: &Path, name: &str, bus: Bus, files: &[(&str, &str)]) -> Disk {
    let staged = dir.join(format!("{name}-files"));
    std::fs::create_dir_all(&staged).unwrap();
    let paths: Vec<(&str, PathBuf)> = files
        .iter()
        .map(|(file, contents)| {
            let path = staged.join(file);
            std::fs::write(&path, contents).unwrap();
            (*file, path)
        })
        .collect();
    let paths: Vec<(&str, &Path)> = paths.iter().map(|(n, p)| (*n, p.as_path())).collect();
    boot_disk(dir, name, bus, &paths)
}

/// The files a Pi 4 or 5 boots the x86 guest's way from.
pub(crate) const BOOTS: &[(&str, &str)] = &[
    ("start4.elf", "GPU firmware"),
    ("config.txt", "kernel=vmlinuz\n"),
    ("cmdline.txt", "root=/dev/sda2 rootwait\n"),
    ("vmlinuz", "kernel"),
];

/// A blank disk: no partition table at all.
pub(crate) fn blank_disk(dir: &Path, name: &str, bus: Bus) -> Disk {
    let image = dir.join(format!("{name}.img"));
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    Disk {
        name: name.into(),
        bus,
        profile: crate::host::profiles::Profile::named("sd-unthrottled").unwrap(),
        image,
        discard: false,
        scsi_version: None,
    }
}
