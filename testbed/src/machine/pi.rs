//! One emulated Raspberry Pi: its disks, the firmware stand-in, the share
//! and the boots, with every boot's serial console kept under
//! `target/testbed-logs/<name>/`.

use crate::firmware::boot as firmware;
use crate::firmware::bootloader::Bootloader;
use crate::firmware::model::Model;
use crate::firmware::spec::{BootRequest, BootSpec};
use crate::host::disks::{Bus, Disk};
use crate::host::share::{After, JobOutput, Share};
use crate::machine::fault::{EmulationFault, FaultKind, Retry};
use crate::machine::live::{free_port, Live};
use crate::machine::qemu::{self, BootRecord, Ending, MachineConfig, Running};
use crate::machine::qmp::{Unplug, SUN_PATH_MAX};
use anyhow::{bail, ensure, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Reboots before the job starts that are taken as part of booting.
const MAX_EARLY_REBOOTS: u32 = 3;

/// Boots ended by an emulation fault that are booted once more, each.
const MAX_FAULT_REBOOTS: u32 = 2;

/// Emergency-shell boots that a long-running Pi ([`Pi::serve`]) power-cycles
/// before giving up.
const MAX_EMERGENCY_RESCUES: u32 = 2;

/// Boots in a row that [`Pi::run_past_emergency`] lets stop in the
/// emergency shell before the scenario fails.
const EMERGENCY_ATTEMPTS: u32 = 3;

/// What systemd prints when a boot drops to its emergency shell.
const EMERGENCY: &str = "You are in emergency mode";

/// `target/` of the workspace (or `$CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            crate_dir.parent().unwrap_or(crate_dir).join("target")
        })
}

/// A scenario's work folder: its disk images and the share.
pub fn work_dir(scenario: &str) -> PathBuf {
    target_dir().join("testbed-work").join(scenario)
}

/// Whether scenarios' disk images are kept after they end
/// (`PI_TESTBED_KEEP_WORK=1`), for inspection.
pub fn keep_work() -> bool {
    std::env::var_os("PI_TESTBED_KEEP_WORK").is_some_and(|v| v == "1")
}

