//! The state files pimigrate keeps: the migration's journal
//! (`migration.json`) and the standby's record (`standby.json`), in the
//! state directory and copied onto the disk they describe. Here are their
//! types, schemas and readers, and what can be told from them without
//! writing; the one writer of both is `apply::state`, which takes
//! the state directory's lock as a value, so who may write a state file is
//! a type, not a rule in a comment.

pub mod journal;
pub mod standby;
