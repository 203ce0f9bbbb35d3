//! Listing directories for the copy and deciding which entries it skips.
//!
//! The walk is iterative (an explicit stack of listed directories), so deep
//! nesting costs memory, not call stack. Each directory is listed whole and
//! sorted by inode number before anything in it is copied: inode order is
//! close to on-disk order on ext4, which keeps an SD card reading in long
//! runs, and a listing held in memory is not disturbed by the entries the
//! copy itself creates (the source may be the same filesystem in tests).

use crate::system::usage::Exclusion;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirEntryExt;
use std::path::{Path, PathBuf};

/// One name in a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub name: OsString,
    pub ino: u64,
}

/// The names in `dir`, in inode order.
pub fn list(dir: &Path) -> io::Result<Vec<Name>> {
    super::faults::check(dir, super::faults::Op::List)?;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        names.push(Name {
            name: entry.file_name(),
            ino: entry.ino(),
        });
    }
    names.sort_unstable_by_key(|n| n.ino);
    Ok(names)
}

/// The entry's own metadata (a symlink's, not its target's).
pub fn stat(path: &Path) -> io::Result<std::fs::Metadata> {
    super::faults::check(path, super::faults::Op::Stat)?;
    std::fs::symlink_metadata(path)
}

/// Does a rule leave out `relative` (a path below the source root; the root
/// itself, the empty path, is never left out)? What [`Rules`] computes
/// without joining paths, kept as its reference.
#[cfg(test)]
pub fn is_excluded(exclusions: &[Exclusion], relative: &Path) -> bool {
    !relative.as_os_str().is_empty() && exclusions.iter().any(|rule| rule.excludes(relative))
}

/// The exclusions as the walk checks them, once per entry: each rule as the
/// bytes of its normalised path below the root, compared with an entry's
/// path without building it ([`Exclusion::excludes`] compares component
/// by component, and a path must be joined first).
pub struct Rules {
    rules: Vec<(Vec<u8>, bool)>,
}

impl Rules {
    pub fn new(exclusions: &[Exclusion]) -> Rules {
        let rules = exclusions
            .iter()
            .map(|rule| {
                let path: PathBuf = rule
                    .path
                    .components()
                    .filter(|c| {
                        !matches!(
                            c,
                            std::path::Component::RootDir | std::path::Component::CurDir
                        )
                    })
                    .collect();
                (path.into_os_string().into_vec(), rule.contents_only)
            })
            .collect();
        Rules { rules }
    }

    /// Does the entry `name` of `parent` hold a path a rule leaves out
    /// (`var/lib/pimigrate` for `/var/lib/pimigrate/standby.json`)? Such a
    /// directory on the target is the target's own as much as what it
    /// holds: a copy never removes it, though the source has none.
    pub fn holds_excluded(&self, parent: &Path, name: &OsStr) -> bool {
        let mut child = parent.as_os_str().as_bytes().to_vec();
        if !child.is_empty() {
            child.push(b'/');
        }
        child.extend_from_slice(name.as_bytes());
        self.rules.iter().any(|(rule, _)| {
            rule.len() > child.len() && rule.starts_with(&child) && rule[child.len()] == b'/'
        })
    }

    /// Does a rule leave out the entry `name` of the directory `parent`
    /// (relative to the root, "" for the root)? Agrees with
    /// [`is_excluded`] on the joined path.
    pub fn excludes_child(&self, parent: &Path, name: &OsStr) -> bool {
        let parent = parent.as_os_str().as_bytes();
        let name = name.as_bytes();
        let separator: &[u8] = if parent.is_empty() { b"" } else { b"/" };
        let len = parent.len() + separator.len() + name.len();
        let byte = |i: usize| -> u8 {
            if i < parent.len() {
                parent[i]
            } else if i < parent.len() + separator.len() {
                b'/'
            } else {
                name[i - parent.len() - separator.len()]
            }
        };
        self.rules.iter().any(|(rule, contents_only)| {
            if rule.len() > len || !rule.iter().enumerate().all(|(i, &b)| byte(i) == b) {
                return false;
            }
            if rule.len() == len {
                !contents_only
            } else {
                rule.is_empty() || byte(rule.len()) == b'/'
            }
        })
    }
}

