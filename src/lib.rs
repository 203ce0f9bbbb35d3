//! pimigrate: move a Raspberry Pi's system off its SD card, plan first, then apply.
pub mod bootcfg;
