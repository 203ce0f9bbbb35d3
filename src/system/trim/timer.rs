//! Whether `fstrim.timer` is enabled on a root tree (the new root, before
//! it ever boots), and the link that enables it: what `systemctl enable`
//! makes, without running systemctl against a tree it does not manage.
//!
//! Debian's util-linux ships the timer (weekly `fstrim --listed-in
//! /etc/fstab:/proc/self/mountinfo`), enabled on Raspberry Pi OS; it trims
//! only filesystems whose disk takes discard, so it does nothing for a USB
//! disk until TRIM reaches it.

use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// Where `systemctl enable` puts the timer's link, inside the root.
pub const WANTS_LINK: &str = "etc/systemd/system/timers.target.wants/fstrim.timer";
/// An administrator's own unit or mask, inside the root.
const OWN_UNIT: &str = "etc/systemd/system/fstrim.timer";
/// Where packages install the unit, in the order to look.
const UNIT_PATHS: [&str; 2] = [
    "/lib/systemd/system/fstrim.timer",
    "/usr/lib/systemd/system/fstrim.timer",
];

/// The timer on a root tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum FstrimTimer {
    Enabled,
    /// Installed, not enabled: [`FstrimTimer::enable_link`] enables it.
    Disabled {
        unit: PathBuf,
    },
    /// Masked (`/etc/systemd/system/fstrim.timer` points at /dev/null):
    /// someone turned it off on purpose, and pimigrate leaves it so.
    Masked,
    /// util-linux's unit is not in the tree.
    NotInstalled,
}

/// A symbolic link to make: `link` inside the root, pointing at `target`
/// as the booted system sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub link: PathBuf,
    pub target: PathBuf,
}

impl FstrimTimer {
    /// Reads the timer's state on the root tree at `root` (a real path,
    /// such as the new root mounted during a migration).
    pub fn of_root(root: &Path) -> FstrimTimer {
        let own = root.join(OWN_UNIT);
        if let Ok(target) = std::fs::read_link(&own) {
            if target == Path::new("/dev/null") {
                return FstrimTimer::Masked;
            }
        }
        if root.join(WANTS_LINK).symlink_metadata().is_ok() {
            return FstrimTimer::Enabled;
        }
        match UNIT_PATHS.iter().find(|p| resolves_in(root, Path::new(p))) {
            Some(unit) => FstrimTimer::Disabled {
                unit: PathBuf::from(unit),
            },
            None => FstrimTimer::NotInstalled,
        }
    }

    /// The link that enables a disabled timer.
    pub fn enable_link(&self) -> Option<Link> {
        match self {
            FstrimTimer::Disabled { unit } => Some(Link {
                link: PathBuf::from(WANTS_LINK),
                target: unit.clone(),
            }),
            _ => None,
        }
    }
}

/// Whether the absolute path `path`, as the system booted from `root` sees
/// it, names an existing file: symbolic links are followed inside the
/// tree (`/lib` → `usr/lib` on a merged-/usr system), never out of it.
pub fn resolves_in(root: &Path, path: &Path) -> bool {
    let mut pending: Vec<PathBuf> = vec![path.to_path_buf()];
    let mut at = PathBuf::new();
    let mut hops = 0;
    while let Some(next) = pending.pop() {
        let mut parts: Vec<Component> = next.components().collect();
        parts.reverse();
        if next.is_absolute() {
            at = PathBuf::new();
        }
        while let Some(part) = parts.pop() {
            match part {
                Component::Normal(name) => at.push(name),
                Component::ParentDir => {
                    at.pop();
                }
                _ => continue,
            }
            let real = root.join(&at);
            match std::fs::read_link(&real) {
                Ok(target) => {
                    hops += 1;
                    if hops > 32 {
                        return false;
                    }
                    at.pop();
                    let rest: PathBuf = parts.iter().rev().collect();
                    pending.push(target.join(rest));
                    break;
                }
                Err(_) if real.symlink_metadata().is_err() => return false,
                Err(_) => {}
            }
        }
    }
    root.join(&at).is_file()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A merged-/usr root as Debian bookworm lays it out: `/lib` is a link
    /// to `usr/lib`, the unit lives in usr/lib.
    fn bookworm_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let units = root.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join("fstrim.timer"), "[Timer]\nOnCalendar=weekly\n").unwrap();
        symlink("usr/lib", root.path().join("lib")).unwrap();
        std::fs::create_dir_all(root.path().join("etc/systemd/system")).unwrap();
        root
    }

    #[test]
    fn a_disabled_timer_is_enabled_by_a_link_to_where_the_unit_is() {
        let root = bookworm_root();
        let state = FstrimTimer::of_root(root.path());
        assert_eq!(
            state,
            FstrimTimer::Disabled {
                unit: PathBuf::from("/lib/systemd/system/fstrim.timer")
            }
        );
        let link = state.enable_link().unwrap();
        assert_eq!(link.link, PathBuf::from(WANTS_LINK));
        // Made as systemctl would make it, the timer reads as enabled.
        let wants = root.path().join(&link.link);
        std::fs::create_dir_all(wants.parent().unwrap()).unwrap();
        symlink(&link.target, &wants).unwrap();
        assert_eq!(FstrimTimer::of_root(root.path()), FstrimTimer::Enabled);
        assert_eq!(FstrimTimer::Enabled.enable_link(), None);
    }

    #[test]
    fn without_a_lib_link_the_unit_is_found_under_usr() {
        let root = tempfile::tempdir().unwrap();
        let units = root.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join("fstrim.timer"), "").unwrap();
        assert_eq!(
            FstrimTimer::of_root(root.path()),
            FstrimTimer::Disabled {
                unit: PathBuf::from("/usr/lib/systemd/system/fstrim.timer")
            }
        );
    }

    #[test]
    fn masked_and_missing_timers_are_left_alone() {
        let root = bookworm_root();
        symlink("/dev/null", root.path().join(OWN_UNIT)).unwrap();
        assert_eq!(FstrimTimer::of_root(root.path()), FstrimTimer::Masked);
        assert_eq!(FstrimTimer::Masked.enable_link(), None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            FstrimTimer::of_root(empty.path()),
            FstrimTimer::NotInstalled
        );
    }

    #[test]
    fn links_never_lead_out_of_the_tree() {
        // An absolute link is read inside the root: /lib -> /usr/lib.
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("usr/lib/systemd/system")).unwrap();
        std::fs::write(root.path().join("usr/lib/systemd/system/fstrim.timer"), "").unwrap();
        symlink("/usr/lib", root.path().join("lib")).unwrap();
        assert!(resolves_in(
            root.path(),
            Path::new("/lib/systemd/system/fstrim.timer")
        ));
        // A link up past the root stays at the root.
        symlink("../../../../../../etc", root.path().join("up")).unwrap();
        assert!(!resolves_in(root.path(), Path::new("/up/hostname")));
        // A loop ends.
        symlink("loop", root.path().join("loop")).unwrap();
        assert!(!resolves_in(root.path(), Path::new("/loop/x")));
    }

    #[test]
    fn the_migrated_fixtures_timer_is_enabled() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4-migrated");
        assert_eq!(FstrimTimer::of_root(&root), FstrimTimer::Enabled);
    }
}
