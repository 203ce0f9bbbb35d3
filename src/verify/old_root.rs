//! Places that still name the SD card's old root partition after the move.
//! Each would mount, unlock, resume from or boot the stale copy instead of
//! the new root. Advice, not failures: the `/` line of fstab and the
//! running kernel's `root=` are checks of their own.

use super::checks::cmdline_named_by;
use super::expected::Expected;
use super::Warning;
use crate::bootcfg::{Cmdline, DeviceSpec};
use crate::system::disks::Disk;
use crate::system::source::resolve;
use crate::system::System;
use std::path::Path;

const CODE: &str = "old-root-referenced";

pub fn references(system: &System, expected: &Expected) -> Vec<Warning> {
    let old = OldRoot::of(system, expected);
    let etc = |rest: &str| system.source.root_dir.join("etc").join(rest);
    let mut out = fstab(system, &old);
    out.extend(boot_files(system, expected, &old));
    out.extend(crypttab(system, &etc("crypttab"), &old));
    out.extend(systemd_units(system, &etc("systemd/system"), &old));
    out.extend(resume(system, &etc("initramfs-tools/conf.d/resume"), &old));
    out
}

/// Every name of the old root partition: its spec from the plan, and
/// whatever else resolves to it alone while the SD card is attached (its
/// UUID, LABEL, `/dev` path).
struct OldRoot<'a> {
    spec: &'a DeviceSpec,
    devices: Vec<String>,
    disks: &'a [Disk],
}

impl<'a> OldRoot<'a> {
    fn of(system: &'a System, expected: &'a Expected) -> OldRoot<'a> {
        OldRoot {
            spec: &expected.old_root_spec,
            devices: resolve(&expected.old_root_spec, &system.disks),
            disks: &system.disks,
        }
    }

    fn is(&self, spec: &DeviceSpec) -> bool {
        spec == self.spec || {
            let matches = resolve(spec, self.disks);
            !matches.is_empty() && matches.iter().all(|m| self.devices.contains(m))
        }
    }

    /// `text` as a file writes a device names the old root.
    fn named_by(&self, text: &str) -> bool {
        spec_of(text).is_some_and(|spec| self.is(&spec))
    }
}

/// A device as a config file names it. udev's `/dev/disk/by-*` links (what
/// systemd units and hand-written lines use) count as the id they stand for.
fn spec_of(text: &str) -> Option<DeviceSpec> {
    let text = text.trim().trim_matches('"');
    type MakeSpec = fn(String) -> DeviceSpec;
    let links: [(&str, MakeSpec); 4] = [
        ("/dev/disk/by-partuuid/", DeviceSpec::PartUuid),
        ("/dev/disk/by-partlabel/", DeviceSpec::PartLabel),
        ("/dev/disk/by-uuid/", DeviceSpec::Uuid),
        ("/dev/disk/by-label/", DeviceSpec::Label),
    ];
    for (prefix, make) in links {
        if let Some(id) = text.strip_prefix(prefix).filter(|id| !id.is_empty()) {
            return Some(make(id.to_string()));
        }
    }
    DeviceSpec::parse(text).ok()
}

/// The lines of a text file (1-based numbers) whose value, as `value_of`
/// finds it, names the old root. Comments and blank lines are skipped; a
/// missing or unreadable file names nothing.
fn lines_naming(
    system: &System,
    view: &Path,
    old: &OldRoot,
    value_of: impl Fn(&str) -> Option<&str>,
) -> Vec<(usize, String)> {
    let Ok(text) = std::fs::read_to_string(system.host.path(view)) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with('#'))
        .filter_map(|(index, line)| {
            let value = value_of(line)?.trim();
            old.named_by(value).then(|| (index + 1, value.to_string()))
        })
        .collect()
}

/// The value of a `KEY=value` line (`key` with its `=`).
fn setting<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.trim_start().strip_prefix(key)
}

