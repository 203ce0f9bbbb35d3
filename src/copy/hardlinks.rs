//! Which source inodes with several names were already copied, and where.
//!
//! Keyed by (st_dev, st_ino) of the source, so names in different
//! directories are recognised as one file. An entry is dropped once all of
//! its names were seen, which keeps the map small on a root filesystem
//! (most multi-link inodes have two or three names close together).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct HardlinkMap {
    inodes: HashMap<(u64, u64), Seen>,
}

#[derive(Debug)]
struct Seen {
    /// Where the first name was copied to: the next names link to it.
    target: PathBuf,
    /// Names not seen yet, from the source's link count.
    remaining: u64,
}

/// What to do with a name of a multi-link inode.
#[derive(Debug, PartialEq, Eq)]
pub enum LinkAction {
    /// The first name seen: copy the file to this name.
    CopyData,
    /// The inode was copied to this target path: link to it.
    LinkTo(PathBuf),
}

impl HardlinkMap {
    pub fn new() -> HardlinkMap {
        HardlinkMap::default()
    }

    /// Records the name `target` of the source inode (`dev`, `ino`) with
    /// `nlink` names, and says whether to copy it or link to an earlier copy.
    pub fn visit(&mut self, dev: u64, ino: u64, nlink: u64, target: &Path) -> LinkAction {
        let key = (dev, ino);
        match self.inodes.get_mut(&key) {
            Some(seen) => {
                let action = LinkAction::LinkTo(seen.target.clone());
                seen.remaining = seen.remaining.saturating_sub(1);
                if seen.remaining == 0 {
                    self.inodes.remove(&key);
                }
                action
            }
            None => {
                if nlink > 1 {
                    self.inodes.insert(
                        key,
                        Seen {
                            target: target.to_path_buf(),
                            remaining: nlink - 1,
                        },
                    );
                }
                LinkAction::CopyData
            }
        }
    }

    /// Forgets an inode whose first copy failed, so a later name copies the
    /// data instead of linking to a file that does not exist.
    pub fn forget(&mut self, dev: u64, ino: u64) {
        self.inodes.remove(&(dev, ino));
    }

    /// Inodes with names still to come (names outside the copied tree, or
    /// excluded ones, keep their inode here until the end).
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.inodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_name_links_to_the_first_across_directories() {
        let mut map = HardlinkMap::new();
        assert_eq!(
            map.visit(1, 42, 3, Path::new("/t/usr/bin/a")),
            LinkAction::CopyData
        );
        assert_eq!(
            map.visit(1, 42, 3, Path::new("/t/etc/b")),
            LinkAction::LinkTo(PathBuf::from("/t/usr/bin/a"))
        );
        assert_eq!(map.pending(), 1, "one name of three still to come");
        assert_eq!(
            map.visit(1, 42, 3, Path::new("/t/var/c")),
            LinkAction::LinkTo(PathBuf::from("/t/usr/bin/a"))
        );
        assert_eq!(map.pending(), 0, "all names seen: the inode is dropped");
    }

    #[test]
    fn same_inode_number_on_another_device_is_another_file() {
        let mut map = HardlinkMap::new();
        assert_eq!(map.visit(1, 7, 2, Path::new("a")), LinkAction::CopyData);
        assert_eq!(map.visit(2, 7, 2, Path::new("b")), LinkAction::CopyData);
    }

    #[test]
    fn single_link_files_are_not_remembered() {
        let mut map = HardlinkMap::new();
        assert_eq!(map.visit(1, 9, 1, Path::new("a")), LinkAction::CopyData);
        assert_eq!(map.pending(), 0);
    }

    #[test]
    fn forgotten_inode_is_copied_again() {
        let mut map = HardlinkMap::new();
        map.visit(1, 5, 2, Path::new("a"));
        map.forget(1, 5);
        assert_eq!(map.visit(1, 5, 2, Path::new("b")), LinkAction::CopyData);
    }
}
