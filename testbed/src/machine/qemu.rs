//! Starting QEMU for one boot and telling how that boot ended.
//!
//! QEMU runs with `-no-reboot`, so a guest reboot ends the process and the
//! harness (playing the firmware) decides what the next boot loads. Whether
//! the guest powered off, rebooted, or asked for a trial boot is read from
//! the kernel's last words on the serial console.

use crate::firmware::spec::BootSpec;
use crate::host::disks::{self, Disk, IoEngine};
use crate::machine::fault::{self, EmulationFault, FaultKind, Hang};
use crate::machine::qmp::Qmp;
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The machine QEMU emulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Board {
    /// The x86 guest (q35): NVMe, xHCI with UAS, 9p share, speed profiles.
    X86,
    /// QEMU's `raspi3b`, a Raspberry Pi 3 Model B: the BCM2837 with its
    /// sdhost SD controller and dwc2 USB, a device tree, an arm64 kernel.
    Raspi3b,
    /// QEMU 10's `raspi4b`, a Raspberry Pi 4 Model B: the BCM2711 without
    /// PCIe (so no VL805 USB 3 and no NVMe), the SD card on the Arasan
    /// sdhci (the real Pi 4's Wi-Fi slot), USB through dwc2. Debian 12 has
    /// QEMU 7.2; testbed/run.sh unpacks bookworm-backports' QEMU 10 beside
    /// it and names its program in `PI_TESTBED_QEMU10`.
    Raspi4b,
}

/// The variable naming QEMU 10's qemu-system-aarch64 (for raspi4b).
pub const QEMU10_VAR: &str = "PI_TESTBED_QEMU10";

impl Board {
    pub fn is_raspi(self) -> bool {
        matches!(self, Board::Raspi3b | Board::Raspi4b)
    }

    /// QEMU's name of the machine.
    fn machine(self) -> &'static str {
        match self {
            Board::X86 => "q35",
            Board::Raspi3b => "raspi3b",
            Board::Raspi4b => "raspi4b",
        }
    }

    /// The QEMU program and where it comes from.
    pub fn program(self) -> (String, &'static str) {
        match self {
            Board::X86 => ("qemu-system-x86_64".into(), "install qemu-system-x86"),
            Board::Raspi3b => ("qemu-system-aarch64".into(), "install qemu-system-arm"),
            Board::Raspi4b => (
                std::env::var(QEMU10_VAR).unwrap_or_else(|_| "qemu-system-aarch64".into()),
                "testbed/run.sh unpacks QEMU 10 from bookworm-backports and sets PI_TESTBED_QEMU10",
            ),
        }
    }
}

/// Guest RAM and CPUs. One vCPU unless a scenario measures speed: the
/// scenarios that time nothing run two or three guests side by side on a
/// 2-core host, where a second vCPU only adds TCG's cost of keeping two
/// in step (a boot took 15 % less CPU with one, measured side by side);
/// the speed scenarios ([`crate::machine::rig::Setup::timed`]) keep two,
/// for the queue depths their benchmarks drive.
#[derive(Debug, Clone)]
pub struct MachineConfig {
    pub board: Board,
    /// RAM and CPUs of the x86 guest; a raspi machine has its model's own
    /// (1 GiB and four cores on raspi3b).
    pub memory_mib: u32,
    pub cpus: u32,
    pub io_engine: IoEngine,
    /// Host folder exported to the guest as the 9p share `tb`.
    pub share: Option<PathBuf>,
    /// QEMU user networking with the guest's SSH port forwarded to this
    /// loopback port (fleet tests); no NIC at all when `None`.
    pub ssh_port: Option<u16>,
    /// A QMP socket, for changing the machine while it runs (unplugging a
    /// disk mid-copy); none when `None`.
    pub qmp_socket: Option<PathBuf>,
    /// The firmware stand-in puts `panic=-1` before cmdline.txt's words, so
    /// a kernel panic resets at once instead of waiting for a person. Off
    /// (`false`) for the scenarios that prove the OS's own words reset a
    /// failed trial: the guest then hangs as a Pi would, until the time
    /// limit.
    pub reset_on_panic: bool,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            board: Board::X86,
            memory_mib: 1536,
            cpus: 1,
            io_engine: IoEngine::IoUring,
            share: None,
            ssh_port: None,
            qmp_socket: None,
            reset_on_panic: true,
        }
    }
}