/// A directory being copied: where it is on both sides, and the names in it
/// not copied yet, each with its metadata (or the error of its stat).
pub struct Frame {
    pub source: PathBuf,
    pub target: PathBuf,
    /// Below the source root, for exclusions and messages.
    pub relative: PathBuf,
    pub names: std::vec::IntoIter<(Name, io::Result<std::fs::Metadata>)>,
    /// The index of the next name in the listing.
    pub next: u32,
    /// Its place in the walk (see `lookahead`).
    pub key: Vec<u32>,
    /// The source directory's metadata, applied when it is left.
    pub meta: std::fs::Metadata,
    /// Whether the target directory is known to be this directory's copy
    /// as the last complete copy left it, so that an entry of it whose
    /// inode is quiet (unchanged, not even renamed or moved: either moves
    /// its ctime) has its copy under the same name. True for the root;
    /// below, for a directory that is quiet itself, or whose parent is
    /// quiet (no name in the parent was added, removed or renamed, so the
    /// directory is the one that was there), when its parent is settled.
    /// A directory moved (its ctime moves) within or into a directory whose
    /// names changed is not settled, nor is anything below it.
    pub settled: bool,
    /// A worker may rename a new copy into the target directory after the
    /// walker left it: its times are set again at the end.
    pub renames: bool,
    /// An entry in it was compared with its target, and may have been
    /// written: the target directory's attributes are checked when it is
    /// left.
    pub compared: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn contents_only_keeps_the_directory_and_drops_what_is_in_it() {
        let rules = vec![
            Exclusion::new("/tmp", true, ""),
            Exclusion::new("/var/swap", false, ""),
        ];
        assert!(!is_excluded(&rules, Path::new("tmp")));
        assert!(is_excluded(&rules, Path::new("tmp/.X11-unix")));
        assert!(is_excluded(&rules, Path::new("var/swap")));
        assert!(!is_excluded(&rules, Path::new("var/swapfile.d")));
        assert!(!is_excluded(&rules, Path::new("")));
    }

    /// The compiled rules agree with [`Exclusion::excludes`] on every
    /// path of a small tree of look-alike names.
    #[test]
    fn compiled_rules_agree_with_the_exclusions() {
        let exclusions = vec![
            Exclusion::new("/tmp", true, ""),
            Exclusion::new("/var/swap", false, ""),
            Exclusion::new("/srv/cache/", false, ""),
            Exclusion::new("/a/./b", true, ""),
        ];
        let rules = Rules::new(&exclusions);
        let parents = [
            "",
            "tmp",
            "var",
            "var/swap",
            "srv",
            "srv/cache",
            "a",
            "a/b",
            "tm",
        ];
        let names = [
            "tmp", "swap", "swapfile", "cache", "cache2", "b", "x", "var", "p",
        ];
        for parent in parents {
            for name in names {
                let joined = Path::new(parent).join(name);
                assert_eq!(
                    rules.excludes_child(Path::new(parent), OsStr::new(name)),
                    is_excluded(&exclusions, &joined),
                    "{}",
                    joined.display()
                );
            }
        }
        let odd = OsStr::from_bytes(b"swap\xff");
        assert!(rules.holds_excluded(Path::new(""), OsStr::new("var")));
        assert!(!rules.holds_excluded(Path::new("srv"), OsStr::new("cache")));
        assert!(!rules.holds_excluded(Path::new("a"), OsStr::new("b")));
        assert!(rules.holds_excluded(Path::new(""), OsStr::new("a")));
        assert!(!rules.holds_excluded(Path::new(""), OsStr::new("va")));
        assert!(!rules.holds_excluded(Path::new("var"), OsStr::new("swap")));
        assert!(!rules.excludes_child(Path::new("var"), odd));
    }

    #[test]
    fn rules_match_whole_components_of_non_utf8_names() {
        let rules = vec![Exclusion::new("/srv/cache", false, "")];
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"srv/cache\xff"));
        assert!(!is_excluded(&rules, odd));
        let below = Path::new(std::ffi::OsStr::from_bytes(b"srv/cache/\xfe\xff"));
        assert!(is_excluded(&rules, below));
    }

    #[test]
    fn listing_is_in_inode_order_and_keeps_raw_names() {
        let dir = tempfile::tempdir().unwrap();
        let odd = std::ffi::OsStr::from_bytes(b"caf\xe9");
        std::fs::write(dir.path().join(odd), "").unwrap();
        std::fs::write(dir.path().join("b"), "").unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let names = list(dir.path()).unwrap();
        assert_eq!(names.len(), 3);
        assert!(names.windows(2).all(|w| w[0].ino <= w[1].ino));
        assert!(names.iter().any(|n| n.name == odd));
    }
}
