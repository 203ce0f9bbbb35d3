//! The checks a sync ends with, made on the standby offline (mounted by the
//! sync, not running): what `verify` asks of a running system, asked of
//! the copy before anyone needs it. Each is a [`Check`] with a stable code.
//!
//! | code | passes when |
//! |---|---|
//! | `standby-fstab` | the standby's fstab names its own root partition for `/` (and its own boot partition, or the shared one, for the boot line), each exactly one attached device |
//! | `standby-root` | the command line that starts the standby has a `root=` naming its root partition, and only it |
//! | `ids-unique` | every id of the standby (PARTUUIDs, filesystem UUIDs, labels) names one attached device |
//! | `kernel` | the kernel its boot partition starts exists, the standby has the modules of that kernel's version, and the initramfs it names exists |
//! | `first-boot` | its command line has no first-boot or resize hook, and its root no pending `resize2fs_once` |

use super::standby::Standby;
use crate::bootcfg::firstboot::first_boot_hooks;
use crate::bootcfg::{Cmdline, DeviceSpec, Fstab};
use crate::check::Check;
use crate::system::kernel;
use crate::system::source::{id_uses, resolve, IdUse};
use crate::system::System;
use std::path::Path;

/// What the checks look at.
pub struct Standing<'a> {
    /// The machine as it is after the copy.
    pub system: &'a System,
    pub standby: &'a Standby,
    /// The standby's root filesystem, mounted.
    pub root: &'a Path,
    /// The boot partition that starts it: its own, or the shared one.
    pub boot: &'a Path,
    /// The command line that starts it.
    pub command_line: &'a [u8],
}

pub fn run(s: &Standing) -> Vec<Check> {
    vec![
        fstab(s),
        root_arg(s),
        ids_unique(s),
        kernel_check(s),
        first_boot(s),
    ]
}

/// The attached device names the standby's root (or boot) partition has.
fn names_of(s: &Standing, boot: bool) -> Vec<String> {
    let part = if boot {
        s.standby.boot.as_ref()
    } else {
        Some(&s.standby.root)
    };
    part.and_then(|p| p.partuuid.clone())
        .map(|id| resolve(&DeviceSpec::PartUuid(id), &s.system.disks))
        .unwrap_or_default()
}

/// `spec` names exactly the devices `wanted` (one).
fn names_exactly(s: &Standing, spec: &DeviceSpec, wanted: &[String]) -> Result<String, String> {
    let found = resolve(spec, &s.system.disks);
    match (found.as_slice(), wanted) {
        ([one], [want]) if one == want => Ok(one.clone()),
        ([], _) => Err(format!("{spec} names no attached device")),
        ([one], _) => Err(format!(
            "{spec} names {one}, not the standby's {}",
            wanted.join(", ")
        )),
        (many, _) => Err(format!(
            "{spec} names {} devices: {}; the kernel may mount either",
            many.len(),
            many.join(", ")
        )),
    }
}

fn fstab(s: &Standing) -> Check {
    const CODE: &str = "standby-fstab";
    let path = s.root.join("etc/fstab");
    let fstab = match std::fs::read(&path).map(|b| Fstab::parse(&b)) {
        Ok(Ok(fstab)) => fstab,
        Ok(Err(err)) => return Check::fail(CODE, format!("the standby's /etc/fstab: {err}")),
        Err(err) => return Check::fail(CODE, format!("reading the standby's /etc/fstab: {err}")),
    };
    let mut said = Vec::new();
    if let Ok(entry) = fstab.root() {
        let spec = match entry.device_spec() {
            Ok(spec) => spec,
            Err(err) => return Check::fail(CODE, format!("the standby's fstab / line: {err}")),
        };
        match names_exactly(s, &spec, &names_of(s, false)) {
            Ok(name) => said.push(format!("/ is {spec} ({name})")),
            Err(why) => return Check::fail(CODE, format!("the standby's fstab: / {why}")).hint(
                "sync again; if it stays, the standby's ids are not its own (`pimigrate devices`)",
            ),
        }
    }
    if let Some(entry) = fstab.boot() {
        if let Ok(spec) = entry.device_spec() {
            let wanted = match &s.standby.boot {
                Some(_) => names_of(s, true),
                // Root-only: the running system's boot partition, shared.
                None => s
                    .system
                    .source
                    .boot_devno
                    .and_then(|d| crate::system::disks::device_name(&s.system.disks, d))
                    .map(|n| vec![n])
                    .unwrap_or_else(|| resolve(&spec, &s.system.disks)),
            };
            match names_exactly(s, &spec, &wanted) {
                Ok(name) => said.push(format!("{} is {spec} ({name})", entry.mountpoint)),
                Err(why) => {
                    return Check::fail(
                        CODE,
                        format!("the standby's fstab: {} {why}", entry.mountpoint),
                    )
                }
            }
        }
    }
    if said.is_empty() {
        said.push("it has no / line: the kernel's root= names the root".into());
    }
    Check::pass(CODE, format!("the standby's fstab: {}", said.join(", ")))
}

