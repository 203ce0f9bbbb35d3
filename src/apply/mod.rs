//! The only code that writes: applies a [`crate::plan::Plan`] step by step.

pub mod atomic;
pub mod mount;
pub mod reread;
pub mod table;
pub mod wipe;