/// fstab lines other than `/` (the `/` line is a failed check).
fn fstab(system: &System, old: &OldRoot) -> Vec<Warning> {
    let Some(fstab) = system.source.fstab.as_ref().ok().and_then(|f| f.ok()) else {
        return Vec::new();
    };
    fstab
        .entries()
        .iter()
        .filter(|e| e.mountpoint != "/" && old.named_by(&e.spec))
        .map(|entry| {
            Warning::new(
                CODE,
                format!(
                    "/etc/fstab line {} mounts the SD card's old root partition ({}) at {}",
                    entry.line, entry.spec, entry.mountpoint
                ),
            )
            .fix(
                "remove the line unless you mean to keep the old root mounted (it is a stale copy)",
            )
        })
        .collect()
}

/// The command lines the firmware reads at the next boot. During a trial
/// that is the trial's file (cmdline.txt naming the SD card is the fallback,
/// by design); otherwise the file config.txt's `cmdline=` names, and the one
/// the migration edited, should they differ.
fn boot_files(system: &System, expected: &Expected, old: &OldRoot) -> Vec<Warning> {
    let trial = expected.trial.as_ref().filter(|_| expected.trial_pending());
    let edited = trial.map_or(&expected.cmdline_file, |t| &t.cmdline_file);
    let mut files = vec![
        expected.on_boot(edited),
        cmdline_named_by(system, expected, trial.is_some()),
    ];
    files.dedup();
    files
        .into_iter()
        .filter_map(|file| cmdline_naming(system, expected, &file, old))
        .collect()
}

fn cmdline_naming(
    system: &System,
    expected: &Expected,
    file: &Path,
    old: &OldRoot,
) -> Option<Warning> {
    let bytes = std::fs::read(system.host.path(file)).ok()?;
    let root = Cmdline::parse(&bytes).and_then(|c| c.root()).ok()?;
    old.is(&root).then(|| {
        // The firmware reads the first line only.
        Warning::new(
            CODE,
            format!(
                "{} line 1 boots the SD card's old root (root={root})",
                file.display()
            ),
        )
        .fix(format!(
            "set root={} in {}",
            expected.root_spec(),
            file.display()
        ))
    })
}

/// `/etc/crypttab`: name, device, key file, options.
fn crypttab(system: &System, view: &Path, old: &OldRoot) -> Vec<Warning> {
    lines_naming(system, view, old, |line| line.split_whitespace().nth(1))
        .into_iter()
        .map(|(line, device)| {
            Warning::new(
                CODE,
                format!(
                    "{} line {line} unlocks the SD card's old root partition ({device})",
                    view.display()
                ),
            )
            .fix(format!(
                "point line {line} at the device you mean to unlock, or remove it; then sudo update-initramfs -u"
            ))
        })
        .collect()
}

/// Mount and swap units an administrator wrote (`What=`); the ones systemd
/// generates from fstab live in /run and are covered by the fstab lines.
fn systemd_units(system: &System, dir: &Path, old: &OldRoot) -> Vec<Warning> {
    let Ok(entries) = std::fs::read_dir(system.host.path(dir)) else {
        return Vec::new();
    };
    let mut units: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".mount") || name.ends_with(".swap"))
        .collect();
    units.sort();
    let mut out = Vec::new();
    for unit in units {
        let view = dir.join(&unit);
        for (line, device) in lines_naming(system, &view, old, |l| setting(l, "What=")) {
            out.push(
                Warning::new(
                    CODE,
                    format!(
                        "{} line {line}: What={device} is the SD card's old root partition",
                        view.display()
                    ),
                )
                .fix(format!(
                    "point What= at the device you mean, or remove the unit: sudo systemctl disable --now {unit} && sudo rm {}",
                    view.display()
                ))
                .fix("sudo systemctl daemon-reload"),
            );
        }
    }
    out
}

