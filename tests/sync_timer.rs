//! `pimigrate sync --install-timer` and `--remove-timer` on system trees
//! (root: the program's ownership is checked, systemctl links the timer):
//! with the package's units, the drop-ins that systemd itself reads back
//! (`systemd-analyze verify`, and the argv of an `--exclude` with a space,
//! quotes, a backslash, `%` and `$` as systemd's own loader parses it);
//! without the package, the units written and removed; a program that
//! another user could change refused.

use crate::common::*;
use pimigrate::sync::timer::{self, units};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The awkward arguments every test gives: each must reach the program as
/// it was typed.
const EXCLUDES: [&str; 7] = [
    "/srv/a b",
    "/srv/it's",
    "/srv/q\"uote",
    "/srv/back\\slash",
    "/srv/100%n",
    "/srv/$HOME",
    ";",
];

/// A system tree that systemd's tools, run as another user, may read.
fn system_tree() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pimigrate-timer")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The Debian package's part of a system: the program and the two units.
fn install_package(root: &Path) -> PathBuf {
    let units_dir = root.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units_dir).unwrap();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    let service = units::service_unit(Path::new(timer::PACKAGE_PROGRAM), false).unwrap();
    std::fs::write(units_dir.join(timer::SERVICE), service).unwrap();
    std::fs::write(units_dir.join(timer::TIMER), units::timer_unit(false)).unwrap();
    let program = root.join("usr/bin/pimigrate");
    install_pimigrate(&program);
    program
}

fn install_timer(program: &Path, root: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(program);
    command
        .env_remove("PIMIGRATE_TOOLS_PATH")
        .arg("--sysroot")
        .arg(root)
        .args([
            "--json",
            "sync",
            "--install-timer",
            "*-*-* 03:00",
            "--checksum",
        ]);
    for exclude in EXCLUDES {
        command.arg("--exclude").arg(exclude);
    }
    command
        .args(extra)
        .output()
        .expect("running the installed pimigrate")
}

fn remove_timer(program: &Path, root: &Path) -> Output {
    Command::new(program)
        .env_remove("PIMIGRATE_TOOLS_PATH")
        .arg("--sysroot")
        .arg(root)
        .args(["--json", "sync", "--remove-timer"])
        .output()
        .expect("running the installed pimigrate")
}

/// The arguments the service's program gets, as the test passes them.
fn expected_argv(program: &str, before: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = [program, "sync", "--yes"].map(String::from).to_vec();
    argv.extend(before.iter().map(|s| s.to_string()));
    argv.push("--checksum".into());
    argv.extend(EXCLUDES.iter().map(|e| format!("--exclude={e}")));
    argv
}

/// systemd's tool, or a loud failure under CI (it is installed there).
fn systemd_tool(name: &str) -> Option<PathBuf> {
    let found = pimigrate::tools::which(name)
        .or_else(|| Some(PathBuf::from("/lib/systemd").join(name)).filter(|p| p.exists()));
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} (systemd) is needed in CI"
        );
        eprintln!("skipping the check by {name}: not installed");
    }
    found
}

