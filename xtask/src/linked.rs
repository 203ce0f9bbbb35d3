//! The crates linked into the pimigrate program for a target, which the
//! package's copyright file names with their licences. `cargo tree` asks
//! about the pimigrate package alone, for that target, with its normal
//! dependencies only: features resolved as its build resolves them, no
//! procedural macros (they run while compiling; nothing of them is
//! linked), no build or dev-dependencies, and none of this tool crate's
//! (clap_mangen, clap_complete). `cargo tree` reads only the crates that
//! build needs, so a machine that has just run `cargo build --release`
//! has them all; one that lacks some downloads them, and without a network
//! the error says what to do.

use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// One linked crate, as the copyright file names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Crate {
    pub name: String,
    pub version: String,
    /// Its SPDX expression, or "see the crate" when it declares none.
    pub license: String,
}

/// The marker in packaging/deb/copyright that the crates replace.
pub const MARKER: &str = "@CRATES@";

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The crates linked into pimigrate for `triple` (a Rust target such as
/// aarch64-unknown-linux-gnu), sorted, pimigrate itself left out.
pub fn linked_crates(repo: &Path, triple: &str) -> Result<Vec<Crate>> {
    let output = cargo()
        .current_dir(repo)
        .args([
            "tree",
            "--locked",
            "--package",
            "pimigrate",
            "--target",
            triple,
        ])
        .args(["--edges", "normal,no-proc-macro", "--prefix", "none"])
        .args(["--format", "{p}\t{l}"])
        .output()
        .context("running cargo tree (is cargo on PATH?)")?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        bail!(
            "cargo tree could not list the crates linked into pimigrate for {triple}. It reads \
             Cargo.lock and the manifests of the crates that build needs, and downloads those \
             this machine lacks: without crates.io, run `cargo fetch --locked --target {triple}` \
             first where it can be reached. cargo said:\n  {}",
            said.trim().replace('\n', "\n  ")
        );
    }
    let crates = parse_tree(&String::from_utf8_lossy(&output.stdout))?;
    ensure!(
        !crates.is_empty(),
        "cargo tree lists no crate linked into pimigrate for {triple}"
    );
    Ok(crates)
}

/// `cargo tree --prefix none --format "{p}\t{l}"`'s lines ("clap v4.6.9\tMIT
/// OR Apache-2.0", a path crate with its path after the version, a crate
/// seen before with " (*)" after it) as crates, each once, without
/// pimigrate itself.
pub fn parse_tree(text: &str) -> Result<Vec<Crate>> {
    let mut crates = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let line = line.trim_end_matches('\r').trim_end_matches(" (*)");
        let (package, license) = line
            .split_once('\t')
            .with_context(|| format!("cargo tree printed {line:?}, not a package and licence"))?;
        let mut words = package.split_whitespace();
        let (Some(name), Some(version)) = (words.next(), words.next()) else {
            bail!("cargo tree printed {line:?}, not a name and a version");
        };
        let Some(version) = version.strip_prefix('v') else {
            bail!("cargo tree printed {line:?}, whose version does not start with v");
        };
        if name == "pimigrate" {
            continue;
        }
        let license = match license.trim() {
            "" => "see the crate",
            license => license,
        };
        crates.insert(Crate {
            name: name.to_string(),
            version: version.to_string(),
            license: license.to_string(),
        });
    }
    Ok(crates.into_iter().collect())
}

/// The copyright file: `template` with its [`MARKER`] line replaced by one
/// " NAME VERSION: LICENSE" line a crate (a DEP-5 continuation line).
pub fn copyright(template: &str, crates: &[Crate]) -> Result<String> {
    ensure!(
        template.matches(MARKER).count() == 1,
        "the copyright template must hold {MARKER} once, where the crates go"
    );
    let lines: Vec<String> = crates
        .iter()
        .map(|c| format!(" {} {}: {}", c.name, c.version, c.license))
        .collect();
    Ok(template.replace(MARKER, &lines.join("\n")))
}

/// The Rust target this machine builds for by default (`rustc -vV`'s host).
pub fn host_triple() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .context("running rustc -vV")?;
    ensure!(output.status.success(), "rustc -vV failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .context("rustc -vV names no host")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_becomes_each_crate_once() {
        let text = "pimigrate v0.1.0 (/src/pimigrate)\tMIT\n\
                    clap v4.6.9\tMIT OR Apache-2.0\n\
                    anstyle v1.0.14\tMIT OR Apache-2.0\n\
                    anstyle v1.0.14\tMIT OR Apache-2.0 (*)\n\
                    odd v0.1.0\t\n";
        let crates = parse_tree(text).unwrap();
        let lines: Vec<String> = crates
            .iter()
            .map(|c| format!("{} {} {}", c.name, c.version, c.license))
            .collect();
        assert_eq!(
            lines,
            [
                "anstyle 1.0.14 MIT OR Apache-2.0",
                "clap 4.6.9 MIT OR Apache-2.0",
                "odd 0.1.0 see the crate"
            ]
        );
        assert!(parse_tree("no tab here\n").is_err());
        assert!(parse_tree("clap 4.6.9\tMIT\n").is_err());
    }

    #[test]
    fn the_crates_replace_the_marker() {
        let crates = parse_tree("nix v0.29.0\tMIT\n").unwrap();
        let text = copyright("Comment: linked:\n .\n@CRATES@\n\nFiles: *\n", &crates).unwrap();
        assert_eq!(text, "Comment: linked:\n .\n nix 0.29.0: MIT\n\nFiles: *\n");
        assert!(copyright("no marker\n", &crates).is_err());
    }
}
