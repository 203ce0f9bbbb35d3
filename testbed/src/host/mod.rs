//! The host's side of the testbed, below the machine and the firmware
//! stand-in: disk images and the buses and speed profiles they are
//! attached with, the cached pristine images, the share folder the guest's
//! command channel runs through, and the tools that read and check images
//! from the host while the machine is off.

pub mod attach;
pub mod cmd;
pub mod disks;
pub mod fat;
pub mod fsck;
pub mod image;
pub mod inspect;
pub mod kernel;
pub mod mbr;
pub mod profiles;
pub mod share;
#[cfg(test)]
pub(crate) mod test_disks;
