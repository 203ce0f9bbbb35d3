//! Boot files as real systems ship them: each must parse, print back byte for
//! byte, name its root (and boot) device, and take a root replacement that
//! changes one token on one line.

use std::path::{Path, PathBuf};

use pimigrate::bootcfg::{unified_diff, Cmdline, ConfigTxt, DeviceSpec, FilterContext, Fstab};

fn data_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/bootfiles")
        .join(relative)
}

fn read(relative: &str) -> Vec<u8> {
    let path = data_path(relative);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn spec(text: &str) -> DeviceSpec {
    DeviceSpec::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The spec every root replacement writes: a fresh MBR PARTUUID.
const NEW_ROOT: &str = "PARTUUID=f00dcafe-02";

/// Asserts that `new` differs from `old` in exactly one line, and that on that
/// line only `old_token` was replaced by `new_token`; also that the unified
/// diff shows exactly one removed and one added line.
fn assert_single_token_edit(old: &[u8], new: &[u8], old_token: &str, new_token: &str) {
    let old_text = String::from_utf8_lossy(old);
    let new_text = String::from_utf8_lossy(new);
    let old_lines: Vec<&str> = old_text.split('\n').collect();
    let new_lines: Vec<&str> = new_text.split('\n').collect();
    assert_eq!(old_lines.len(), new_lines.len(), "line count changed");
    let changed: Vec<usize> = (0..old_lines.len())
        .filter(|&i| old_lines[i] != new_lines[i])
        .collect();
    assert_eq!(
        changed.len(),
        1,
        "expected one changed line, got {changed:?}"
    );
    let index = changed[0];
    assert_eq!(
        old_lines[index].matches(old_token).count(),
        1,
        "token {old_token:?} should appear once on the line"
    );
    assert_eq!(
        old_lines[index].replacen(old_token, new_token, 1),
        new_lines[index]
    );

    let diff = unified_diff("a/file", "b/file", old, new);
    let removed = diff
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .count();
    let added = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .count();
    assert_eq!((removed, added), (1, 1), "diff:\n{diff}");
    let missing_newline = !old.ends_with(b"\n");
    assert_eq!(
        diff.contains("\\ No newline at end of file"),
        missing_newline && index + 1 == old_lines.len(),
        "diff:\n{diff}"
    );
}

/// `cmdline.txt` files: (path, expected root, arguments that must survive).
const CMDLINES: &[(&str, &str, &[&str])] = &[
    (
        "bookworm-lite/cmdline.txt",
        "PARTUUID=6c586e13-02",
        &["console=serial0,115200", "rootwait"],
    ),
    (
        "bookworm-desktop/cmdline.txt",
        "PARTUUID=2f9b8c1e-02",
        &["quiet", "splash", "plymouth.ignore-serial-consoles"],
    ),
    (
        "bullseye/cmdline.txt",
        "PARTUUID=ea7d04d6-02",
        &["fsck.repair=yes"],
    ),
    (
        "firstboot/cmdline.txt",
        "PARTUUID=4e639091-02",
        &["init=/usr/lib/raspberrypi-sys-mods/firstboot"],
    ),
    (
        "firstboot-legacy/cmdline.txt",
        "PARTUUID=738a4d67-02",
        &["init=/usr/lib/raspi-config/init_resize.sh"],
    ),
    (
        "ubuntu/cmdline.txt",
        "LABEL=writable",
        &["multipath=off", "fixrtc"],
    ),
    (
        "dietpi/cmdline.txt",
        "PARTUUID=9a8f4b3c-02",
        &["net.ifnames=0"],
    ),
    (
        "devpath/cmdline.txt",
        "/dev/mmcblk0p2",
        &["elevator=deadline"],
    ),
    ("crlf/cmdline.txt", "PARTUUID=5e3da3da-02", &["rootwait"]),
    (
        "no-final-newline/cmdline.txt",
        "PARTUUID=1d2c3b4a-02",
        &["rootwait"],
    ),
    ("tryboot/cmdline.txt", "PARTUUID=6c586e13-02", &[]),
    (
        "tryboot/cmdline-trial.txt",
        "PARTUUID=8d1f0e27-02",
        &["rootwait"],
    ),
];

#[test]
fn cmdline_files_round_trip_and_take_a_new_root() {
    for (path, root, kept) in CMDLINES {
        let bytes = read(path);
        let mut cmdline = Cmdline::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            cmdline.to_bytes(),
            bytes,
            "{path}: print differs from input"
        );
        assert_eq!(cmdline.root(), Ok(spec(root)), "{path}");
        for arg in *kept {
            assert!(cmdline.args().any(|a| a == *arg), "{path}: lost {arg}");
        }

        cmdline.set_root(&spec(NEW_ROOT)).expect(path);
        let edited = cmdline.to_bytes();
        assert_eq!(cmdline.root(), Ok(spec(NEW_ROOT)), "{path}");
        assert_single_token_edit(&bytes, &edited, root, NEW_ROOT);
        let reparsed = Cmdline::parse(&edited).expect(path);
        assert_eq!(reparsed.root(), Ok(spec(NEW_ROOT)), "{path}");
    }
}

#[test]
fn first_boot_init_can_be_removed_without_touching_the_rest() {
    for path in ["firstboot/cmdline.txt", "firstboot-legacy/cmdline.txt"] {
        let bytes = read(path);
        let mut cmdline = Cmdline::parse(&bytes).expect(path);
        assert!(cmdline
            .get("init")
            .is_some_and(|v| v.starts_with("/usr/lib/")));
        assert!(cmdline.remove("init"));
        let text = String::from_utf8(cmdline.to_bytes()).expect("utf-8");
        let original = String::from_utf8(bytes).expect("utf-8");
        let init = original
            .split(' ')
            .find(|a| a.starts_with("init="))
            .expect("init argument")
            .trim_end()
            .to_string();
        assert_eq!(text, original.replace(&format!(" {init}"), ""), "{path}");
    }
}

#[test]
fn usb_quirk_and_rootwait_are_added_once() {
    let bytes = read("ubuntu/cmdline.txt");
    let mut cmdline = Cmdline::parse(&bytes).expect("ubuntu cmdline");
    cmdline.add("rootwait");
    assert_eq!(cmdline.to_bytes(), bytes, "rootwait was already there");
    cmdline.add("usb-storage.quirks=174c:55aa:u");
    let text = String::from_utf8(cmdline.to_bytes()).expect("utf-8");
    assert!(text.ends_with(" quiet splash usb-storage.quirks=174c:55aa:u\n"));
    assert_eq!(cmdline.get("usb-storage.quirks"), Some("174c:55aa:u"));
}

/// The boot partition's entry an fstab should have: (mount point, spec).
type BootEntry = Option<(&'static str, &'static str)>;

/// fstab files: (path, root spec, boot entry).
const FSTABS: &[(&str, &str, BootEntry)] = &[
    (
        "bookworm-lite/fstab",
        "PARTUUID=6c586e13-02",
        Some(("/boot/firmware", "PARTUUID=6c586e13-01")),
    ),
    (
        "bookworm-desktop/fstab",
        "PARTUUID=2f9b8c1e-02",
        Some(("/boot/firmware", "PARTUUID=2f9b8c1e-01")),
    ),
    (
        "bullseye/fstab",
        "PARTUUID=ea7d04d6-02",
        Some(("/boot", "PARTUUID=ea7d04d6-01")),
    ),
    (
        "ubuntu/fstab",
        "LABEL=writable",
        Some(("/boot/firmware", "LABEL=system-boot")),
    ),
    (
        "dietpi/fstab",
        "UUID=3b2b7e2d-7c37-4f68-9b1d-2a4f1c0e5a91",
        Some(("/boot", "UUID=A1B2-C3D4")),
    ),
    (
        "devpath/fstab",
        "/dev/mmcblk0p2",
        Some(("/boot", "/dev/mmcblk0p1")),
    ),
    (
        "crlf/fstab",
        "PARTUUID=5e3da3da-02",
        Some(("/boot/firmware", "PARTUUID=5e3da3da-01")),
    ),
    (
        "no-final-newline/fstab",
        "PARTUUID=1d2c3b4a-02",
        Some(("/boot/firmware", "PARTUUID=1d2c3b4a-01")),
    ),
    (
        "tabs/fstab",
        "PARTUUID=0b1c2d3e-02",
        Some(("/boot/firmware", "PARTUUID=0b1c2d3e-01")),
    ),
];

#[test]
fn fstab_files_round_trip_and_take_a_new_root() {
    for (path, root, boot) in FSTABS {
        let bytes = read(path);
        let mut fstab = Fstab::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(fstab.to_bytes(), bytes, "{path}: print differs from input");
        let root_entry = fstab.root().expect(path);
        assert_eq!(root_entry.device_spec(), Ok(spec(root)), "{path}");
        let found_boot = fstab
            .boot()
            .map(|e| (e.mountpoint.clone(), e.device_spec()));
        let expected_boot = boot.map(|(mp, s)| (mp.to_string(), Ok(spec(s))));
        assert_eq!(found_boot, expected_boot, "{path}");

        fstab.set_spec("/", &spec(NEW_ROOT)).expect(path);
        let edited = fstab.to_bytes();
        assert_single_token_edit(&bytes, &edited, root, NEW_ROOT);
        let reparsed = Fstab::parse(&edited).expect(path);
        assert_eq!(reparsed.root().map(|e| e.spec), Ok(NEW_ROOT.to_string()));
        assert_eq!(reparsed.entries().len(), fstab.entries().len());
    }
}

#[test]
fn dietpi_tmpfs_lines_are_entries_without_a_device() {
    let fstab = Fstab::parse(&read("dietpi/fstab")).expect("dietpi fstab");
    let tmp = fstab.entry("/var/log").expect("/var/log entry");
    assert_eq!(tmp.fstype, "tmpfs");
    assert!(tmp.device_spec().is_err());
    assert_eq!(tmp.freq, None);
}

#[test]
fn escaped_mount_point_is_found_unescaped() {
    let fstab = Fstab::parse(&read("tabs/fstab")).expect("tabs fstab");
    let data = fstab.entry("/mnt/usb data").expect("escaped entry");
    assert_eq!(data.device_spec(), Ok(spec("LABEL=data")));
    assert_eq!(data.options, "defaults,nofail");
}

#[test]
fn config_files_round_trip() {
    for path in [
        "bookworm-lite/config.txt",
        "ubuntu/config.txt",
        "crlf/config.txt",
        "no-final-newline/config.txt",
        "tryboot/config.txt",
    ] {
        let bytes = read(path);
        let config = ConfigTxt::parse(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(config.to_bytes(), bytes, "{path}: print differs from input");
    }
}

#[test]
fn bookworm_config_boots_cmdline_txt_in_64_bit() {
    let config = ConfigTxt::parse(&read("bookworm-lite/config.txt")).expect("config");
    assert_eq!(config.sections(), ["cm4", "cm5", "all"]);
    for model in ["pi3", "pi4", "cm4", "pi5", "cm5"] {
        let settings = config.effective(&FilterContext::new(Some(model), false));
        assert_eq!(settings.cmdline_file(), "cmdline.txt");
        assert_eq!(settings.arm_64bit, Some(true));
        assert_eq!(settings.kernel, None);
        assert!(settings.is_certain());
    }
}

#[test]
fn ubuntu_config_names_kernel_initramfs_and_cmdline() {
    let config = ConfigTxt::parse(&read("ubuntu/config.txt")).expect("config");
    let settings = config.effective(&FilterContext::new(Some("pi4"), false));
    assert_eq!(settings.kernel.as_deref(), Some("vmlinuz"));
    assert_eq!(settings.cmdline_file(), "cmdline.txt");
    assert_eq!(
        settings.initramfs.map(|i| i.file),
        Some("initrd.img".to_string())
    );
}

#[test]
fn tryboot_config_selects_the_trial_command_line() {
    let config = ConfigTxt::parse(&read("tryboot/config.txt")).expect("config");
    assert_eq!(config.sections(), ["pi4", "pi5", "all", "tryboot"]);
    let normal_pi4 = config.effective(&FilterContext::new(Some("pi4"), false));
    assert_eq!(normal_pi4.cmdline_file(), "current/cmdline.txt");
    assert_eq!(normal_pi4.kernel.as_deref(), Some("kernel8.img"));
    let trial_pi5 = config.effective(&FilterContext::new(Some("pi5"), true));
    assert_eq!(trial_pi5.cmdline_file(), "current/cmdline-trial.txt");
    assert_eq!(trial_pi5.kernel.as_deref(), Some("kernel_2712.img"));
    let trial_pi400 = config.effective(&FilterContext::new(Some("pi400"), true));
    assert_eq!(trial_pi400.kernel.as_deref(), Some("kernel8.img"));
}

#[test]
fn config_set_appends_without_disturbing_the_file() {
    for path in [
        "crlf/config.txt",
        "no-final-newline/config.txt",
        "bookworm-lite/config.txt",
    ] {
        let bytes = read(path);
        let mut config = ConfigTxt::parse(&bytes).expect(path);
        config.set("usb_max_current_enable", "1");
        let edited = config.to_bytes();
        let diff = unified_diff("a", "b", &bytes, &edited);
        let added: Vec<&str> = diff
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .collect();
        assert!(
            added
                .iter()
                .any(|l| l.trim_end() == "+usb_max_current_enable=1"),
            "{path}:\n{diff}"
        );
        let settings = ConfigTxt::parse(&edited).expect(path);
        assert_eq!(settings.to_bytes(), edited);
        if bytes.ends_with(b"\n") {
            assert!(edited.starts_with(&bytes), "{path}: existing bytes changed");
        }
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn separator() -> impl Strategy<Value = String> {
        prop::sample::select(vec![" ", "  ", "\t", " \t ", "\t\t"]).prop_map(str::to_string)
    }

    fn optional_whitespace() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", " ", "\t", "  \t"]).prop_map(str::to_string)
    }

    fn line_ending() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["\n", "\r\n"]).prop_map(str::to_string)
    }

    fn device_spec() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9a-f]{8}-0[1-4]".prop_map(|v| format!("PARTUUID={v}")),
            "[0-9A-F]{4}-[0-9A-F]{4}".prop_map(|v| format!("UUID={v}")),
            "[a-z][a-z0-9-]{0,10}".prop_map(|v| format!("LABEL={v}")),
            "[a-z][a-z0-9_]{0,10}".prop_map(|v| format!("PARTLABEL={v}")),
            "(sd[a-c][1-4]|mmcblk0p[1-4]|nvme0n1p[1-4])".prop_map(|v| format!("/dev/{v}")),
        ]
    }

    fn kernel_argument() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_.]{0,8}(=[a-zA-Z0-9:,./_-]{0,10})?"
            .prop_filter("not root", |a| !a.starts_with("root=") && a != "root")
    }

    /// A cmdline.txt built from parts, with `ROOT` where the root spec goes.
    fn cmdline_template() -> impl Strategy<Value = String> {
        (
            optional_whitespace(),
            prop::collection::vec((kernel_argument(), separator()), 0..8),
            any::<prop::sample::Index>(),
            optional_whitespace(),
            prop::sample::select(vec!["", "\n", "\r\n", "\n\n", "\r\n\r\n"]),
        )
            .prop_map(|(leading, mut args, position, trailing, ending)| {
                let at = position.index(args.len() + 1);
                args.insert(at, ("root=ROOT".to_string(), " ".to_string()));
                let mut text = leading;
                let count = args.len();
                for (i, (arg, sep)) in args.into_iter().enumerate() {
                    text.push_str(&arg);
                    if i + 1 < count {
                        text.push_str(&sep);
                    }
                }
                text.push_str(&trailing);
                text.push_str(ending);
                text
            })
    }

    /// One fstab line; `root` marks the single `/` entry, which has spec ROOT.
    fn fstab_line(root: bool) -> BoxedStrategy<String> {
        let entry = (
            if root {
                Just("ROOT".to_string()).boxed()
            } else {
                prop_oneof![
                    device_spec(),
                    Just("proc".to_string()),
                    Just("tmpfs".to_string())
                ]
                .boxed()
            },
            if root {
                Just("/".to_string()).boxed()
            } else {
                "/(boot|boot/firmware|home|mnt/[a-z]{1,6}|var/log)"
                    .prop_map(|s| s.to_string())
                    .boxed()
            },
            prop::sample::select(vec!["ext4", "vfat", "tmpfs", "proc", "btrfs"]),
            "[a-z]{1,8}(,[a-z]{1,8}){0,3}",
            prop::collection::vec(separator(), 5),
            0usize..3,
            optional_whitespace(),
            optional_whitespace(),
        )
            .prop_map(
                |(spec, mountpoint, fstype, options, seps, extra, leading, trailing)| {
                    let mut fields = vec![spec, mountpoint, fstype.to_string(), options];
                    fields.extend(["0", "2"].iter().take(extra).map(|s| s.to_string()));
                    let mut line = leading;
                    for (i, field) in fields.iter().enumerate() {
                        if i > 0 {
                            line.push_str(&seps[i - 1]);
                        }
                        line.push_str(field);
                    }
                    line.push_str(&trailing);
                    line
                },
            );
        if root {
            entry.boxed()
        } else {
            prop_oneof![
                3 => entry,
                1 => "[ \t]{0,3}#[ -~\t]{0,30}",
                1 => "[ \t]{0,3}",
            ]
            .boxed()
        }
    }

    /// A whole fstab with one `/` entry whose spec is the placeholder ROOT.
    fn fstab_template() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(fstab_line(false), 0..8),
            fstab_line(true),
            any::<prop::sample::Index>(),
            line_ending(),
            any::<bool>(),
        )
            .prop_map(|(mut lines, root_line, position, ending, final_newline)| {
                let at = position.index(lines.len() + 1);
                lines.retain(|l| l.split_whitespace().nth(1).is_none_or(|mp| mp != "/"));
                let at = at.min(lines.len());
                lines.insert(at, root_line);
                let mut text = lines.join(&ending);
                if final_newline {
                    text.push_str(&ending);
                }
                text
            })
    }

    fn config_line() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ \t]{0,2}#[ -~]{0,30}",
            "[ \t]{0,2}",
            prop::sample::select(vec![
                "[all]",
                "[none]",
                "[pi4]",
                "[pi5]",
                "[pi400]",
                "[cm5]",
                "[tryboot]",
                "[gpio4=1]",
                "[EDID=VSC-TD2220]",
                "[0x12345678]",
                "[HDMI:1]",
                " [pi3+] ",
            ])
            .prop_map(str::to_string),
            (
                prop::sample::select(vec![
                    "kernel",
                    "cmdline",
                    "os_prefix",
                    "arm_64bit",
                    "dtoverlay",
                    "dtparam"
                ]),
                optional_whitespace(),
                optional_whitespace(),
                "[a-z0-9_./=-]{0,12}",
            )
                .prop_map(|(k, a, b, v)| format!("{k}{a}={b}{v}")),
            "initramfs [a-z0-9.]{1,10}( followkernel| 0x00800000)?",
        ]
    }

    fn config_template() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(config_line(), 0..15),
            line_ending(),
            any::<bool>(),
        )
            .prop_map(|(lines, ending, final_newline)| {
                let mut text = lines.join(&ending);
                if final_newline && !text.is_empty() {
                    text.push_str(&ending);
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn cmdline_prints_back_and_edits_only_root(
            template in cmdline_template(),
            old_root in device_spec(),
            new_root in device_spec(),
        ) {
            let old_text = template.replace("ROOT", &old_root);
            let mut cmdline = Cmdline::parse(old_text.as_bytes()).expect("generated cmdline");
            prop_assert_eq!(cmdline.to_bytes(), old_text.as_bytes());
            prop_assert_eq!(cmdline.root(), Ok(spec(&old_root)));
            cmdline.set_root(&spec(&new_root)).expect("set root");
            prop_assert_eq!(cmdline.to_bytes(), template.replace("ROOT", &new_root).into_bytes());
        }

        #[test]
        fn fstab_prints_back_and_edits_only_root(
            template in fstab_template(),
            old_root in device_spec(),
            new_root in device_spec(),
        ) {
            let old_text = template.replace("ROOT", &old_root);
            let mut fstab = Fstab::parse(old_text.as_bytes()).expect("generated fstab");
            prop_assert_eq!(fstab.to_bytes(), old_text.as_bytes());
            prop_assert_eq!(fstab.root().map(|e| e.spec), Ok(old_root.clone()));
            fstab.set_spec("/", &spec(&new_root)).expect("set spec");
            prop_assert_eq!(fstab.to_bytes(), template.replace("ROOT", &new_root).into_bytes());
        }

        #[test]
        fn config_prints_back_and_appends_only(text in config_template()) {
            let mut config = ConfigTxt::parse(text.as_bytes()).expect("generated config");
            prop_assert_eq!(config.to_bytes(), text.as_bytes());
            for model in [None, Some("pi4"), Some("pi5"), Some("pi02")] {
                let _ = config.effective(&FilterContext::new(model, true)).cmdline_file();
            }
            config.set("pimigrate_probe", "1");
            let edited = config.to_bytes();
            let unchanged_prefix = text.trim_end_matches(['\r', '\n']).as_bytes();
            prop_assert!(edited.starts_with(unchanged_prefix));
            let settings = ConfigTxt::parse(&edited).expect("edited config");
            prop_assert_eq!(settings.to_bytes(), edited);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_accepted_input_prints_back(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            check_arbitrary(&bytes)?;
        }

        #[test]
        fn arbitrary_structured_text_never_panics(
            text in "[ \t\r\n#=\\[\\]\"\\\\a-z0-9/:.,_-]{0,300}",
        ) {
            check_arbitrary(text.as_bytes())?;
        }
    }

    fn check_arbitrary(bytes: &[u8]) -> Result<(), TestCaseError> {
        if let Ok(mut cmdline) = Cmdline::parse(bytes) {
            prop_assert_eq!(cmdline.to_bytes(), bytes);
            let _ = cmdline.root();
            let _ = cmdline.get("root");
            let _ = cmdline.set_root(&spec("/dev/sda2"));
            cmdline.add("rootwait");
            cmdline.remove("quiet");
        }
        if let Ok(mut fstab) = Fstab::parse(bytes) {
            prop_assert_eq!(fstab.to_bytes(), bytes);
            let _ = fstab.root();
            let _ = fstab.boot();
            for entry in fstab.entries() {
                let _ = entry.device_spec();
            }
            let _ = fstab.set_spec("/", &spec("LABEL=new root"));
        }
        if let Ok(mut config) = ConfigTxt::parse(bytes) {
            prop_assert_eq!(config.to_bytes(), bytes);
            let _ = config.sections();
            let _ = config.effective(&FilterContext::new(Some("pi4"), true));
            config.set("cmdline", "x.txt");
        }
        let text = String::from_utf8_lossy(bytes);
        let _ = DeviceSpec::parse(&text);
        let _ = unified_diff("a", "b", bytes, b"x\n");
        Ok(())
    }
}
