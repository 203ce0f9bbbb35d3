//! One value that says where everything the tool reads lives.
//!
//! On a running Pi every path is the ordinary one (`/sys`, `/proc`, `/dev`,
//! `/`). Tests point `root` at a fixture tree, and a workstation points
//! `source_root`/`boot_dir` at a mounted image. Paths inside the tool are
//! "view" paths (as the system being inspected sees them, e.g.
//! `/proc/self/mountinfo`); [`Host::path`] turns them into paths to open.

use std::path::{Component, Path, PathBuf};

/// Default place for reports, journals and backups of the tool itself.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/pimigrate";

/// Default place for the full log of each migration.
pub const DEFAULT_LOG_DIR: &str = "/var/log/pimigrate";

#[derive(Debug, Clone)]
pub struct Host {
    /// Where the inspected system's `/` is, for sysfs, procfs, /dev and /run.
    /// `/` on a live system; a fixture tree in tests.
    pub root: PathBuf,
    /// The root filesystem to be copied, as a view path.
    pub source_root: PathBuf,
    /// The directory holding config.txt and cmdline.txt, as a view path;
    /// `None` means "find it from the mount table".
    pub boot_dir: Option<PathBuf>,
    /// The tool's own state (reports, journal), as a view path.
    pub state_dir: PathBuf,
    /// Where each migration writes its full log, as a view path.
    pub log_dir: PathBuf,
}

impl Host {
    /// The running system.
    pub fn live() -> Host {
        Host::with_root("/")
    }

    /// A system whose `/` is `root` (a fixture tree, or `/`).
    pub fn with_root(root: impl Into<PathBuf>) -> Host {
        Host {
            root: root.into(),
            source_root: PathBuf::from("/"),
            boot_dir: None,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            log_dir: PathBuf::from(DEFAULT_LOG_DIR),
        }
    }

    /// True when this describes the machine we run on, so device nodes are
    /// real and can be opened, stat'ed and probed.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The path to open for a view path such as `/sys/block`.
    pub fn path(&self, view: impl AsRef<Path>) -> PathBuf {
        let view = view.as_ref();
        if self.is_live() {
            return view.to_path_buf();
        }
        let mut out = self.root.clone();
        for component in view.components() {
            match component {
                Component::Normal(part) => out.push(part),
                Component::ParentDir => {
                    // Never climb out of the fixture tree.
                    if out != self.root {
                        out.pop();
                    }
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        out
    }

    pub fn sys(&self, rest: &str) -> PathBuf {
        self.path(Path::new("/sys").join(rest))
    }

    pub fn proc(&self, rest: &str) -> PathBuf {
        self.path(Path::new("/proc").join(rest))
    }

    /// The device tree as the firmware handed it to the kernel.
    pub fn device_tree(&self, rest: &str) -> PathBuf {
        self.proc("device-tree").join(rest)
    }

    /// Reads a small text attribute (sysfs, procfs), trimmed; `None` when
    /// missing or unreadable, which sysfs uses to mean "not applicable".
    pub fn read_attr(&self, path: &Path) -> Option<String> {
        let raw = std::fs::read(path).ok()?;
        let text = String::from_utf8_lossy(&raw);
        let trimmed = text.trim_matches(|c: char| c.is_whitespace() || c == '\0');
        if trimmed.is_empty() {
            None
        } else {
            Some(trimmed.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_paths_are_unchanged() {
        let host = Host::live();
        assert_eq!(host.path("/sys/block"), PathBuf::from("/sys/block"));
    }

    #[test]
    fn fixture_paths_stay_inside_the_tree() {
        let host = Host::with_root("/fx");
        assert_eq!(
            host.path("/sys/block/sda"),
            PathBuf::from("/fx/sys/block/sda")
        );
        assert_eq!(host.path("/../../etc"), PathBuf::from("/fx/etc"));
        assert_eq!(
            host.sys("class/block"),
            PathBuf::from("/fx/sys/class/block")
        );
    }
}
