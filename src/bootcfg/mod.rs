//! Boot-file parsers and editors that keep every other byte.
//!
//! A migration rewrites three small files on the boot and root partitions:
//! `cmdline.txt` (which partition the kernel mounts as `/`), `/etc/fstab`
//! (which partitions userspace mounts) and, for a trial boot, `config.txt` or
//! `tryboot.txt`. Users and other tools have edited these files by hand, so an
//! edit must change only the token it targets: comments, alignment, tabs,
//! CRLF line endings, unknown lines and a missing final newline all survive.
//!
//! Every parser here refuses input it does not understand with an error a
//! person can act on, instead of guessing; none of them panics on any input.
//!
//! - [`spec`] names block devices as boot files do (`PARTUUID=…`, `UUID=…`, …).
//! - [`cmdline`] reads and edits the kernel command line in `cmdline.txt`.
//! - [`fstab`] reads and edits `/etc/fstab`.
//! - [`configtxt`] evaluates the firmware's `config.txt` / `tryboot.txt` filters.
//! - [`firstboot`] recognises first-boot hooks on a command line.
//! - [`noroot`] recognises systems without a root partition (squashfs, RAM).
//! - [`eeprom`] reads and edits the bootloader's EEPROM config (`BOOT_ORDER`, `[tryboot]`).
//! - [`defaults`] reads and edits `/etc/default/` settings (raspi-firmware's `ROOTPART=`).
//! - [`usb_quirks`] merges `usb-storage.quirks=VID:PID:u` into the command line.
//! - [`diff`] shows an edit as a unified diff, for plans and dry runs.

pub mod cmdline;
pub mod configtxt;
pub mod defaults;
pub mod diff;
pub mod eeprom;
pub mod firstboot;
pub mod fstab;
pub mod noroot;
pub mod spec;
mod text;
pub mod usb_quirks;

pub use cmdline::{Cmdline, CmdlineError};
pub use configtxt::{
    BootSettings, ConfigTxt, ConfigTxtError, FilterContext, IncludeReader, Initramfs,
    InitramfsAddress, UncertainSetting,
};
pub use diff::unified_diff;
pub use eeprom::{BootOrder, EepromConfig, EepromConfigError};
pub use fstab::{Fstab, FstabEntry, FstabError};
pub use spec::{DeviceSpec, SpecError};
