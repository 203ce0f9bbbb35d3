//! The emulation's own faults: what QEMU, its machine models or a guest
//! kernel under TCG do now and then that says nothing about pimigrate.
//!
//! Each is decided where it is seen (the boot's watcher in
//! [`crate::machine::qemu`], the boot loop in [`crate::machine::pi`], a speed scenario's
//! premise) and travels as this type inside the `anyhow` error, so that
//! what to do about it is one match ([`EmulationFault::retry`]) instead
//! of a search of error strings.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A fault of the emulation, with the console it was seen on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmulationFault {
    pub kind: FaultKind,
    /// The boot's serial log (or the scenario's log, for a slow disk).
    pub log: PathBuf,
    /// Whether the guest had started its /init when it happened: before
    /// that nothing of the guest's userspace ran, so no disk changed.
    pub after_init: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// QEMU used no CPU time at all for this long: every vCPU halted and
    /// its main loop asleep, with a timer interrupt that never came.
    Stalled(Duration),
    /// QEMU died of this signal, a fault of the emulator itself.
    Crashed(i32),
    /// The guest kernel hung in its own initialisation: a task blocked
    /// for minutes (a vCPU whose timer never fires again), or its console
    /// silent this long before it ran /init.
    HungBeforeInit(Hang),
    /// Fewer USB disks came up than are attached (raspi's dwc2 and hub
    /// under host load): `seen` says what the console showed.
    UsbHubMissing { seen: String },
    /// An emulated disk ran far below its speed profile, so a speed
    /// scenario's premise did not hold.
    DiskBelowProfile { what: String },
    /// The emulated NVMe controller stopped completing commands that QEMU
    /// had taken: the guest's nvme driver timed them out, aborted them and
    /// reset the controller, with the guest itself running on. No
    /// scenario makes an NVMe drive stop answering (QEMU cannot unplug
    /// one from q35's root bus), so such a line is the emulation's: seen
    /// once in a loaded full run (2026-12-07, `sync-standby`, its full
    /// sync to the NVMe drive failing on the I/O errors that followed).
    /// `seen` is the console's first such line.
    NvmeStopped { seen: String },
}

/// How a guest kernel was seen to hang before /init.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hang {
    /// It reported a task blocked for more than two minutes.
    BlockedTask,
    /// Its console printed nothing for this long.
    Silent(Duration),
}

/// What the suite does about a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Boot the same disks once more, as one would power-cycle or replug:
    /// nothing the scenario cares about was written.
    Boot,
    /// Run the whole scenario once more, from fresh disks: the fault came
    /// while the guest was at work, so its disks are in no known state.
    Scenario,
}

impl EmulationFault {
    pub fn new(kind: FaultKind, log: impl Into<PathBuf>, after_init: bool) -> EmulationFault {
        EmulationFault {
            kind,
            log: log.into(),
            after_init,
        }
    }

    /// The one place that decides how a fault is retried: a boot that
    /// never reached /init (or whose USB disks never appeared, so its job
    /// found nothing to work on) is booted again; anything later is the
    /// scenario again.
    pub fn retry(&self) -> Retry {
        match self.kind {
            FaultKind::UsbHubMissing { .. } => Retry::Boot,
            FaultKind::DiskBelowProfile { .. } | FaultKind::NvmeStopped { .. } => Retry::Scenario,
            _ if !self.after_init => Retry::Boot,
            _ => Retry::Scenario,
        }
    }

    /// The fault inside `error`, if it is one (through any context).
    pub fn find(error: &anyhow::Error) -> Option<&EmulationFault> {
        error
            .chain()
            .find_map(|e| e.downcast_ref::<EmulationFault>())
    }
}

