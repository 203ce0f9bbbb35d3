//! The only code that writes to a disk, a boot file or pimigrate's own
//! state: applies a [`crate::plan::Plan`] step by step (and a sync's plan),
//! and holds the guarded writers: [`state::StateLock`], the state
//! directory's lock and the one writer of the journal and the standby
//! record; [`boot_partition::BootWriter`], the boot partition's, which
//! `verify` and `rollback` use too; [`timer`], the sync timer's units.
//! (Elsewhere pimigrate writes only reports, the benchmark's test file
//! and logs.)

pub mod atomic;
pub mod boot_partition;
pub mod boot_tree;
pub mod bootloader;
pub mod copy_root;
pub mod edit_files;
pub mod executor;
pub mod layout;
pub mod log;
pub mod loopparts;
pub mod migration;
pub mod mount;
pub mod render;
pub mod replica;
pub mod reread;
pub mod sd_boot;
pub mod standby;
pub mod standing;
pub mod state;
pub mod sync;
pub mod table;
pub mod timer;
pub mod trial_guard;
pub mod trial_outcome;
pub mod trim_setup;
pub mod wipe;
