//! The bootloader EEPROM of a Pi 4 or Pi 5, as far as the firmware
//! stand-in needs it: the image's `bootconf.txt`, read with our own reader
//! of the image's layout, the config's sections, and the BOOT_ORDER a
//! normal boot or a trial boot (`reboot "0 tryboot"`) follows.
//!
//! An image is a run of sections, each 8-byte aligned: a big-endian magic
//! (`0x55aa_f00f` under the mask `0xffff_f00f`) and a big-endian length of
//! what follows. A modifiable file (magic `0x55aa_f11f`) starts with a
//! 12-byte, NUL-padded name and 4 reserved bytes, then its contents. A
//! magic of 0 or `0xffff_ffff` (erased flash) ends the run. The official
//! `rpi-eeprom-config` reads and writes the same layout; the tests check
//! this reader against it on the real images in `testbed/data/rpi-eeprom`.

use crate::sections::{self, Line};
use anyhow::{bail, ensure, Context, Result};

const SECTION_MAGIC: u32 = 0x55aa_f00f;
const SECTION_MASK: u32 = 0xffff_f00f;
const FILE_MAGIC: u32 = 0x55aa_f11f;
/// The section header: magic and length.
const HEADER_LEN: usize = 8;
/// A file's name, NUL-padded, and the 4 reserved bytes after it.
const FILE_NAME_LEN: usize = 12;
const FILE_PREFIX_LEN: usize = FILE_NAME_LEN + 4;

/// The file in an image that holds the bootloader's config.
pub const BOOTCONF: &str = "bootconf.txt";

/// One section of an image: where its contents start, how long they are,
/// and a modifiable file's name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    contents: usize,
    length: usize,
    file_name: Option<String>,
}

/// A bootloader image, its sections found.
#[derive(Debug)]
pub struct Image {
    bytes: Vec<u8>,
    sections: Vec<Section>,
}

impl Image {
    /// Reads the sections of `bytes`; an image whose run of sections is
    /// broken (a foreign magic, a length past the end) is refused.
    pub fn parse(bytes: Vec<u8>) -> Result<Image> {
        let mut sections = Vec::new();
        let mut offset = 0usize;
        while offset + HEADER_LEN <= bytes.len() {
            let magic = be_u32(&bytes, offset);
            if magic == 0 || magic == 0xffff_ffff {
                break;
            }
            ensure!(
                magic & SECTION_MASK == SECTION_MAGIC,
                "not a bootloader image: section magic {magic:#010x} at offset {offset}"
            );
            let length = be_u32(&bytes, offset + 4) as usize;
            let contents = offset + HEADER_LEN;
            ensure!(
                contents + length <= bytes.len(),
                "the section at offset {offset} is {length} bytes long, past the image's end ({} bytes)",
                bytes.len()
            );
            let file_name = (magic == FILE_MAGIC)
                .then(|| file_name(&bytes[contents..contents + length.min(FILE_NAME_LEN)]));
            sections.push(Section {
                contents,
                length,
                file_name,
            });
            offset = (contents + length).next_multiple_of(8);
        }
        ensure!(!sections.is_empty(), "not a bootloader image: no sections");
        Ok(Image { bytes, sections })
    }

    /// The contents of the first modifiable file called `name`.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        let section = self
            .sections
            .iter()
            .find(|s| s.file_name.as_deref() == Some(name))?;
        let start = section.contents + FILE_PREFIX_LEN;
        let end = section.contents + section.length;
        self.bytes.get(start..end)
    }

    /// The image's config, `bootconf.txt`.
    pub fn bootconf(&self) -> Result<BootConf> {
        let bytes = self
            .file(BOOTCONF)
            .with_context(|| format!("the bootloader image has no {BOOTCONF}"))?;
        let text = std::str::from_utf8(bytes)
            .with_context(|| format!("the image's {BOOTCONF} is not UTF-8"))?;
        Ok(BootConf::parse(text))
    }
}

fn be_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_be_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn file_name(padded: &[u8]) -> String {
    let end = padded.iter().position(|&b| b == 0).unwrap_or(padded.len());
    String::from_utf8_lossy(&padded[..end]).into_owned()
}

/// The Pi whose bootloader reads the config: it picks the config's
/// model sections and the order used when the config names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Board {
    Pi4,
    Pi5,
}

impl Board {
    /// The conditional section naming this board.
    fn section(self) -> &'static str {
        match self {
            Board::Pi4 => "pi4",
            Board::Pi5 => "pi5",
        }
    }
}

/// The order a config without BOOT_ORDER boots in: the bootloader's
/// documented default, SD card then USB mass storage, then restart.
pub const DEFAULT_BOOT_ORDER: u32 = 0xf41;