impl fmt::Display for EmulationFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FaultKind::Stalled(idle) => write!(
                f,
                "the emulator stalled: QEMU used no CPU time for {idle:.0?}, so the guest was \
                 not running at all; killed it"
            )?,
            FaultKind::Crashed(signal) => write!(
                f,
                "the emulator crashed: QEMU died of signal {signal}, a fault of the emulator \
                 itself, not of the guest"
            )?,
            FaultKind::HungBeforeInit(Hang::BlockedTask) => write!(
                f,
                "the guest kernel hung while starting: it reported a task blocked for minutes \
                 before it ran /init, an emulation fault (a vCPU whose timer never fires again) \
                 that pimigrate never reached; killed it"
            )?,
            FaultKind::HungBeforeInit(Hang::Silent(quiet)) => write!(
                f,
                "the guest kernel hung while starting: its console printed nothing for \
                 {quiet:.0?} before it ran /init, an emulation fault that pimigrate never \
                 reached; killed it"
            )?,
            FaultKind::UsbHubMissing { seen } => {
                write!(f, "the emulated USB hub did not enumerate ({seen})")?
            }
            FaultKind::DiskBelowProfile { what } => {
                write!(f, "an emulated disk ran far below its profile: {what}")?
            }
            FaultKind::NvmeStopped { seen } => write!(
                f,
                "the emulated NVMe controller stopped completing commands, which the guest \
                 timed out (`{seen}`)"
            )?,
        }
        write!(f, " (see {})", self.log.display())
    }
}

impl std::error::Error for EmulationFault {}

/// How long a guest kernel's console may stay silent before it ran /init.
/// Its lines come at most 3.4 s apart in every boot of a loaded full run
/// (2026-12-03, 60 boots); one that hung (that run, a power-cut boot, after
/// "Loading compiled-in X.509 certificates" at 8 s, with QEMU busy) never
/// printed again until the 20-minute limit.
pub const SILENT_BEFORE_INIT: Duration = Duration::from_secs(90);

/// The kernel's line as it starts userspace.
pub const INIT_LINE: &str = "Run /init as init process";

/// Whether a console shows the guest's /init started.
pub fn reached_init(console: &str) -> bool {
    console.contains(INIT_LINE)
}

/// Whether the kernel reported a hung task (blocked for over two minutes)
/// before it ran /init: a boot that will never come up. Seen under TCG on
/// a loaded host (migrate-trial, 2026-12-02): CPU 0 idled and never woke
/// (an RCU stall with "0 ticks this GP" at 25 s), and the kernel's
/// i8042_probe waited for its timeout until the harness's 20-minute limit.
/// Only before /init: later a task blocked that long can be a slow copy.
pub fn blocked_before_init(console: &str) -> bool {
    match console.find("blocked for more than") {
        Some(hung) => !reached_init(&console[..hung]),
        None => false,
    }
}

/// The first line of a console on which the guest's nvme driver timed
/// out a command ([`FaultKind::NvmeStopped`]): `nvme nvme0: I/O 170 (I/O
/// Cmd) QID 1 timeout, aborting`, `... QID 1 timeout, reset controller`.
pub fn nvme_timeout(console: &str) -> Option<&str> {
    console
        .lines()
        .find(|l| l.contains("nvme") && l.contains(" QID ") && l.contains(" timeout"))
        .map(str::trim)
}

