//! Pi systems whose root is not a filesystem on a partition: they boot a
//! squashfs image, or run from RAM, and their cmdline.txt rightly has no
//! `root=`. Moving them is a different job from pimigrate's (copy one root
//! filesystem, point `root=` at the copy), and adding a `root=` would break
//! them, so they are recognised by what their command line and boot
//! partition hold, and named.
//!
//! Recognised from the distributions' own boot files: LibreELEC (and Lakka,
//! built from it) `boot=UUID=… disk=UUID=…` with `SYSTEM` and `KERNEL` on the
//! boot partition; Volumio `imgpart=… imgfile=/volumio_current.sqsh
//! bootpart=… datapart=…`; Alpine's diskless mode by `modules=` naming both
//! `loop` and `squashfs` (its initramfs loads the modloop with them), or by
//! another Alpine argument or `modules=…squashfs…` together with
//! `*.apkovl.tar.gz`, `apks/` or `boot/modloop-*` on the boot partition.

use super::Cmdline;

/// A system recognised as not having a root filesystem on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotOnAPartition {
    /// `LibreELEC-style`, `Volumio`, `Alpine Linux (diskless)`.
    pub system: &'static str,
    /// What gave it away in the command line: the arguments seen.
    pub arguments: Vec<String>,
    /// What gave it away on the boot partition: the files seen, if any.
    pub files: Vec<String>,
    /// How such a system is moved to another disk, for a person.
    pub hint: &'static str,
}

/// What the boot partition holds that matters here: its top-level names,
/// and those in `boot/` (Alpine keeps `boot/modloop-rpi` there).
pub struct BootListing<'a> {
    pub names: &'a [String],
}

impl BootListing<'_> {
    fn matching(&self, test: impl Fn(&str) -> bool) -> Vec<String> {
        self.names.iter().filter(|n| test(n)).cloned().collect()
    }
}

