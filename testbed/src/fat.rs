//! Files on a FAT partition inside an image, through mtools' `image@@offset`
//! syntax (the host has neither vfat nor partition devices).

use crate::cmd;
use crate::mbr::Partition;
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

fn tempfile_path(name: &str) -> std::path::PathBuf {
    let base = name.rsplit('/').next().unwrap_or("file");
    std::env::temp_dir().join(format!("pi-testbed-{}-{base}", std::process::id()))
}
