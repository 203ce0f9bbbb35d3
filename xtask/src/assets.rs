//! What the .deb installs besides the program, written into one folder
//! (`cargo xtask assets [DIR] [--target TRIPLE]`, `target/assets` by
//! default) for `scripts/build-deb.sh`, whose `cargo deb` packs what
//! Cargo.toml's `[package.metadata.deb]` lists from there: the man pages
//! and shell completions ([`crate::man`]), the systemd units of the sync
//! timer and of the daily check after the move (`DIR/systemd/`), the documentation with links that work where it is
//! installed (`DIR/doc/`, [`crate::package_docs`]), and the copyright file
//! naming the crates linked into the program for TRIPLE (`DIR/copyright`,
//! [`crate::linked`]).

use anyhow::{Context, Result};
use pimigrate::status::timer as check_timer;
use pimigrate::sync::timer::{self, units};
use std::path::{Path, PathBuf};

/// Where the package's copyright template is, in the repository.
pub const COPYRIGHT_TEMPLATE: &str = "packaging/deb/copyright";

/// Writes every file into `dir` from the repository at `repo`, the
/// copyright file for the Rust target `triple`; returns the files written.
pub fn write_all(repo: &Path, dir: &Path, triple: &str) -> Result<Vec<PathBuf>> {
    let mut written = crate::man::write_all(dir)?;
    written.extend(write_units(
        &dir.join("systemd"),
        Path::new(timer::PACKAGE_PROGRAM),
    )?);
    written.extend(write_docs(repo, &dir.join("doc"))?);
    let template = repo.join(COPYRIGHT_TEMPLATE);
    let template = std::fs::read_to_string(&template)
        .with_context(|| format!("reading {}", template.display()))?;
    let crates = crate::linked::linked_crates(repo, triple)?;
    let text = crate::linked::copyright(&template, &crates)
        .with_context(|| format!("in {COPYRIGHT_TEMPLATE}"))?;
    written.push(crate::write(&dir.join("copyright"), text)?);
    Ok(written)
}

/// The units as shipped, running `program`, into `dir`: the sync timer's
/// two (disabled; `sync --install-timer` enables them) and the check's
/// two (the package enables its timer).
pub fn write_units(dir: &Path, program: &Path) -> Result<Vec<PathBuf>> {
    Ok(vec![
        crate::write(
            &dir.join(timer::SERVICE),
            units::service_unit(program, false)?,
        )?,
        crate::write(&dir.join(timer::TIMER), units::timer_unit(false))?,
        crate::write(
            &dir.join(check_timer::SERVICE),
            check_timer::service_unit(program)?,
        )?,
        crate::write(&dir.join(check_timer::TIMER), check_timer::timer_unit())?,
    ])
}

/// The documentation, under `dir` as under /usr/share/doc/pimigrate
/// (emptied first, so a page no longer linked does not stay).
fn write_docs(repo: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    let mut written = Vec::new();
    for page in crate::package_docs::pages(repo)? {
        let path = dir.join(&page.installed);
        if path.extension().is_some_and(|e| e == "gz") {
            written.push(crate::write(&path, gzip(page.text.as_bytes())?)?);
        } else {
            written.push(crate::write(&path, &page.text)?);
        }
    }
    Ok(written)
}

/// `gzip -9n`: as Debian compresses documentation (no name, no time in
/// the header, so the package is the same from one build to the next).
fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("gzip")
        .arg("-9n")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running gzip")?;
    let mut stdin = child.stdin.take().context("gzip's input")?;
    // Written from a thread: gzip's output fills its pipe while it reads.
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().context("running gzip")?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writing to gzip panicked"))?
        .context("writing to gzip")?;
    anyhow::ensure!(output.status.success(), "gzip -9n failed");
    Ok(output.stdout)
}