/// A bootloader config: `KEY=value` lines under conditional sections
/// (`[all]`, `[none]`, `[tryboot]`, `[pi4]`, ...), as in `bootconf.txt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootConf {
    /// Each setting with the section it is under, in the file's order.
    settings: Vec<(String, String, String)>,
}

impl BootConf {
    /// Reads the config. Lines before the first section are under `[all]`;
    /// comments (`#`) and lines that are neither a section nor a setting
    /// are ignored, as the bootloader ignores them.
    pub fn parse(text: &str) -> BootConf {
        let mut section = "all";
        let mut settings = Vec::new();
        for line in sections::lines(text) {
            match line {
                Line::Section(filter) => section = filter,
                Line::Setting(line) => {
                    if let Some((key, value)) = line.split_once('=') {
                        settings.push((
                            section.to_string(),
                            key.trim().to_string(),
                            value.trim().to_string(),
                        ));
                    }
                }
            }
        }
        BootConf { settings }
    }

    /// The value of `key` this board reads, normally or in a trial boot:
    /// the last setting under a section that applies. `[all]` always
    /// applies, `[none]` never, `[tryboot]` only in a trial boot, a
    /// board's section on that board; any other filter (a GPIO, a serial
    /// number) is not played and does not apply.
    pub fn value(&self, key: &str, board: Board, tryboot: bool) -> Option<&str> {
        self.settings
            .iter()
            .rfind(|(section, k, _)| {
                k == key && sections::applies(section, board.section(), tryboot)
            })
            .map(|(_, _, value)| value.as_str())
    }

    /// BOOT_ORDER as this board reads it, the default when the config has
    /// none.
    pub fn boot_order(&self, board: Board, tryboot: bool) -> Result<BootOrder> {
        match self.value("BOOT_ORDER", board, tryboot) {
            None => Ok(BootOrder(DEFAULT_BOOT_ORDER)),
            Some(value) => BootOrder::parse(value),
        }
    }
}

/// One boot mode, a digit of BOOT_ORDER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootMode {
    SdCard,
    Network,
    UsbMassStorage,
    Nvme,
    /// Stop and show the error pattern.
    Stop,
    /// Start again from the first digit.
    Restart,
    /// A mode the stand-in does not play (RPIBOOT, HTTP, ...).
    Other(u8),
}

/// BOOT_ORDER: hex digits read from the right, one boot mode each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOrder(pub u32);

impl BootOrder {
    /// Reads `0xf41` or `f41`.
    pub fn parse(value: &str) -> Result<BootOrder> {
        let digits = value
            .strip_prefix("0x")
            .or_else(|| value.strip_prefix("0X"))
            .unwrap_or(value);
        match u32::from_str_radix(digits, 16) {
            Ok(order) if order != 0 => Ok(BootOrder(order)),
            _ => bail!("BOOT_ORDER={value} is not a boot order (hex digits such as 0xf41)"),
        }
    }

    /// The modes in the order the bootloader tries them, up to the first
    /// stop or restart.
    pub fn modes(self) -> Vec<BootMode> {
        let mut modes = Vec::new();
        let mut rest = self.0;
        while rest != 0 {
            let mode = match (rest & 0xf) as u8 {
                1 => BootMode::SdCard,
                2 => BootMode::Network,
                4 => BootMode::UsbMassStorage,
                6 => BootMode::Nvme,
                0xe => BootMode::Stop,
                0xf => BootMode::Restart,
                other => BootMode::Other(other),
            };
            modes.push(mode);
            if matches!(mode, BootMode::Stop | BootMode::Restart) {
                break;
            }
            rest >>= 4;
        }
        modes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    fn data() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/rpi-eeprom")
    }

    const PI4_IMAGE: &str = "firmware-2711/pieeprom-2026-05-17.bin";
    const PI5_IMAGE: &str = "firmware-2712/pieeprom-2026-05-26.bin";

