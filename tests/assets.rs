//! The files the .deb installs, as Cargo.toml's package metadata lists
//! them, and the version the program says. What `cargo xtask assets`
//! writes for them is tested in xtask/tests/.

use std::path::Path;
use std::process::Command;

#[test]
fn the_package_metadata_installs_every_asset() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deb = manifest
        .split("[package.metadata.deb]")
        .nth(1)
        .expect("Cargo.toml has [package.metadata.deb]");
    for needle in [
        "depends = \"e2fsprogs, dosfstools, $auto\"",
        "\"target/release/pimigrate\", \"usr/bin/\"",
        "\"target/assets/man/*.1\", \"usr/share/man/man1/\"",
        "\"target/assets/pimigrate.bash\", \"usr/share/bash-completion/completions/pimigrate\"",
        "\"target/assets/_pimigrate\", \"usr/share/zsh/vendor-completions/_pimigrate\"",
        "\"target/assets/pimigrate.fish\", \"usr/share/fish/vendor_completions.d/pimigrate.fish\"",
        "\"packaging/update-motd.d/60-pimigrate\", \"etc/update-motd.d/60-pimigrate\", \"755\"",
    ] {
        assert!(deb.contains(needle), "the package metadata lacks {needle}");
    }
}

#[test]
fn the_version_names_the_commit() {
    let output = Command::new(env!("CARGO_BIN_EXE_pimigrate"))
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    // "pimigrate 0.1.0 (abc1234)", "(abc1234-dirty)" or, outside a git
    // checkout, "(unknown)": in a checkout, a hash (build.rs found git).
    let expected = format!("pimigrate {} (", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&expected), "{text}");
    let commit = text
        .trim()
        .trim_start_matches(&expected)
        .trim_end_matches(')');
    let hash = commit.trim_end_matches("-dirty");
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists();
    assert!(
        (commit == "unknown" && !checkout)
            || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
}