/// initramfs-tools' hibernation resume device: a filesystem is never a
/// valid one, and resuming from the old root's id would wait for it.
fn resume(system: &System, view: &Path, old: &OldRoot) -> Vec<Warning> {
    lines_naming(system, view, old, |l| setting(l, "RESUME="))
        .into_iter()
        .map(|(line, device)| {
            Warning::new(
                CODE,
                format!(
                    "{} line {line}: RESUME={device} is the SD card's old root partition",
                    view.display()
                ),
            )
            .fix(format!(
                "set RESUME=none (or your swap partition) in {}, then sudo update-initramfs -u",
                view.display()
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;
    use crate::plan::{Layout, TrialBoot};
    use std::path::PathBuf;

    /// The "pi4-migrated" fixture machine (root-only move to sda1, the SD
    /// card's root mmcblk0p2 still attached), copied so a test can add the
    /// file it is about.
    struct Pi {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    impl Pi {
        fn new() -> Pi {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("pi");
            let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi4-migrated");
            let status = std::process::Command::new("cp")
                .arg("-a")
                .arg(fixture)
                .arg(&root)
                .status()
                .unwrap();
            assert!(status.success());
            Pi { _dir: dir, root }
        }

        fn write(&self, view: &str, text: &str) {
            let path = self.root.join(view.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        /// The warnings, during the trial or after the commit.
        fn warnings(&self, committed: bool) -> Vec<Warning> {
            let system = System::inspect(&Host::with_root(&self.root)).unwrap();
            references(&system, &expected(committed))
        }
    }

    /// What the fixture's journal says: the trial boot of a root-only move
    /// from PARTUUID=6c586e13-02 to PARTUUID=2f4a9c17-01.
    fn expected(committed: bool) -> Expected {
        Expected {
            layout: Layout::RootOnly,
            root_partuuid: "2f4a9c17-01".into(),
            boot_spec: Some(DeviceSpec::PartUuid("6c586e13-01".into())),
            old_root_spec: DeviceSpec::PartUuid("6c586e13-02".into()),
            new_ids: Vec::new(),
            trial: Some(TrialBoot {
                tryboot_file: "/tryboot.txt".into(),
                cmdline_file: "/cmdline.pimigrate.txt".into(),
                backup: None,
                diff: String::new(),
            }),
            committed: committed.then_some(1_700_000_000),
            boot_dir: "/boot/firmware".into(),
            cmdline_file: "/cmdline.txt".into(),
        }
    }

    const NEW_CMDLINE: &str = "console=tty1 root=PARTUUID=2f4a9c17-01 rootwait\n";

    fn messages(warnings: &[Warning]) -> Vec<&str> {
        warnings.iter().map(|w| w.message.as_str()).collect()
    }

    #[test]
    fn a_clean_trial_names_nothing_although_cmdline_txt_is_the_fallback() {
        // cmdline.txt boots the SD card's root: by design until the commit.
        let warnings = Pi::new().warnings(false);
        assert_eq!(warnings, Vec::new());
    }

    #[test]
    fn cmdline_txt_naming_the_old_root_after_the_commit() {
        let warnings = Pi::new().warnings(true);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert_eq!(
            warnings[0].message,
            "/boot/firmware/cmdline.txt line 1 boots the SD card's old root (root=PARTUUID=6c586e13-02)"
        );
        assert_eq!(
            warnings[0].fix,
            ["set root=PARTUUID=2f4a9c17-01 in /boot/firmware/cmdline.txt"]
        );
    }

    #[test]
    fn the_trial_cmdline_naming_the_old_root_by_its_dev_path() {
        let pi = Pi::new();
        pi.write(
            "/boot/firmware/cmdline.pimigrate.txt",
            "console=tty1 root=/dev/mmcblk0p2 rootwait\n",
        );
        let warnings = pi.warnings(false);
        assert_eq!(
            messages(&warnings),
            ["/boot/firmware/cmdline.pimigrate.txt line 1 boots the SD card's old root (root=/dev/mmcblk0p2)"]
        );
    }

    #[test]
    fn the_file_config_txt_names_with_cmdline_is_read_too() {
        let pi = Pi::new();
        pi.write("/boot/firmware/cmdline.txt", NEW_CMDLINE);
        let config = std::fs::read_to_string(pi.root.join("boot/firmware/config.txt")).unwrap();
        pi.write(
            "/boot/firmware/config.txt",
            &(config + "cmdline=custom.txt\n"),
        );
        pi.write(
            "/boot/firmware/custom.txt",
            "console=tty1 root=LABEL=rootfs rootwait\n",
        );
        let warnings = pi.warnings(true);
        assert_eq!(
            messages(&warnings),
            ["/boot/firmware/custom.txt line 1 boots the SD card's old root (root=LABEL=rootfs)"]
        );
    }

    #[test]
    fn fstab_by_uuid_links_count_as_the_uuid() {
        let pi = Pi::new();
        let fstab = std::fs::read_to_string(pi.root.join("etc/fstab")).unwrap();
        pi.write(
            "/etc/fstab",
            &(fstab
                + "/dev/disk/by-uuid/3b614a3f-4a65-4480-876a-8a998e01ac9b  /mnt/old  ext4  nofail  0  2\n"),
        );
        let warnings = pi.warnings(false);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        assert!(
            warnings[0].message.starts_with("/etc/fstab line 6 mounts")
                && warnings[0].message.ends_with("at /mnt/old"),
            "{}",
            warnings[0].message
        );
    }

    #[test]
    fn crypttab_lines_naming_the_old_root() {
        let pi = Pi::new();
        pi.write(
            "/etc/crypttab",
            "# UUID=3b614a3f-4a65-4480-876a-8a998e01ac9b in a comment\n\
             olddata  UUID=3b614a3f-4a65-4480-876a-8a998e01ac9b  none  luks\n\
             stick    /dev/sdb1  /dev/urandom  swap\n",
        );
        let warnings = pi.warnings(false);
        assert_eq!(
            messages(&warnings),
            ["/etc/crypttab line 2 unlocks the SD card's old root partition (UUID=3b614a3f-4a65-4480-876a-8a998e01ac9b)"]
        );
        assert!(warnings[0].fix[0].contains("update-initramfs -u"));
    }

    #[test]
    fn mount_and_swap_units_naming_the_old_root() {
        let pi = Pi::new();
        let dir = "/etc/systemd/system";
        pi.write(
            &format!("{dir}/mnt-old.mount"),
            "[Unit]\nDescription=old root\n\n[Mount]\nWhat=/dev/disk/by-partuuid/6c586e13-02\nWhere=/mnt/old\n",
        );
        pi.write(
            &format!("{dir}/dev-sdb1.swap"),
            "[Swap]\nWhat=/dev/disk/by-uuid/1234-ABCD\n",
        );
        // Not a mount or swap unit: What= means nothing there.
        pi.write(
            &format!("{dir}/backup.service"),
            "[Service]\nWhat=/dev/mmcblk0p2\n",
        );
        let warnings = pi.warnings(false);
        assert_eq!(
            messages(&warnings),
            ["/etc/systemd/system/mnt-old.mount line 5: What=/dev/disk/by-partuuid/6c586e13-02 is the SD card's old root partition"]
        );
        assert!(warnings[0].fix[0].contains("systemctl disable --now mnt-old.mount"));
    }

    #[test]
    fn an_initramfs_resume_device_naming_the_old_root() {
        let pi = Pi::new();
        let view = "/etc/initramfs-tools/conf.d/resume";
        pi.write(view, "RESUME=none\n");
        assert_eq!(pi.warnings(false), Vec::new());
        pi.write(view, "# hibernation\nRESUME=LABEL=rootfs\n");
        let warnings = pi.warnings(false);
        assert_eq!(
            messages(&warnings),
            ["/etc/initramfs-tools/conf.d/resume line 2: RESUME=LABEL=rootfs is the SD card's old root partition"]
        );
        assert!(warnings[0].fix[0].starts_with("set RESUME=none"));
    }

    #[test]
    fn by_links_read_as_their_id() {
        assert_eq!(
            spec_of("/dev/disk/by-partuuid/6c586e13-02"),
            Some(DeviceSpec::PartUuid("6c586e13-02".into()))
        );
        assert_eq!(
            spec_of("/dev/disk/by-label/rootfs"),
            Some(DeviceSpec::Label("rootfs".into()))
        );
        assert_eq!(
            spec_of("\"UUID=3b614a3f-4a65-4480-876a-8a998e01ac9b\""),
            Some(DeviceSpec::Uuid(
                "3b614a3f-4a65-4480-876a-8a998e01ac9b".into()
            ))
        );
        assert_eq!(spec_of("none"), None);
    }
}