/// The NVMe fault a failed scenario's boots show, if any: the first boot
/// log (`boot-NN.serial.log` in `logs`) with an nvme command timed out.
pub fn nvme_stopped_in(logs: &std::path::Path) -> Option<EmulationFault> {
    let mut consoles: Vec<PathBuf> = std::fs::read_dir(logs)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("boot-") && n.ends_with(".serial.log"))
        })
        .collect();
    consoles.sort();
    consoles.into_iter().find_map(|log| {
        let bytes = std::fs::read(&log).ok()?;
        let console = String::from_utf8_lossy(&bytes);
        let seen = nvme_timeout(&console)?.to_string();
        Some(EmulationFault::new(
            FaultKind::NvmeStopped { seen },
            log,
            true,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: FaultKind, after_init: bool) -> EmulationFault {
        EmulationFault::new(kind, "/logs/boot-01.serial.log", after_init)
    }

    #[test]
    fn a_fault_before_init_is_the_boot_again_and_later_the_scenario() {
        let hung = FaultKind::HungBeforeInit(Hang::Silent(Duration::from_secs(150)));
        assert_eq!(fault(hung, false).retry(), Retry::Boot);
        assert_eq!(fault(FaultKind::Crashed(11), false).retry(), Retry::Boot);
        let stalled = FaultKind::Stalled(Duration::from_secs(120));
        assert_eq!(fault(stalled, true).retry(), Retry::Scenario);
        assert_eq!(fault(FaultKind::Crashed(11), true).retry(), Retry::Scenario);
        let usb = FaultKind::UsbHubMissing {
            seen: "0 of 1 USB disks detected".into(),
        };
        assert_eq!(fault(usb, true).retry(), Retry::Boot);
        let slow = FaultKind::DiskBelowProfile {
            what: "46 IOPS".into(),
        };
        assert_eq!(fault(slow, true).retry(), Retry::Scenario);
    }

    #[test]
    fn a_fault_is_found_through_the_errors_context() {
        let e = anyhow::Error::new(fault(FaultKind::Crashed(11), false))
            .context("power-cut-migrate: boot 3");
        let e = e.context("the scenario");
        assert_eq!(
            EmulationFault::find(&e).unwrap().kind,
            FaultKind::Crashed(11)
        );
        assert!(EmulationFault::find(&anyhow::anyhow!("the emulator crashed")).is_none());
        assert!(format!("{e:#}").contains("see /logs/boot-01.serial.log"));
    }

    #[test]
    fn an_nvme_command_timed_out_is_the_emulations_and_the_scenario_again() {
        let console = "[ 12.0] nvme nvme0: 1/0/0 default/read/poll queues\n\
                       [ 365.524650] nvme nvme0: I/O 170 (I/O Cmd) QID 1 timeout, aborting\n\
                       [ 365.524731] nvme nvme0: Abort status: 0x0\n";
        assert_eq!(
            nvme_timeout(console),
            Some("[ 365.524650] nvme nvme0: I/O 170 (I/O Cmd) QID 1 timeout, aborting")
        );
        assert_eq!(
            nvme_timeout("[ 12.0] nvme nvme0: 1/0/0 default/read/poll queues\n"),
            None
        );
        // A USB disk's SCSI timeouts are not the NVMe controller's.
        assert_eq!(
            nvme_timeout("[ 9.0] sd 0:0:0:0: [sda] tag#3 timing out command\n"),
            None
        );

        let logs = tempfile::tempdir().unwrap();
        std::fs::write(logs.path().join("boot-01.serial.log"), "[ 1.0] booting\n").unwrap();
        assert!(nvme_stopped_in(logs.path()).is_none());
        std::fs::write(logs.path().join("boot-02.serial.log"), console).unwrap();
        std::fs::write(logs.path().join("boot-02.stdout"), console).unwrap();
        let fault = nvme_stopped_in(logs.path()).expect("the NVMe fault");
        assert!(fault.log.ends_with("boot-02.serial.log"));
        assert_eq!(fault.retry(), Retry::Scenario);
        assert!(fault.to_string().contains("QID 1 timeout, aborting"));
    }

    #[test]
    fn a_hung_task_counts_only_before_init() {
        let early = "[ 2.0] i8042: PNP\n[ 245.1] INFO: task swapper/0:1 blocked for more than 120 seconds.\n";
        assert!(blocked_before_init(early));
        let later = "[ 5.93] Run /init as init process\n[ 400.0] INFO: task cp:812 blocked for more than 120 seconds.\n";
        assert!(!blocked_before_init(later));
        assert!(!blocked_before_init("[ 5.93] Run /init as init process\n"));
    }
}
