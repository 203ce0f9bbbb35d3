//! `config.txt` and `tryboot.txt` as the firmware reads them: section
//! filters, `include`, and the few settings that decide what boots.

use crate::firmware::model::Model;
use crate::firmware::sections::{self, Line};

/// Settings that matter here, after section filtering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub kernel: String,
    pub initramfs: Option<String>,
    pub cmdline: String,
    pub os_prefix: String,
    /// `device_tree=`: a device tree file other than the model's own.
    pub device_tree: Option<String>,
    /// `upstream_kernel=1`: upstream Linux's device tree names first.
    pub upstream_kernel: bool,
}

impl Default for Config {
    fn default() -> Self {
        // What the firmware assumes when config.txt says nothing.
        Config {
            kernel: "kernel8.img".into(),
            initramfs: None,
            cmdline: "cmdline.txt".into(),
            os_prefix: String::new(),
            device_tree: None,
            upstream_kernel: false,
        }
    }
}

/// Parses config.txt as the firmware of a Pi 4 would: lines under a section
/// filter apply only when it matches; `[all]` matches always; `[tryboot]`
/// only in a trial boot; `[pi4]` matches (we play a Pi 4); any other filter
/// (`[pi5]`, `[cm4]`, `[none]`, ...) does not. `include` lines are not
/// followed (see [`parse_config_with`]).
pub fn parse_config(text: &str, tryboot: bool) -> Config {
    parse_config_with(text, tryboot, &mut |_| None)
}

/// [`parse_config_with`] as the firmware of `model` reads it: its own
/// section filter matches instead of `[pi4]`.
pub fn parse_config_for(
    model: Model,
    text: &str,
    tryboot: bool,
    read: &mut dyn FnMut(&str) -> Option<String>,
) -> Config {
    let mut parser = Parser {
        cfg: Config::default(),
        active: true,
        tryboot,
        model,
    };
    parser.feed(text, read, 0);
    parser.cfg
}

/// How deep `include` nests before the stand-in stops following it.
const MAX_INCLUDE_DEPTH: usize = 8;

/// [`parse_config`], following `include FILE` as the firmware does: FILE
/// (read from the boot partition by `read`; `None` when absent, which the
/// firmware skips) is read in place, in the section in force there, its
/// last section stays in force after it, and a later `cmdline=` (or any
/// setting) wins over an earlier one. Ubuntu's `include syscfg.txt` works
/// this way; an include under a section that does not match is skipped.
pub fn parse_config_with(
    text: &str,
    tryboot: bool,
    read: &mut dyn FnMut(&str) -> Option<String>,
) -> Config {
    parse_config_for(Model::Pi4B, text, tryboot, read)
}

struct Parser {
    cfg: Config,
    active: bool,
    tryboot: bool,
    model: Model,
}