/// `systemd-analyze verify` on the units as installed in `root`, with
/// their drop-ins; the ExecStart program is looked up in `root`.
fn assert_systemd_accepts(root: &Path) {
    let Some(analyze) = systemd_tool("systemd-analyze") else {
        return;
    };
    let verified = Command::new(&analyze)
        .arg("verify")
        .arg(format!("--root={}", root.display()))
        // The man pages are not in the tree; the targets a unit is
        // ordered against (sysinit.target ...) neither: check the two
        // units themselves.
        .args([
            "--man=no",
            "--recursive-errors=no",
            timer::SERVICE,
            timer::TIMER,
        ])
        .output()
        .unwrap();
    assert!(
        verified.status.success() && verified.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        stdout(&verified),
        stderr(&verified)
    );
    // The hardening holds: systemd's own rating of the service.
    let security = Command::new(&analyze)
        .arg("security")
        .arg(format!("--root={}", root.display()))
        .args(["--offline=true", timer::SERVICE])
        .output()
        .unwrap();
    let rating = stdout(&security);
    let level: f64 = rating
        .lines()
        .find_map(|l| {
            l.split("exposure level for pimigrate-sync.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{rating}{}", stderr(&security)));
    assert!(
        level <= 3.0,
        "the service's exposure rose to {level}:\n{rating}"
    );
}

/// The argv systemd would start the service with: systemd's own loader
/// reads the units and their drop-ins (`systemd --test`, which dumps every
/// unit it loaded, as a user other than root as it insists, with a
/// /run/systemd/system of its own so it acts as the system manager), and
/// prints each command line shell-quoted; `sh` unquotes it. The one step
/// left, at the process's start, is systemd's `$$` for a literal `$`.
fn argv_as_systemd_reads_it(root: &Path) -> Option<Vec<String>> {
    let systemd = systemd_tool("systemd")?;
    let unit_path = format!(
        "{}:{}:",
        root.join("etc/systemd/system").display(),
        root.join("usr/lib/systemd/system").display()
    );
    let dump = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && \
             exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$0\" --test --system \
             --unit=pimigrate-sync.service --no-pager",
        )
        .arg(&systemd)
        .env("SYSTEMD_UNIT_PATH", unit_path)
        .env("SYSTEMD_LOG_LEVEL", "err")
        .output()
        .unwrap();
    let text = stdout(&dump);
    let unit = text
        .split("-> Unit pimigrate-sync.service:")
        .nth(1)
        .unwrap_or_else(|| {
            panic!(
                "systemd --test did not load the service:\n{}",
                stderr(&dump)
            )
        });
    let unit = unit.split("-> Unit ").next().unwrap();
    let exec = unit
        .split("-> ExecStart:")
        .nth(1)
        .expect("the service's ExecStart");
    let exec = exec.split("-> ").next().unwrap();
    let lines: Vec<&str> = exec
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Command Line: "))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "one command: the drop-in's ExecStart= emptied the shipped one: {lines:?}"
    );
    let line = lines[0];
    let unquoted = Command::new("sh")
        .args([
            "-c",
            "eval \"set -- $1\"; printf '%s\\0' \"$@\"",
            "sh",
            line,
        ])
        .output()
        .unwrap();
    assert!(unquoted.status.success(), "sh could not read {line}");
    Some(
        stdout(&unquoted)
            .split_terminator('\0')
            .map(expand_variables)
            .collect(),
    )
}

