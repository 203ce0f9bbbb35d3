//! Debian's raspi-firmware package, fetched and its kernel hook run on a
//! directory, for the tests that prove ROOTPART= follows a migration.

use std::path::Path;

/// Debian's real raspi-firmware hook, from the package: the path of its
/// extracted tree, or None (said on stderr) where the package cannot be
/// had, which fails the test in CI (CI=true). PIMIGRATE_RASPI_FIRMWARE_DEB
/// names a downloaded .deb; otherwise it is downloaded once ([`fetch`]) and
/// kept for later runs.
pub fn package() -> Option<tempfile::TempDir> {
    use std::process::Command;
    let deb = match std::env::var_os("PIMIGRATE_RASPI_FIRMWARE_DEB") {
        Some(path) => Ok(std::path::PathBuf::from(path)),
        None => fetch(),
    };
    let deb = match deb {
        Ok(deb) => deb,
        Err(why) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run Debian's raspi-firmware hook, but the package could not be had: {why}"
            );
            eprintln!(
                "skipping the raspi-firmware hook run: {why}; set PIMIGRATE_RASPI_FIRMWARE_DEB to \
                 Debian's raspi-firmware .deb (non-free-firmware)"
            );
            return None;
        }
    };
    let dir = tempfile::tempdir().unwrap();
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

/// Downloads bookworm's raspi-firmware .deb into the build's temporary
/// folder, once: the package is in the non-free-firmware component, which a
/// machine's own apt sources often lack, so apt runs with a private
/// configuration there (its own sources list and package lists; the
/// machine's apt is not touched).
fn fetch() -> Result<std::path::PathBuf, String> {
    use std::process::Command;
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("raspi-firmware");
    let find = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "deb")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("raspi-firmware_"))
            })
    };
    if let Some(deb) = find(&cache) {
        return Ok(deb);
    }
    let apt = cache.join("apt");
    std::fs::create_dir_all(apt.join("lists/partial")).map_err(|e| e.to_string())?;
    std::fs::write(
        apt.join("sources.list"),
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
         http://deb.debian.org/debian bookworm non-free-firmware\n",
    )
    .map_err(|e| e.to_string())?;
    let private = [
        format!(
            "-oDir::Etc::SourceList={}",
            apt.join("sources.list").display()
        ),
        "-oDir::Etc::SourceParts=/nonexistent".to_string(),
        format!("-oDir::State::Lists={}", apt.join("lists").display()),
        format!("-oDir::Cache={}", apt.display()),
        "-oAPT::Sandbox::User=root".to_string(),
        "-oDebug::NoLocking=1".to_string(),
    ];
    let run = |args: &[&str], cwd: &std::path::Path| {
        let out = Command::new("apt-get")
            .args(&private)
            .args(args)
            .current_dir(cwd)
            .output()
            .map_err(|e| format!("cannot run apt-get: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "apt-get {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(&["-q", "update"], &apt)?;
    // Into a folder of its own first: a download cut short never looks
    // like the package to the next run.
    let partial = cache.join("download");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| e.to_string())?;
    run(&["-q", "download", "raspi-firmware"], &partial)?;
    let got = find(&partial).ok_or("apt-get download wrote no raspi-firmware .deb")?;
    let deb = cache.join(got.file_name().expect("a file name"));
    std::fs::rename(&got, &deb).map_err(|e| e.to_string())?;
    Ok(deb)
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
