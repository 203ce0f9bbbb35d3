//! `pimigrate sync`: a standby copy of the running system kept up to date
//! (the SD card the system was migrated from, or any disk named), and
//! checked after every run that it would boot.
//!
//! As everywhere in pimigrate: plan, then apply. [`plan::plan_sync`] finds
//! the standby, decides what the run does (a first run lays the disk out as
//! a migration would; later runs copy what changed) and refuses what is
//! unsafe; [`apply::apply`] is the only code here that writes. It marks the
//! standby as being synced before it touches it and as complete only after
//! the copy, the edits, a flush and the offline checks ([`checks`]), so an
//! interrupted run is never taken for a good copy ([`record`]). A
//! [`watchdog`] ends a run whose disk stops answering. [`timer`] writes the
//! systemd units that run it daily; [`status`] is the one line `devices`
//! and `verify` show.

pub mod boot_order;
pub mod checks;
pub mod divergence;
pub mod kernel;
pub mod plan;
pub mod record;
pub mod render;
pub mod standby;
pub mod status;
pub mod superblock;
pub mod timer;
pub mod watchdog;

/// The `--json` document of `pimigrate sync`.
pub const SYNC_SCHEMA: &str = "pimigrate.sync/2";

/// How long the standby may go without any progress (no entry copied, no
/// byte read or written by its disk) before the run is ended.
pub const DEFAULT_STALL_TIMEOUT_SECS: u64 = 120;
