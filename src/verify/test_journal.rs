//! The journal of the root-only move the "pi4" fixture machine shows
//! (to /dev/sda, with a trial), every step done and not yet committed:
//! what verify's tests start from.

use crate::plan::{Options, TrialChoice};
use crate::state::journal::{Journal, Step};

pub(crate) fn pi4_root_only() -> Journal {
    let (_host, system) = crate::system::inspect_fixture("pi4");
    let mut options = Options::new("/dev/sda");
    options.trial = TrialChoice::Always;
    options.seed = Some(7);
    options.disk_signature = Some(0x2f4a_9c17);
    let plan = crate::plan::plan(&system, &options).expect("planning for the pi4 fixture");
    let mut journal = Journal::new(plan, "/".into(), "/boot/firmware".into());
    journal.done = vec![
        Step::Partitioned,
        Step::Formatted,
        Step::Copied,
        Step::TargetEdited,
        Step::SourceBootEdited,
    ];
    journal
}
