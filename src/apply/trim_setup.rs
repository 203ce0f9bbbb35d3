//! The migration's TRIM step on the new root (`plan::after_move::trim`):
//! the udev rule for the target's USB bridge, and the link that enables
//! `fstrim.timer`, as `systemctl enable` makes it (systemctl cannot be
//! pointed at a root that is not running). Nothing else: the rule acts
//! only on that bridge's disks, and nothing here ever concerns the SD card.
//!
//! Run again on a resume until the journal records it: the rule is
//! replaced atomically, the link made only when it is not there.

use super::atomic;
use super::edit_files::keeping_times;
use crate::plan::after_move::TrimPlan;
use crate::system::trim::on_root;
use anyhow::{Context, Result};
use std::path::Path;

/// Writes what `plan` asks for onto the root mounted at `root`, flushed;
/// returns what it did, line by line (nothing when it asks for nothing).
pub fn install(plan: &TrimPlan, root: &Path) -> Result<Vec<String>> {
    let mut done = Vec::new();
    if let Some(rule) = &plan.rule {
        let path = on_root(root, &rule.path);
        let dir = path.parent().unwrap_or(root);
        keeping_times(dir, || {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            atomic::replace(&path, rule.text.as_bytes(), atomic::FILE)
        })
        .with_context(|| format!("writing the TRIM rule {}", path.display()))?;
        done.push(format!(
            "wrote the TRIM rule {} on the new root",
            rule.path.display()
        ));
    }
    if let Some(link) = &plan.timer_link {
        let path = on_root(root, &link.link);
        if path.symlink_metadata().is_err() {
            let dir = path.parent().unwrap_or(root);
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            std::os::unix::fs::symlink(&link.target, &path)
                .with_context(|| format!("linking {} to enable fstrim.timer", path.display()))?;
            atomic::sync_filesystem(dir)?;
        }
        done.push(format!(
            "enabled fstrim.timer on the new root ({} -> {})",
            link.link.display(),
            link.target.display()
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::after_move::trim::NewFile;
    use crate::system::trim::timer::{FstrimTimer, Link, WANTS_LINK};
    use std::path::PathBuf;

    fn plan(rule: bool, link: bool) -> TrimPlan {
        TrimPlan {
            rule: rule.then(|| NewFile {
                path: PathBuf::from("/etc/udev/rules.d/60-pimigrate-trim-46f4-0001.rules"),
                text: "# rule\n".into(),
                diff: String::new(),
            }),
            timer_link: link.then(|| Link {
                link: PathBuf::from(WANTS_LINK),
                target: PathBuf::from("/lib/systemd/system/fstrim.timer"),
            }),
            ..TrimPlan::default()
        }
    }

    #[test]
    fn the_rule_and_the_link_land_on_the_new_root_and_a_second_run_keeps_them() {
        let root = tempfile::tempdir().unwrap();
        let units = root.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join("fstrim.timer"), "[Timer]\n").unwrap();
        std::os::unix::fs::symlink("usr/lib", root.path().join("lib")).unwrap();
        for _ in 0..2 {
            let done = install(&plan(true, true), root.path()).unwrap();
            assert_eq!(done.len(), 2, "{done:?}");
        }
        let rule = root
            .path()
            .join("etc/udev/rules.d/60-pimigrate-trim-46f4-0001.rules");
        assert_eq!(std::fs::read_to_string(rule).unwrap(), "# rule\n");
        assert_eq!(
            std::fs::read_link(root.path().join(WANTS_LINK)).unwrap(),
            PathBuf::from("/lib/systemd/system/fstrim.timer")
        );
        assert_eq!(FstrimTimer::of_root(root.path()), FstrimTimer::Enabled);
    }

    #[test]
    fn a_plan_that_asks_for_nothing_writes_nothing() {
        let root = tempfile::tempdir().unwrap();
        assert!(install(&plan(false, false), root.path())
            .unwrap()
            .is_empty());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }
}
