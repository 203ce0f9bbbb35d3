//! The only code that writes: applies a [`crate::plan::Plan`] step by step.

pub mod atomic;
pub mod copy_root;
pub mod executor;
pub mod journal;
pub mod log;
pub mod loopparts;
pub mod mount;
pub mod reread;
pub mod table;
pub mod wipe;