/// How a boot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    PowerOff,
    Reboot,
    /// `reboot "0 tryboot"`: the next boot is a trial boot.
    TrybootReboot,
    /// The guest's kernel panicked and reset the machine (`panic=N`, or the
    /// testbed's `panic=-1`): no shutdown, no trial flag, but no power
    /// lost either, so the firmware starts again as after a reboot.
    Reset,
    /// The harness killed QEMU: a simulated power cut, or a boot that ran
    /// past its time limit.
    Killed,
    /// QEMU ended without a recognisable shutdown message (a QEMU error);
    /// see the serial log.
    Unknown,
}

impl Ending {
    /// Whether the machine restarted without losing power (a reboot, a
    /// trial reboot, a panic's reset): the firmware runs again by itself.
    pub fn restarted(self) -> bool {
        matches!(self, Ending::Reboot | Ending::TrybootReboot | Ending::Reset)
    }
}

/// What the kernel prints when it panics: with `panic=N` (N not 0) it
/// then resets the machine, after "Rebooting in N seconds.." when N > 0.
const PANIC: &str = "Kernel panic - not syncing";

/// A finished boot.
#[derive(Debug, Clone)]
pub struct BootRecord {
    pub ending: Ending,
    pub serial_log: PathBuf,
    pub elapsed: Duration,
    /// The CPU time QEMU used (user and system), to within the half
    /// second between two looks at it.
    pub cpu: Duration,
    /// When the guest's agent started its job, and when the job ended
    /// (none: it never did): where a boot's time went, booting the
    /// system, the job, or shutting down (the time table's boot rows).
    pub job_started: Option<Mark>,
    pub job_ended: Option<Mark>,
}

/// A moment of a boot: wall time and QEMU's CPU time since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    pub wall: Duration,
    pub cpu: Duration,
}

/// What the agents of both images print when they start the job and when
/// it ended (testbed/image*/files/usr/local/sbin/testbed-agent).
const JOB_STARTED: &str = "testbed-agent: running job";
const JOB_ENDED: &str = "testbed-agent: job exited with status";

/// The marks a console shows, each taken the first time it is seen.
#[derive(Debug, Clone, Copy, Default)]
struct JobMarks {
    started: Option<Mark>,
    ended: Option<Mark>,
}

impl JobMarks {
    fn look(&mut self, console: &str, now: Mark) {
        if self.started.is_none() && console.contains(JOB_STARTED) {
            self.started = Some(now);
        }
        if self.ended.is_none() && console.contains(JOB_ENDED) {
            self.ended = Some(now);
        }
    }
}

