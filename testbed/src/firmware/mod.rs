//! The firmware stand-in: what a Pi's boot ROM, EEPROM bootloader,
//! recovery.bin and `start*.elf` do before Linux runs ([`boot`]), the
//! EEPROM it keeps between boots ([`bootloader`], read by [`eeprom`]), what
//! it tells Linux in the device tree ([`device_tree`]), and what the x86
//! guest gets instead of a real Pi's firmware: its share's `firmware/`
//! ([`channel`]) and Raspberry Pi OS's tools ([`pi_tools`]). It uses the
//! host's tools only (docs/testbed/firmware.md).

pub mod boot;
pub mod bootloader;
pub mod channel;
pub mod config_txt;
pub mod device_tree;
pub mod eeprom;
pub mod model;
pub mod partition;
pub mod pi_tools;
pub mod recovery;
pub mod sections;
pub mod spec;
