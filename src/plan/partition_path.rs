//! A file's name inside one partition's filesystem, from its root: the
//! boot partition's `/cmdline.txt` and `/tryboot.txt`, the new root's
//! `/etc/fstab`. It is never a path on this machine: the plan's edits, the
//! trial boot and the journal hold these, and only [`PartitionPath::under`]
//! (called by the boot partition's guarded writer, and by the executor for
//! the target it mounted itself) turns one into a path to open.
//!
//! Paths as the inspected system sees them (`/boot/firmware/cmdline.txt`)
//! stay `PathBuf`s: the two kinds can no longer be mixed up.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// A relative path of plain names (`cmdline.txt`, `overlays/a.dtbo`),
/// never empty; shown and stored with a leading slash (`/cmdline.txt`), as
/// plans and journals always wrote it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionPath(PathBuf);

/// Why a name is not a path inside a partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionPathError {
    #[error("{0} names no file (the partition's root itself)")]
    Empty(String),
    #[error("{0} leaves the partition (`..`)")]
    Escapes(String),
}

impl PartitionPath {
    /// `/cmdline.txt`, `cmdline.txt` or `./cmdline.txt`: the same file.
    pub fn new(name: impl AsRef<Path>) -> Result<PartitionPath, PartitionPathError> {
        let name = name.as_ref();
        let mut relative = PathBuf::new();
        for component in name.components() {
            match component {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(part) => relative.push(part),
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(PartitionPathError::Escapes(name.display().to_string()))
                }
            }
        }
        if relative.as_os_str().is_empty() {
            return Err(PartitionPathError::Empty(name.display().to_string()));
        }
        Ok(PartitionPath(relative))
    }

    /// The name of a file the product itself names (`tryboot.txt`): a
    /// constant, so a bad one is a bug caught by every test that plans.
    pub fn known(name: &str) -> PartitionPath {
        PartitionPath::new(name).unwrap_or_else(|e| panic!("a built-in file name: {e}"))
    }

    /// Where the file is with the partition's root at `dir`: the one
    /// conversion to a path to open or to show.
    pub fn under(&self, dir: &Path) -> PathBuf {
        dir.join(&self.0)
    }

    /// The file's last name (`cmdline.txt`).
    pub fn file_name(&self) -> &std::ffi::OsStr {
        self.0.file_name().unwrap_or_default()
    }

    /// The same directory, with the last name `name` (`cmdline.txt.bak`).
    pub fn with_file_name(&self, name: impl AsRef<std::ffi::OsStr>) -> PartitionPath {
        PartitionPath(self.0.with_file_name(name))
    }

    /// As plans show it: `/cmdline.txt`.
    pub fn display(&self) -> impl fmt::Display + '_ {
        self
    }
}

impl fmt::Display for PartitionPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", self.0.display())
    }
}

impl Serialize for PartitionPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PartitionPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        PartitionPath::new(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_inside_the_partition_in_any_spelling_is_one_path() {
        let plain = PartitionPath::new("cmdline.txt").unwrap();
        assert_eq!(PartitionPath::new("/cmdline.txt").unwrap(), plain);
        assert_eq!(PartitionPath::new("./cmdline.txt").unwrap(), plain);
        assert_eq!(plain.to_string(), "/cmdline.txt");
        assert_eq!(
            plain.under(Path::new("/boot/firmware")),
            Path::new("/boot/firmware/cmdline.txt")
        );
        let nested = PartitionPath::new("/overlays/a.dtbo").unwrap();
        assert_eq!(
            nested.with_file_name("a.dtbo.pimigrate-backup").to_string(),
            "/overlays/a.dtbo.pimigrate-backup"
        );
    }

    #[test]
    fn a_name_that_leaves_the_partition_or_names_none_is_refused() {
        assert!(matches!(
            PartitionPath::new("/../etc/passwd"),
            Err(PartitionPathError::Escapes(_))
        ));
        assert!(matches!(
            PartitionPath::new("a/../../b"),
            Err(PartitionPathError::Escapes(_))
        ));
        assert!(matches!(
            PartitionPath::new("/"),
            Err(PartitionPathError::Empty(_))
        ));
        assert!(matches!(
            PartitionPath::new(""),
            Err(PartitionPathError::Empty(_))
        ));
    }

    #[test]
    fn it_is_stored_as_plans_always_wrote_it_and_refused_when_it_escapes() {
        let path = PartitionPath::new("tryboot.txt").unwrap();
        assert_eq!(serde_json::to_string(&path).unwrap(), r#""/tryboot.txt""#);
        let read: PartitionPath = serde_json::from_str(r#""/tryboot.txt""#).unwrap();
        assert_eq!(read, path);
        let escaping = serde_json::from_str::<PartitionPath>(r#""/../x""#).unwrap_err();
        assert!(
            escaping.to_string().contains("leaves the partition"),
            "{escaping}"
        );
        let map: std::collections::BTreeMap<PartitionPath, PartitionPath> =
            serde_json::from_str(r#"{"/cmdline.txt": "/cmdline.txt.pimigrate-backup"}"#).unwrap();
        assert_eq!(
            map[&PartitionPath::known("cmdline.txt")].to_string(),
            "/cmdline.txt.pimigrate-backup"
        );
    }
}
