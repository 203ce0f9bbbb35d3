//! The only code that writes to a disk or a boot file: applies a
//! [`crate::plan::Plan`] step by step, and holds the one guarded writer of
//! the boot partition ([`boot_partition::BootWriter`]) that `verify` and
//! `rollback` use too. (Elsewhere pimigrate writes only its own files:
//! reports, the benchmark's test file, logs.)

pub mod atomic;
pub mod boot_partition;
pub mod boot_tree;
pub mod bootloader;
pub mod copy_root;
pub mod edit_files;
pub mod executor;
pub mod journal;
pub mod layout;
pub mod log;
pub mod loopparts;
pub mod migration;
pub mod mount;
pub mod render;
pub mod reread;
pub mod sd_boot;
pub mod standby;
pub mod sync;
pub mod table;
pub mod trial_guard;
pub mod trial_outcome;
pub mod wipe;
