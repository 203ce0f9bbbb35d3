//! Where kernel updates go, against where the firmware reads: the boot
//! directory is mounted, from the partition the firmware started this
//! boot from (`boot-mount`); nothing hides under its mount point, where
//! an update written while it was not mounted lands (`boot-shadowed`);
//! the running kernel has its modules (`kernel-modules`), which it lacks
//! once the kernel on the boot partition and the modules on the root
//! come from different updates (raspberrypi/linux#4616,
//! RPi-Distro/raspberrypi-sys-mods#111).

use super::Facts;
use crate::bootcfg::eeprom::mode_name;
use crate::check::Finding;
use crate::system::disks::{Disk, Partition};
use crate::system::mounts::DevNo;
use crate::system::pi::boot_mode;
use crate::system::shadowed::Hidden;
use crate::system::source::resolve;
use crate::system::System;

/// The step that puts a kernel update where the firmware reads it.
fn reinstall(dir: &str) -> String {
    format!(
        "with {dir} mounted (`findmnt {dir}` shows it), install the kernel package again so that its files reach the \
         boot partition: sudo apt install --reinstall NAME (`dpkg -l 'linux-image*' raspberrypi-kernel` names it), then reboot"
    )
}

/// The boot directory is mounted, from the partition the firmware read
/// this boot's files from: the device tree's `chosen/bootloader`
/// (`boot-mode`, `partition`) where the bootloader says it, else the boot
/// partition the move set up.
pub fn boot_mount(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "boot-mount";
    let (system, expected) = (facts.system, &facts.expected);
    let spec = expected.boot_spec.as_ref()?;
    let dir = expected.boot_dir.display().to_string();
    let Some(mount) = system.mounts.at(&expected.boot_dir) else {
        return Some(
            Finding::failure(
                CODE,
                format!(
                    "{dir} is not mounted: kernel and firmware updates go into the directory on the root filesystem, \
                     which the firmware never reads"
                ),
            )
            .fix(format!(
                "sudo mount {dir} (its line in /etc/fstab names the boot partition, {spec})"
            ))
            .fix(reinstall(&dir)),
        );
    };
    let Some((disk, part)) = partition_of(system, mount.devno) else {
        return Some(Finding::warning(
            CODE,
            format!(
                "{dir} is mounted from {}, which is no partition of a disk listed",
                mount.source
            ),
        ));
    };
    let device = part.node_name(&disk.path);
    let read_from = match (system.pi.boot_mode, facts.firmware_partition) {
        (Some(mode), Some(number)) => {
            let same =
                boot_mode(disk.transport).map(u32::from) == Some(mode) && part.number == number;
            let name = u8::try_from(mode).map(mode_name).unwrap_or("other");
            (
                same,
                format!("{name} partition {number}, where the firmware started this boot"),
            )
        }
        _ => {
            let named = resolve(spec, &system.disks);
            let said = match named.as_slice() {
                [] => "not attached".to_string(),
                many => many.join(", "),
            };
            (
                named == [device.clone()],
                format!("the boot partition the move set up, {spec} ({said})"),
            )
        }
    };
    Some(match read_from {
        (true, from) => Finding::ok(
            CODE,
            format!("{dir} is mounted from {device}, {from}: kernel updates reach it"),
        )
        .devices(vec![device]),
        (false, from) => Finding::failure(
            CODE,
            format!(
                "{dir} is mounted from {device}, not from {from}: kernel updates go to a partition the firmware \
                 does not read"
            ),
        )
        .devices(vec![device])
        .fix(format!(
            "name the boot partition the firmware reads in {dir}'s line in /etc/fstab ({spec} after the move), then \
             sudo umount {dir} && sudo mount {dir}"
        ))
        .fix(reinstall(&dir)),
    })
}

/// The disk and partition of `devno`.
fn partition_of(system: &System, devno: DevNo) -> Option<(&Disk, &Partition)> {
    system.disks.iter().find_map(|disk| {
        disk.partitions
            .iter()
            .find(|p| p.devno == Some(devno))
            .map(|p| (disk, p))
    })
}

/// Nothing hides under the boot directory's mount point.
pub fn hidden(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "boot-shadowed";
    let dir = facts.expected.boot_dir.display().to_string();
    Some(match &facts.hidden {
        Hidden::NotAMountPoint => return None,
        Hidden::Unreadable(why) => Finding::warning(
            CODE,
            format!("what {dir}'s mount point hides could not be looked at: {why}"),
        )
        .fix("check as root: sudo pimigrate status --check"),
        Hidden::Entries(names) if names.is_empty() => {
            Finding::ok(CODE, format!("nothing hides under {dir}'s mount point"))
        }
        Hidden::Entries(names) => {
            let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
            let more = match names.len().saturating_sub(shown.len()) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            let paths: Vec<String> = names
                .iter()
                .map(|n| shell_word(&format!("/mnt{dir}/{n}")))
                .collect();
            Finding::failure(
                CODE,
                format!(
                    "{} under {dir}'s mount point, on the root filesystem, where the firmware never reads: {}{more}; \
                     an update (a kernel's, most likely) was written while {dir} was not mounted",
                    match names.len() {
                        1 => "a file hides".to_string(),
                        n => format!("{n} files hide"),
                    },
                    shown.join(", ")
                ),
            )
            .fix(reinstall(&dir))
            .fix(format!(
                "then remove the hidden copies: sudo mount --bind / /mnt && sudo rm -r {} && sudo umount /mnt",
                paths.join(" ")
            ))
        }
    })
}

/// `word` as one word for a shell: bare when it holds only plain
/// characters, else in single quotes.
fn shell_word(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The running kernel has its modules.
pub fn modules(facts: &Facts) -> Option<Finding> {
    const CODE: &str = "kernel-modules";
    let release = facts.kernel_release.as_deref()?;
    let dir = facts.expected.boot_dir.display().to_string();
    Some(match facts.modules_present {
        true => Finding::ok(
            CODE,
            format!("the running kernel {release} has its modules (/lib/modules/{release})"),
        ),
        false => Finding::failure(
            CODE,
            format!(
                "the running kernel {release} has no modules (no /lib/modules/{release}): the kernel the firmware \
                 started is not the one the installed modules are for, as when a kernel update reached the root \
                 filesystem but not the boot partition ({dir})"
            ),
        )
        .fix(reinstall(&dir)),
    })
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_name_with_a_space_or_a_quote_is_one_shell_word() {
        assert_eq!(shell_word("/mnt/boot/kernel8.img"), "/mnt/boot/kernel8.img");
        assert_eq!(shell_word("/mnt/boot/a b"), "'/mnt/boot/a b'");
        assert_eq!(shell_word("/mnt/boot/it's"), r"'/mnt/boot/it'\''s'");
    }
}
