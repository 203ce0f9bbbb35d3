//! Debian's raspi-firmware package, fetched and its kernel hook run on a
//! directory, for the tests that prove ROOTPART= follows a migration.

use std::path::Path;

/// Debian's real raspi-firmware hook, from the package: the path of its
/// extracted tree, or None (said on stderr) where the package cannot be
/// had. PIMIGRATE_RASPI_FIRMWARE_DEB names a downloaded .deb; otherwise
/// `apt-get download raspi-firmware` is tried (it needs the
/// non-free-firmware component in apt's sources).
pub fn package() -> Option<tempfile::TempDir> {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let deb = match std::env::var_os("PIMIGRATE_RASPI_FIRMWARE_DEB") {
        Some(path) => std::path::PathBuf::from(path),
        None => {
            let fetched = Command::new("apt-get")
                .args(["download", "raspi-firmware"])
                .current_dir(dir.path())
                .output();
            let found = std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "deb"));
            match (fetched, found) {
                (Ok(_), Some(deb)) => deb,
                _ => {
                    eprintln!(
                        "skipping the raspi-firmware hook run: set PIMIGRATE_RASPI_FIRMWARE_DEB to \
                         Debian's raspi-firmware .deb (apt-get download raspi-firmware, from non-free-firmware)"
                    );
                    return None;
                }
            }
        }
    };
    let tree = dir.path().join("x");
    let status = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&tree)
        .status()
        .expect("running dpkg-deb");
    assert!(status.success(), "dpkg-deb -x {}", deb.display());
    Some(dir)
}

/// Runs the package's kernel hook against `sysroot` as a kernel update on
/// that system would: the script unchanged but for its absolute paths
/// (/boot, /etc/default, /usr/lib/linux-image-*) moved under `sysroot`,
/// with `ischroot` saying yes (it then skips its /boot/firmware mount check)
/// and `dpkg` saying arm64. What it reads for root=: ROOTPART from
/// /etc/default/raspi-firmware, which it sources; `findmnt /` only when
/// that is unset.
pub fn run_hook(package: &Path, sysroot: &Path) {
    let hook = std::fs::read_to_string(package.join("x/etc/kernel/postinst.d/z50-raspi-firmware"))
        .unwrap();
    let root = sysroot.display().to_string();
    let moved = hook
        .replace("/boot/", &format!("{root}/boot/"))
        .replace(" /boot/firmware", &format!(" {root}/boot/firmware"))
        .replace("/etc/default/", &format!("{root}/etc/default/"))
        .replace(
            "/usr/lib/linux-image-",
            &format!("{root}/usr/lib/linux-image-"),
        );
    let bin = sysroot.join("stub-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, script) in [
        ("ischroot", "#!/bin/sh\nexit 0\n"),
        ("dpkg", "#!/bin/sh\necho arm64\n"),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let script = sysroot.join("z50-raspi-firmware");
    std::fs::write(&script, moved).unwrap();
    for dir in ["boot/firmware", "etc/default"] {
        std::fs::create_dir_all(sysroot.join(dir)).unwrap();
    }
    std::fs::write(sysroot.join("boot/vmlinuz-6.1.0-31-arm64"), b"kernel").unwrap();
    std::fs::write(sysroot.join("boot/initrd.img-6.1.0-31-arm64"), b"initrd").unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = std::process::Command::new("sh")
        .arg(&script)
        .env("PATH", path)
        .env("DEB_MAINT_PARAMS", "configure")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the hook failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