/// Removes a finished scenario's work folder unless `keep_work()`. Each
/// scenario leaves 0.5-2.5 GB of disk images; sixteen of them would fill a
/// small CI disk, and its logs (kept apart) tell what happened.
pub fn clear_work(scenario: &str) -> Result<()> {
    if keep_work() {
        return Ok(());
    }
    let dir = work_dir(scenario);
    // Never delete through a mount a failed scenario left behind.
    let mounts =
        fs::read_to_string("/proc/self/mounts").context("cannot read /proc/self/mounts")?;
    if let Some(m) = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .find(|m| Path::new(m).starts_with(&dir))
    {
        bail!("{} is still mounted; left the work folder in place", m);
    }
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove the work folder {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// One finished boot: what the firmware loaded, how it ended, what the job said.
#[derive(Debug, Clone)]
pub struct Boot {
    pub number: u32,
    pub spec: BootSpec,
    pub record: BootRecord,
    /// `None` when the agent never finished a job (power cut, hang, panic,
    /// emergency shell, or no job set).
    pub job: Option<JobOutput>,
}

impl Boot {
    /// The job's output, or an error pointing at the serial log.
    pub fn job(&self) -> Result<&JobOutput> {
        self.job.as_ref().with_context(|| {
            format!(
                "boot {} ended ({:?}) without the job finishing; see {}",
                self.number,
                self.record.ending,
                self.record.serial_log.display()
            )
        })
    }

    /// The job's output if it exited 0, else an error with its output.
    pub fn job_ok(&self) -> Result<&JobOutput> {
        self.job()?
            .check(&format!("the job of boot {}", self.number))
    }
}

/// An emulated Raspberry Pi (the x86 guest or a raspi machine) with its
/// disks; every `impl Pi` is in this file.
pub struct Pi {
    pub name: String,
    pub work: PathBuf,
    pub logs: PathBuf,
    pub config: MachineConfig,
    /// The Pi the firmware stand-in plays (config.txt sections, boot
    /// order, tryboot, device tree); [`Pi::play`] changes it.
    model: Model,
    /// Longest a boot may take before QEMU is killed.
    pub boot_limit: Duration,
    /// The EEPROM bootloader (a Pi 4's or 5's; a Pi 3 has none), kept
    /// from boot to boot.
    bootloader: Option<Bootloader>,
    disks: Vec<Disk>,
    share: Share,
    tryboot_next: bool,
    /// How the last boot ended, which decides whether the next is a
    /// reboot (a reboot order survives one) or a power-on.
    last_ending: Option<Ending>,
    boots: u32,
}

impl Pi {
    /// A Pi with no disks; its work folder (disk copies, share) and log
    /// folder start empty.
    pub fn new(name: &str) -> Result<Pi> {
        let work = work_dir(name);
        let logs = target_dir().join("testbed-logs").join(name);
        for d in [&work, &logs] {
            let _ = fs::remove_dir_all(d);
            fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let share = Share::create(work.join("share"))?;
        let config = MachineConfig {
            share: Some(share.dir.clone()),
            ..MachineConfig::default()
        };
        Ok(Pi {
            name: name.to_string(),
            work,
            logs,
            config,
            model: Model::Pi4B,
            bootloader: Model::Pi4B.bootloader()?,
            boot_limit: Duration::from_secs(20 * 60),
            disks: Vec::new(),
            share,
            tryboot_next: false,
            last_ending: None,
            boots: 0,
        })
    }

    /// Makes the x86 guest play `model` (a Pi 4 by default, or a Pi 5)
    /// from its next boot: that model's config.txt section, device tree
    /// and bootloader as it ships ([`Model::bootloader`]), which
    /// [`Pi::bootloader_mut`] can then change. The raspi machines play
    /// their own model only.
    pub fn play(&mut self, model: Model) -> Result<&mut Pi> {
        ensure!(
            !self.config.board.is_raspi() || model == self.model,
            "{}: QEMU's {:?} is a {:?}; only the x86 guest plays another model",
            self.name,
            self.config.board,
            self.model
        );
        ensure!(
            model != Model::Pi3B,
            "{}: the x86 guest plays a Pi 4 or a Pi 5 (a Pi 3 is QEMU's raspi3b, Pi::raspi3b)",
            self.name
        );
        self.model = model;
        self.bootloader = model.bootloader()?;
        Ok(self)
    }

    /// Puts Raspberry Pi OS's tools into the x86 guest's reach
    /// ([`crate::firmware::pi_tools`]): `$TESTBED/pi/bin/tb-as-pi CMD` runs CMD as on
    /// the Pi this one plays, with its device tree, the official
    /// rpi-eeprom tools and the testbed's stand-ins of vcgencmd, vcmailbox,
    /// rpi-eeprom-digest and flashrom. Nothing is on the job's PATH.
    pub fn raspberry_pi_os_tools(&mut self) -> Result<&mut Pi> {
        ensure!(
            !self.config.board.is_raspi(),
            "{}: Raspberry Pi OS's tools are the x86 guest's; QEMU's raspi machines have no share",
            self.name
        );
        crate::firmware::pi_tools::place(&self.share)?;
        Ok(self)
    }

    /// The Pi the firmware stand-in plays.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The EEPROM bootloader as it stands between boots; None on a Pi 3.
    pub fn bootloader(&self) -> Option<&Bootloader> {
        self.bootloader.as_ref()
    }

    /// The EEPROM bootloader, to change before a boot: its config
    /// (`set_config("[all]\nBOOT_ORDER=0xf41\n")`), its build time (an
    /// old bootloader), a HAT+ on a Pi 5.
    pub fn bootloader_mut(&mut self) -> Result<&mut Bootloader> {
        let (name, model) = (&self.name, self.model);
        self.bootloader
            .as_mut()
            .with_context(|| format!("{name}: a {model:?} has no EEPROM bootloader"))
    }

    /// A Raspberry Pi 3 Model B: QEMU's `raspi3b` with the Pi 3's
    /// firmware stand-in (its config.txt section, its boot order, no
    /// tryboot) and the command channel on the SD card ([`card_channel`]).
    ///
    /// [`card_channel`]: crate::machine::card_channel
    pub fn raspi3b(name: &str) -> Result<Pi> {
        Pi::raspi(name, qemu::Board::Raspi3b, Model::Pi3B)
    }

    /// A Raspberry Pi 4 Model B: QEMU 10's `raspi4b` with the Pi 4's
    /// firmware stand-in (its section, its EEPROM boot order, tryboot),
    /// the command channel on the SD card.
    pub fn raspi4b(name: &str) -> Result<Pi> {
        Pi::raspi(name, qemu::Board::Raspi4b, Model::Pi4B)
    }

    fn raspi(name: &str, board: qemu::Board, model: Model) -> Result<Pi> {
        let mut pi = Pi::new(name)?;
        pi.config.board = board;
        pi.config.share = None;
        pi.model = model;
        pi.bootloader = model.bootloader()?;
        Ok(pi)
    }

    /// Inserts a copy of a pristine SD image as the card `sd`.
    pub fn insert_sd_copy(&mut self, pristine: &Path, profile: &str) -> Result<&Disk> {
        let disk = Disk::copy_of(pristine, self.work.join("sd.img"), "sd", Bus::Sd, profile)?;
        self.attach(disk)
    }

    /// Attaches a new blank disk of `size` bytes, image `work/<name>.img`.
    pub fn attach_blank(
        &mut self,
        name: &str,
        bus: Bus,
        size: u64,
        profile: &str,
    ) -> Result<&Disk> {
        let disk = Disk::blank(
            self.work.join(format!("{name}.img")),
            size,
            name,
            bus,
            profile,
        )?;
        self.attach(disk)
    }

    /// Attaches a disk (takes effect at the next boot).
    pub fn attach(&mut self, disk: Disk) -> Result<&Disk> {
        if self.disks.iter().any(|d| d.name == disk.name) {
            bail!("{} already has a disk named {}", self.name, disk.name);
        }
        if disk.bus == Bus::Sd && self.disks.iter().any(|d| d.bus == Bus::Sd) {
            bail!("{} already has an SD card; a Pi has one slot", self.name);
        }
        self.disks.push(disk);
        Ok(self.disks.last().expect("just pushed"))
    }

    /// Unplugs a disk (takes effect at the next boot); its image stays.
    pub fn detach(&mut self, name: &str) -> Result<Disk> {
        let i = self.disks.iter().position(|d| d.name == name);
        let i = i.with_context(|| format!("{} has no disk named {name}", self.name))?;
        Ok(self.disks.remove(i))
    }

    pub fn disk(&self, name: &str) -> Result<&Disk> {
        self.disks
            .iter()
            .find(|d| d.name == name)
            .with_context(|| format!("{} has no disk named {name}", self.name))
    }

    pub fn disks(&self) -> &[Disk] {
        &self.disks
    }

    /// The share, e.g. to [`Share::place_binary`] pimigrate into the guest.
    pub fn share(&self) -> &Share {
        &self.share
    }

    /// Whether the next boot will be a trial boot (set by the guest with
    /// `reboot "0 tryboot"`, consumed by the next boot).
    pub fn tryboot_pending(&self) -> bool {
        self.tryboot_next
    }

    /// Boots, runs `script` (bash, `set -eu`, cwd `$TESTBED/job`, host share
    /// at `$TESTBED`) once the system is up, then does `after`. Returns when
    /// QEMU has exited.
    pub fn run(&mut self, script: &str, after: After) -> Result<Boot> {
        self.share.set_job(script, after)?;
        self.boot_until(|_, _| false)
    }

    /// Boots and cuts the power (kills QEMU) as soon as `cut` returns true;
    /// it sees the share and the serial output so far.
    pub fn run_then_cut(
        &mut self,
        script: &str,
        mut cut: impl FnMut(&Share, &str) -> bool,
    ) -> Result<Boot> {
        self.share.set_job(script, After::Stay)?;
        let share = self.share.clone();
        self.boot_until(move |_, console| cut(&share, console))
    }

    /// Gives this machine a QMP socket (from its next boot on) and returns
    /// how to unplug disk `name` while it runs. Only USB disks can be
    /// pulled: a Pi's SD slot and q35's NVMe have no hot-plug here.
    pub fn prepare_unplug(&mut self, name: &str) -> Result<Unplug> {
        let disk = self.disk(name)?;
        let device_id = disk.device_id().with_context(|| {
            format!(
                "disk {name} is on {:?}, which the testbed cannot hot-unplug",
                disk.bus
            )
        })?;
        let socket = self.monitor_socket()?;
        Ok(Unplug {
            socket,
            device_id,
            disk: name.to_string(),
        })
    }

    /// Gives this machine a QMP socket for the scenario (from its next boot
    /// on), apart from the harness's own.
    pub fn monitor_socket(&mut self) -> Result<PathBuf> {
        let socket = self.work.join("qmp.sock");
        ensure!(
            socket.as_os_str().len() <= SUN_PATH_MAX,
            "the QMP socket path {} is longer than a Unix socket allows; use a shorter CARGO_TARGET_DIR",
            socket.display()
        );
        let _ = std::fs::remove_file(&socket);
        self.config.qmp_socket = Some(socket.clone());
        Ok(socket)
    }

    /// Like [`Pi::run`], but calls `act` every half second while the guest
    /// runs (with the share and the console so far), without stopping it.
    /// An error from `act` cuts the power and is returned.
    pub fn run_acting(
        &mut self,
        script: &str,
        after: After,
        mut act: impl FnMut(&Share, &str) -> Result<()>,
    ) -> Result<Boot> {
        self.share.set_job(script, after)?;
        let mut failed = None;
        let boot = self.boot_until(|share, console| match act(share, console) {
            Ok(()) => false,
            Err(e) => {
                failed = Some(e);
                true
            }
        })?;
        if let Some(e) = failed {
            return Err(e.context(format!(
                "{}: acting during boot {} failed; see {}",
                self.name,
                boot.number,
                boot.record.serial_log.display()
            )));
        }
        Ok(boot)
    }

    /// [`Pi::run`], except that a boot which lands in systemd's emergency
    /// shell before its job starts is power-cycled and booted again. On a
    /// host busy with other guests, coldplugging three disks can outlast
    /// systemd's 90 s wait for `/boot/firmware`'s device, and the guest then
    /// waits at the emergency shell for a person until the boot limit. A
    /// boot that keeps failing this way (a wrong PARTUUID in fstab would)
    /// still fails the scenario, after three boots. A trial boot
    /// that was cut is asked for again, as a person would after the power
    /// cycle brought back the SD card system.
    pub fn run_past_emergency(&mut self, script: &str, after: After) -> Result<Boot> {
        for attempt in 1..=EMERGENCY_ATTEMPTS {
            let trial = self.tryboot_pending();
            self.share.set_job(script, after)?;
            let boot =
                self.boot_until(|share, console| !share.started() && console.contains(EMERGENCY))?;
            let stuck = boot.record.ending == Ending::Killed && !self.share.started();
            if !stuck {
                return Ok(boot);
            }
            eprintln!(
                "testbed: {}: boot {} stopped in the emergency shell before its job (attempt {attempt} of {EMERGENCY_ATTEMPTS}; see {}); power-cycling",
                self.name,
                boot.number,
                boot.record.serial_log.display()
            );
            self.tryboot_next = trial;
        }
        bail!(
            "{EMERGENCY_ATTEMPTS} boots in a row stopped in the emergency shell before the job started; see {}",
            self.logs.display()
        )
    }

    /// Runs the machine with SSH forwarded to a free loopback port while
    /// `work` runs on this thread: boots with `job` (bash, as for
    /// [`Pi::run`]) and boots again after every reboot, until the guest
    /// powers off, a boot ends any other way, or `work` returns (then the
    /// machine is stopped). Returns `work`'s result and every boot.
    pub fn serve<R>(
        &mut self,
        job: &str,
        work: impl FnOnce(&Live) -> Result<R>,
    ) -> Result<(R, Vec<Boot>)> {
        let port = free_port()?;
        self.config.ssh_port = Some(port);
        let live = Live::new(port, self.share.clone());
        eprintln!("testbed: {} serving SSH on 127.0.0.1:{port}", self.name);
        let (result, boots) = std::thread::scope(|scope| {
            let machine = scope.spawn(|| {
                let boots = self.boot_loop(job, &live);
                live.mark_ended();
                boots
            });
            let result = work(&live);
            live.stop();
            let boots = match machine.join() {
                Ok(boots) => boots,
                Err(_) => Err(anyhow::anyhow!("the boot loop panicked")),
            };
            (result, boots)
        });
        let boots = boots?;
        Ok((result?, boots))
    }

    fn boot_loop(&mut self, job: &str, live: &Live) -> Result<Vec<Boot>> {
        let mut boots = Vec::new();
        let mut rescues = 0;
        while !live.stop_requested() {
            self.share.set_job(job, After::Stay)?;
            let flag = if self.tryboot_next { "1" } else { "0" };
            self.share.place_file("tryboot", flag.as_bytes())?;
            live.mark_boot(self.boots + 1);
            // On a loaded host a device can miss systemd's 90 s timeout and
            // the boot drop to the emergency shell before the job starts;
            // like a person at a real Pi, power-cycle it and boot again.
            let mut emergency = false;
            let share = self.share.clone();
            let boot = self.boot_once(&mut |_, console| {
                emergency = !share.started() && console.contains("Emergency Mode");
                emergency || live.stop_requested()
            })?;
            let ending = boot.record.ending;
            live.record_ending(ending);
            let number = boot.number;
            boots.push(boot);
            if emergency && rescues < MAX_EMERGENCY_RESCUES {
                rescues += 1;
                eprintln!(
                    "testbed: {} boot {number}: emergency shell before the job started; power-cycling",
                    self.name
                );
                continue;
            }
            if !ending.restarted() {
                break;
            }
        }
        Ok(boots)
    }

    /// Boots until the job has run: a guest that reboots before its agent
    /// starts the job (systemd-fsck repairing root after a power cut does
    /// that) is simply booted again, as a real Pi would be, and so is a
    /// boot that an [`EmulationFault`] ended before anything of the guest
    /// ran ([`Retry::Boot`]), a trial boot as a trial boot again.
    pub(crate) fn boot_until(
        &mut self,
        mut until: impl FnMut(&Share, &str) -> bool,
    ) -> Result<Boot> {
        let mut early_reboots = 0;
        loop {
            let boot = self.boot_through_faults(&mut until)?;
            let rebooted = boot.record.ending.restarted();
            if !rebooted || self.share.started() {
                return Ok(boot);
            }
            early_reboots += 1;
            if early_reboots == MAX_EARLY_REBOOTS {
                bail!(
                    "{}: the guest rebooted {MAX_EARLY_REBOOTS} times without starting its job; see {}",
                    self.name,
                    self.logs.display()
                );
            }
            eprintln!(
                "testbed: {} boot {}: rebooted before the job started; booting again",
                self.name, boot.number
            );
        }
    }

    /// One boot, started again (a trial boot as a trial boot) when a fault
    /// of the emulation spoilt it before anything of the guest ran
    /// ([`Retry::Boot`]), up to [`MAX_FAULT_REBOOTS`] times: what the
    /// scenarios that count boots themselves use (the unattended ones).
    pub(crate) fn boot_through_faults(
        &mut self,
        until: &mut impl FnMut(&Share, &str) -> bool,
    ) -> Result<Boot> {
        let mut faults = 0;
        loop {
            // What a boot the emulation spoilt is started with again.
            let tryboot = self.tryboot_next;
            let last_ending = self.last_ending;
            let reboot_order = self.bootloader.as_ref().and_then(Bootloader::reboot_order);
            match self
                .boot_once(until)
                .and_then(|b| self.usb_disks_came_up(b))
            {
                Ok(boot) => return Ok(boot),
                Err(e) => match EmulationFault::find(&e) {
                    Some(fault) if fault.retry() == Retry::Boot && faults < MAX_FAULT_REBOOTS => {
                        faults += 1;
                        eprintln!(
                            "testbed: {}: {fault}; booting once more, as one would power-cycle \
                             the Pi or replug the disk",
                            self.name
                        );
                        self.tryboot_next = tryboot;
                        self.last_ending = last_ending;
                        if let (Some(order), Some(bootloader)) =
                            (reboot_order, self.bootloader.as_mut())
                        {
                            bootloader.set_reboot_order(order);
                        }
                    }
                    _ => return Err(e),
                },
            }
        }
    }

    /// The power comes on, the boot ROM starts recovery.bin on a staged
    /// bootloader update, and the power goes again while it writes: nothing
    /// is written, the staged files stay on the SD card (recovery.bin
    /// renames itself only once done), so the next boot runs it again
    /// (PI-FACTS, "The bootloader's config"). Like any power cut it drops
    /// the trial flag and a pending reboot order. An error when nothing is
    /// staged. Returns what happened, for the scenario's log.
    pub fn power_cut_in_recovery(&mut self) -> Result<String> {
        ensure!(
            crate::firmware::recovery::staged(&self.disks)?,
            "{}: no staged bootloader update (recovery.bin, pieeprom.upd) on the SD card to cut",
            self.name
        );
        self.boots += 1;
        let n = self.boots;
        self.tryboot_next = false;
        self.last_ending = Some(Ending::Killed);
        if let Some(bootloader) = self.bootloader.as_mut() {
            bootloader.clear_reboot_order();
        }
        let note = "recovery.bin started writing the staged update and the power was cut: nothing \
                    written, the files stay on the SD card for the next boot"
            .to_string();
        fs::write(
            self.logs.join(format!("boot-{n:02}.firmware.txt")),
            format!("{note}\n"),
        )?;
        eprintln!("testbed: {} boot {n}: {note}", self.name);
        Ok(note)
    }

    /// `boot`, or the fault of a raspi machine whose USB disks did not all
    /// come up ([`Pi::usb_disks_missing`]).
    fn usb_disks_came_up(&self, boot: Boot) -> Result<Boot> {
        match self.usb_disks_missing(&boot) {
            Some(seen) => Err(EmulationFault::new(
                FaultKind::UsbHubMissing { seen },
                &boot.record.serial_log,
                true,
            )
            .into()),
            None => Ok(boot),
        }
    }

    /// On a raspi machine, what was seen when fewer USB disks came up than
    /// are attached: QEMU's dwc2 model and hub sometimes fail to enumerate
    /// under host load ("dwc2 ...: Not connected"), a fault of the
    /// emulation that the same setup does not repeat. `None` when all came
    /// up, and always on the x86 guest.
    fn usb_disks_missing(&self, boot: &Boot) -> Option<String> {
        if !self.config.board.is_raspi() {
            return None;
        }
        let attached = self.disks.iter().filter(|d| d.bus.is_usb()).count();
        let console = boot.record.console();
        let seen = usb_disks_detected(&console);
        // Only when the controller came up: a dwc2 that never registered
        // its bus (a module missing from the initramfs) is no fault of the
        // emulation, and booting again would only hide it.
        (seen < attached && usb_bus_registered(&console))
            .then(|| format!("{seen} of {attached} USB disks detected"))
    }

    pub(crate) fn boot_once(
        &mut self,
        until: &mut impl FnMut(&Share, &str) -> bool,
    ) -> Result<Boot> {
        self.boots += 1;
        let n = self.boots;
        // Like the real flag, the trial request is cleared before the
        // firmware acts on it: whatever happens now, the boot after is normal.
        let request = BootRequest {
            tryboot: std::mem::take(&mut self.tryboot_next),
            after_reboot: self.last_ending.take().is_some_and(Ending::restarted),
        };
        let spec = firmware::select(
            self.model,
            self.bootloader.as_mut(),
            &self.disks,
            request,
            &self.work.join("firmware"),
        )
        .with_context(|| format!("{}: the firmware did not start Linux (boot {n})", self.name))?;
        let serial = self.logs.join(format!("boot-{n:02}.serial.log"));
        let notes: String = spec.notes.iter().map(|n| format!("{n}\n")).collect();
        fs::write(
            self.logs.join(format!("boot-{n:02}.firmware.txt")),
            format!(
                "{notes}disk: {}\nconfig: {}\ntryboot: {}\ncmdline: {}\n",
                spec.disk, spec.config_file, spec.tryboot, spec.cmdline
            ),
        )?;
        eprintln!(
            "testbed: {} boot {n}: {} from disk {} ({}), console: {}",
            self.name,
            if spec.tryboot { "trial boot" } else { "boot" },
            spec.disk,
            spec.config_file,
            serial.display()
        );
        let board = self.config.board;
        if board.is_raspi() {
            crate::machine::card_channel::to_card(&self.share, &self.disks)?;
        } else if let Some(bootloader) = &self.bootloader {
            crate::firmware::channel::before_boot(&self.share, self.model, bootloader, &spec)?;
        }
        let running = Running::start(
            qemu::command(&self.config, &spec, &self.disks, &serial)?,
            &serial,
            board,
        )?;
        let share = self.share.clone();
        let record = running.wait(self.boot_limit, |console| until(&share, console))?;
        if board.is_raspi() {
            crate::machine::card_channel::from_card(&self.share, &self.disks)?;
        } else if let Some(bootloader) = self.bootloader.as_mut() {
            crate::firmware::channel::after_boot(&self.share, bootloader)?;
        }
        crate::machine::load::add_guest_boot(&self.name, &record);
        self.note_boot_times(n, &record);
        if record.ending == Ending::TrybootReboot {
            self.tryboot_next = true;
        }
        self.last_ending = Some(record.ending);
        let job = self.share.output()?;
        if let Some(job) = &job {
            let base = self.logs.join(format!("boot-{n:02}"));
            fs::write(base.with_extension("stdout"), &job.stdout)?;
            fs::write(base.with_extension("stderr"), &job.stderr)?;
        }
        eprintln!(
            "testbed: {} boot {n}: ended {:?} after {:.0?}, job status {:?}",
            self.name,
            record.ending,
            record.elapsed,
            job.as_ref().map(|j| j.status)
        );
        Ok(Boot {
            number: n,
            spec,
            record,
            job,
        })
    }
}

impl Pi {
    /// One row of the scenario's `boots.tsv` in its log folder: the boot,
    /// how it ended, and its wall and CPU seconds until the job started,
    /// for the job, and in all (what the time table sums per scenario).
    fn note_boot_times(&self, n: u32, record: &BootRecord) {
        let path = self.logs.join("boots.tsv");
        let secs = |m: Option<qemu::Mark>, f: fn(&qemu::Mark) -> Duration| {
            m.map_or("-".to_string(), |m| format!("{:.1}", f(&m).as_secs_f64()))
        };
        let mut row = String::new();
        if !path.exists() {
            row.push_str("boot\tending\tjob start wall s\tjob start CPU s\tjob end wall s\tjob end CPU s\twall s\tCPU s\n");
        }
        row.push_str(&format!(
            "{n}\t{:?}\t{}\t{}\t{}\t{}\t{:.1}\t{:.1}\n",
            record.ending,
            secs(record.job_started, |m| m.wall),
            secs(record.job_started, |m| m.cpu),
            secs(record.job_ended, |m| m.wall),
            secs(record.job_ended, |m| m.cpu),
            record.elapsed.as_secs_f64(),
            record.cpu.as_secs_f64(),
        ));
        let written = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, row.as_bytes()));
        if let Err(e) = written {
            eprintln!("testbed: cannot add to {}: {e}", path.display());
        }
    }
}

/// How many USB disks the kernel detected in a boot's console: usb-storage
/// says so once for each (UAS disks go through uas, which raspi's dwc2
/// never has).
pub fn usb_disks_detected(console: &str) -> usize {
    console
        .lines()
        .filter(|l| l.contains("USB Mass Storage device detected"))
        .count()
}

/// Whether the dwc2 controller registered its USB bus in a boot's console.
pub fn usb_bus_registered(console: &str) -> bool {
    console
        .lines()
        .any(|l| l.contains("dwc2") && l.contains("new USB bus registered"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_usb_disks_the_kernel_detected() {
        let console = "[    9.10] usb 1-1.1: new full-speed USB device number 3 using dwc2\n\
            [    9.52] usb-storage 1-1.1:1.0: USB Mass Storage device detected\n\
            [    9.53] scsi host0: usb-storage 1-1.1:1.0\n";
        assert_eq!(usb_disks_detected(console), 1);
        assert_eq!(
            usb_disks_detected("[ 7.9] dwc2 3f980000.usb: Not connected\n"),
            0
        );
    }

    #[test]
    fn a_dwc2_that_never_loaded_registered_no_bus() {
        let up = "[ 7.97] dwc2 3f980000.usb: new USB bus registered, assigned bus number 1\n";
        assert!(usb_bus_registered(up));
        let missing = "[ 20.70] dwc2: Unknown symbol usb_add_gadget_udc (err -2)\n";
        assert!(!usb_bus_registered(missing));
    }
}
