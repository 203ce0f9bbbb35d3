//! The emulated machine, the harness the scenarios and benchmarks are
//! built from: one Raspberry Pi played by QEMU ([`pi`], [`qemu`], [`qmp`]),
//! its boots and their faults ([`fault`]), the raspi machines' command
//! channel on the SD card ([`card_channel`]), power cuts judged from the
//! host ([`power`]), a Pi that stays up for tests that drive it from
//! outside ([`live`]), the host's load beside it ([`load`]); and what
//! scenarios set up alike: a rig of disks ([`rig`]), pimigrate in the
//! guest ([`pimigrate_bin`]) and what a guest job reports ([`probe`]).

pub mod card_channel;
pub mod fault;
pub mod live;
pub mod load;
pub mod pi;
pub mod pimigrate_bin;
pub mod power;
pub mod probe;
pub mod qemu;
pub mod qmp;
pub mod raspi4b;
pub mod rig;
