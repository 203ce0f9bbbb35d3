//! Finding and running the system tools the plan names.

use std::path::{Path, PathBuf};

/// Looks a program up in `PATH` and the sbin directories (which a normal
/// user's `PATH` on Debian lacks, but where mkfs and sfdisk live).
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The Debian package that provides a tool we run, to name in errors.
pub fn package_for(program: &str) -> &'static str {
    match program {
        "mkfs.ext4" | "e2fsck" | "resize2fs" | "tune2fs" | "debugfs" => "e2fsprogs",
        "mkfs.vfat" | "fsck.vfat" => "dosfstools",
        "sfdisk" | "fdisk" => "fdisk",
        "rpi-eeprom-config" => "rpi-eeprom",
        "vcgencmd" => "raspi-utils",
        _ => "the package that provides it",
    }
}