impl BootRecord {
    pub fn console(&self) -> String {
        fs::read(&self.serial_log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

/// What the kernel prints last, in order of precedence. A panic counts as
/// a reset only when QEMU has ended by itself (`-no-reboot` turns the
/// guest's reset into QEMU exiting): a kernel with `panic=0` hangs after
/// the same words.
pub fn classify(console: &str) -> Ending {
    if console.contains("reboot: Restarting system with command '0 tryboot'") {
        Ending::TrybootReboot
    } else if console.contains("reboot: Restarting system") {
        Ending::Reboot
    } else if console.contains("reboot: Power down") {
        Ending::PowerOff
    } else if console.contains(PANIC) {
        Ending::Reset
    } else {
        Ending::Unknown
    }
}

/// The full QEMU command line for one boot.
pub fn command(
    cfg: &MachineConfig,
    spec: &BootSpec,
    disks: &[Disk],
    serial_log: &Path,
) -> Result<Command> {
    match cfg.board {
        Board::X86 => x86_command(cfg, spec, disks, serial_log),
        Board::Raspi3b | Board::Raspi4b => raspi_command(cfg, spec, disks, serial_log),
    }
}

/// QEMU's `raspi3b` or `raspi4b`, given what the firmware stand-in loaded: the kernel,
/// initramfs and device tree from the SD card's FAT partition, and
/// cmdline.txt's line. The SD card goes to the SoC's slot (`if=sd`, which
/// the kernel's sdhost-bcm2835 drives), USB disks to dwc2's one root port,
/// behind the hub QEMU puts there (as the Pi 3's LAN9514 hub is).
fn raspi_command(
    cfg: &MachineConfig,
    spec: &BootSpec,
    disks: &[Disk],
    serial_log: &Path,
) -> Result<Command> {
    let board = cfg.board;
    let dtb = spec.dtb.as_ref().with_context(|| {
        format!(
            "the boot partition of {} has no device tree for QEMU's {}",
            spec.disk,
            board.machine()
        )
    })?;
    if board == Board::Raspi4b {
        crate::machine::raspi4b::fit_device_tree(dtb)?;
    }
    let mut c = Command::new(board.program().0);
    c.args(["-machine", board.machine()]);
    // The SoC's four cores on one host thread, not one each (QEMU's
    // default for TCG): the ARM lane's guests share a CPU-bound host with
    // other guests and builds, and keeping four vCPU threads in step
    // (TLB flushes, exclusive accesses) cost more than the parallelism
    // gave. Booting the arm64 image to its agent took 91 CPU s (62 s
    // wall) that way and 49 CPU s (49 s) this way on a raspi4b, 88 and 37
    // on a raspi3b, measured one after the other on an idle 2-core host.
    c.args(["-accel", "tcg,thread=single"]);
    // The first UART is the PL011, the guest's ttyAMA0.
    boot_args(&mut c, &spec.kernel, spec, serial_log);
    c.arg("-dtb").arg(dtb);
    // panic=-1 and mitigations=off before cmdline.txt's words, as on the
    // x86 guest (x86_command); the Pi's reboot goes through the SoC's
    // watchdog, which QEMU turns into a reset, and -no-reboot into QEMU
    // exiting.
    c.arg("-append").arg(format!(
        "{}mitigations=off {}",
        panic_word(cfg),
        spec.cmdline
    ));
    for d in disks {
        c.args(d.raspi_args(cfg.io_engine)?);
    }
    if let Some(monitor) = harness_monitor(serial_log) {
        c.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", monitor.display()));
    }
    c.stdin(Stdio::null());
    Ok(c)
}

/// The stand-in's own `panic=-1`, unless the machine is to wait at a
/// panic as a Pi does ([`MachineConfig::reset_on_panic`]).
fn panic_word(cfg: &MachineConfig) -> &'static str {
    if cfg.reset_on_panic {
        "panic=-1 "
    } else {
        ""
    }
}

/// What every machine gets: no devices but those named, no display, a
/// reboot that ends QEMU (the harness plays the firmware for the next
/// boot), the first serial port into the boot's log, and the kernel and
/// initramfs the firmware stand-in loaded.
fn boot_args(c: &mut Command, kernel: &Path, spec: &BootSpec, serial_log: &Path) {
    c.args([
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
    ]);
    c.arg("-serial")
        .arg(format!("file:{}", serial_log.display()));
    c.arg("-kernel").arg(kernel);
    if let Some(initrd) = &spec.initrd {
        c.arg("-initrd").arg(initrd);
    }
}

/// The q35 x86 guest.
fn x86_command(
    cfg: &MachineConfig,
    spec: &BootSpec,
    disks: &[Disk],
    serial_log: &Path,
) -> Result<Command> {
    let mut c = Command::new(cfg.board.program().0);
    c.args(["-machine", "q35,accel=tcg", "-cpu", "max"]);
    c.args([
        "-m",
        &cfg.memory_mib.to_string(),
        "-smp",
        &cfg.cpus.to_string(),
    ]);
    // As a Pi's firmware does with a compressed kernel: unpacked before it
    // starts (host::kernel).
    let kernel = crate::host::kernel::loadable(
        &spec.kernel,
        &crate::machine::pi::target_dir().join("testbed-kernels"),
    )?;
    boot_args(&mut c, &kernel, spec, serial_log);
    // Words of the machine's own before cmdline.txt's, where a Pi's
    // firmware puts its own, so that cmdline.txt's words win where they
    // say the same (Linux and the initramfs take the last; scenarios
    // compare the end of /proc/cmdline with cmdline.txt):
    // - panic=-1: a kernel panic resets at once, which -no-reboot turns
    //   into QEMU exiting (Ending::Reset), instead of hanging until the
    //   time limit, as a Pi whose cmdline.txt names no panic= would; an
    //   OS's own panic=N comes after it and counts.
    // - tsc=reliable: under TCG the two vCPUs' TSCs look unsynchronised, so
    //   the kernel falls back to the HPET, and every clock read (each I/O's
    //   accounting, every timestamp of a copy or a benchmark) becomes an
    //   emulated MMIO access. QEMU's TSC follows the host's, so it is a
    //   sound clock; with it a root-only migration's copy took 18 % less
    //   time and the boot before it 7 % less, side by side on a loaded host.
    // - mitigations=off: the guest runs only the testbed's own programs, and
    //   the kernel's speculative-execution defences (retpolines, barriers,
    //   buffer fills on every switch) are emulated instruction by
    //   instruction under TCG.
    // - testbed.net, only with a NIC: the image starts systemd-networkd and
    //   sshd only then (testbed/image/files/etc/systemd/system).
    let net = if cfg.ssh_port.is_some() {
        "testbed.net "
    } else {
        ""
    };
    c.arg("-append").arg(format!(
        "{}tsc=reliable mitigations=off {net}{}",
        panic_word(cfg),
        spec.cmdline
    ));
    c.args(disks::controller_args(disks));
    for d in disks {
        c.args(d.qemu_args(cfg.io_engine));
    }
    if let Some(share) = &cfg.share {
        c.arg("-virtfs").arg(format!(
            "local,path={},mount_tag=tb,security_model=none,id=tb",
            share.display()
        ));
    }
    if let Some(port) = cfg.ssh_port {
        // Loopback only: the guest's root has no password.
        c.arg("-nic").arg(format!(
            "user,model=virtio-net-pci,hostfwd=tcp:127.0.0.1:{port}-:22"
        ));
    }
    // The harness's own monitor, apart from a scenario's (QEMU serves each
    // -qmp to its own client): how a stalled emulator is woken (`wake`).
    if let Some(monitor) = harness_monitor(serial_log) {
        c.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", monitor.display()));
    }
    if let Some(qmp) = &cfg.qmp_socket {
        c.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()));
    }
    c.stdin(Stdio::null());
    Ok(c)
}