fn root_arg(s: &Standing) -> Check {
    const CODE: &str = "standby-root";
    let spec = match Cmdline::parse(s.command_line).and_then(|c| c.root()) {
        Ok(spec) => spec,
        Err(err) => return Check::fail(CODE, format!("the standby's command line: {err}")),
    };
    match names_exactly(s, &spec, &names_of(s, false)) {
        Ok(name) => Check::pass(
            CODE,
            format!("its command line starts root={spec} ({name})"),
        )
        .devices(vec![name]),
        Err(why) => Check::fail(CODE, format!("its command line's root={why}")),
    }
}

fn ids_unique(s: &Standing) -> Check {
    const CODE: &str = "ids-unique";
    let uses = id_uses(s.standby.specs(), &s.system.disks);
    let shared: Vec<String> = uses
        .iter()
        .filter(|u| !u.is_unique())
        .map(IdUse::describe)
        .collect();
    if shared.is_empty() {
        Check::pass(
            CODE,
            format!(
                "each of the standby's {} ids names one attached device",
                uses.len()
            ),
        )
    } else {
        Check::fail(CODE, shared.join("; "))
            .hint("two disks with one id make the kernel or systemd pick either: detach the clone")
    }
}

fn kernel_check(s: &Standing) -> Check {
    const CODE: &str = "kernel";
    let pi = &s.system.pi;
    let images = kernel::boot_images(s.boot, pi.family, pi.config_filter);
    let Some(name) = images.kernel else {
        return Check::fail(CODE, "config.txt names no kernel, and none of the firmware's default names is on the boot partition".into());
    };
    let image = match std::fs::read(s.boot.join(&name)) {
        Ok(image) => image,
        Err(err) => return Check::fail(CODE, format!("the boot partition's kernel {name}: {err}")),
    };
    let mut said = vec![format!("the boot partition starts {name}")];
    match kernel::kernel_version(&image, s.root) {
        Some(version) => match kernel::modules_dir(s.root, &version) {
            Some(_) => said.push(format!("version {version}, whose modules the standby has")),
            None => {
                return Check::fail(
                    CODE,
                    format!("the boot partition starts {name}, version {version}, but the standby has no /lib/modules/{version}"),
                )
                .hint("the kernel and the root are out of step: sync again after the kernel update finished")
            }
        },
        None => said.push("its version could not be read (a compressed image)".into()),
    }
    if let Some(initramfs) = images.initramfs {
        if !s.boot.join(&initramfs).is_file() {
            return Check::fail(
                CODE,
                format!("config.txt loads the initramfs {initramfs}, which the boot partition does not have"),
            );
        }
        said.push(format!("with {initramfs}"));
    }
    Check::pass(CODE, said.join(", "))
}

fn first_boot(s: &Standing) -> Check {
    const CODE: &str = "first-boot";
    let hooks = Cmdline::parse(s.command_line)
        .map(|c| first_boot_hooks(&c))
        .unwrap_or_default();
    if let Some(hook) = hooks.first() {
        return Check::fail(
            CODE,
            format!(
                "the standby's command line has `{}` ({})",
                hook.arg, hook.what
            ),
        );
    }
    let pending = std::fs::read_dir(s.root.join("etc"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rc"))
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .find(|e| e.file_name().to_string_lossy().ends_with("resize2fs_once"));
    if let Some(link) = pending {
        return Check::fail(
            CODE,
            format!(
                "the standby's root would grow itself at boot: /{} is enabled",
                link.path()
                    .strip_prefix(s.root)
                    .unwrap_or(&link.path())
                    .display()
            ),
        );
    }
    Check::pass(CODE, "no first-boot or resize hook".into())
}
