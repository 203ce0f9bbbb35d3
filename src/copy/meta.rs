//! Ownership, extended attributes (POSIX ACLs included), mode and times of
//! one copied entry, applied in the one order that keeps them all:
//!
//! 1. owner: chown clears setuid/setgid and `security.capability`;
//! 2. xattrs and ACLs (raw `system.posix_acl_*`), so the capability lands
//!    after the chown that would clear it;
//! 3. mode, after the ACL (setting an access ACL rewrites the group bits)
//!    and after the chown (which cleared setuid/setgid);
//! 4. times, last, since every step before may touch ctime but only data
//!    writes touch mtime, and the caller writes data before calling this.
//!
//! Each step that fails is reported and the next still runs: a missing
//! `trusted.*` attribute should not leave a file with the wrong mode.

use crate::sys64::{self, TimesOf};
use std::ffi::OsString;
use std::fs::{File, Metadata, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use xattr::FileExt;

/// Extended attributes of one entry: name and value, in listing order.
pub type Xattrs = Vec<(OsString, Vec<u8>)>;

/// The copied entry, reached the cheapest way available.
#[derive(Clone, Copy)]
pub enum Node<'a> {
    /// A regular file the copy holds open.
    Open(&'a File),
    /// A directory, device node, FIFO or socket: path calls are safe
    /// (they follow nothing the copy did not create).
    Path(&'a Path),
    /// A symlink: every call must act on the link, never its target.
    Symlink(&'a Path),
}

/// Reads every extended attribute the kernel lists for `node`; a
/// filesystem without xattr support has none.
pub fn read_xattrs(node: Node) -> io::Result<Xattrs> {
    let names: Vec<OsString> = match node {
        Node::Open(file) => file.list_xattr().map(|names| names.collect()),
        Node::Path(path) | Node::Symlink(path) => xattr::list(path).map(|names| names.collect()),
    }
    .or_else(no_xattr_support)?;
    let mut all = Vec::with_capacity(names.len());
    for name in names {
        let value = match node {
            Node::Open(file) => file.get_xattr(&name),
            Node::Path(path) | Node::Symlink(path) => xattr::get(path, &name),
        };
        // Removed between the listing and now: nothing to copy.
        if let Some(value) = value? {
            all.push((name, value));
        }
    }
    Ok(all)
}

fn no_xattr_support(err: io::Error) -> io::Result<Vec<OsString>> {
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        Ok(Vec::new())
    } else {
        Err(err)
    }
}

/// What [`apply`] may skip because the target already has it; `None`
/// applies everything (a freshly created entry).
pub type Existing<'a> = Option<&'a Metadata>;

/// Makes `node` carry the owner, xattrs, mode and times of `source`.
/// `data_written` says whether the caller just wrote data (which moved the
/// target's mtime). Every failing step is passed to `report` with the
/// operation's name.
pub fn apply(
    node: Node,
    source: &Metadata,
    xattrs: &Xattrs,
    existing: Existing,
    data_written: bool,
    report: &mut dyn FnMut(String, io::Error),
) {
    let owner_differs = existing.is_none_or(|t| t.uid() != source.uid() || t.gid() != source.gid());
    if owner_differs {
        if let Err(err) = set_owner(node, source.uid(), source.gid()) {
            report("set owner".into(), err);
        }
    }
    let xattrs_changed = match sync_xattrs(node, xattrs, report) {
        Ok(changed) => changed,
        Err(err) => {
            report("list target xattrs".into(), err);
            false
        }
    };
    let is_symlink = matches!(node, Node::Symlink(_));
    let mode = source.mode() & 0o7777;
    let mode_differs = existing.is_none_or(|t| t.mode() & 0o7777 != mode);
    if !is_symlink && (mode_differs || owner_differs || xattrs_changed) {
        if let Err(err) = set_mode(node, mode) {
            report(format!("set mode {mode:04o}"), err);
        }
    }
    let times_differ = existing.is_none_or(|t| {
        (t.mtime(), t.mtime_nsec(), t.atime(), t.atime_nsec())
            != (
                source.mtime(),
                source.mtime_nsec(),
                source.atime(),
                source.atime_nsec(),
            )
    });
    if data_written || times_differ {
        if let Err(err) = set_times(node, source) {
            report("set times".into(), err);
        }
    }
}

fn set_owner(node: Node, uid: u32, gid: u32) -> io::Result<()> {
    match node {
        Node::Open(file) => std::os::unix::fs::fchown(file, Some(uid), Some(gid)),
        Node::Path(path) => std::os::unix::fs::chown(path, Some(uid), Some(gid)),
        Node::Symlink(path) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
    }
}

/// Sets the xattrs the target lacks or holds with another value and removes
/// those the source does not have (a default ACL inherited from the parent
/// directory, or an attribute removed from the source since the last pass).
/// Returns whether anything changed.
fn sync_xattrs(
    node: Node,
    wanted: &Xattrs,
    report: &mut dyn FnMut(String, io::Error),
) -> io::Result<bool> {
    let present: Vec<OsString> = match node {
        Node::Open(file) => file.list_xattr().map(|names| names.collect()),
        Node::Path(path) | Node::Symlink(path) => xattr::list(path).map(|names| names.collect()),
    }
    .or_else(no_xattr_support)?;
    if present.is_empty() && wanted.is_empty() {
        return Ok(false);
    }
    let mut changed = false;
    for name in &present {
        if wanted.iter().any(|(wanted_name, _)| wanted_name == name) {
            continue;
        }
        let removed = match node {
            Node::Open(file) => file.remove_xattr(name),
            Node::Path(path) | Node::Symlink(path) => xattr::remove(path, name),
        };
        match removed {
            Ok(()) => changed = true,
            Err(err) => report(format!("remove xattr {}", name.to_string_lossy()), err),
        }
    }
    for (name, value) in wanted {
        if present.contains(name) {
            let current = match node {
                Node::Open(file) => file.get_xattr(name),
                Node::Path(path) | Node::Symlink(path) => xattr::get(path, name),
            };
            if matches!(current, Ok(Some(ref v)) if v == value) {
                continue;
            }
        }
        let set = match node {
            Node::Open(file) => file.set_xattr(name, value),
            Node::Path(path) | Node::Symlink(path) => xattr::set(path, name, value),
        };
        match set {
            Ok(()) => changed = true,
            Err(err) => report(format!("set xattr {}", name.to_string_lossy()), err),
        }
    }
    Ok(changed)
}

fn set_mode(node: Node, mode: u32) -> io::Result<()> {
    let permissions = Permissions::from_mode(mode);
    match node {
        Node::Open(file) => file.set_permissions(permissions),
        Node::Path(path) => std::fs::set_permissions(path, permissions),
        Node::Symlink(_) => Ok(()), // Linux symlinks have no mode of their own
    }
}

/// A node's access and modification times, kept apart from the rest of its
/// metadata so they can be set again later (see `Walker::deferred_times`).
#[derive(Debug, Clone, Copy)]
pub struct Times {
    atime: (i64, i64),
    mtime: (i64, i64),
}

impl Times {
    pub fn of(meta: &Metadata) -> Times {
        Times {
            atime: (meta.atime(), meta.atime_nsec()),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

fn set_times(node: Node, source: &Metadata) -> io::Result<()> {
    set_node_times(node, Times::of(source))
}

/// Sets `times` on `node` (a symlink itself, never what it points to),
/// with 64-bit times on every architecture: on armhf a time after 2038 is
/// kept, or the call fails, never cut to 32 bits.
pub fn set_node_times(node: Node, times: Times) -> io::Result<()> {
    let of = match node {
        Node::Open(file) => TimesOf::File(file),
        Node::Path(path) | Node::Symlink(path) => TimesOf::Path(path),
    };
    sys64::set_times(of, times.atime, times.mtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Do owner, mode and times of `target` match `source` already? (Xattrs are
    /// compared by [`apply`] itself.)
    fn same_inode_attributes(source: &Metadata, target: &Metadata) -> bool {
        source.uid() == target.uid()
            && source.gid() == target.gid()
            && source.mode() == target.mode()
            && source.mtime() == target.mtime()
            && source.mtime_nsec() == target.mtime_nsec()
            && source.atime() == target.atime()
            && source.atime_nsec() == target.atime_nsec()
    }

    #[test]
    fn mode_times_and_user_xattrs_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        let target = dir.path().join("target");
        std::fs::write(&source, "x").unwrap();
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&source, Permissions::from_mode(0o751)).unwrap();
        // 2040: past a 32-bit time_t, which armhf must keep all the same.
        let old = (2_208_988_800, 123_456_789);
        sys64::set_times(TimesOf::Path(&source), old, old).unwrap();
        // tmpfs supports user.* xattrs only on newer kernels: skip if not.
        let with_xattr = xattr::set(&source, "user.test", b"value").is_ok();
        let meta = std::fs::symlink_metadata(&source).unwrap();
        let xattrs = read_xattrs(Node::Path(&source)).unwrap();
        let mut errors = Vec::new();
        apply(
            Node::Path(&target),
            &meta,
            &xattrs,
            None,
            false,
            &mut |op, err| errors.push(format!("{op}: {err}")),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let copied = std::fs::symlink_metadata(&target).unwrap();
        assert!(same_inode_attributes(&meta, &copied));
        if with_xattr {
            assert_eq!(xattr::get(&target, "user.test").unwrap().unwrap(), b"value");
        }
    }

    #[test]
    fn symlink_times_are_set_on_the_link_not_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let link = dir.path().join("link");
        symlink(&file, &link).unwrap();
        let before = std::fs::metadata(&file).unwrap();
        let source = dir.path().join("old-link");
        symlink("nowhere", &source).unwrap();
        sys64::set_times(TimesOf::Path(&source), (500_000_000, 1), (500_000_000, 1)).unwrap();
        let meta = std::fs::symlink_metadata(&source).unwrap();
        apply(
            Node::Symlink(&link),
            &meta,
            &Vec::new(),
            None,
            false,
            &mut |op, err| panic!("{op}: {err}"),
        );
        assert_eq!(
            std::fs::symlink_metadata(&link).unwrap().mtime(),
            500_000_000
        );
        assert_eq!(std::fs::metadata(&file).unwrap().mtime(), before.mtime());
    }
}
