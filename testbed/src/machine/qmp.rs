//! Changing a running machine through QEMU's monitor (QMP): unplugging a USB
//! disk in the middle of a boot, as a user pulling the cable would.
//!
//! A scenario asks for the socket with [`MachineConfig::qmp_socket`], then
//! acts from the hook of [`Pi::run_acting`], which is called while the guest
//! runs and never stops it.
//!
//! [`MachineConfig::qmp_socket`]: crate::machine::qemu::MachineConfig
//! [`Pi::run_acting`]: crate::Pi::run_acting

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
/// boot ([`Pi::prepare_unplug`]), used from [`Pi::run_acting`]'s hook.
///
/// [`Pi::prepare_unplug`]: crate::Pi::prepare_unplug
/// [`Pi::run_acting`]: crate::Pi::run_acting
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
