//! The bootloader EEPROM of one emulated Pi 4 or Pi 5, kept between its
//! boots as the SPI flash keeps it: the image, the config the bootloader
//! runs with, when it was built and last updated, a HAT+ on a Pi 5, and a
//! one-shot reboot order (`set_reboot_order`). It decides the order in
//! which a boot tries the boot modes ([`Bootloader::boot_order`]).

use crate::firmware::eeprom::{Board, BootConf, BootOrder, Image};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};

/// The vendored rpi-eeprom release files (`testbed/data/rpi-eeprom`): the
/// real images and recovery.bin of each board, and the official tools.
pub fn rpi_eeprom_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/rpi-eeprom")
}

/// The release folder of `board`'s files in [`rpi_eeprom_data`].
pub fn release_dir(board: Board) -> PathBuf {
    rpi_eeprom_data().join(format!("firmware-{}", board.chip()))
}

/// The `default` release image a board starts with.
pub fn release_image(board: Board) -> PathBuf {
    release_dir(board).join(match board {
        Board::Pi4 => "pieeprom-2026-05-17.bin",
        Board::Pi5 => "pieeprom-2026-05-26.bin",
    })
}

/// 2025-01-14 00:00 UTC: a Pi 5 bootloader built since honours
/// `set_reboot_order` (rpi-eeprom's firmware-2712 release notes); an older
/// one never reads it.
pub const SET_REBOOT_ORDER_SINCE: u32 = 1_736_812_800;

/// One Pi's bootloader EEPROM and what its bootloader keeps across resets.
#[derive(Debug, Clone)]
pub struct Bootloader {
    board: Board,
    image: Vec<u8>,
    /// The config the bootloader runs with: the image's bootconf.txt, or
    /// the one a scenario set.
    config: String,
    conf: BootConf,
    build_timestamp: u32,
    update_timestamp: u32,
    hat_plus: Option<String>,
    reboot_order: Option<BootOrder>,
}

impl Bootloader {
    /// `board`'s bootloader as the release image in testbed/data/rpi-eeprom
    /// has it: its own config and build time, never updated.
    pub fn release(board: Board) -> Result<Bootloader> {
        let path = release_image(board);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut bootloader = Bootloader {
            board,
            image: Vec::new(),
            config: String::new(),
            conf: BootConf::parse(""),
            build_timestamp: 0,
            update_timestamp: 0,
            hat_plus: None,
            reboot_order: None,
        };
        bootloader
            .flash(bytes, None)
            .with_context(|| format!("the release image {}", path.display()))?;
        Ok(bootloader)
    }

    /// Writes a new image into the EEPROM (recovery.bin applying
    /// pieeprom.upd, flashrom): from the next reset the bootloader runs it,
    /// with its own bootconf.txt and build time. `update_time` is when it
    /// was written (pieeprom.sig's `ts:`); without one, the time the image
    /// was stamped with, else 0. An image that is not one for this board
    /// is refused, as it would not start.
    pub fn flash(&mut self, bytes: Vec<u8>, update_time: Option<u32>) -> Result<()> {
        ensure!(
            bytes.len() == self.board.eeprom_size(),
            "a {} byte image does not fit the {:?}'s {} byte EEPROM",
            bytes.len(),
            self.board,
            self.board.eeprom_size()
        );
        let image = Image::parse(bytes)?;
        let config = image.bootconf_text()?;
        self.build_timestamp = image.build_timestamp()?;
        self.update_timestamp = update_time.or(image.update_time()).unwrap_or(0);
        self.conf = BootConf::parse(&config);
        self.config = config;
        self.image = image.bytes().to_vec();
        Ok(())
    }

    /// The config the bootloader runs with, as if the EEPROM had been
    /// written with it (a scenario's `BOOT_ORDER=0xf41`). The image keeps
    /// its own bootconf.txt: only a flash or an applied update replaces it.
    pub fn set_config(&mut self, text: &str) -> &mut Self {
        self.config = text.to_string();
        self.conf = BootConf::parse(text);
        self
    }

    /// Plays a bootloader built at `timestamp` (unix time), such as one
    /// from before `set_reboot_order` ([`SET_REBOOT_ORDER_SINCE`]): what it
    /// reports and which features it has. The image is left as it is.
    pub fn set_build_timestamp(&mut self, timestamp: u32) -> &mut Self {
        self.build_timestamp = timestamp;
        self
    }

    /// A HAT+ (an M.2 HAT+, say) on a Pi 5's GPIO header: the bootloader
    /// reads its EEPROM, names it in `/proc/device-tree/hat/product`, and
    /// probes PCIe for an NVMe drive without `PCIE_PROBE=1`.
    pub fn attach_hat_plus(&mut self, product: &str) -> Result<&mut Self> {
        ensure!(
            self.board == Board::Pi5,
            "a HAT+ is a Pi 5's; this bootloader is a {:?}'s",
            self.board
        );
        self.hat_plus = Some(product.to_string());
        Ok(self)
    }