/// What systemd does to a word of a command line as the process starts:
/// `$$` is a `$`; a `$NAME` or `${NAME}` would be replaced from the
/// environment, which no argument of ours may meet.
fn expand_variables(word: &str) -> String {
    let mut out = String::new();
    let mut chars = word.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' {
            match chars.peek() {
                Some('$') => {
                    chars.next();
                }
                Some(n) if n.is_ascii_alphabetic() || *n == '_' || *n == '{' => {
                    panic!("systemd would replace a variable in {word:?}")
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

#[test]
fn with_the_package_the_timer_is_two_drop_ins_that_systemd_reads_back() {
    if !require_root("installing the timer (root-owned program, systemctl)") {
        return;
    }
    let tree = system_tree();
    let root = tree.path();
    let program = install_package(root);
    let installed = install_timer(&program, root, &["--state-dir", "/srv/pimigrate state"]);
    let value = succeeded(&installed, "sync");
    assert_eq!(value["result"], "timer-installed");
    assert_eq!(value["changed"], true);
    let etc = root.join("etc/systemd/system");
    let service =
        std::fs::read_to_string(etc.join("pimigrate-sync.service.d/50-pimigrate.conf")).unwrap();
    assert!(
        service.contains("\nExecStart=\nExecStart=/usr/bin/pimigrate sync --yes "),
        "{service}"
    );
    assert!(
        service.contains("\nReadWritePaths=\"/srv/pimigrate state\"\n"),
        "{service}"
    );
    assert!(
        root.join("srv/pimigrate state").is_dir(),
        "the service's state directory exists"
    );
    let timer_drop_in =
        std::fs::read_to_string(etc.join("pimigrate-sync.timer.d/50-pimigrate.conf")).unwrap();
    assert!(timer_drop_in.ends_with("[Timer]\nOnCalendar=\nOnCalendar=*-*-* 03:00\n"));
    assert!(
        !etc.join(timer::SERVICE).exists(),
        "the package's units are not copied"
    );
    assert_eq!(
        std::fs::read_link(etc.join(timer::ENABLED_LINK)).unwrap(),
        Path::new("/usr/lib/systemd/system/pimigrate-sync.timer"),
        "systemctl enabled the timer"
    );
    assert_systemd_accepts(root);
    if let Some(argv) = argv_as_systemd_reads_it(root) {
        assert_eq!(
            argv,
            expected_argv("/usr/bin/pimigrate", &["--state-dir=/srv/pimigrate state"])
        );
    }
    // The same again changes nothing.
    let again = install_timer(&program, root, &["--state-dir", "/srv/pimigrate state"]);
    assert_eq!(succeeded(&again, "sync")["changed"], false);

    let removed = remove_timer(&program, root);
    let value = succeeded(&removed, "sync");
    assert_eq!(value["result"], "timer-removed");
    assert_eq!(value["changed"], true);
    assert!(!etc.join("pimigrate-sync.service.d").exists());
    assert!(!etc.join("pimigrate-sync.timer.d").exists());
    assert!(
        etc.join(timer::ENABLED_LINK).symlink_metadata().is_err(),
        "disabled"
    );
    assert!(root
        .join("usr/lib/systemd/system")
        .join(timer::TIMER)
        .exists());
    let nothing = remove_timer(&program, root);
    assert_eq!(succeeded(&nothing, "sync")["changed"], false);
}

#[test]
fn without_the_package_the_units_are_written_beside_the_drop_ins_and_removed() {
    if !require_root("installing the timer (root-owned program, systemctl)") {
        return;
    }
    // The program in a directory only root can write, all the way up
    // (/run is root's, 755): as `sudo install -m 755 ... /usr/local/bin/`.
    let bin = tempfile::Builder::new()
        .prefix("pimigrate-timer-bin")
        .tempdir_in("/run")
        .unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let program = bin.path().join("pimigrate");
    install_pimigrate(&program);
    let tree = system_tree();
    let root = tree.path();
    let installed = install_timer(&program, root, &["--stall-timeout", "300"]);
    let value = succeeded(&installed, "sync");
    assert_eq!(value["units"].as_array().unwrap().len(), 4, "{value}");
    let etc = root.join("etc/systemd/system");
    let service = std::fs::read_to_string(etc.join(timer::SERVICE)).unwrap();
    assert!(service.starts_with(units::WRITTEN_BY), "{service}");
    assert!(service.contains(&format!("\nExecStart={} sync --yes\n", program.display())));
    let drop_in =
        std::fs::read_to_string(etc.join("pimigrate-sync.service.d/50-pimigrate.conf")).unwrap();
    assert!(drop_in.contains("--stall-timeout=300"), "{drop_in}");
    assert!(etc.join(timer::ENABLED_LINK).symlink_metadata().is_ok());
    // systemd reads them; the program is this machine's, so no --root.
    if let Some(analyze) = systemd_tool("systemd-analyze") {
        let verified = Command::new(analyze)
            .args(["verify", "--man=no", "--recursive-errors=no"])
            .arg(etc.join(timer::SERVICE))
            .arg(etc.join(timer::TIMER))
            .output()
            .unwrap();
        assert!(
            verified.status.success() && verified.stderr.is_empty(),
            "systemd-analyze verify: {}",
            stderr(&verified)
        );
    }
    if let Some(argv) = argv_as_systemd_reads_it(root) {
        let mut expected = expected_argv(&program.display().to_string(), &[]);
        expected.push("--stall-timeout=300".into());
        assert_eq!(argv, expected);
    }
    let removed = remove_timer(&program, root);
    assert_eq!(
        succeeded(&removed, "sync")["units"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let left: Vec<_> = walkdir::WalkDir::new(&etc)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| e.path().to_path_buf())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_program_another_user_could_change_is_refused_with_where_to_install_it() {
    if !require_root("installing the timer (root-owned program)") {
        return;
    }
    let bin = tempfile::Builder::new()
        .prefix("pimigrate-timer-open")
        .tempdir_in("/run")
        .unwrap();
    // As a user's ~/.cargo/bin would be to root: not root's alone.
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let program = bin.path().join("pimigrate");
    install_pimigrate(&program);
    let tree = system_tree();
    let output = install_timer(&program, tree.path(), &[]);
    assert_eq!(exit_code(&output), 3, "{}", stderr(&output));
    let reason = &json(&output)["reasons"][0];
    assert_eq!(reason["code"], timer::program::UNSAFE_PROGRAM);
    assert!(
        reason["message"]
            .as_str()
            .unwrap()
            .contains("may be written by anyone"),
        "{reason}"
    );
    assert!(
        reason["hint"].as_str().unwrap().contains(&format!(
            "sudo install -m 755 {} /usr/local/bin/pimigrate",
            program.display()
        )),
        "{reason}"
    );
    assert!(!tree.path().join("etc").exists(), "nothing was written");
}