/// A running QEMU.
pub struct Running {
    child: Child,
    started: Instant,
    serial_log: PathBuf,
    stderr_log: PathBuf,
    board: Board,
}

/// How long QEMU gets after the kernel's last words before the harness
/// ends it, where the machine cannot power off or reset by itself: the
/// guest synced its disks before printing them.
const AFTER_LAST_WORDS: Duration = Duration::from_secs(3);

impl Running {
    pub fn start(mut cmd: Command, serial_log: &Path, board: Board) -> Result<Running> {
        let stderr_log = serial_log.with_extension("qemu.log");
        let err = fs::File::create(&stderr_log)
            .with_context(|| format!("cannot create {}", stderr_log.display()))?;
        fs::write(
            serial_log.with_extension("cmd"),
            crate::host::cmd::describe(&cmd),
        )
        .with_context(|| format!("cannot write next to {}", serial_log.display()))?;
        if let Some(monitor) = harness_monitor(serial_log) {
            let _ = fs::remove_file(monitor);
        }
        cmd.stdout(Stdio::null()).stderr(err);
        let (program, package) = board.program();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {program}: {package}"))?;
        Ok(Running {
            child,
            started: Instant::now(),
            serial_log: serial_log.to_path_buf(),
            stderr_log,
            board,
        })
    }

