//! cmdline.txt that a package writes anew: Debian's raspi-firmware hooks
//! (`/etc/kernel/postinst.d/z50-raspi-firmware`, and the same script in
//! `/etc/initramfs/post-update.d/`) rebuild cmdline.txt on every kernel or
//! initramfs update, with `root=$ROOTPART` from `/etc/default/raspi-firmware`
//! (or, when that is unset, whatever `findmnt /` reports: a kernel name
//! like /dev/sda2, or the SD card's LABEL=RASPIROOT in Debian's images).
//! Editing cmdline.txt alone would be undone by the next upgrade, so the
//! new root's copy of the setting names the new root too.

use super::options::Layout;
use super::replica::RootPart;
use super::FileEdit;

/// The settings file the raspi-firmware hooks source.
pub const RASPI_FIRMWARE_DEFAULTS: &str = "/etc/default/raspi-firmware";
/// The setting they write into cmdline.txt as `root=`.
pub const ROOTPART: &str = "ROOTPART";

/// What ROOTPART= on the new root says of itself.
pub(super) const MOVED_HERE: &str = "Set by pimigrate: the root filesystem moved here; raspi-firmware writes this into cmdline.txt as root=";

/// What the plan does about a regenerating package: the edit of its setting
/// on the new root, and what to tell the user.
pub(super) struct Regenerated {
    pub edit: FileEdit,
    pub note: String,
    pub warning: Option<String>,
}

/// What the plan says of the target root's `/etc/default/raspi-firmware`,
/// whose edit ([`super::replica::root_edits`], the replica's, with the
/// value [`super::replica::retarget`] decided) is `edit`.
pub(super) fn raspi_firmware(
    rootpart: &RootPart,
    edit: FileEdit,
    layout: Layout,
    trial: bool,
) -> Regenerated {
    let value = &rootpart.value;
    let was = match &rootpart.current {
        Some(old) => format!("it says {ROOTPART}={old}"),
        None => format!("{ROOTPART} is unset, so it would take whatever `findmnt /` reports"),
    };
    let note = format!(
        "Debian's raspi-firmware rebuilds cmdline.txt from {RASPI_FIRMWARE_DEFAULTS} on every kernel or initramfs \
         update ({was}): the new root's copy says {ROOTPART}={value}, so the next upgrade keeps the new root. \
         The SD card's root keeps its own setting, which is right again after a rollback."
    );
    // Between the migration and the reboot the SD card's system still runs
    // and its hook would write its own ROOTPART into the edited cmdline.txt.
    let warning = (layout == Layout::RootOnly && !trial).then(|| {
        format!(
            "reboot soon after the migration: until then a kernel or initramfs update on this system rewrites \
             cmdline.txt from the SD card's {RASPI_FIRMWARE_DEFAULTS} and undoes the move"
        )
    });
    Regenerated {
        edit,
        note,
        warning,
    }
}
