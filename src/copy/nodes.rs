//! Creating the non-file entries of a tree (directories, symlinks, device
//! nodes, FIFOs, sockets) and clearing whatever stands in their way.

use nix::sys::stat::{Mode, SFlag};
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` for writing, created empty (or emptied): the file's data is
/// written through this descriptor. Owner-only mode until the metadata
/// step sets the real one, so no one else can open a half-copied file.
/// O_NOFOLLOW: a symlink at the target path is never written through.
pub fn create_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens a source file for reading without touching its access time (the
/// copy preserves atime, and reading must not change the source either).
/// O_NOATIME is refused for files the caller does not own unless root;
/// then the file is opened normally.
pub fn open_source(path: &Path) -> io::Result<File> {
    let open = |flags| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | flags)
            .open(path)
    };
    match open(libc::O_NOATIME) {
        Err(err) if err.raw_os_error() == Some(libc::EPERM) => open(0),
        other => other,
    }
}

/// Creates a directory (owner-only until its metadata is applied, after its
/// contents); an existing directory is fine.
pub fn create_dir(path: &Path) -> io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {
            // is_dir follows symlinks: make sure it is a real directory.
            if std::fs::symlink_metadata(path)?.is_dir() {
                Ok(())
            } else {
                Err(err)
            }
        }
        other => other,
    }
}

/// Creates a device node, FIFO or socket like the source's (`mknod` makes
/// all of them on Linux, sockets included: an unbound socket inode is all
/// a copy can carry).
pub fn create_special(path: &Path, source: &Metadata) -> io::Result<()> {
    let file_type = source.file_type();
    let kind = if file_type.is_char_device() {
        SFlag::S_IFCHR
    } else if file_type.is_block_device() {
        SFlag::S_IFBLK
    } else if file_type.is_fifo() {
        SFlag::S_IFIFO
    } else if file_type.is_socket() {
        SFlag::S_IFSOCK
    } else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    nix::sys::stat::mknod(
        path,
        kind,
        Mode::from_bits_truncate(0o600),
        source.rdev() as libc::dev_t,
    )?;
    Ok(())
}

/// Is `entry` a device node, FIFO or socket?
pub fn is_special(meta: &Metadata) -> bool {
    let t = meta.file_type();
    t.is_char_device() || t.is_block_device() || t.is_fifo() || t.is_socket()
}

/// Removes whatever is at `path` (a whole directory tree included, without
/// following symlinks); nothing there is fine.
pub fn remove_any(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

/// Makes a name at `path` with `make`; where one is already there (a
/// resumed copy, or something the live system made since the walk looked)
/// it is removed and `make` runs once more.
pub fn make_replacing(path: &Path, make: impl Fn() -> io::Result<()>) -> io::Result<()> {
    match make() {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            remove_any(path).and_then(|()| make())
        }
        made => made,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_in_the_way_is_replaced_once() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        std::fs::write(&link, b"in the way").unwrap();
        make_replacing(&link, || std::os::unix::fs::symlink("target", &link)).unwrap();
        assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("target"));
        let missing = dir.path().join("no-such-dir/link");
        let err = make_replacing(&missing, || std::os::unix::fs::symlink("t", &missing));
        assert_eq!(err.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn fifo_and_socket_nodes_are_created() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let socket_path = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
        for source in [&fifo, &socket_path] {
            let meta = std::fs::symlink_metadata(source).unwrap();
            let copy = dir.path().join(format!(
                "copy-{}",
                source.file_name().unwrap().to_string_lossy()
            ));
            create_special(&copy, &meta).unwrap();
            let copied = std::fs::symlink_metadata(&copy).unwrap();
            assert_eq!(copied.file_type(), meta.file_type());
        }
    }

    #[test]
    fn remove_any_takes_trees_and_leaves_symlink_targets() {
        let dir = tempfile::tempdir().unwrap();
        let keep = dir.path().join("keep");
        std::fs::create_dir(&keep).unwrap();
        std::fs::write(keep.join("file"), "x").unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::os::unix::fs::symlink(&keep, tree.join("a/link")).unwrap();
        remove_any(&tree).unwrap();
        assert!(!tree.exists());
        assert!(keep.join("file").exists());
        remove_any(&tree).unwrap();
    }

    #[test]
    fn create_file_does_not_write_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_file(&link).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
