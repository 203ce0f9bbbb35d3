//! Changing a running machine through QEMU's monitor (QMP): unplugging a USB
//! disk in the middle of a boot, as a user pulling the cable would.
//!
//! A scenario asks for the socket with [`MachineConfig::qmp_socket`], then
//! acts from the hook of [`Pi::run_acting`], which is called while the guest
//! runs and never stops it.
//!
//! [`MachineConfig::qmp_socket`]: crate::qemu::MachineConfig

use crate::pi::Boot;
use crate::{After, Pi, Share};
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest path a Unix socket address holds (`sun_path`, with its NUL).
pub(crate) const SUN_PATH_MAX: usize = 107;

/// One QMP connection, in command mode.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events read while waiting for a command's answer.
    events: Vec<Value>,
}

impl Qmp {
    /// Connects (QEMU may still be creating the socket: retried for up to
    /// `wait`), reads the greeting and leaves capability negotiation.
    pub fn connect(socket: &Path, wait: Duration) -> Result<Qmp> {
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(socket) {
                Ok(s) => break s,
                Err(e) if start.elapsed() < wait => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot connect to QEMU's QMP socket {}", socket.display())
                    })
                }
            }
        };
        // A monitor that stops answering must not hang the test forever.
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let writer = stream.try_clone().context("cannot clone the QMP socket")?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
            events: Vec::new(),
        };
        let greeting = qmp.read()?;
        ensure!(
            greeting.get("QMP").is_some(),
            "QMP greeting expected from {}, got {greeting}",
            socket.display()
        );
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .context("reading from QEMU's QMP socket")?;
        ensure!(n > 0, "QEMU closed the QMP socket");
        serde_json::from_str(&line)
            .with_context(|| format!("QMP sent something not JSON: {line:?}"))
    }

    /// Runs a command and returns its `return` value; a QMP `error` is an error.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let msg = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{msg}").with_context(|| format!("sending QMP {command}"))?;
        loop {
            let v = self.read()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                bail!("QMP {command} failed: {e}");
            }
            if v.get("event").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Waits for event `name` whose `data` has `key` equal to `value`
    /// (including events that arrived while a command was answered).
    pub fn wait_event(
        &mut self,
        name: &str,
        key: &str,
        value: &str,
        limit: Duration,
    ) -> Result<Value> {
        let matches = |v: &Value| v["event"] == name && v["data"][key] == value;
        if let Some(i) = self.events.iter().position(matches) {
            return Ok(self.events.remove(i));
        }
        let start = Instant::now();
        while start.elapsed() < limit {
            match self.read() {
                Ok(v) if matches(&v) => return Ok(v),
                Ok(v) => self.events.push(v),
                Err(e) => {
                    let timed_out = e.chain().any(|c| {
                        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
                            matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                        })
                    });
                    if !timed_out {
                        return Err(e);
                    }
                }
            }
        }
        bail!("QEMU sent no {name} event for {key}={value} within {limit:?}")
    }
}

/// What it takes to pull one disk out of a running machine; made before the
/// boot, used from [`Pi::run_acting`]'s hook.
#[derive(Debug, Clone)]
pub struct Unplug {
    pub socket: PathBuf,
    pub device_id: String,
    pub disk: String,
}

impl Unplug {
    /// `device_del`, then waits until QEMU reports the device gone.
    pub fn now(&self) -> Result<()> {
        let mut qmp = Qmp::connect(&self.socket, Duration::from_secs(10))?;
        qmp.execute("device_del", json!({ "id": self.device_id }))
            .with_context(|| format!("unplugging disk {}", self.disk))?;
        qmp.wait_event(
            "DEVICE_DELETED",
            "device",
            &self.device_id,
            Duration::from_secs(60),
        )
        .with_context(|| format!("unplugging disk {}", self.disk))?;
        Ok(())
    }
}

impl Pi {
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
}