impl Parser {
    fn feed(&mut self, text: &str, read: &mut dyn FnMut(&str) -> Option<String>, depth: usize) {
        for line in sections::lines(text) {
            let line = match line {
                Line::Section(filter) => {
                    self.active = sections::applies(filter, self.model.section(), self.tryboot);
                    continue;
                }
                Line::Setting(_) if !self.active => continue,
                Line::Setting(line) => line,
            };
            if let Some(name) = line.strip_prefix("include ") {
                if depth < MAX_INCLUDE_DEPTH {
                    if let Some(inner) = read(name.trim()) {
                        self.feed(&inner, read, depth + 1);
                    }
                }
            } else if let Some(rest) = line.strip_prefix("initramfs ") {
                // `initramfs FILE followkernel` or `initramfs FILE ADDRESS`.
                self.cfg.initramfs = rest.split_whitespace().next().map(str::to_string);
            } else if let Some((key, value)) = line.split_once('=') {
                let value = value.trim().to_string();
                match key.trim() {
                    "kernel" => self.cfg.kernel = value,
                    "cmdline" => self.cfg.cmdline = value,
                    "os_prefix" => self.cfg.os_prefix = value,
                    "device_tree" => self.cfg.device_tree = Some(value),
                    "upstream_kernel" => self.cfg.upstream_kernel = value == "1",
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "dtparam=audio=on\n[pi5]\nkernel=kernel_2712.img\n[pi4]\narm_boost=1\n\
        [all]\nkernel=vmlinuz # the kernel\ninitramfs initrd.img followkernel\n[tryboot]\ncmdline=cmdline-new.txt\n";

    #[test]
    fn normal_boot_ignores_tryboot_and_pi5_sections() {
        let c = parse_config(CONFIG, false);
        assert_eq!(c.kernel, "vmlinuz");
        assert_eq!(c.initramfs.as_deref(), Some("initrd.img"));
        assert_eq!(c.cmdline, "cmdline.txt");
    }

    #[test]
    fn trial_boot_applies_tryboot_section() {
        assert_eq!(parse_config(CONFIG, true).cmdline, "cmdline-new.txt");
    }

    #[test]
    fn defaults_when_empty() {
        assert_eq!(parse_config("", false), Config::default());
    }

    /// Ubuntu 20.04's layout: config.txt's cmdline= is overridden by the
    /// one in syscfg.txt, and a tryboot.txt that appends cmdline= after the
    /// includes wins over both.
    #[test]
    fn includes_are_read_in_place_and_the_last_assignment_wins() {
        let config =
            "[pi4]\nkernel=uboot_rpi_4.bin\n[pi3]\nkernel=uboot_rpi_3.bin\n[all]\narm_64bit=1\n\
            cmdline=cmdline.txt\ninclude syscfg.txt\ninclude usercfg.txt\n";
        let mut read = |name: &str| match name {
            "syscfg.txt" => Some("enable_uart=1\ncmdline=syscfg-cmdline.txt\n".to_string()),
            "usercfg.txt" => Some("# user changes\n".to_string()),
            _ => None,
        };
        let normal = parse_config_with(config, false, &mut read);
        assert_eq!(normal.cmdline, "syscfg-cmdline.txt");
        assert_eq!(normal.kernel, "uboot_rpi_4.bin");
        let tryboot = format!("{config}[all]\ncmdline=cmdline.pimigrate.txt\n");
        assert_eq!(
            parse_config_with(&tryboot, true, &mut read).cmdline,
            "cmdline.pimigrate.txt"
        );
        // Without following includes, the override would go unseen.
        assert_eq!(parse_config(config, false).cmdline, "cmdline.txt");
    }

    #[test]
    fn includes_under_other_sections_are_skipped_and_loops_end() {
        let mut read = |name: &str| match name {
            "pi5.txt" => Some("cmdline=pi5.txt\n".to_string()),
            "self.txt" => Some("include self.txt\ncmdline=deep.txt\n".to_string()),
            _ => None,
        };
        assert_eq!(
            parse_config_with("[pi5]\ninclude pi5.txt\n", false, &mut read).cmdline,
            "cmdline.txt"
        );
        assert_eq!(
            parse_config_with("include self.txt\n", false, &mut read).cmdline,
            "deep.txt"
        );
        assert_eq!(
            parse_config_with("include missing.txt\n", false, &mut read),
            Config::default()
        );
    }

    /// A config.txt with both models' sections, as Debian's raspi-firmware
    /// writes `[pi4]` settings before `[all]` with `upstream_kernel=1`.
    const BOTH_MODELS: &str = "[pi4]\nkernel=pi4.img\ndevice_tree=pi4.dtb\n[pi3]\nkernel=pi3.img\n\
        [all]\nupstream_kernel=1\ninitramfs initrd.img followkernel\n";

    #[test]
    fn each_model_reads_its_own_section() {
        let pi3 = parse_config_for(Model::Pi3B, BOTH_MODELS, false, &mut |_| None);
        assert_eq!(pi3.kernel, "pi3.img");
        assert_eq!(pi3.device_tree, None);
        assert!(pi3.upstream_kernel);
        let pi4 = parse_config_for(Model::Pi4B, BOTH_MODELS, false, &mut |_| None);
        assert_eq!(pi4.kernel, "pi4.img");
        assert_eq!(pi4.device_tree.as_deref(), Some("pi4.dtb"));
        assert_eq!(pi4, parse_config(BOTH_MODELS, false));
    }

    #[test]
    fn os_prefix_is_read() {
        assert_eq!(parse_config("os_prefix=new/\n", false).os_prefix, "new/");
    }
}
