//! Mounts that undo themselves. A mount point directory is removed only
//! after its unmount succeeded: removing files through a mount that is
//! still there would delete the target's (or worse, the source's) data.

use crate::system::mounts::{is_stale, RUN_DIR};
use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Mounted {
    point: PathBuf,
    active: bool,
}

impl Mounted {
    pub fn path(&self) -> &Path {
        &self.point
    }

    /// Writes everything cached for this filesystem to its disk (syncfs):
    /// what a step wrote is on the disk before the journal records it.
    pub fn sync(&self) -> Result<()> {
        super::atomic::sync_filesystem(&self.point)
    }

    /// Unmounts now, reporting failure (Drop can only log it).
    pub fn unmount(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if !self.active {
            return Ok(());
        }
        unmount_past_a_moments_holder(&self.point)
            .with_context(|| format!("unmounting {}", self.point.display()))?;
        self.active = false;
        std::fs::remove_dir(&self.point)
            .with_context(|| format!("removing the mount point {}", self.point.display()))
    }
}

/// How long an unmount that finds the mount busy keeps trying.
const BUSY_GRACE: Duration = Duration::from_secs(2);

/// Unmounts `point`, trying again for [`BUSY_GRACE`] while the kernel says
/// EBUSY: whatever stats every mount point (a disk listing, as sysinfo's
/// does, or a desktop's disk monitor) holds ours for an instant, and an
/// unmount at that instant fails. A mount really in use stays busy and
/// fails after the grace.
fn unmount_past_a_moments_holder(point: &Path) -> nix::Result<()> {
    let deadline = Instant::now() + BUSY_GRACE;
    loop {
        match umount2(point, MntFlags::empty()) {
            Err(Errno::EBUSY) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            done => return done,
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(err) = self.release() {
            eprintln!("pimigrate: {err:#}; left in place, unmount it by hand");
        }
    }
}

/// A fresh private mount point under [`RUN_DIR`].
fn mount_point(name: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(RUN_DIR)
        .with_context(|| format!("creating {RUN_DIR}"))?;
    let point = Path::new(RUN_DIR).join(format!("{name}-{}", std::process::id()));
    // An empty directory of this name is a killed run's leftover whose pid
    // came round again; remove_dir refuses anything mounted or non-empty.
    let _ = std::fs::remove_dir(&point);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&point)
        .with_context(|| format!("creating the mount point {}", point.display()))?;
    Ok(point)
}

/// How pimigrate mounts a filesystem it writes (a migration's target, a
/// standby): no symlink on it is ever followed while a path is looked up
/// (`nosymfollow`, Linux 5.10), so whatever the disk holds (a symlinked
/// `var/lib/pimigrate`, a directory replaced by a link to `/etc`) no write
/// meant for it lands outside it; its device nodes are not opened and its
/// programs not run through this mount; no access times are written.
fn write_flags() -> MsFlags {
    MsFlags::MS_NOATIME
        | MsFlags::MS_NODEV
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NOEXEC
        | MsFlags::from_bits_retain(nix::libc::MS_NOSYMFOLLOW)
}

/// Mounts a filesystem pimigrate writes (`fstype` such as "ext4" or
/// "vfat"), with [`write_flags`].
pub fn mount_device(device: &Path, fstype: &str, name: &str) -> Result<Mounted> {
    let point = mount_point(name)?;
    if let Err(err) = mount(
        Some(device),
        &point,
        Some(fstype),
        write_flags(),
        None::<&str>,
    ) {
        let _ = std::fs::remove_dir(&point);
        return Err(err).with_context(|| {
            format!(
                "mounting {} ({fstype}) on {}",
                device.display(),
                point.display()
            )
        });
    }
    Ok(Mounted {
        point,
        active: true,
    })
}

/// Mounts an ext4 filesystem only to look at it: read-only, and without
/// replaying its journal (`noload`), so not a byte of the disk changes,
/// not even its superblock's mount count.
pub fn mount_to_look(device: &Path, name: &str) -> Result<Mounted> {
    let point = mount_point(name)?;
    let flags = (write_flags() - MsFlags::MS_NOATIME) | MsFlags::MS_RDONLY;
    if let Err(err) = mount(Some(device), &point, Some("ext4"), flags, Some("noload")) {
        let _ = std::fs::remove_dir(&point);
        return Err(err).with_context(|| {
            format!(
                "mounting {} read-only on {} to look at it",
                device.display(),
                point.display()
            )
        });
    }
    Ok(Mounted {
        point,
        active: true,
    })
}

/// A read-only bind mount of `dir`'s filesystem alone: files hidden under
/// other mount points (a /dev, /boot/firmware or /tmp mounted over a
/// directory that still has files in it) show through, and nothing below
/// is a different filesystem.
pub fn bind_read_only(dir: &Path, name: &str) -> Result<Mounted> {
    let point = mount_point(name)?;
    let bind = mount(
        Some(dir),
        &point,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    );
    if let Err(err) = bind {
        let _ = std::fs::remove_dir(&point);
        return Err(err)
            .with_context(|| format!("bind-mounting {} on {}", dir.display(), point.display()));
    }
    let mounted = Mounted {
        point,
        active: true,
    };
    // Private, so the bind does not propagate to other namespaces; read-only,
    // so the copy can never write to the source.
    mount(
        None::<&str>,
        mounted.path(),
        None::<&str>,
        MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .with_context(|| format!("making {} private", mounted.path().display()))?;
    mount(
        None::<&str>,
        mounted.path(),
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .with_context(|| {
        format!(
            "making the bind mount {} read-only",
            mounted.path().display()
        )
    })?;
    Ok(mounted)
}

/// Unmounts what an interrupted (killed) run left under [`RUN_DIR`]: mount
/// points are named `<what>-<pid>`, and a pid that no longer runs left them.
pub fn clean_up_stale_mounts() -> Result<Vec<PathBuf>> {
    let table =
        std::fs::read_to_string("/proc/self/mountinfo").context("reading the mount table")?;
    let table = crate::system::mounts::MountTable::parse(&table);
    let mut cleaned = Vec::new();
    // Deepest first, in case anything was mounted inside another.
    let mut points: Vec<PathBuf> = table
        .mounts
        .iter()
        .map(|m| m.mountpoint.clone())
        .filter(|p| is_stale(p))
        .collect();
    points.sort();
    points.dedup();
    for point in points.into_iter().rev() {
        match umount2(&point, MntFlags::empty()) {
            // Another pimigrate cleaned it up since the table was read.
            Ok(()) | Err(Errno::ENOENT | Errno::EINVAL) => {}
            Err(err) => {
                return Err(err).with_context(|| {
                    format!("unmounting {}, left by an interrupted run", point.display())
                })
            }
        }
        let _ = std::fs::remove_dir(&point);
        cleaned.push(point);
    }
    // Empty mount points of dead runs (killed between mkdir and mount, or
    // between unmount and rmdir).
    for entry in std::fs::read_dir(RUN_DIR).into_iter().flatten().flatten() {
        let path = entry.path();
        if is_stale(&path) && std::fs::remove_dir(&path).is_ok() {
            cleaned.push(path);
        }
    }
    Ok(cleaned)
}
