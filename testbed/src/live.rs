//! A long-running Pi for tests that drive the guest from outside (Ansible
//! over SSH): it boots, and whenever the guest reboots the harness plays the
//! firmware again (a normal boot, or a trial boot after `reboot "0 tryboot"`)
//! and boots it on the same forwarded SSH port, until the host says stop or
//! the guest powers off.
//!
//! The job is set again before every boot (with [`After::Stay`], so the
//! guest stays up), next to a file `job/tryboot` holding `1` on a trial boot
//! and `0` otherwise: what the real firmware tells the OS in
//! `/proc/device-tree/chosen/bootloader/tryboot`, which an x86 guest lacks.

use crate::pi::{Boot, Pi};
use crate::qemu::Ending;
use crate::share::{After, JobOutput, Share};
use anyhow::{bail, Context, Result};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Emergency-shell boots that are power-cycled before giving up.
const MAX_EMERGENCY_RESCUES: u32 = 2;

/// The host side's view of a [`Pi::serve`] run.
pub struct Live {
    /// Loopback port forwarded to the guest's port 22.
    pub port: u16,
    share: Share,
    stop: AtomicBool,
    /// Number of the boot in progress (0 before the first).
    boot: AtomicU32,
    /// Set when the boot loop has ended (power-off, crash, stop, error).
    ended: AtomicBool,
    /// How the last finished boot ended, for error messages.
    last_ending: Mutex<Option<Ending>>,
}

impl Live {
    /// Asks the harness to stop: the running QEMU is killed (a power cut)
    /// and no further boot starts.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The number of the boot in progress.
    pub fn boot_number(&self) -> u32 {
        self.boot.load(Ordering::SeqCst)
    }

    /// Whether the machine has stopped for good.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Waits until the job of the current boot has finished, and returns
    /// its output. Fails when the machine stops first or `limit` passes.
    pub fn wait_job(&self, limit: Duration) -> Result<JobOutput> {
        let start = Instant::now();
        loop {
            if let Some(out) = self.share.output()? {
                return Ok(out);
            }
            if self.ended() {
                bail!(
                    "the machine stopped (last boot ended {:?}) before the job of boot {} finished",
                    self.last_ending.lock().map(|e| *e).unwrap_or(None),
                    self.boot_number()
                );
            }
            if start.elapsed() > limit {
                bail!(
                    "the job of boot {} did not finish within {limit:?}",
                    self.boot_number()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until the boot loop has ended (after the guest powered off).
    pub fn wait_ended(&self, limit: Duration) -> Result<()> {
        let start = Instant::now();
        while !self.ended() {
            if start.elapsed() > limit {
                bail!("the machine did not stop within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    }
}

/// A loopback TCP port that was free a moment ago (QEMU binds it next; the
/// window in between is tiny compared with anything else here).
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("cannot bind a loopback port to find a free one")?;
    Ok(listener.local_addr()?.port())
}

impl Pi {
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
        let live = Live {
            port,
            share: self.share.clone(),
            stop: AtomicBool::new(false),
            boot: AtomicU32::new(0),
            ended: AtomicBool::new(false),
            last_ending: Mutex::new(None),
        };
        eprintln!("testbed: {} serving SSH on 127.0.0.1:{port}", self.name);
        let (result, boots) = std::thread::scope(|scope| {
            let machine = scope.spawn(|| {
                let boots = self.boot_loop(job, &live);
                live.ended.store(true, Ordering::SeqCst);
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
        while !live.stop.load(Ordering::SeqCst) {
            self.share.set_job(job, After::Stay)?;
            let flag = if self.tryboot_next { "1" } else { "0" };
            self.share.place_file("tryboot", flag.as_bytes())?;
            live.boot.store(self.boots + 1, Ordering::SeqCst);
            // On a loaded host a device can miss systemd's 90 s timeout and
            // the boot drop to the emergency shell before the job starts;
            // like a person at a real Pi, power-cycle it and boot again.
            let mut emergency = false;
            let share = self.share.clone();
            let boot = self.boot_once(&mut |_, console| {
                emergency = !share.started() && console.contains("Emergency Mode");
                emergency || live.stop.load(Ordering::SeqCst)
            })?;
            let ending = boot.record.ending;
            if let Ok(mut last) = live.last_ending.lock() {
                *last = Some(ending);
            }
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
            if !matches!(ending, Ending::Reboot | Ending::TrybootReboot) {
                break;
            }
        }
        Ok(boots)
    }
}
