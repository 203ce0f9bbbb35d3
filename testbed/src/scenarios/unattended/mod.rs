//! The unattended failure matrix: failures injected into migrations in
//! both layouts, and after each the harness only waits (no power cycle, no
//! console input, no command into the guest) until the Pi runs again, then
//! checks where it runs and what was recorded. The firmware stand-in adds
//! no `panic=-1` here ([`crate::machine::qemu::MachineConfig::reset_on_panic`]): a
//! trial that nothing resets waits, as on a Pi, until the boot's time
//! limit, which counts as needing hands. Each failure goes to the tally
//! ([`tally`]) that ends the run's output:
//! `unattended: N failures injected, N came back by themselves (slowest M
//! s), 0 needed hands`.
//!
//! The failures are chained on one set of disks ([`chain`]), as
//! `power-cut-migrate` chains its cuts: the SD card's system, back after
//! one failed trial, says what happened (`pimigrate status`, the trial's
//! record), mends it, breaks the next thing and starts the next trial.
//! Each failure is a row of a layout's table ([`matrix`]) of
//! [`breakage::Breakage`]s, and one loop runs a table
//! ([`chain::Chain::run_matrix`]); what comes before the first trial and
//! after the last is each layout's own ([`root_only`], [`full`]).
//!
//! The ARM lane's case is in `pi4-trial` (`scenarios/raspi.rs`): an fstab
//! line that fails in a trial the Pi 4 model's real tryboot flag started.

pub(super) mod breakage;
pub(super) mod chain;
pub(super) mod full;
pub(super) mod matrix;
pub(super) mod root_only;
pub mod tally;
