//! pimigrate's tree copier on a whole Debian root filesystem, the one
//! debootstrap made for the guest image, on the host and without a boot:
//! the SD image's root partition, attached read-only at its offset (the
//! host has no partition devices), is copied into a fresh ext4 by
//! `examples/copy-tree` (the copier `migrate` runs), and
//! `rsync -naHAXc --itemize-changes --numeric-ids` must find nothing to do:
//! same names, types, contents, owners, modes, times, hard links, ACLs and
//! xattrs. The torture tree in tests/copy_fidelity.rs covers the rare
//! cases; this is the common case, whole.

use super::{Lane, Scenario};
use crate::host::attach::Attached;
use crate::host::cmd;
use crate::host::mbr;
use crate::machine::pi::{target_dir, work_dir};
use crate::ImageSet;
use anyhow::{ensure, Context, Result};
use std::fs;
use std::process::Command;

/// The module's scenario, in [`super::all`]'s order.
pub const SCENARIO: Scenario = Scenario {
    name: "copy-debian-root",
    lane: Lane::Shared,
    run,
    about: r#"host only, no boot: the SD image's root partition (the Debian root debootstrap made) on a read-only loop device at its offset, copied by pimigrate's copier (`examples/copy-tree`, which run.sh builds) into a fresh ext4; `rsync -naHAXc --itemize-changes --numeric-ids` lists nothing"#,
};

pub fn run(images: &ImageSet) -> Result<()> {
    let copier = target_dir().join("release/examples/copy-tree");
    ensure!(
        copier.is_file(),
        "{} is missing: run `cargo build --release --example copy-tree` (testbed/run.sh does)",
        copier.display()
    );
    let work = work_dir("copy-debian-root");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;

    let root = mbr::partition_of(&images.bookworm, 2)?;
    let source = Attached::new(
        &images.bookworm,
        Some(&root),
        &work.join("src"),
        "ro,noload",
    )?;
    let target_image = work.join("target.img");
    fs::File::create(&target_image)?.set_len(6 << 30)?;
    cmd::run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&target_image),
    )?;
    let target = Attached::new(&target_image, None, &work.join("dst"), "rw")?;

    let copy = target.mountpoint.join("root");
    let out = cmd::stdout(
        Command::new(&copier)
            .arg(format!("{}/", source.mountpoint.display()))
            .arg(&copy),
    )?;
    eprintln!("testbed: copy-debian-root: {}", out.trim());
    let changes = cmd::stdout(
        Command::new("rsync")
            .args(["-naHAXc", "--itemize-changes", "--numeric-ids"])
            .arg(format!("{}/", source.mountpoint.display()))
            .arg(format!("{}/", copy.display())),
    )?;
    let entries = cmd::stdout(Command::new("find").arg(&source.mountpoint))?
        .lines()
        .count();
    ensure!(
        changes.trim().is_empty(),
        "rsync -naHAXc finds differences between the Debian root and its copy:\n{changes}"
    );
    ensure!(
        entries > 5_000,
        "the source root has only {entries} entries: is it the guest's root filesystem?"
    );
    eprintln!("testbed: copy-debian-root: {entries} entries, rsync -naHAXc finds nothing to do");
    // The mounts are undone on drop; the runner then removes `work`.
    Ok(())
}