    fn image(name: &str) -> Image {
        let path = data().join(name);
        Image::parse(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
            .unwrap()
    }

    /// The official tool, run on the host's python3 (scripts/test.sh
    /// installs it).
    fn rpi_eeprom_config(args: &[&Path]) -> String {
        let out = Command::new("python3")
            .arg(data().join("rpi-eeprom-config"))
            .args(args)
            .output()
            .expect("python3 runs the official rpi-eeprom-config (apt install python3)");
        assert!(
            out.status.success(),
            "rpi-eeprom-config {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn bootconf_text(image: &Image) -> String {
        String::from_utf8(image.file(BOOTCONF).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn the_real_images_config_reads_as_the_official_tool_prints_it() {
        for name in [PI4_IMAGE, PI5_IMAGE] {
            let ours = bootconf_text(&image(name));
            let official = rpi_eeprom_config(&[&data().join(name)]);
            assert_eq!(ours.trim_end(), official.trim_end(), "{name}");
        }
    }

    #[test]
    fn the_images_own_boot_orders() {
        // The Pi 4 image names no order: the default, SD then USB.
        let pi4 = image(PI4_IMAGE).bootconf().unwrap();
        assert_eq!(pi4.value("BOOT_ORDER", Board::Pi4, false), None);
        assert_eq!(
            pi4.boot_order(Board::Pi4, false).unwrap().modes(),
            [
                BootMode::SdCard,
                BootMode::UsbMassStorage,
                BootMode::Restart
            ]
        );
        let pi5 = image(PI5_IMAGE).bootconf().unwrap();
        assert_eq!(
            pi5.boot_order(Board::Pi5, false).unwrap().modes(),
            [
                BootMode::SdCard,
                BootMode::Nvme,
                BootMode::UsbMassStorage,
                BootMode::Restart
            ]
        );
    }

    #[test]
    fn a_tryboot_section_written_by_the_official_tool_changes_only_the_trial_boot() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bootconf.txt");
        let text = "[all]\nBOOT_UART=0\nBOOT_ORDER=0xf41\n\n[tryboot]\nBOOT_ORDER=0xf14\n";
        std::fs::write(&config, text).unwrap();
        let out = dir.path().join("pieeprom.upd");
        rpi_eeprom_config(&[
            Path::new("--config"),
            &config,
            Path::new("--out"),
            &out,
            &data().join(PI4_IMAGE),
        ]);
        let written = Image::parse(std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(bootconf_text(&written).trim_end(), text.trim_end());
        let conf = written.bootconf().unwrap();
        assert_eq!(
            conf.boot_order(Board::Pi4, false).unwrap().modes(),
            [
                BootMode::SdCard,
                BootMode::UsbMassStorage,
                BootMode::Restart
            ]
        );
        assert_eq!(
            conf.boot_order(Board::Pi4, true).unwrap().modes(),
            [
                BootMode::UsbMassStorage,
                BootMode::SdCard,
                BootMode::Restart
            ]
        );
        // The image's other files are the ones it was built from.
        let original = image(PI4_IMAGE);
        let names = |image: &Image| -> Vec<String> {
            image
                .sections
                .iter()
                .filter_map(|s| s.file_name.clone())
                .collect()
        };
        assert!(names(&original).len() > 1, "{:?}", names(&original));
        assert_eq!(names(&written), names(&original));
        for name in names(&original).iter().filter(|n| *n != BOOTCONF) {
            assert_eq!(written.file(name), original.file(name), "{name}");
        }
    }

    #[test]
    fn sections_apply_by_board_and_trial_the_last_setting_winning() {
        let conf = BootConf::parse(
            "BOOT_UART=1\n# a comment\n[pi5]\nBOOT_ORDER=0xf461 # NVMe\n[pi4]\nBOOT_ORDER=0xf14\n\
             [none]\nBOOT_ORDER=0xf2\n[gpio4=0]\nBOOT_ORDER=0xf2\n[all]\nPCIE_PROBE=1\n[tryboot]\nBOOT_ORDER=0xf16\n",
        );
        assert_eq!(conf.value("BOOT_UART", Board::Pi4, false), Some("1"));
        assert_eq!(conf.value("BOOT_ORDER", Board::Pi5, false), Some("0xf461"));
        assert_eq!(conf.value("BOOT_ORDER", Board::Pi4, false), Some("0xf14"));
        assert_eq!(conf.value("BOOT_ORDER", Board::Pi4, true), Some("0xf16"));
        assert_eq!(conf.value("PCIE_PROBE", Board::Pi5, false), Some("1"));
        assert_eq!(conf.value("WAKE_ON_GPIO", Board::Pi5, false), None);
    }

    #[test]
    fn boot_orders_stop_at_restart_and_bad_ones_are_refused() {
        assert_eq!(
            BootOrder::parse("0x21f6").unwrap().modes(),
            [BootMode::Nvme, BootMode::Restart]
        );
        assert_eq!(
            BootOrder::parse("e1").unwrap().modes(),
            [BootMode::SdCard, BootMode::Stop]
        );
        assert_eq!(
            BootOrder::parse("0x3").unwrap().modes(),
            [BootMode::Other(3)]
        );
        for bad in ["", "0x", "0", "sd", "0xfffffffff"] {
            assert!(BootOrder::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn broken_images_are_refused() {
        let err = Image::parse(b"\x12\x34\x56\x78\0\0\0\0".to_vec()).unwrap_err();
        assert!(err.to_string().contains("not a bootloader image"), "{err}");
        let mut truncated = std::fs::read(data().join(PI4_IMAGE)).unwrap();
        let first_length = be_u32(&truncated, 4) as usize;
        truncated.truncate(HEADER_LEN + first_length / 2);
        let err = Image::parse(truncated).unwrap_err();
        assert!(err.to_string().contains("past the image's end"), "{err}");
        assert!(Image::parse(vec![0xff; 64]).is_err());
    }
}
