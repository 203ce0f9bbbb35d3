//! What the source's boot layout asks of a migration beyond `root=`: the
//! first-boot hooks its command line still carries, and an fstab that
//! leaves `/` to the kernel. Each becomes an operation, a note the plan
//! shows (the wizard too), or a refusal with the way out.

use super::source_check::CheckedSource;
use super::{EditOperation, Layout, Reason};
use crate::bootcfg::firstboot::{first_boot_hooks, HookAction};

/// The extra cmdline.txt operations and what the plan says about them.
#[derive(Debug, Default)]
pub(crate) struct LayoutDemands {
    /// Applied to the command line the new root boots with, after `root=`.
    pub cmdline_ops: Vec<EditOperation>,
    pub notes: Vec<String>,
}

pub(crate) fn demands(
    source: &CheckedSource,
    layout: Layout,
    trial: bool,
    reasons: &mut Vec<Reason>,
) -> LayoutDemands {
    let mut demands = LayoutDemands::default();
    let cmdline_name = source.cmdline_path.display();
    for hook in first_boot_hooks(source.cmdline) {
        match hook.action {
            HookAction::LeaveOut => {
                let sd_card = match (layout, trial) {
                    (Layout::Full, _) => "the SD card's own cmdline.txt is not changed",
                    (Layout::RootOnly, true) => {
                        "the SD card's cmdline.txt keeps it until `verify --commit` replaces it with the trial's"
                    }
                    (Layout::RootOnly, false) => "it is removed from the SD card's cmdline.txt",
                };
                demands.notes.push(format!(
                    "{cmdline_name} still has the first-boot hook `{}` ({}). The new command line goes without it: \
                     the new root partition already fills its space and has fresh ids, and the hook would act on \
                     whichever disk boots it; {sd_card}.",
                    hook.arg, hook.what
                ));
                demands.cmdline_ops.push(EditOperation::CmdlineRemove { arg: hook.arg });
            }
            HookAction::BootOnceFirst => reasons.push(
                Reason::new(
                    "first-boot-pending",
                    format!(
                        "{cmdline_name} has `{}`: this system has not finished its first boot ({}), \
                         and a copy made now would lack what it sets up and run it again",
                        hook.arg, hook.what
                    ),
                )
                .hint("boot the system once from the SD card and let the first-boot setup finish (it reboots by itself), then run pimigrate again"),
            ),
        }
    }
    if source.fstab.root().is_err() {
        demands.notes.push(
            "/etc/fstab has no line for / (as on Arch Linux ARM): the kernel mounts the root filesystem from \
             cmdline.txt's root=, so only cmdline.txt names the new root; /etc/fstab is left as it is"
                .into(),
        );
    }
    demands
}
