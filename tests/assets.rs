//! The files the .deb installs: what `examples/gen-assets.rs` writes for
//! `scripts/build-deb.sh`, and what Cargo.toml's package metadata lists.

use clap::CommandFactory;
use std::path::Path;
use std::process::Command;

/// The subcommands a person uses (hidden ones, which a trial boot's own
/// units run, have no page).
fn subcommands() -> Vec<String> {
    pimigrate::cli::Cli::command()
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn the_generated_assets_are_complete() {
    let dir = tempfile::tempdir().unwrap();
    let written = pimigrate::assets::write_all(dir.path()).unwrap();
    for path in &written {
        assert!(
            std::fs::metadata(path).unwrap().len() > 0,
            "{path:?} is empty"
        );
    }
    let page = std::fs::read_to_string(dir.path().join("man/pimigrate.1")).unwrap();
    for sub in subcommands() {
        assert!(
            page.contains(&format!("pimigrate\\-{sub}")),
            "pimigrate(1) does not name {sub}"
        );
        assert!(
            dir.path().join(format!("man/pimigrate-{sub}.1")).exists(),
            "no page for {sub}"
        );
    }
    for (_, name) in pimigrate::assets::SHELLS {
        assert!(dir.path().join(name).exists(), "no {name}");
    }
    // bash parses its completion script (bash is on every machine the
    // tests run on; the zsh and fish scripts come from the same generator).
    let status = Command::new("bash")
        .arg("-n")
        .arg(dir.path().join("pimigrate.bash"))
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_man_page_renders_without_warnings() {
    // groff renders what `man` shows. It may be missing on a developer's
    // build machine, never in CI (scripts/test.sh installs groff-base).
    let dir = tempfile::tempdir().unwrap();
    pimigrate::assets::write_all(dir.path()).unwrap();
    let output = match Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(dir.path().join("man/pimigrate.1"))
        .output()
    {
        Ok(output) => output,
        Err(err) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("skipping: cannot run groff ({err}); install groff-base");
            return;
        }
        Err(err) => panic!("CI=true and groff cannot run ({err}): install groff-base"),
    };
    assert!(output.status.success());
    let warnings = String::from_utf8_lossy(&output.stderr);
    assert!(warnings.trim().is_empty(), "{warnings}");
}

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
