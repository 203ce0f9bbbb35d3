//! Puts the git commit into `pimigrate --version` ("0.1.0 (abc1234)"), so a
//! bug report names the exact build. Outside a git checkout (a .deb built
//! from a source tarball) the commit reads "unknown" and the build goes on.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = git(&manifest_dir, &["rev-parse", "--short=7", "HEAD"]);
    let commit = match commit {
        Some(hash) => {
            // Tracked files changed since the commit: the binary is not
            // exactly that commit, and --version says so.
            let dirty = git(
                &manifest_dir,
                &["status", "--porcelain", "--untracked-files=no"],
            )
            .is_some_and(|status| !status.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        None => "unknown".to_string(),
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=PIMIGRATE_COMMIT={commit}");
    println!("cargo:rustc-env=PIMIGRATE_VERSION={version} ({commit})");
    rerun_when_head_moves(&manifest_dir);
}

/// Runs git in `dir`; `None` when git is missing or this is no checkout.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Cargo reruns this script only when a listed file changes. HEAD changes on
/// a checkout, the branch's ref file (or packed-refs) on a commit. The index
/// is not watched: it changes with every `git add`, and rebuilding for that
/// is not worth it, so "-dirty" reflects the tree when the commit last
/// changed (release builds come from a clean checkout anyway). Paths that do
/// not exist are left out, since cargo would otherwise rerun the script on
/// every build.
fn rerun_when_head_moves(manifest_dir: &Path) {
    println!("cargo:rerun-if-changed=build.rs");
    // In a worktree or a workspace member, .git is elsewhere: ask git.
    let Some(git_dir) = git(manifest_dir, &["rev-parse", "--git-dir"]) else {
        return;
    };
    let git_dir = manifest_dir.join(git_dir);
    let head = git_dir.join("HEAD");
    let mut watch = vec![head.clone()];
    if let Ok(text) = std::fs::read_to_string(&head) {
        if let Some(reference) = text.trim().strip_prefix("ref: ") {
            // A worktree keeps its branch refs in the common directory.
            let common = git(manifest_dir, &["rev-parse", "--git-common-dir"])
                .map(|dir| manifest_dir.join(dir))
                .unwrap_or_else(|| git_dir.clone());
            watch.push(common.join(reference));
            watch.push(common.join("packed-refs"));
        }
    }
    for path in watch.into_iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
