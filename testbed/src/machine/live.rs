//! A long-running Pi for tests that drive the guest from outside (Ansible
//! over SSH): it boots, and whenever the guest reboots the harness plays the
//! firmware again (a normal boot, or a trial boot after `reboot "0 tryboot"`)
//! and boots it on the same forwarded SSH port, until the host says stop or
//! the guest powers off.
//!
//! The job is set again before every boot (with `After::Stay`, so the
//! guest stays up), next to a file `job/tryboot` holding `1` on a trial boot
//! and `0` otherwise: what the real firmware tells the OS in
//! `/proc/device-tree/chosen/bootloader/tryboot`, which an x86 guest lacks.

use crate::host::share::{JobOutput, Share};
use crate::machine::qemu::Ending;
use anyhow::{bail, Context, Result};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The host side's view of a [`Pi::serve`] run.
///
/// [`Pi::serve`]: crate::Pi::serve
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
    /// The host's view of a machine about to serve SSH on `port`.
    pub(crate) fn new(port: u16, share: Share) -> Live {
        Live {
            port,
            share,
            stop: AtomicBool::new(false),
            boot: AtomicU32::new(0),
            ended: AtomicBool::new(false),
            last_ending: Mutex::new(None),
        }
    }

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

    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_boot(&self, number: u32) {
        self.boot.store(number, Ordering::SeqCst);
    }

    pub(crate) fn record_ending(&self, ending: Ending) {
        if let Ok(mut last) = self.last_ending.lock() {
            *last = Some(ending);
        }
    }

    pub(crate) fn mark_ended(&self) {
        self.ended.store(true, Ordering::SeqCst);
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