    /// What `set_reboot_order` (`vcmailbox 0x0003808b 4 4 ORDER`) asks of
    /// the next reboot: one boot in `order` instead of BOOT_ORDER.
    pub fn set_reboot_order(&mut self, order: BootOrder) {
        self.reboot_order = Some(order);
    }

    pub fn board(&self) -> Board {
        self.board
    }

    /// The EEPROM's contents.
    pub fn image(&self) -> &[u8] {
        &self.image
    }

    /// The running config's text (`vcgencmd bootloader_config`).
    pub fn config(&self) -> &str {
        &self.config
    }

    /// The running config, parsed.
    pub fn conf(&self) -> &BootConf {
        &self.conf
    }

    /// When the running bootloader was built (`/chosen/bootloader/build-timestamp`).
    pub fn build_timestamp(&self) -> u32 {
        self.build_timestamp
    }

    /// When the EEPROM was last written (`vcgencmd bootloader_version`'s
    /// `update-time`), 0 if never.
    pub fn update_timestamp(&self) -> u32 {
        self.update_timestamp
    }

    /// The attached HAT+'s product name.
    pub fn hat_plus(&self) -> Option<&str> {
        self.hat_plus.as_deref()
    }

    /// The reboot order the next boot would take, if asked for.
    pub fn reboot_order(&self) -> Option<BootOrder> {
        self.reboot_order
    }

    /// Drops a pending reboot order: a reset that does not go through the
    /// bootloader's reading of it (a power cut, recovery.bin's reset).
    pub fn clear_reboot_order(&mut self) {
        self.reboot_order = None;
    }

    /// The order this boot tries the boot modes in, and why: a pending
    /// reboot order, once, where the boot before ended in a reboot and the
    /// bootloader is a Pi 5's from 2025-01-14 on; else BOOT_ORDER (its
    /// `[tryboot]` section in a trial boot), the default 0xf41 where the
    /// config has none. The reboot order is cleared either way.
    pub fn boot_order(&mut self, tryboot: bool, after_reboot: bool) -> Result<(BootOrder, String)> {
        let mut why = Vec::new();
        if let Some(order) = self.reboot_order.take() {
            if self.board != Board::Pi5 {
                why.push(format!(
                    "set_reboot_order {order} ignored: a Pi 4's bootloader has no set_reboot_order"
                ));
            } else if self.build_timestamp < SET_REBOOT_ORDER_SINCE {
                why.push(format!(
                    "set_reboot_order {order} ignored: this bootloader was built {}, before 2025-01-14",
                    utc(self.build_timestamp)
                ));
            } else if !after_reboot {
                why.push(format!(
                    "set_reboot_order {order} lost: the boot before did not end in a reboot"
                ));
            } else {
                return Ok((order, format!("set_reboot_order {order}, once")));
            }
        }
        let order = self
            .conf
            .boot_order(self.board, tryboot)
            .context("the EEPROM config's BOOT_ORDER")?;
        let source = match self.conf.value("BOOT_ORDER", self.board, tryboot) {
            None => "the default, the config has no BOOT_ORDER",
            Some(_)
                if tryboot
                    && self.conf.value("BOOT_ORDER", self.board, false)
                        != self.conf.value("BOOT_ORDER", self.board, true) =>
            {
                "BOOT_ORDER of the [tryboot] section"
            }
            Some(_) => "BOOT_ORDER",
        };
        why.push(format!("{order} ({source})"));
        Ok((order, why.join("; ")))
    }

    /// Whether the bootloader looks for an NVMe drive on PCIe: a Pi 4
    /// (the x86 guest's is a CM4-like Pi 4 with NVMe) always; a Pi 5 with
    /// `PCIE_PROBE=1` or a HAT+ that says what is on its PCIe connector.
    pub fn probes_nvme(&self, tryboot: bool) -> bool {
        self.board == Board::Pi4
            || self.hat_plus.is_some()
            || self.conf.value("PCIE_PROBE", self.board, tryboot) == Some("1")
    }

    /// What `vcgencmd bootloader_version` prints on this Pi: the build
    /// date, the git hash, the build and update times and the
    /// capabilities.
    pub fn version_report(&self) -> Result<String> {
        let version = Image::parse(self.image.clone())?.version()?;
        Ok(format!(
            "{}\nversion {version} (release)\ntimestamp {}\nupdate-time {}\ncapabilities 0x0000007f\n",
            utc(self.build_timestamp),
            self.build_timestamp,
            self.update_timestamp
        ))
    }
}

/// `timestamp` as the bootloader prints its date: `2026/05/17 19:13:18` (UTC).
pub fn utc(timestamp: u32) -> String {
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(timestamp));
    // RFC 3339 (`2026-05-17T19:13:18Z`) in the bootloader's spelling.
    humantime::format_rfc3339_seconds(when)
        .to_string()
        .trim_end_matches('Z')
        .replace('-', "/")
        .replace('T', " ")
}

