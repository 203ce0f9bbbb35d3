//! First-boot hooks: arguments that an image which has never booted carries
//! in cmdline.txt, each run once by the system that boots it and then
//! removed from the file. Carried onto another disk, they act on that disk
//! (or on the SD card) at the wrong time; so a migration decides, hook by
//! hook, whether it may leave one out or must have the system booted first.
//!
//! What each hook does was read from the distributions' own build scripts:
//! pi-gen's `stage2/01-sys-tweaks/00-patches/07-resize-init.diff` (buster:
//! init_resize.sh; bullseye and bookworm: raspberrypi-sys-mods' firstboot),
//! its trixie `stage1/00-boot-files/files/cmdline.txt` (`resize`, read by the
//! `rpi-resize` service), raspberrypi-sys-mods' `usr/lib/raspberrypi-sys-mods/
//! firstboot` (SSH host keys, custom.toml, new disk ids, then the resize in
//! its initramfs script) and its `imager_fixup` (Raspberry Pi Imager's
//! `systemd.run=/boot/firstrun.sh`).

use super::Cmdline;

/// What a migration does with a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookAction {
    /// The hook only grows the root partition of the disk it boots from
    /// (and gives that disk new ids): the target's root partition already
    /// fills its space and has fresh ids, so the new command line goes
    /// without it.
    LeaveOut,
    /// The hook sets the system up (users, SSH keys, Imager settings): a copy
    /// made before it ran would lack them, and the hook would run again from
    /// the copy's command line. The system must boot once first.
    BootOnceFirst,
}

/// One first-boot hook found on a command line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FirstBootHook {
    /// The argument exactly as written (`init=/usr/lib/raspi-config/init_resize.sh`).
    pub arg: String,
    /// Whose hook it is and what it does, for a person.
    pub what: &'static str,
    pub action: HookAction,
}

/// (argument key, value or None for a bare word, what, action); a value
/// matches when the argument's value is it, with or without a `/boot` or
/// `/boot/firmware` prefix for scripts on the boot partition.
const HOOKS: &[(&str, Option<&str>, &str, HookAction)] = &[
    (
        "init",
        Some("/usr/lib/raspi-config/init_resize.sh"),
        "Raspberry Pi OS's first-boot resize (jessie to buster): grows the root partition of the disk it boots from, gives that disk a new id, and removes itself",
        HookAction::LeaveOut,
    ),
    (
        "resize",
        None,
        "Raspberry Pi OS trixie's first-boot resize (the rpi-resize service): grows the root partition of the disk it boots from, and removes itself",
        HookAction::LeaveOut,
    ),
    (
        "init",
        Some("/usr/lib/raspberrypi-sys-mods/firstboot"),
        "Raspberry Pi OS's first-boot setup (bullseye, bookworm): makes the SSH host keys, applies Raspberry Pi Imager's custom.toml, gives the disk new ids and grows its root partition",
        HookAction::BootOnceFirst,
    ),
    (
        "systemd.run",
        Some("/firstrun.sh"),
        "Raspberry Pi Imager's first-run script: sets the user, password, Wi-Fi, SSH and locale chosen in the Imager, then removes itself",
        HookAction::BootOnceFirst,
    ),
];

/// The first-boot hooks on `cmdline`, in the order they are written.
pub fn first_boot_hooks(cmdline: &Cmdline) -> Vec<FirstBootHook> {
    let mut found = Vec::new();
    for arg in cmdline.kernel_arguments() {
        let (key, value) = match arg.split_once('=') {
            Some((key, value)) => (key, Some(value.trim_matches('"'))),
            None => (arg, None),
        };
        let hook = HOOKS.iter().find(|(k, v, _, _)| {
            *k == key
                && match (v, value) {
                    (None, None) => true,
                    (Some(wanted), Some(value)) => names_script(value, wanted),
                    _ => false,
                }
        });
        if let Some((_, _, what, action)) = hook {
            found.push(FirstBootHook {
                arg: arg.to_string(),
                what,
                action: *action,
            });
        }
    }
    found
}

/// `value` is the script `wanted`: the same path, or for a script on the
/// boot partition (`/firstrun.sh`) that name under `/boot` or
/// `/boot/firmware` (Imager wrote both over the years).
fn names_script(value: &str, wanted: &str) -> bool {
    value == wanted
        || ["/boot", "/boot/firmware"]
            .iter()
            .any(|prefix| value.strip_prefix(prefix) == Some(wanted))
            && wanted.matches('/').count() == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(line: &str) -> Vec<(String, HookAction)> {
        first_boot_hooks(&Cmdline::parse(line.as_bytes()).unwrap())
            .into_iter()
            .map(|h| (h.arg, h.action))
            .collect()
    }

    /// pi-gen's buster patch: the resize that only grows the SD card.
    #[test]
    fn init_resize_is_left_out() {
        assert_eq!(
            hooks("console=serial0,115200 console=tty1 root=PARTUUID=738a4d67-02 rootfstype=ext4 elevator=deadline fsck.repair=yes rootwait quiet init=/usr/lib/raspi-config/init_resize.sh\n"),
            [("init=/usr/lib/raspi-config/init_resize.sh".to_string(), HookAction::LeaveOut)]
        );
    }

    /// pi-gen's trixie cmdline.txt ends with the bare word `resize`; a
    /// `resize=` with a value, or the word after `--`, is something else.
    #[test]
    fn trixie_resize_word_is_left_out() {
        assert_eq!(
            hooks("console=serial0,115200 console=tty1 root=PARTUUID=1c2a3b4d-02 rootfstype=ext4 fsck.repair=yes rootwait resize\n"),
            [("resize".to_string(), HookAction::LeaveOut)]
        );
        assert!(hooks("root=/dev/sda2 resize=0\n").is_empty());
        assert!(hooks("root=/dev/sda2 -- resize\n").is_empty());
    }

    /// pi-gen's bullseye and bookworm patch: the set-up that makes keys and
    /// applies the Imager's settings.
    #[test]
    fn sys_mods_firstboot_needs_a_first_boot() {
        assert_eq!(
            hooks("console=serial0,115200 console=tty1 root=PARTUUID=4e639091-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot\n"),
            [("init=/usr/lib/raspberrypi-sys-mods/firstboot".to_string(), HookAction::BootOnceFirst)]
        );
    }

    /// Raspberry Pi Imager's customisation, under /boot (bullseye) or
    /// /boot/firmware (later Imager releases).
    #[test]
    fn imager_firstrun_needs_a_first_boot() {
        for script in ["/boot/firstrun.sh", "/boot/firmware/firstrun.sh"] {
            let line = format!("console=serial0,115200 console=tty1 root=PARTUUID=4e639091-02 rootfstype=ext4 fsck.repair=yes rootwait quiet init=/usr/lib/raspberrypi-sys-mods/firstboot systemd.run={script} systemd.run_success_action=reboot systemd.unit=kernel-command-line.target\n");
            let found = hooks(&line);
            assert_eq!(found.len(), 2, "{found:?}");
            assert_eq!(
                found[1],
                (format!("systemd.run={script}"), HookAction::BootOnceFirst)
            );
        }
        assert!(hooks("root=/dev/sda2 systemd.run=/usr/local/bin/mine.sh\n").is_empty());
    }

    #[test]
    fn a_booted_system_has_none() {
        assert!(hooks("console=serial0,115200 console=tty1 root=PARTUUID=6c586e13-02 rootfstype=ext4 fsck.repair=yes rootwait quiet splash plymouth.ignore-serial-consoles\n").is_empty());
        assert!(hooks("root=/dev/sda2 init=/bin/systemd\n").is_empty());
    }
}
