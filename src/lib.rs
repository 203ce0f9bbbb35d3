//! pimigrate: move a Raspberry Pi's system off its SD card.
//!
//! Reading (`system`, `bootcfg`) and deciding (`plan`) are separate from
//! acting: `plan::plan` turns what is true about the machine and what the
//! user asked into a [`plan::Plan`], or a [`plan::Refusal`] with every reason.
pub mod apply;
pub mod bench;
pub mod bootcfg;
pub mod check;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod copy;
pub mod exit;
pub mod failpoint;
pub mod host;
pub mod plan;
pub mod privilege;
pub mod recommend;
pub mod signals;
pub mod space;
pub mod state;
pub mod status;
pub mod sync;
pub mod sys64;
pub mod system;
pub mod tools;
pub mod ui;
pub mod units;
pub mod verify;
pub mod wizard;
