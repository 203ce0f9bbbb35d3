//! pimigrate's tooling, apart from the product it serves: the blocks of
//! README.md and docs/ that the code writes ([`docgen`], with the example
//! plan of [`plan_example`]), the man pages
//! and shell completions ([`man`]), the files the Debian package installs
//! besides the program ([`assets`], [`package_docs`], [`linked`]) and the
//! same extras for a system that installed pimigrate with cargo
//! ([`install`]). `cargo xtask --help` lists the commands that run them.

pub mod assets;
pub mod docgen;
pub mod install;
pub mod linked;
pub mod man;
pub mod package_docs;
pub mod plan_example;

use std::path::{Path, PathBuf};

/// The repository: the workspace this crate is a member of.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ sits in the repository")
}

/// Writes `bytes` to `path`, making its directory first.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_path_buf())
}