/// Reads BOOT_ORDER-like hex (`0xf16`) as `set_reboot_order`'s argument.
pub fn parse_reboot_order(text: &str) -> Result<BootOrder> {
    let text = text.trim();
    if text.is_empty() {
        bail!("an empty reboot order");
    }
    BootOrder::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_board_starts_as_its_release_image() {
        let pi4 = Bootloader::release(Board::Pi4).unwrap();
        assert_eq!(pi4.image().len(), 512 * 1024);
        assert_eq!(pi4.build_timestamp(), 1_779_045_198);
        assert_eq!(pi4.update_timestamp(), 0);
        assert!(
            pi4.config().contains("POWER_OFF_ON_HALT=0"),
            "{}",
            pi4.config()
        );
        let pi5 = Bootloader::release(Board::Pi5).unwrap();
        assert_eq!(pi5.image().len(), 2 * 1024 * 1024);
        assert!(
            pi5.config().contains("BOOT_ORDER=0xf461"),
            "{}",
            pi5.config()
        );
        assert_eq!(pi5.hat_plus(), None);
        // A Pi 4's image does not fit a Pi 5's EEPROM, and back.
        let mut wrong = pi5.clone();
        let err = wrong.flash(pi4.image().to_vec(), None).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }

    #[test]
    fn the_version_report_is_vcgencmds() {
        let pi4 = Bootloader::release(Board::Pi4).unwrap();
        assert_eq!(
            pi4.version_report().unwrap(),
            "2026/05/17 19:13:18\nversion 224877da90f82a72dbcc9db10bcf059259f54680 (release)\n\
             timestamp 1779045198\nupdate-time 0\ncapabilities 0x0000007f\n"
        );
        assert_eq!(utc(0), "1970/01/01 00:00:00");
        assert_eq!(utc(SET_REBOOT_ORDER_SINCE), "2025/01/14 00:00:00");
        assert_eq!(utc(951_782_400), "2000/02/29 00:00:00");
    }

    #[test]
    fn a_reboot_order_counts_once_after_a_reboot_on_a_recent_pi5() {
        let mut pi5 = Bootloader::release(Board::Pi5).unwrap();
        let nvme_first = BootOrder(0xf16);
        pi5.set_reboot_order(nvme_first);
        let (order, why) = pi5.boot_order(false, true).unwrap();
        assert_eq!(order, nvme_first, "{why}");
        // Once: the next boot is back on BOOT_ORDER.
        assert_eq!(pi5.boot_order(false, true).unwrap().0, BootOrder(0xf461));
        // A power cut loses it.
        pi5.set_reboot_order(nvme_first);
        let (order, why) = pi5.boot_order(false, false).unwrap();
        assert_eq!(order, BootOrder(0xf461));
        assert!(why.contains("lost"), "{why}");
        assert_eq!(pi5.reboot_order(), None);
        // A bootloader from before 2025-01-14 never reads it.
        pi5.set_build_timestamp(SET_REBOOT_ORDER_SINCE - 1);
        pi5.set_reboot_order(nvme_first);
        let (order, why) = pi5.boot_order(false, true).unwrap();
        assert_eq!(order, BootOrder(0xf461));
        assert!(why.contains("before 2025-01-14"), "{why}");
        // Nor does a Pi 4's.
        let mut pi4 = Bootloader::release(Board::Pi4).unwrap();
        pi4.set_reboot_order(nvme_first);
        assert_eq!(pi4.boot_order(false, true).unwrap().0, BootOrder(0xf41));
    }

    #[test]
    fn a_trial_boot_takes_the_tryboot_section_and_a_set_config_counts() {
        let mut pi4 = Bootloader::release(Board::Pi4).unwrap();
        pi4.set_config("[all]\nBOOT_ORDER=0xf41\n[tryboot]\nBOOT_ORDER=0xf14\n");
        let (normal, _) = pi4.boot_order(false, false).unwrap();
        let (trial, why) = pi4.boot_order(true, true).unwrap();
        assert_eq!((normal, trial), (BootOrder(0xf41), BootOrder(0xf14)));
        assert!(why.contains("[tryboot]"), "{why}");
    }

    #[test]
    fn a_pi5_probes_nvme_with_pcie_probe_or_a_hat_plus() {
        let mut pi5 = Bootloader::release(Board::Pi5).unwrap();
        assert!(!pi5.probes_nvme(false));
        pi5.set_config("[all]\nBOOT_ORDER=0xf416\nPCIE_PROBE=1\n");
        assert!(pi5.probes_nvme(false));
        pi5.set_config("[all]\nBOOT_ORDER=0xf416\n");
        pi5.attach_hat_plus("Raspberry Pi M.2 HAT+").unwrap();
        assert!(pi5.probes_nvme(false));
        let mut pi4 = Bootloader::release(Board::Pi4).unwrap();
        assert!(pi4.probes_nvme(false));
        assert!(pi4.attach_hat_plus("M.2 HAT+").is_err());
    }
}
