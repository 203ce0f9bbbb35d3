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
//!
//! Besides its files an image carries what `rpi-eeprom-update` reads with
//! `strings`: `BUILD_TIMESTAMP=<unix time>` and `VERSION:<git hash>`; and
//! the time it was last written (`rpi-eeprom-config --timestamp`): the
//! `updatetime` file of the first 64 KiB (a Pi 5's read-only part) or,
//! where there is none there (a Pi 4's), the image's last 8 bytes, each as
//! the inverted time then the time, little-endian.

use crate::firmware::sections::{self, Line};
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

/// The file that holds the time the image was written.
const UPDATE_TIME: &str = "updatetime";

/// The part of an image before its first partition: an `updatetime` file
/// there is the one that counts.
const READ_ONLY_SIZE: usize = 64 * 1024;

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
        Ok(BootConf::parse(&self.bootconf_text()?))
    }

    /// The text of the image's `bootconf.txt`.
    pub fn bootconf_text(&self) -> Result<String> {
        let bytes = self
            .file(BOOTCONF)
            .with_context(|| format!("the bootloader image has no {BOOTCONF}"))?;
        let text = std::str::from_utf8(bytes)
            .with_context(|| format!("the image's {BOOTCONF} is not UTF-8"))?;
        Ok(text.to_string())
    }

    /// The whole image, as it would be written to the SPI flash.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `BUILD_TIMESTAMP=`: when the bootloader was built (unix time), which
    /// `rpi-eeprom-update` compares and the bootloader reports in
    /// `/chosen/bootloader/build-timestamp`.
    pub fn build_timestamp(&self) -> Result<u32> {
        let digits = self
            .after("BUILD_TIMESTAMP=")
            .context("the bootloader image has no BUILD_TIMESTAMP")?;
        let digits: String = digits
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .map(|&b| b as char)
            .collect();
        digits
            .parse()
            .with_context(|| format!("the image's BUILD_TIMESTAMP={digits} is not a unix time"))
    }

    /// The bootloader's git hash, as `vcgencmd bootloader_version` prints
    /// it: the full 40 hex digits where the image holds them, else the
    /// short `VERSION:` one.
    pub fn version(&self) -> Result<String> {
        let short: String = self
            .after("VERSION:")
            .context("the bootloader image has no VERSION")?
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .map(|&b| b as char)
            .collect();
        let full = self
            .bytes
            .windows(40)
            .find(|w| w.starts_with(short.as_bytes()) && w.iter().all(u8::is_ascii_hexdigit))
            .map(|w| String::from_utf8_lossy(w).into_owned());
        Ok(full.unwrap_or(short))
    }

    /// When the image was last written (`rpi-eeprom-config --timestamp`,
    /// which `rpi-eeprom-update` sets), or None where it never was (erased
    /// flash: the time reads `0xffffffff`).
    pub fn update_time(&self) -> Option<u32> {
        let stamp =
            match self.sections.iter().find(|s| {
                s.file_name.as_deref() == Some(UPDATE_TIME) && s.contents < READ_ONLY_SIZE
            }) {
                Some(s) => self
                    .bytes
                    .get(s.contents + FILE_PREFIX_LEN..s.contents + FILE_PREFIX_LEN + 8)?,
                None => self.bytes.get(self.bytes.len().checked_sub(8)?..)?,
            };
        let le = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let (inverted, time) = (le(&stamp[..4]), le(&stamp[4..]));
        (inverted == !time && time != u32::MAX).then_some(time)
    }

    /// The bytes after the first occurrence of `marker`.
    fn after(&self, marker: &str) -> Option<&[u8]> {
        let at = self
            .bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())?;
        Some(&self.bytes[at + marker.len()..])
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

    /// The size of its SPI flash, which every image for it has.
    pub fn eeprom_size(self) -> usize {
        match self {
            Board::Pi4 => 512 * 1024,
            Board::Pi5 => 2 * 1024 * 1024,
        }
    }

    /// The chip's name in rpi-eeprom's folders (`bootloader-2711`).
    pub fn chip(self) -> &'static str {
        match self {
            Board::Pi4 => "2711",
            Board::Pi5 => "2712",
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

impl BootMode {
    /// The mode's BOOT_ORDER digit, which the bootloader also hands Linux
    /// as `/chosen/bootloader/boot-mode` (1 SD card, 4 USB, 6 NVMe).
    pub fn digit(self) -> u32 {
        match self {
            BootMode::SdCard => 1,
            BootMode::Network => 2,
            BootMode::UsbMassStorage => 4,
            BootMode::Nvme => 6,
            BootMode::Stop => 0xe,
            BootMode::Restart => 0xf,
            BootMode::Other(digit) => digit.into(),
        }
    }

    /// How the documentation names the mode.
    pub fn name(self) -> String {
        match self {
            BootMode::SdCard => "SD card".into(),
            BootMode::Network => "network".into(),
            BootMode::UsbMassStorage => "USB mass storage".into(),
            BootMode::Nvme => "NVMe".into(),
            BootMode::Stop => "stop".into(),
            BootMode::Restart => "restart".into(),
            BootMode::Other(digit) => format!("mode {digit:x}"),
        }
    }
}

/// BOOT_ORDER: hex digits read from the right, one boot mode each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOrder(pub u32);

impl std::fmt::Display for BootOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

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
    fn the_images_build_time_and_version_read_as_rpi_eeprom_update_reads_them() {
        // What `strings IMAGE | grep BUILD_TIMESTAMP` gives rpi-eeprom-update.
        let pi4 = image(PI4_IMAGE);
        assert_eq!(pi4.build_timestamp().unwrap(), 1_779_045_198);
        assert_eq!(
            pi4.version().unwrap(),
            "224877da90f82a72dbcc9db10bcf059259f54680"
        );
        let pi5 = image(PI5_IMAGE);
        assert_eq!(pi5.build_timestamp().unwrap(), 1_779_807_685);
        assert!(pi5.version().unwrap().starts_with("086b83e3"));
        // Fresh from the release: never written.
        assert_eq!(pi4.update_time(), None);
        assert_eq!(pi5.update_time(), None);
    }

    /// The update time the official tool stamps (`--timestamp`, as
    /// rpi-eeprom-update does before it stages or flashes an image) reads
    /// back: a Pi 5 image keeps it in its read-only `updatetime` file, a
    /// Pi 4 image in its last 8 bytes.
    #[test]
    fn the_update_time_the_official_tool_stamps_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        for name in [PI4_IMAGE, PI5_IMAGE] {
            let out = dir.path().join("stamped.bin");
            rpi_eeprom_config(&[
                Path::new("--timestamp"),
                Path::new("1760000000"),
                Path::new("--out"),
                &out,
                &data().join(name),
            ]);
            let stamped = Image::parse(std::fs::read(&out).unwrap()).unwrap();
            assert_eq!(stamped.update_time(), Some(1_760_000_000), "{name}");
            assert_eq!(
                stamped.build_timestamp().unwrap(),
                image(name).build_timestamp().unwrap()
            );
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
