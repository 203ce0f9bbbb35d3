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

    // Each place is tested on the fixture machine in tests/verify_fixture.rs.

    #[test]
    fn by_links_read_as_their_id() {
        let uuid = "3b614a3f-4a65-4480-876a-8a998e01ac9b";
        let cases = [
            (
                "/dev/disk/by-partuuid/6c586e13-02".to_string(),
                Some(DeviceSpec::PartUuid("6c586e13-02".into())),
            ),
            (
                "/dev/disk/by-label/rootfs".into(),
                Some(DeviceSpec::Label("rootfs".into())),
            ),
            (
                format!("\"UUID={uuid}\""),
                Some(DeviceSpec::Uuid(uuid.into())),
            ),
            (
                "/dev/mmcblk0p2".into(),
                Some(DeviceSpec::Path("/dev/mmcblk0p2".into())),
            ),
            // A link without an id is only a path.
            (
                "/dev/disk/by-uuid/".into(),
                Some(DeviceSpec::Path("/dev/disk/by-uuid/".into())),
            ),
            ("none".into(), None),
        ];
        for (text, spec) in cases {
            assert_eq!(spec_of(&text), spec, "{text}");
        }
    }
}
