//! Writes what the .deb installs besides the binary:
//! `cargo run --example gen-assets [DIR [TRIPLE]]` (default
//! `target/assets`, this machine's target): the man pages and shell
//! completions (from the clap definition), the sync timer's systemd units
//! (`DIR/systemd/`), the documentation with links that work where it is
//! installed (`DIR/doc/`), and the package's copyright file naming the
//! crates linked into the program for TRIPLE (`DIR/copyright`).
//! `scripts/build-deb.sh` runs it before packing.

use anyhow::{Context, Result};
use pimigrate::sync::timer::{self, units};
use std::path::{Path, PathBuf};

fn main() -> Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/assets")));
    let triple = std::env::args().nth(2);
    for path in pimigrate::assets::write_all(&dir)? {
        println!("{}", path.display());
    }
    let systemd = dir.join("systemd");
    std::fs::create_dir_all(&systemd).with_context(|| format!("creating {}", systemd.display()))?;
    for (name, text) in [
        (
            timer::SERVICE,
            units::service_unit(Path::new(timer::PACKAGE_PROGRAM), false)?,
        ),
        (timer::TIMER, units::timer_unit(false)),
    ] {
        let path = systemd.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    // The documentation, under DIR/doc/ as under /usr/share/doc/pimigrate.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = dir.join("doc");
    if doc.exists() {
        std::fs::remove_dir_all(&doc).with_context(|| format!("emptying {}", doc.display()))?;
    }
    for page in pimigrate::package_docs::pages(repo)? {
        let path = doc.join(&page.installed);
        std::fs::create_dir_all(path.parent().unwrap())
            .with_context(|| format!("creating {}", path.display()))?;
        if path.extension().is_some_and(|e| e == "gz") {
            gzip(page.text.as_bytes(), &path)?;
        } else {
            std::fs::write(&path, &page.text)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{}", path.display());
    }
    let template = repo.join("packaging/deb/copyright");
    let text = std::fs::read_to_string(&template)
        .with_context(|| format!("reading {}", template.display()))?;
    let crates = linked_crates(repo, triple.as_deref())?;
    let path = dir.join("copyright");
    std::fs::write(&path, text.replace("@CRATES@", &crates))
        .with_context(|| format!("writing {}", path.display()))?;
    println!("{}", path.display());
    Ok(())
}

/// The crates linked into the pimigrate program for `triple` (this
/// machine's when `None`), one " NAME VERSION: LICENSE" line each, from
/// `cargo metadata`: the normal dependencies, all the way down, less the
/// procedural macros, which run at build time only.
fn linked_crates(repo: &Path, triple: Option<&str>) -> Result<String> {
    use serde_json::Value;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command
        .current_dir(repo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"]);
    if let Some(triple) = triple {
        command.args(["--filter-platform", triple]);
    }
    let output = command.output().context("running cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let packages: std::collections::HashMap<&str, &Value> = metadata["packages"]
        .as_array()
        .context("cargo metadata: no packages")?
        .iter()
        .map(|p| (p["id"].as_str().unwrap_or_default(), p))
        .collect();
    let nodes: std::collections::HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .context("cargo metadata: no resolve")?
        .iter()
        .map(|n| (n["id"].as_str().unwrap_or_default(), n))
        .collect();
    let root = packages
        .values()
        .find(|p| p["name"] == "pimigrate")
        .and_then(|p| p["id"].as_str())
        .context("cargo metadata: no pimigrate package")?;
    let is_proc_macro = |id: &str| {
        packages[id]["targets"].as_array().is_some_and(|ts| {
            ts.iter().any(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "proc-macro"))
            })
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut queue = vec![root];
    while let Some(id) = queue.pop() {
        for dep in nodes[id]["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()));
            let dep_id = dep["pkg"].as_str().unwrap_or_default();
            if normal && !is_proc_macro(dep_id) && seen.insert(dep_id) {
                queue.push(dep_id);
            }
        }
    }
    let mut lines: Vec<String> = seen
        .iter()
        .map(|id| {
            let p = packages[id];
            format!(
                " {} {}: {}",
                p["name"].as_str().unwrap_or("?"),
                p["version"].as_str().unwrap_or("?"),
                p["license"].as_str().unwrap_or("see the crate")
            )
        })
        .collect();
    lines.sort();
    Ok(lines.join("\n"))
}

/// `gzip -9n`: as Debian compresses documentation (no name, no time in
/// the header, so the package is the same from one build to the next).
fn gzip(bytes: &[u8], to: &Path) -> Result<()> {
    use std::io::Write;
    let file = std::fs::File::create(to).with_context(|| format!("creating {}", to.display()))?;
    let mut child = std::process::Command::new("gzip")
        .arg("-9n")
        .stdin(std::process::Stdio::piped())
        .stdout(file)
        .spawn()
        .context("running gzip")?;
    child.stdin.take().unwrap().write_all(bytes)?;
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "gzip -9n into {} failed", to.display());
    Ok(())
}