/// The system `cmdline` and the boot partition's files describe, if it is
/// one that does not mount a root filesystem from a partition.
pub fn recognise(cmdline: &Cmdline, boot: &BootListing) -> Option<NotOnAPartition> {
    let arg = |key: &str| cmdline.get(key).map(|value| format!("{key}={value}"));
    if cmdline.has("root") {
        return None;
    }
    if let (Some(boot_arg), Some(disk)) = (arg("boot"), arg("disk")) {
        return Some(NotOnAPartition {
            system: "a LibreELEC-style system (its SYSTEM squashfs on the boot partition, its data on the storage partition)",
            arguments: vec![boot_arg, disk],
            files: boot.matching(|n| n == "SYSTEM" || n == "KERNEL"),
            hint: "LibreELEC boots from USB or NVMe when written there directly: make a backup in its settings, write the image to the new disk with the Raspberry Pi Imager, and restore the backup",
        });
    }
    if let Some(imgpart) = arg("imgpart") {
        let mut arguments = vec![imgpart];
        arguments.extend(
            ["imgfile", "bootpart", "datapart"]
                .iter()
                .filter_map(|k| arg(k)),
        );
        return Some(NotOnAPartition {
            system: "Volumio (a squashfs system image with an overlay data partition)",
            arguments,
            files: Vec::new(),
            hint: "write the Volumio image to the new disk with the Raspberry Pi Imager and restore your settings there; Volumio's own partition layout is what its updater expects",
        });
    }
    let diskless_files = boot.matching(|n| {
        n.ends_with(".apkovl.tar.gz") || n == "apks" || n.starts_with("boot/modloop-")
    });
    let alpine_args: Vec<String> = ["modules", "modloop", "apkovl", "alpine_dev"]
        .iter()
        .filter_map(|k| arg(k))
        .collect();
    let modules: Vec<&str> = cmdline
        .get("modules")
        .map(|m| m.split(',').collect())
        .unwrap_or_default();
    // `modules=loop,squashfs,…` without root= is how Alpine's own
    // cmdline.txt starts a diskless boot (the initramfs mounts the modloop
    // squashfs through a loop device): enough on its own. Files alone could
    // be left-overs, and `modules=squashfs` alone could be another
    // initramfs: with the files, either is Alpine's boot.
    let diskless_modules = modules.contains(&"loop") && modules.contains(&"squashfs");
    let alpine_boot =
        modules.contains(&"squashfs") || alpine_args.iter().any(|a| !a.starts_with("modules="));
    if diskless_modules || (!diskless_files.is_empty() && alpine_boot) {
        return Some(NotOnAPartition {
            system: "Alpine Linux in diskless mode (it runs from RAM; its changes are saved to an apkovl on the boot partition)",
            arguments: alpine_args,
            files: diskless_files,
            hint: "copy the boot partition's files (with the apkovl, if `lbu commit` saved one) to a FAT partition of the new disk, or install Alpine there in sys mode with setup-disk",
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn check(line: &str, files: &[&str]) -> Option<NotOnAPartition> {
        let cmdline = Cmdline::parse(line.as_bytes()).unwrap();
        let names = names(files);
        recognise(&cmdline, &BootListing { names: &names })
    }

    /// LibreELEC 12's cmdline.txt and boot partition.
    #[test]
    fn libreelec_is_named_by_boot_and_disk() {
        let found = check(
            "boot=UUID=2306-0801 disk=UUID=f1ab2bd5-8ad8-4d6b-a5b3-0fe6b4d0e8a6 quiet console=tty0\n",
            &["SYSTEM", "SYSTEM.md5", "KERNEL", "KERNEL.md5", "config.txt", "cmdline.txt"],
        )
        .unwrap();
        assert!(found.system.contains("LibreELEC"));
        assert_eq!(
            found.arguments,
            [
                "boot=UUID=2306-0801",
                "disk=UUID=f1ab2bd5-8ad8-4d6b-a5b3-0fe6b4d0e8a6",
            ]
        );
        assert_eq!(found.files, ["SYSTEM", "KERNEL"]);
        assert!(!found.hint.contains("root="));
    }

    #[test]
    fn volumio_is_named_by_imgpart() {
        let found = check(
            "splash plymouth.ignore-serial-consoles dwc_otg.fiq_enable=1 dwc_otg.fiq_fsm_enable=1 dwc_otg.fiq_fsm_mask=0xF dwc_otg.nak_holdoff=1 quiet console=serial0,115200 console=tty1 imgpart=UUID=6a4f8c7e-1b2d-4e9a-9f0c-3d5e7a1b2c4d imgfile=/volumio_current.sqsh bootpart=UUID=1A2B-3C4D datapart=UUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 uuidconfig bootconfig=/boot/config.txt rootwait bootdelay=5 logo.nologo vt.global_cursor_default=0 net.ifnames=0 snd-bcm2835.enable_compat_alsa=1 loglevel=0\n",
            &["cmdline.txt", "config.txt"],
        )
        .unwrap();
        assert!(found.system.starts_with("Volumio"));
        assert_eq!(found.arguments[1], "imgfile=/volumio_current.sqsh");
    }

    /// Alpine's Raspberry Pi tarball in diskless mode, after `lbu commit`.
    #[test]
    fn alpine_diskless_is_named_by_its_apkovl() {
        let found = check(
            "modules=loop,squashfs,sd-mod,usb-storage quiet console=tty1\n",
            &[
                "apks",
                "boot/modloop-rpi",
                "cmdline.txt",
                "config.txt",
                "pi.apkovl.tar.gz",
            ],
        )
        .unwrap();
        assert!(found.system.starts_with("Alpine"));
        assert_eq!(
            found.arguments,
            ["modules=loop,squashfs,sd-mod,usb-storage"]
        );
        assert_eq!(
            found.files,
            ["apks", "boot/modloop-rpi", "pi.apkovl.tar.gz"]
        );
    }

    /// Alpine's cmdline.txt alone (the boot partition not listed, or before
    /// an apkovl was saved): `modules=` naming loop and squashfs is its
    /// diskless boot, and the refusal must not advise adding a root=.
    #[test]
    fn alpine_diskless_is_named_by_its_cmdline_alone() {
        let found = check(
            "modules=loop,squashfs,sd-mod,usb-storage quiet console=tty1\n",
            &[],
        )
        .unwrap();
        assert!(found.system.starts_with("Alpine"));
        assert_eq!(
            found.arguments,
            ["modules=loop,squashfs,sd-mod,usb-storage"]
        );
        assert!(found.files.is_empty());
        assert!(!found.hint.contains("root="), "{}", found.hint);
    }

    /// A system with root= (Alpine in sys mode, everything pimigrate moves)
    /// is not one of these, and neither is a cmdline.txt that lost its root=,
    /// nor one whose `modules=` names only one of loop and squashfs with no
    /// Alpine file beside it.
    #[test]
    fn systems_with_a_root_or_without_evidence_are_not_recognised() {
        assert!(check(
            "modules=loop,squashfs,sd-mod,usb-storage root=/dev/mmcblk0p2 rootwait\n",
            &["apks", "boot/modloop-rpi"]
        )
        .is_none());
        assert!(check("console=tty1 quiet rootwait\n", &["config.txt"]).is_none());
        assert!(check("modules=squashfs quiet\n", &["config.txt"]).is_none());
        assert!(check("modules=loop,ext4 quiet\n", &["config.txt"]).is_none());
    }
}
