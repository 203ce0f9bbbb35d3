//! The real binary run as a normal user (nobody, through setpriv): the
//! commands that write say `run as root: sudo pimigrate ...` with the
//! user's own words before they read, plan or ask anything; the read-only
//! ones still work and say what they could not read. Needs root (to become
//! nobody) and setpriv (util-linux).

use crate::common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

/// The binary where nobody can run it (a build directory may not be
/// reachable by other users), and nothing else.
struct AsNobody {
    _dir: tempfile::TempDir,
    binary: std::path::PathBuf,
}

impl AsNobody {
    fn new() -> Option<AsNobody> {
        if !require_root("running pimigrate as nobody") {
            return None;
        }
        let found = pimigrate::tools::which("setpriv").is_some();
        assert!(
            found || std::env::var("CI").as_deref() != Ok("true"),
            "setpriv (util-linux) is needed, and CI must have it"
        );
        if !found {
            eprintln!("skipping: no setpriv");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let binary = dir.path().join("pimigrate");
        install_pimigrate(&binary);
        Some(AsNobody { _dir: dir, binary })
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&self.binary)
            .args(args)
            // Somewhere nobody may be, so nothing depends on the caller's.
            .current_dir("/")
            .env_remove("PIMIGRATE_TOOLS_PATH")
            .output()
            .expect("running setpriv")
    }
}

#[test]
fn commands_that_write_say_sudo_first_with_the_users_own_words() {
    let Some(nobody) = AsNobody::new() else {
        return;
    };
    let cases: [&[&str]; 7] = [
        &[
            "migrate",
            "--target",
            "/dev/sdz",
            "--exclude",
            "/srv/my data",
            "--yes",
        ],
        &["--quiet", "rollback", "--yes"],
        &["verify", "--commit"],
        &["bench", "--destructive", "--yes", "/dev/sdz"],
        &["wizard", "--yes", "--target", "/dev/sdz", "--no-bench"],
        &["recommend", "--bench-blank", "--all"],
        &["migrate", "--resume", "--yes"],
    ];
    for args in cases {
        let output = nobody.run(args);
        let quoted: Vec<String> = args
            .iter()
            .map(|a| pimigrate::privilege::shell_quote(a))
            .collect();
        let expected = format!("run as root: sudo pimigrate {}", quoted.join(" "));
        assert_eq!(exit_code(&output), 1, "{args:?}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(&expected),
            "{args:?}: wanted {expected:?}, got {}",
            stderr(&output)
        );
        // Said first: no plan, no question, no table before it.
        assert_eq!(stdout(&output), "", "{args:?} printed before refusing");
        assert_eq!(
            stderr(&output).lines().count(),
            1,
            "{args:?}: one line, nothing before it: {}",
            stderr(&output)
        );
    }
    // The quoting is the shell's: a space stays in one word.
    let output = nobody.run(cases[0]);
    assert!(stderr(&output).contains("--exclude '/srv/my data' --yes"));
}

#[test]
fn devices_works_without_root_and_says_what_it_could_not_read() {
    let Some(nobody) = AsNobody::new() else {
        return;
    };
    // A disk only root can open, whatever this machine has besides.
    let disk = LoopDisk::new(1 << 30);
    let output = nobody.run(&["devices", "--all"]);
    assert_eq!(exit_code(&output), 0, "{}", stderr(&output));
    assert!(stdout(&output).contains(disk.path()), "{}", stdout(&output));
    let err = stderr(&output);
    assert!(err.contains("not root: could not open"), "{err}");
    assert!(err.contains(disk.path()), "{err}");
    assert!(err.contains("sudo pimigrate devices --all"), "{err}");
    // plan too: a plan or a refusal (this VM has no boot files), never
    // an error, and the same line.
    let output = nobody.run(&["plan", "--target", disk.path()]);
    assert!([0, 3].contains(&exit_code(&output)), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("not root: could not open"),
        "{}",
        stderr(&output)
    );
    // As root, nothing is said.
    let output = pimigrate().args(["devices", "--all"]).output().unwrap();
    assert!(!stderr(&output).contains("not root"), "{}", stderr(&output));
}
