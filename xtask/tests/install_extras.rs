//! `xtask install-extras`, run into a folder that stands for `/`: the
//! files a cargo install lacks beside the program, where the system's
//! tools look for them, each pointing at PREFIX/bin/pimigrate.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn install_extras(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("install-extras")
        .args(args)
        .output()
        .unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn the_extras_go_where_the_system_looks() {
    let root = tempfile::tempdir().unwrap();
    let output = install_extras(&["--destdir", root.path().to_str().unwrap()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed = String::from_utf8_lossy(&output.stdout);
    let at = |p: &str| root.path().join(p);
    for file in [
        "usr/local/share/man/man1/pimigrate.1",
        "usr/local/share/man/man1/pimigrate-sync.1",
        "usr/local/share/bash-completion/completions/pimigrate",
        "usr/local/share/zsh/site-functions/_pimigrate",
        "usr/local/share/fish/vendor_completions.d/pimigrate.fish",
        "usr/local/lib/systemd/system/pimigrate-sync.service",
        "usr/local/lib/systemd/system/pimigrate-sync.timer",
        "usr/local/lib/systemd/system/pimigrate-check.service",
        "usr/local/lib/systemd/system/pimigrate-check.timer",
    ] {
        assert_eq!(mode(&at(file)), 0o644, "{file}");
        assert!(
            listed.contains(&at(file).display().to_string()),
            "{file} not listed"
        );
    }
    // The login message: executable (pam_motd runs only those), and
    // running the program where install-extras was told it is.
    let motd = at("etc/update-motd.d/60-pimigrate");
    assert_eq!(mode(&motd), 0o755);
    let script = std::fs::read_to_string(&motd).unwrap();
    assert!(
        script.contains("[ -x /usr/local/bin/pimigrate ]"),
        "{script}"
    );
    assert!(
        script.contains("/usr/local/bin/pimigrate status --login"),
        "{script}"
    );
    assert!(!script.contains("/usr/bin/pimigrate"), "{script}");
    assert!(Command::new("sh")
        .arg("-n")
        .arg(&motd)
        .status()
        .unwrap()
        .success());
    let service =
        std::fs::read_to_string(at("usr/local/lib/systemd/system/pimigrate-sync.service")).unwrap();
    assert!(
        service.contains("ExecStart=/usr/local/bin/pimigrate sync --yes"),
        "{service}"
    );
    let check = std::fs::read_to_string(at("usr/local/lib/systemd/system/pimigrate-check.service"))
        .unwrap();
    assert!(
        check.contains("ExecStart=/usr/local/bin/pimigrate status --check"),
        "{check}"
    );
    // The check's timer is enabled, as the package enables it; the sync's
    // is not.
    let wants = at("etc/systemd/system/timers.target.wants");
    assert_eq!(
        std::fs::read_link(wants.join("pimigrate-check.timer")).unwrap(),
        Path::new("/usr/local/lib/systemd/system/pimigrate-check.timer")
    );
    assert!(!wants.join("pimigrate-sync.timer").exists());
    // The program itself is not installed by it: it says so.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/usr/local/bin/pimigrate is not there"),
        "{stderr}"
    );
}

#[test]
fn a_prefix_of_usr_uses_the_systems_own_places() {
    let root = tempfile::tempdir().unwrap();
    let output = install_extras(&[
        "--prefix",
        "/usr",
        "--destdir",
        root.path().to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(root
        .path()
        .join("usr/share/zsh/vendor-completions/_pimigrate")
        .is_file());
    let script =
        std::fs::read_to_string(root.path().join("etc/update-motd.d/60-pimigrate")).unwrap();
    assert!(
        script.contains("/usr/bin/pimigrate status --login"),
        "{script}"
    );
}

#[test]
fn a_relative_prefix_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let output = install_extras(&[
        "--prefix",
        "usr/local",
        "--destdir",
        root.path().to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("give an absolute path"), "{stderr}");
    assert!(
        std::fs::read_dir(root.path()).unwrap().next().is_none(),
        "it wrote something"
    );
}
