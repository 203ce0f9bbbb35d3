//! Files on a FAT partition inside an image, through mtools' `image@@offset`
//! syntax (the host has neither vfat nor partition devices).

use crate::host::cmd;
use crate::host::mbr::Partition;
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

fn target(image: &Path, part: &Partition) -> String {
    format!("{}@@{}", image.display(), part.offset())
}

fn mtools(tool: &str) -> Command {
    let mut c = Command::new(tool);
    // Images made elsewhere may have odd geometry; mtools need not care.
    c.env("MTOOLS_SKIP_CHECK", "1");
    c
}

/// Contents of `path` (relative to the FAT root) as text; `None` if absent.
pub fn read(image: &Path, part: &Partition, path: &str) -> Result<Option<String>> {
    let file = format!("::/{}", path.trim_start_matches('/'));
    let out = mtools("mtype")
        .arg("-i")
        .arg(target(image, part))
        .arg(&file)
        .output()
        .context("cannot run mtype: install mtools (testbed/run.sh does)")?;
    if out.status.success() {
        return Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("not found") {
        return Ok(None);
    }
    anyhow::bail!(
        "mtype {file} on {} failed: {}",
        target(image, part),
        err.trim()
    )
}

/// Whether `path` (relative to the FAT root) exists, without reading it.
pub fn exists(image: &Path, part: &Partition, path: &str) -> Result<bool> {
    let file = format!("::/{}", path.trim_start_matches('/'));
    let out = mtools("mdir")
        .arg("-b")
        .arg("-i")
        .arg(target(image, part))
        .arg(&file)
        .output()
        .context("cannot run mdir: install mtools (testbed/run.sh does)")?;
    Ok(out.status.success())
}

/// Copies `path` out of the FAT to `dest` on the host.
pub fn copy_out(image: &Path, part: &Partition, path: &str, dest: &Path) -> Result<()> {
    let file = format!("::/{}", path.trim_start_matches('/'));
    cmd::run(
        mtools("mcopy")
            .arg("-o")
            .arg("-i")
            .arg(target(image, part))
            .arg(&file)
            .arg(dest),
    )
    .with_context(|| format!("cannot copy {file} out of {}", image.display()))?;
    Ok(())
}

/// Writes `contents` to `path` on the FAT (replacing it), e.g. to prepare a
/// `tryboot.txt` from the host.
pub fn write(image: &Path, part: &Partition, path: &str, contents: &str) -> Result<()> {
    let tmp = tempfile_path(path);
    std::fs::write(&tmp, contents).with_context(|| format!("cannot write {}", tmp.display()))?;
    let file = format!("::/{}", path.trim_start_matches('/'));
    let res = cmd::run(
        mtools("mcopy")
            .arg("-o")
            .arg("-i")
            .arg(target(image, part))
            .arg(&tmp)
            .arg(&file),
    );
    let _ = std::fs::remove_file(&tmp);
    res.with_context(|| format!("cannot write {file} into {}", image.display()))?;
    Ok(())
}

/// Renames `from` to `to` on the FAT (both relative to its root),
/// replacing a file already called `to`, as recovery.bin renames itself.
pub fn rename(image: &Path, part: &Partition, from: &str, to: &str) -> Result<()> {
    if exists(image, part, to)? {
        remove(image, part, to)?;
    }
    let (from, to) = (
        format!("::/{}", from.trim_start_matches('/')),
        format!("::/{}", to.trim_start_matches('/')),
    );
    cmd::run(
        mtools("mren")
            .arg("-i")
            .arg(target(image, part))
            .arg(&from)
            .arg(&to),
    )
    .with_context(|| format!("cannot rename {from} to {to} in {}", image.display()))?;
    Ok(())
}

/// Deletes the file `path` from the FAT.
pub fn remove(image: &Path, part: &Partition, path: &str) -> Result<()> {
    let file = format!("::/{}", path.trim_start_matches('/'));
    cmd::run(mtools("mdel").arg("-i").arg(target(image, part)).arg(&file))
        .with_context(|| format!("cannot delete {file} from {}", image.display()))?;
    Ok(())
}

fn tempfile_path(name: &str) -> std::path::PathBuf {
    let base = name.rsplit('/').next().unwrap_or("file");
    std::env::temp_dir().join(format!("pi-testbed-{}-{base}", std::process::id()))
}

/// Every file on the FAT (path relative to its root, contents), copied out
/// through `scratch` (emptied first): to show a boot partition holds exactly
/// what it held before, names and bytes.
pub fn snapshot(
    image: &Path,
    part: &Partition,
    scratch: &Path,
) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    cmd::run(
        mtools("mcopy")
            .args(["-s", "-m", "-i"])
            .arg(target(image, part))
            .arg("::*")
            .arg(scratch),
    )
    .with_context(|| format!("cannot copy the FAT of {} out", image.display()))?;
    let mut files = std::collections::BTreeMap::new();
    let mut dirs = vec![scratch.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let rel = path.strip_prefix(scratch).unwrap_or(&path);
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                files.insert(rel.display().to_string(), bytes);
            }
        }
    }
    let _ = std::fs::remove_dir_all(scratch);
    Ok(files)
}

/// Where two [`snapshot`]s differ: names only in one, and names whose
/// contents changed; empty when they are the same.
pub fn snapshot_diff(
    before: &std::collections::BTreeMap<String, Vec<u8>>,
    after: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let mut diff = Vec::new();
    for (name, bytes) in before {
        match after.get(name) {
            None => diff.push(format!("{name} is gone")),
            Some(b) if b != bytes => diff.push(format!("{name} changed")),
            Some(_) => {}
        }
    }
    for name in after.keys().filter(|n| !before.contains_key(*n)) {
        diff.push(format!("{name} is new"));
    }
    diff
}

/// Removes the folder `path` (relative to the FAT root) and all below it;
/// nothing when it is absent.
pub fn remove_tree(image: &Path, part: &Partition, path: &str) -> Result<()> {
    if !exists(image, part, path)? {
        return Ok(());
    }
    let dir = format!("::/{}", path.trim_start_matches('/'));
    cmd::run(
        mtools("mdeltree")
            .arg("-i")
            .arg(target(image, part))
            .arg(&dir),
    )
    .with_context(|| format!("cannot remove {dir} from {}", image.display()))?;
    Ok(())
}

/// Copies the host folder `src` to the folder `path` on the FAT, with
/// everything below it (`path` must not exist yet).
pub fn copy_tree_in(image: &Path, part: &Partition, src: &Path, path: &str) -> Result<()> {
    let dir = format!("::/{}", path.trim_start_matches('/'));
    cmd::run(
        mtools("mcopy")
            .args(["-s", "-o", "-i"])
            .arg(target(image, part))
            .arg(src)
            .arg(&dir),
    )
    .with_context(|| {
        format!(
            "cannot copy {} to {dir} on {}",
            src.display(),
            image.display()
        )
    })?;
    Ok(())
}

/// Copies the folder `path` on the FAT, with everything below it, into the
/// host folder `dest` (as `dest/<last part of path>`); nothing when absent.
pub fn copy_tree_out(image: &Path, part: &Partition, path: &str, dest: &Path) -> Result<()> {
    if !exists(image, part, path)? {
        return Ok(());
    }
    let dir = format!("::/{}", path.trim_start_matches('/'));
    cmd::run(
        mtools("mcopy")
            .args(["-s", "-o", "-i"])
            .arg(target(image, part))
            .arg(&dir)
            .arg(dest),
    )
    .with_context(|| format!("cannot copy {dir} out of {}", image.display()))?;
    Ok(())
}
