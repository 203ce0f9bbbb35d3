//! What the EEPROM bootloader tells Linux in the device tree it hands
//! over, and where the stand-in puts it: `/chosen/bootloader` (`boot-mode`,
//! `tryboot`, `build-timestamp`, `partition`, each one big-endian u32), set
//! with fdtput in the raspi machines' device tree copy ([`mark`]); for the
//! x86 guest, which has no device tree, the same properties plus the Pi's
//! `model`, `compatible`, `system/linux,revision` and a HAT+'s
//! `hat/product` as files laid out as /proc/device-tree shows them
//! ([`write_files`]), which `tb-as-pi` puts in the guest's place.

use crate::firmware::bootloader::Bootloader;
use crate::firmware::model::Model;
use crate::firmware::spec::BootSpec;
use anyhow::{Context, Result};
use std::fs;
use std::path::Path;
use std::process::Command;

/// `/chosen/bootloader` of one boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    /// The BOOT_ORDER digit of the mode that booted: 1 SD, 4 USB, 6 NVMe.
    pub boot_mode: u32,
    /// 1 in a trial boot (`reboot "0 tryboot"`), else 0; always present.
    pub tryboot: bool,
    /// When the running bootloader was built (unix time).
    pub build_timestamp: u32,
    /// The number of the partition the firmware was read from.
    pub partition: u32,
}

impl Chosen {
    /// What `bootloader` tells Linux about the boot `spec` describes.
    pub fn of(spec: &BootSpec, bootloader: &Bootloader) -> Chosen {
        Chosen {
            boot_mode: spec.boot_mode.digit(),
            tryboot: spec.tryboot,
            build_timestamp: bootloader.build_timestamp(),
            partition: spec.partition,
        }
    }

    /// The properties, name and value.
    fn properties(&self) -> [(&'static str, u32); 4] {
        [
            ("boot-mode", self.boot_mode),
            ("tryboot", u32::from(self.tryboot)),
            ("build-timestamp", self.build_timestamp),
            ("partition", self.partition),
        ]
    }
}

/// Sets `/chosen/bootloader` in a device tree blob in place, as the
/// firmware sets it in the copy it hands the kernel: `pimigrate verify`
/// reads the trial flag there, `rpi-eeprom-update` the build time.
pub fn mark(dtb: &Path, chosen: &Chosen) -> Result<()> {
    fdtput(dtb, &["-c", "-p", "/chosen/bootloader"])?;
    for (name, value) in chosen.properties() {
        fdtput(
            dtb,
            &["-t", "u", "/chosen/bootloader", name, &value.to_string()],
        )?;
    }
    Ok(())
}

/// `fdtput ARGS` on `dtb`.
fn fdtput(dtb: &Path, args: &[&str]) -> Result<()> {
    crate::host::cmd::run(Command::new("fdtput").arg(dtb).args(args)).context(
        "setting /chosen/bootloader in the device tree needs fdtput (Debian package device-tree-compiler)",
    )?;
    Ok(())
}

/// Writes the x86 guest's device tree for this boot into `dir` (emptied
/// first) as /proc/device-tree lays it out: `model` and `compatible`
/// (strings, NUL-terminated), `system/linux,revision`, `chosen/bootloader/*`
/// (big-endian u32 cells) and, with a HAT+, `hat/product`.
pub fn write_files(
    dir: &Path,
    model: Model,
    chosen: &Chosen,
    hat_product: Option<&str>,
) -> Result<()> {
    let _ = fs::remove_dir_all(dir);
    let (name, compatible, revision) = model.identity();
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("model".into(), format!("{name}\0").into_bytes()),
        ("compatible".into(), compatible.as_bytes().to_vec()),
        (
            "system/linux,revision".into(),
            revision.to_be_bytes().to_vec(),
        ),
    ];
    for (property, value) in chosen.properties() {
        files.push((
            format!("chosen/bootloader/{property}"),
            value.to_be_bytes().to_vec(),
        ));
    }
    if let Some(product) = hat_product {
        files.push(("hat/product".into(), format!("{product}\0").into_bytes()));
    }
    for (path, bytes) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::test_disks::{compile_dtb, have_tools};

    const TRIAL_FROM_USB: Chosen = Chosen {
        boot_mode: 4,
        tryboot: true,
        build_timestamp: 1_779_045_198,
        partition: 1,
    };

    /// `fdtget -t u DTB /chosen/bootloader NAME`.
    fn fdtget(dtb: &Path, name: &str) -> String {
        let out = crate::host::cmd::stdout(
            Command::new("fdtget")
                .args(["-t", "u"])
                .arg(dtb)
                .args(["/chosen/bootloader", name]),
        )
        .unwrap();
        out.trim().to_string()
    }

    #[test]
    fn the_chosen_bootloader_node_is_set_in_a_real_device_tree() {
        if !have_tools(&["dtc", "fdtput", "fdtget"]) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // A tree without /chosen/bootloader, and one where it exists.
        for (name, source) in [
            ("bare", "/dts-v1/;\n/ { model = \"Pi\"; chosen { }; };\n"),
            (
                "marked",
                "/dts-v1/;\n/ { chosen { bootloader { tryboot = <0>; }; }; };\n",
            ),
        ] {
            let dtb = compile_dtb(dir.path(), name, source);
            mark(&dtb, &TRIAL_FROM_USB).unwrap();
            assert_eq!(fdtget(&dtb, "boot-mode"), "4");
            assert_eq!(fdtget(&dtb, "tryboot"), "1");
            assert_eq!(fdtget(&dtb, "build-timestamp"), "1779045198");
            assert_eq!(fdtget(&dtb, "partition"), "1");
        }
    }

    #[test]
    fn the_x86_guests_tree_is_files_as_proc_device_tree_shows_them() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("device-tree");
        let normal = Chosen {
            tryboot: false,
            boot_mode: 6,
            ..TRIAL_FROM_USB
        };
        write_files(&tree, Model::Pi5, &normal, Some("Raspberry Pi M.2 HAT+")).unwrap();
        let read = |p: &str| fs::read(tree.join(p)).unwrap();
        assert_eq!(read("model"), b"Raspberry Pi 5 Model B Rev 1.0\0");
        assert_eq!(read("compatible"), b"raspberrypi,5-model-b\0brcm,bcm2712\0");
        assert_eq!(read("system/linux,revision"), [0x00, 0xc0, 0x41, 0x70]);
        assert_eq!(read("chosen/bootloader/boot-mode"), [0, 0, 0, 6]);
        assert_eq!(read("chosen/bootloader/tryboot"), [0, 0, 0, 0]);
        assert_eq!(
            read("chosen/bootloader/build-timestamp"),
            1_779_045_198u32.to_be_bytes()
        );
        assert_eq!(read("hat/product"), b"Raspberry Pi M.2 HAT+\0");
        // The next boot's tree replaces it whole: no HAT+, a Pi 4.
        write_files(&tree, Model::Pi4B, &TRIAL_FROM_USB, None).unwrap();
        assert_eq!(read("model"), b"Raspberry Pi 4 Model B Rev 1.4\0");
        assert_eq!(read("system/linux,revision"), [0x00, 0xc0, 0x31, 0x14]);
        assert_eq!(read("chosen/bootloader/tryboot"), [0, 0, 0, 1]);
        assert!(!tree.join("hat").exists());
    }
}
