//! `pimigrate sync`: a standby copy of the running system kept up to date
//! (the SD card the system was migrated from, or any disk named), and
//! checked after every run that it would boot.
//!
//! As everywhere in pimigrate: plan, then apply. This room is the deciding
//! half: [`plan::plan_sync`] finds the standby, decides what the run does
//! (a first run lays the disk out as a migration would; later runs copy
//! what changed) and refuses what is unsafe; [`checks`] are the offline
//! checks a run ends with, [`divergence`] tells whether the standby changed
//! behind the sync's back, [`timer`] says what the daily timer's units
//! hold, and [`status`] is the one line `devices` and `verify` show. The
//! writing half is `apply`'s (`apply::standby`, `apply::sync`,
//! `apply::timer`): it marks the standby as being synced before it touches
//! it and as complete only after the copy, the edits, a flush and the
//! checks, so an interrupted run is never taken for a good copy (the
//! record: `state::standby`). A [`watchdog`] ends a run whose disk stops
//! answering.

pub mod boot_order;
pub mod checks;
pub mod compare;
pub mod divergence;
pub mod own_files;
pub mod plan;
pub mod render;
pub mod standby;
pub mod status;
pub mod timer;
pub mod watchdog;

/// The `--json` document of `pimigrate sync`.
pub const SYNC_SCHEMA: &str = "pimigrate.sync/2";

/// How long the standby may go without any progress (no entry copied, no
/// byte read or written by its disk) before the run is ended.
pub const DEFAULT_STALL_TIMEOUT_SECS: u64 = 120;
