//! What the copy of the root leaves out: the defaults (kernel filesystems,
//! caches, the state of a running system), an active swap file, boot files
//! in a plain directory of the root, and the user's `--exclude`s.

use crate::system::usage::{self, Exclusion};
use crate::system::System;
use std::path::{Path, PathBuf};

/// The copy's exclusions, the user's `excludes` (`--exclude`) last.
pub fn exclusions(system: &System, excludes: &[PathBuf]) -> Vec<Exclusion> {
    let mut list = usage::default_exclusions();
    let root = &system.host.source_root;
    for swap in system.swaps.iter().filter(|s| s.kind == "file") {
        if let Ok(relative) = swap.path.strip_prefix(root) {
            let path = Path::new("/").join(relative);
            if !list.iter().any(|e| e.path == path) {
                list.push(Exclusion::new(
                    &path.to_string_lossy(),
                    false,
                    "active swap file",
                ));
            }
        }
    }
    // Boot files sitting in a plain directory of the root filesystem (an
    // image whose boot partition is not mounted) are not part of root.
    if let Some(boot_dir) = &system.source.boot_dir {
        if !system.source.boot_is_mounted {
            if let Ok(relative) = boot_dir.strip_prefix(root) {
                let path = Path::new("/").join(relative);
                list.push(Exclusion::new(
                    &path.to_string_lossy(),
                    true,
                    "boot files (copied to the boot partition, if at all)",
                ));
            }
        }
    }
    for exclude in excludes {
        let path = Path::new("/").join(exclude.strip_prefix("/").unwrap_or(exclude));
        list.push(Exclusion::new(&path.to_string_lossy(), false, "--exclude"));
    }
    list
}