    /// Serial output so far.
    pub fn console(&self) -> String {
        fs::read(&self.serial_log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Waits until QEMU exits or `limit` passes (then kills it: `Killed`).
    /// `until` may end the boot early: when it returns true QEMU is killed,
    /// which is how a power cut at a chosen moment is simulated. A QEMU
    /// that stops running at all (no CPU time for [`STALL_LIMIT`], where
    /// even an idle guest's timers use some), dies of a signal of its own,
    /// or whose kernel hung before /init, ends with an [`EmulationFault`]
    /// rather than being waited for until the limit.
    pub fn wait(
        mut self,
        limit: Duration,
        mut until: impl FnMut(&str) -> bool,
    ) -> Result<BootRecord> {
        let mut progress = Progress::new(self.child.id());
        // When the idle spell the harness woke began, until QEMU runs again.
        let mut woken: Option<Instant> = None;
        // When the console first showed the kernel's last words, on a
        // machine that may not end by itself.
        let mut last_words: Option<Instant> = None;
        let mut silence = Silence::new(Instant::now());
        let mut marks = JobMarks::default();
        loop {
            // Read QEMU's CPU time before asking whether it exited: once it
            // is reaped, /proc no longer has it.
            let idle = progress.idle();
            if let Some(since) = woken.filter(|since| progress.since > *since) {
                self.note_wake(&format!(
                    "it ran again {:.0?} after the idle spell began",
                    progress.since - since
                ));
                woken = None;
            }
            if let Some(status) = self.child.try_wait().context("cannot wait for qemu")? {
                let console = self.console();
                let at_exit = Mark {
                    wall: self.started.elapsed(),
                    cpu: progress.cpu(),
                };
                marks.look(&console, at_exit);
                let ending = classify(&console);
                if let Some(signal) = crashed(status) {
                    return Err(self.fault(FaultKind::Crashed(signal), &console));
                }
                if ending == Ending::Unknown && !status.success() {
                    let err = fs::read_to_string(&self.stderr_log).unwrap_or_default();
                    bail!(
                        "qemu exited with {status}: {}\n(serial log: {})",
                        err.trim(),
                        self.serial_log.display()
                    );
                }
                return Ok(self.record(ending, progress.cpu(), marks));
            }
            let console = self.console();
            marks.look(
                &console,
                Mark {
                    wall: self.started.elapsed(),
                    cpu: progress.cpu(),
                },
            );
            if self.started.elapsed() > limit || until(&console) {
                // `until` may have acted on QEMU (a QMP unplug) and QEMU died
                // of it: QEMU 7.2 aborts on an assertion when a UAS disk
                // with I/O in flight is unplugged ("canceled usb packet not
                // found"). That is the emulator's fault, retried as one.
                if let Some(signal) = self.died_of_a_signal() {
                    return Err(self.fault(FaultKind::Crashed(signal), &console));
                }
                self.kill()?;
                return Ok(self.record(Ending::Killed, progress.cpu(), marks));
            }
            // QEMU 7.2's raspi machines cannot power off: the guest halts
            // and QEMU runs on. Its console's last words say how it ended.
            // A panic's reset ends QEMU by itself (the SoC's watchdog), and
            // a kernel that panicked without resetting is left to hang.
            let ending = classify(&console);
            if self.board.is_raspi() && !matches!(ending, Ending::Unknown | Ending::Reset) {
                let since = *last_words.get_or_insert_with(Instant::now);
                if since.elapsed() > AFTER_LAST_WORDS {
                    self.kill()?;
                    return Ok(self.record(ending, progress.cpu(), marks));
                }
            }
            if let Some(hang) = silence.hang(&console, Instant::now()) {
                self.kill()?;
                return Err(self.fault(FaultKind::HungBeforeInit(hang), &console));
            }
            if let Some(idle) = idle.filter(|d| *d > WAKE_AFTER && woken.is_none()) {
                woken = Some(progress.since);
                self.wake(idle);
            }
            if let Some(stalled) = idle.filter(|d| *d > STALL_LIMIT) {
                let threads = self.serial_log.with_extension("stalled-threads.txt");
                let _ = fs::write(&threads, thread_states(self.child.id()));
                self.kill()?;
                return Err(self
                    .fault(FaultKind::Stalled(stalled), &console)
                    .context(format!("where its threads waited: {}", threads.display())));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The fault `kind`, seen on this boot's console, as the error that
    /// carries it.
    fn fault(&self, kind: FaultKind, console: &str) -> anyhow::Error {
        EmulationFault::new(kind, &self.serial_log, fault::reached_init(console)).into()
    }

    /// Stops and continues the machine through the harness's monitor. A
    /// stalled QEMU had every vCPU halted and its main loop asleep in poll,
    /// with a timer interrupt that never came (twice in two runs on
    /// 2026-12-03, once with nothing else on the host); `cont` kicks every
    /// vCPU thread and the main loop runs its expired timers on the
    /// command, so a lost wake-up is delivered. On a guest that was merely
    /// quiet it costs a pause of milliseconds.
    fn wake(&self, idle: Duration) {
        let outcome = harness_monitor(&self.serial_log)
            .context("no monitor: the serial log's path is too long for a Unix socket")
            .and_then(|m| Qmp::connect(&m, Duration::from_secs(5)))
            .and_then(|mut qmp| {
                qmp.execute("stop", json!({}))?;
                qmp.execute("cont", json!({}))
            });
        let what = match outcome {
            Ok(_) => format!("QEMU used no CPU time for {idle:.0?}; stopped and continued it through its monitor"),
            Err(e) => format!("QEMU used no CPU time for {idle:.0?}; could not wake it through its monitor: {e:#}"),
        };
        self.note_wake(&what);
    }

    /// A line in the boot's wake log (`boot-NN.serial.wake.txt`) and on stderr.
    fn note_wake(&self, what: &str) {
        eprintln!("testbed: {what} ({})", self.serial_log.display());
        let path = wake_log(&self.serial_log);
        let line = format!("{:.0?} into the boot: {what}\n", self.started.elapsed());
        let _ = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    }

    /// The signal QEMU died of, if it ended by one of its own: a look now
    /// and one 50 ms later (it may still be on its way out when its socket
    /// closed), so a power cut at a chosen moment is late by no more.
    fn died_of_a_signal(&mut self) -> Option<i32> {
        for look in 0..2 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return crashed(status);
            }
            if look == 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        None
    }

    /// Pulls the plug: SIGKILL, no flush of anything the guest holds.
    pub fn kill(&mut self) -> Result<()> {
        let _ = self.child.kill();
        self.child.wait().context("cannot reap qemu")?;
        Ok(())
    }

    fn record(&self, ending: Ending, cpu: Duration, marks: JobMarks) -> BootRecord {
        BootRecord {
            ending,
            serial_log: self.serial_log.clone(),
            elapsed: self.started.elapsed(),
            cpu,
            job_started: marks.started,
            job_ended: marks.ended,
        }
    }
}

/// Each thread of process `pid`: its name, state and the kernel function it
/// sleeps in (`wchan`), so a stall says whether QEMU waited on the host's
/// disk (an fdatasync behind other writers) or on itself (a lock).
fn thread_states(pid: u32) -> String {
    let task = PathBuf::from(format!("/proc/{pid}/task"));
    let read = |p: PathBuf| fs::read_to_string(p).unwrap_or_default();
    let mut out = String::new();
    for entry in fs::read_dir(&task).into_iter().flatten().flatten() {
        let dir = entry.path();
        let stat = read(dir.join("stat"));
        // The state is the field after the parenthesised name.
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        out.push_str(&format!(
            "{} {} state={} wchan={}\n",
            entry.file_name().to_string_lossy(),
            read(dir.join("comm")).trim(),
            state.unwrap_or("?"),
            read(dir.join("wchan")).trim()
        ));
    }
    out
}

/// Watches a boot's console for a kernel that hung before /init.
struct Silence {
    length: usize,
    since: Instant,
}

impl Silence {
    fn new(now: Instant) -> Silence {
        Silence {
            length: 0,
            since: now,
        }
    }

    /// How the guest kernel hung before /init, if it did: a blocked task
    /// it reported, or a console that stopped growing for
    /// [`fault::SILENT_BEFORE_INIT`]. After /init nothing counts: a copy
    /// may print nothing for long.
    fn hang(&mut self, console: &str, now: Instant) -> Option<Hang> {
        if fault::reached_init(console) {
            return None;
        }
        if fault::blocked_before_init(console) {
            return Some(Hang::BlockedTask);
        }
        if console.len() != self.length {
            self.length = console.len();
            self.since = now;
        }
        let quiet = now - self.since;
        (quiet > fault::SILENT_BEFORE_INIT).then_some(Hang::Silent(quiet))
    }
}

/// How long QEMU may use no CPU time at all before it counts as hung.
pub const STALL_LIMIT: Duration = Duration::from_secs(120);

/// How long QEMU may use no CPU time before the harness wakes it
/// ([`Running::wake`]): a guest at work, even one waiting on a throttled
/// disk, uses some in far less.
pub const WAKE_AFTER: Duration = Duration::from_secs(20);

/// The harness's monitor socket of a boot, beside its serial log; `None`
/// when that path is too long for a Unix socket.
fn harness_monitor(serial_log: &Path) -> Option<PathBuf> {
    let socket = serial_log.with_extension("monitor");
    (socket.as_os_str().len() <= crate::machine::qmp::SUN_PATH_MAX).then_some(socket)
}

/// What the harness did about a boot's idle spells, one line each.
pub fn wake_log(serial_log: &Path) -> PathBuf {
    serial_log.with_extension("wake.txt")
}

/// The signal of a QEMU that died of a fault of its own (not the harness's
/// SIGKILL, which ends boots on purpose).
fn crashed(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal().filter(|s| {
        [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
            libc::SIGABRT,
        ]
        .contains(s)
    })
}

/// Watches a QEMU process's CPU time (utime + stime in /proc/PID/stat).
struct Progress {
    stat: PathBuf,
    ticks: Option<u64>,
    since: Instant,
}

impl Progress {
    fn new(pid: u32) -> Progress {
        Progress {
            stat: PathBuf::from(format!("/proc/{pid}/stat")),
            ticks: None,
            since: Instant::now(),
        }
    }

    /// How long the CPU time has stood still (`None` once it moved, or
    /// when /proc cannot tell).
    fn idle(&mut self) -> Option<Duration> {
        let ticks = fs::read_to_string(&self.stat)
            .ok()
            .and_then(|s| cpu_ticks(&s))?;
        if self.ticks != Some(ticks) {
            self.ticks = Some(ticks);
            self.since = Instant::now();
            return None;
        }
        Some(self.since.elapsed())
    }

    /// The CPU time seen at the last look.
    fn cpu(&self) -> Duration {
        crate::machine::load::ticks_to_duration(self.ticks.unwrap_or(0))
    }
}

/// utime + stime of a /proc/PID/stat line.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let [user, system, ..] = crate::machine::load::proc_times(stat)?;
    Some(user + system)
}

impl Drop for Running {
    fn drop(&mut self) {
        // Never leave a QEMU behind holding disk images.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_thread_with_its_state_and_wait() {
        let report = thread_states(std::process::id());
        let lines: Vec<&str> = report.lines().collect();
        assert!(!lines.is_empty(), "no thread listed: {report:?}");
        for line in &lines {
            assert!(
                line.contains(" state=") && line.contains(" wchan="),
                "a line without state or wchan: {line:?}"
            );
        }
        // This thread is running the test, so at least one thread is R.
        assert!(report.contains("state=R"), "no running thread: {report}");
    }

    #[test]
    fn a_console_silent_before_init_is_a_hung_kernel_and_after_it_is_not() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut silence = Silence::new(start);
        let early = "[ 8.14] registered taskstats version 1\n";
        assert_eq!(silence.hang(early, at(1)), None);
        assert_eq!(silence.hang(early, at(80)), None);
        // More output starts the count again.
        let more = format!("{early}[ 8.15] Loading compiled-in X.509 certificates\n");
        assert_eq!(silence.hang(&more, at(140)), None);
        assert_eq!(silence.hang(&more, at(200)), None);
        assert_eq!(
            silence.hang(&more, at(300)),
            Some(Hang::Silent(Duration::from_secs(160)))
        );
        // Once /init ran, a quiet console is a guest at work.
        let mut later = Silence::new(start);
        let init = format!("{more}[ 8.68] Run /init as init process\n");
        assert_eq!(later.hang(&init, at(1)), None);
        assert_eq!(later.hang(&init, at(1000)), None);
        let blocked =
            format!("{more}[ 245.1] INFO: task swapper/0:1 blocked for more than 120 seconds.\n");
        assert_eq!(
            Silence::new(start).hang(&blocked, at(2)),
            Some(Hang::BlockedTask)
        );
    }

    #[test]
    fn a_boot_is_split_where_the_agent_starts_and_ends_its_job() {
        let at = |s| Mark {
            wall: Duration::from_secs(s),
            cpu: Duration::from_secs(s / 2),
        };
        let mut marks = JobMarks::default();
        marks.look("[ 3.0] systemd[1]: Reached target", at(10));
        assert_eq!((marks.started, marks.ended), (None, None));
        let started = "testbed-agent[244]: testbed-agent: running job\n";
        marks.look(started, at(40));
        marks.look(started, at(50));
        assert_eq!(marks.started, Some(at(40)), "the first sight counts");
        let ended = format!("{started}testbed-agent: job exited with status 0\n");
        marks.look(&ended, at(90));
        assert_eq!(marks.ended, Some(at(90)));
    }

    #[test]
    fn reads_cpu_ticks_after_the_command_name() {
        let stat = "42 (qemu-system-x86) S 1 2 3 4 5 6 7 8 9 10 1234 56 7 8 20";
        assert_eq!(cpu_ticks(stat), Some(1234 + 56));
        assert_eq!(cpu_ticks("42 (x) S 1"), None);
    }

    #[test]
    fn a_fault_of_qemu_is_a_crash_and_the_harness_kill_is_not() {
        use std::os::unix::process::ExitStatusExt;
        let by_signal = |sig: i32| std::process::ExitStatus::from_raw(sig);
        assert_eq!(crashed(by_signal(libc::SIGSEGV)), Some(libc::SIGSEGV));
        assert_eq!(crashed(by_signal(libc::SIGKILL)), None);
        assert_eq!(crashed(std::process::ExitStatus::from_raw(1 << 8)), None);
    }

    /// The stand-in's words come before cmdline.txt's, where a Pi's
    /// firmware puts its own: an OS's `panic=10` is the last, so the one
    /// Linux and the initramfs take; without one the testbed's panic=-1
    /// holds.
    #[test]
    fn cmdline_txt_comes_last_so_its_panic_setting_wins() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = dir.path().join("kernel8.img");
        fs::write(&kernel, b"an uncompressed kernel").unwrap();
        let spec = BootSpec {
            disk: "sd".into(),
            boot_mode: crate::firmware::eeprom::BootMode::SdCard,
            partition: 1,
            config_file: "config.txt".into(),
            tryboot: false,
            kernel,
            initrd: None,
            cmdline: "console=ttyS0 root=PARTUUID=6c586e13-02 rootwait panic=10".into(),
            dtb: None,
            notes: Vec::new(),
        };
        let cmd = command(
            &MachineConfig::default(),
            &spec,
            &[],
            Path::new("/tmp/boot-01.serial.log"),
        )
        .unwrap();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert!(append.starts_with("panic=-1 "), "{append}");
        assert!(append.ends_with(&spec.cmdline), "{append}");
        let panics: Vec<&str> = append
            .split_whitespace()
            .filter(|w| w.starts_with("panic="))
            .collect();
        assert_eq!(panics.last(), Some(&"panic=10"));
    }

    #[test]
    fn recognises_the_endings() {
        assert_eq!(
            classify("x\n[  9.1] reboot: Power down\n"),
            Ending::PowerOff
        );
        assert_eq!(
            classify("[ 9.1] reboot: Restarting system\n"),
            Ending::Reboot
        );
        assert_eq!(
            classify("[ 9.1] reboot: Restarting system with command '0 tryboot'\n"),
            Ending::TrybootReboot
        );
        // A panic with panic=10, and with the testbed's panic=-1 (no
        // countdown): both reset the machine.
        assert_eq!(
            classify(
                "[ 3.2] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n\
                 [ 3.2] Rebooting in 10 seconds..\n"
            ),
            Ending::Reset
        );
        assert_eq!(
            classify("[ 3.2] Kernel panic - not syncing: Attempted to kill init!\n"),
            Ending::Reset
        );
        assert!(Ending::Reset.restarted() && !Ending::Killed.restarted());
        assert_eq!(
            classify("qemu: terminating on signal 15\n"),
            Ending::Unknown
        );
    }
}
