//! Running the real `pimigrate` binary in tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn pimigrate() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pimigrate"));
    command.env_remove("PIMIGRATE_TOOLS_PATH");
    command
}

/// Runs pimigrate against a fixture machine.
pub fn on_fixture(machine: &str, args: &[&str]) -> Output {
    let root = fixture(machine);
    pimigrate()
        .arg("--sysroot")
        .arg(&root)
        .args(args)
        .output()
        .expect("running pimigrate")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Parses stdout as JSON, with the whole output in the panic message.
pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}):\nstdout: {}\nstderr: {}",
            stdout(output),
            stderr(output)
        )
    })
}

pub fn exit_code(output: &Output) -> i32 {
    output
        .status
        .code()
        .expect("pimigrate was killed by a signal")
}

/// Tests that need root (loop devices, mounts) fail loudly in CI instead of
/// skipping; on a developer's machine without root they say why and pass.
pub fn require_root(what: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} needs root, and CI must run it"
    );
    eprintln!("skipping {what}: needs root (runs in CI)");
    false
}
