//! Finding and running the system tools the plan names.

use std::path::{Path, PathBuf};

/// Overrides where tools are looked for, replacing `PATH` and the sbin
/// directories: for systems with tools in odd places, and for tests that
/// need a tool to be missing.
pub const TOOLS_PATH_VAR: &str = "PIMIGRATE_TOOLS_PATH";

/// Looks a program up in `PATH` and the sbin directories (which a normal
/// user's `PATH` on Debian lacks, but where mkfs and sfdisk live).
pub fn which(program: &str) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = match std::env::var_os(TOOLS_PATH_VAR) {
        Some(path) => std::env::split_paths(&path).collect(),
        None => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
                .collect()
        }
    };
    dirs.into_iter()
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
