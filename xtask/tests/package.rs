//! The files the .deb installs besides the program, as `cargo xtask
//! assets` writes them for scripts/build-deb.sh, and the crates its
//! copyright file names: those linked into the program for the package's
//! architecture, and no other.

use std::path::Path;
use std::process::Command;
use xtask::{linked, repo};

fn names(triple: &str) -> Vec<String> {
    linked::linked_crates(repo(), triple)
        .unwrap_or_else(|e| panic!("{triple}: {e:#}"))
        .into_iter()
        .map(|c| c.name)
        .collect()
}

/// What the program links, per target: its own dependencies (io-uring on
/// 64-bit targets only), never a crate of the tools, the tests or the
/// testbed, nor a procedural macro, which runs while compiling.
#[test]
fn the_copyright_crates_are_those_linked_for_the_target() {
    let not_linked = [
        "pimigrate",
        "xtask",
        "clap_mangen",
        "clap_complete",
        "roff",
        "fs_extra",
        "proptest",
        "humantime",
        "serde_derive",
        "clap_derive",
        "thiserror-impl",
    ];
    for (triple, uring) in [
        ("x86_64-unknown-linux-gnu", true),
        ("aarch64-unknown-linux-gnu", true),
        ("armv7-unknown-linux-gnueabihf", false),
    ] {
        let names = names(triple);
        for linked in [
            "anyhow", "clap", "nix", "serde", "mbrman", "gpt", "tempfile",
        ] {
            assert!(
                names.iter().any(|n| n == linked),
                "{triple}: no {linked} in {names:?}"
            );
        }
        for name in not_linked {
            assert!(
                !names.iter().any(|n| n == name),
                "{triple}: {name} is not linked"
            );
        }
        assert_eq!(
            names.iter().any(|n| n == "io-uring"),
            uring,
            "{triple}: io-uring"
        );
    }
}

/// `xtask assets` writes every file that Cargo.toml's package metadata
/// takes from target/assets, and a copyright file with the crates in.
#[test]
fn the_assets_are_what_the_package_takes() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("assets")
        .arg(dir.path())
        .args(["--target", "aarch64-unknown-linux-gnu"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let deb = manifest.split("[package.metadata.deb]").nth(1).unwrap();
    let mut sources = 0;
    for source in deb
        .split('"')
        .filter_map(|s| s.strip_prefix("target/assets/"))
    {
        sources += 1;
        // "man/*.1", "doc/**/*": the folder must hold a file.
        let (folder, pattern) = match source.split_once('*') {
            Some((folder, _)) => (folder, true),
            None => (source, false),
        };
        let path = dir.path().join(folder);
        if pattern {
            assert!(
                std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_some()),
                "{source}: {} is empty",
                path.display()
            );
        } else {
            assert!(path.is_file(), "{source} was not written");
        }
    }
    assert!(sources >= 8, "{sources} assets in Cargo.toml");
    let service =
        std::fs::read_to_string(dir.path().join("systemd/pimigrate-sync.service")).unwrap();
    assert!(
        service.contains("ExecStart=/usr/bin/pimigrate sync --yes"),
        "{service}"
    );
    assert!(
        dir.path().join("doc/README.md.gz").is_file() || dir.path().join("doc/README.md").is_file()
    );
    let copyright = std::fs::read_to_string(dir.path().join("copyright")).unwrap();
    assert!(!copyright.contains(linked::MARKER));
    assert!(copyright.contains("\n io-uring "), "{copyright}");
    assert!(copyright.contains("\n clap "), "{copyright}");
    assert!(!copyright.contains("clap_mangen"), "{copyright}");
}

#[test]
fn the_copyright_template_holds_the_marker_once() {
    let template = std::fs::read_to_string(repo().join(xtask::assets::COPYRIGHT_TEMPLATE)).unwrap();
    let crates = linked::parse_tree("nix v0.29.0\tMIT\n").unwrap();
    let text = linked::copyright(&template, &crates).unwrap();
    assert!(text.contains("\n nix 0.29.0: MIT\n"), "{text}");
    assert!(Path::new(&repo().join("packaging/deb/copyright")).is_file());
}
