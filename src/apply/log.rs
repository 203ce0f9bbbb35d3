//! The full log of one migration: `<log dir>/migrate-<UTC time>.log`, with
//! the plan, every step with its time, and the error if there is one. It is
//! what a user attaches to a bug report, so it is written as the migration
//! goes (a crash leaves everything up to the crash) and a copy goes onto the
//! new root filesystem with the journal.

use crate::clock::utc_text;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

pub struct MigrationLog {
    path: PathBuf,
    file: Mutex<File>,
    started: Instant,
}

impl MigrationLog {
    /// Creates a new log file in `dir` (created if missing). Never reuses a
    /// file: two migrations in one second get `-2`, `-3`, ...
    pub fn create(dir: &Path) -> Result<MigrationLog> {
        MigrationLog::create_named(dir, "migrate")
    }

    /// As [`MigrationLog::create`], for another command: `<what>-<UTC time>.log`.
    pub fn create_named(dir: &Path, what: &str) -> Result<MigrationLog> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the log directory {}", dir.display()))?;
        let stamp = utc_text(crate::clock::now() as i64, true);
        let mut attempt = 1;
        loop {
            let name = match attempt {
                1 => format!("{what}-{stamp}.log"),
                n => format!("{what}-{stamp}-{n}.log"),
            };
            let path = dir.join(name);
            // Appending: after a hang-up stderr is this file too
            // (`crate::signals::output_to`), and both add to its end.
            match File::options().append(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(MigrationLog {
                        path,
                        file: Mutex::new(file),
                        started: Instant::now(),
                    })
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && attempt < 100 => {
                    attempt += 1;
                }
                Err(err) => {
                    return Err(err).with_context(|| format!("creating the log {}", path.display()))
                }
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// One timestamped line (or several, for a multi-line message).
    ///
    /// Best effort: a full disk under /var/log must not stop a migration
    /// half-way, so write errors are ignored here. The copy onto the target
    /// ([`MigrationLog::copy_into`]) does report them.
    pub fn line(&self, message: &str) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let prefix = format!(
            "{} {elapsed:>8.1}s ",
            utc_text(crate::clock::now() as i64, false)
        );
        let mut text = String::new();
        for (n, line) in message.lines().enumerate() {
            if n == 0 {
                text.push_str(&prefix);
            } else {
                text.push_str(&" ".repeat(prefix.len()));
            }
            text.push_str(line);
            text.push('\n');
        }
        if let Ok(mut file) = self.file.lock() {
            let _ = file.write_all(text.as_bytes());
        }
    }

    /// A block of text as it is (the plan), indented under the last line.
    pub fn block(&self, text: &str) {
        if let Ok(mut file) = self.file.lock() {
            for line in text.lines() {
                let _ = writeln!(file, "    {line}");
            }
        }
    }

    /// Copies the log as written so far into `dir` (on the new root), under
    /// the same name; flushed first so the copy has every line.
    pub fn copy_into(&self, dir: &Path) -> Result<PathBuf> {
        if let Ok(file) = self.file.lock() {
            file.sync_data()
                .with_context(|| format!("flushing {}", self.path.display()))?;
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dest = dir.join(self.path.file_name().unwrap_or_default());
        std::fs::copy(&self.path, &dest).with_context(|| {
            format!(
                "copying the log {} to {}",
                self.path.display(),
                dest.display()
            )
        })?;
        Ok(dest)
    }
}

/// How a log this module wrote ends: its last `done` or `error: ...`
/// entry, or neither (still running, or killed: a power cut, SIGKILL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    Done,
    Error(String),
    Open,
}

/// The newest `<what>-<UTC time>.log` in `dir` (the names sort by time).
pub fn newest(dir: &Path, what: &str) -> Option<PathBuf> {
    let prefix = format!("{what}-");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".log"))
        })
        .max()
}

/// Reads how the log at `path` ends.
pub fn end_of(path: &Path) -> LogEnd {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines().rev() {
        match entry(line) {
            Some("done") => return LogEnd::Done,
            Some(message) if message.starts_with("error: ") => {
                return LogEnd::Error(message["error: ".len()..].to_string())
            }
            _ => {}
        }
    }
    LogEnd::Open
}

/// The message of a timestamped line (`<UTC> <elapsed>s <message>`), or
/// `None` for a continuation, the plan, or output after a hang-up.
fn entry(line: &str) -> Option<&str> {
    let (stamp, rest) = line.split_once(' ')?;
    if !(stamp.ends_with('Z') && stamp.starts_with(|c: char| c.is_ascii_digit())) {
        return None;
    }
    let (elapsed, message) = rest.trim_start().split_once(' ')?;
    elapsed
        .strip_suffix('s')
        .is_some_and(|e| e.parse::<f64>().is_ok())
        .then_some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_gets_a_fresh_name_and_timestamped_lines() {
        let dir = tempfile::tempdir().unwrap();
        let first = MigrationLog::create(&dir.path().join("log")).unwrap();
        let second = MigrationLog::create(&dir.path().join("log")).unwrap();
        assert_ne!(first.path(), second.path());
        first.line("writing a new MBR partition table\nsecond line");
        first.block("Plan: root only");
        let text = std::fs::read_to_string(first.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with("s writing a new MBR partition table"),
            "{text}"
        );
        assert!(
            lines[0].as_bytes()[4] == b'-' && lines[0].contains('T'),
            "{text}"
        );
        assert!(lines[1].trim_start() == "second line", "{text}");
        assert_eq!(lines[2], "    Plan: root only");

        let copy = first
            .copy_into(&dir.path().join("target/var/log/pimigrate"))
            .unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), text);
    }

    #[test]
    fn a_logs_end_is_its_last_done_or_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = MigrationLog::create(dir.path()).unwrap();
        log.line("copying the root filesystem");
        assert_eq!(end_of(log.path()), LogEnd::Open);
        log.line("error: the target /dev/sda is gone\nplug it in again");
        assert_eq!(
            end_of(log.path()),
            LogEnd::Error("the target /dev/sda is gone".into())
        );
        log.line("done");
        log.line("next:\nreboot");
        // What a command printed after a hang-up, below the entries.
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"Migrated to /dev/sda.\n")
            .unwrap();
        assert_eq!(end_of(log.path()), LogEnd::Done);
        let sync = MigrationLog::create_named(dir.path(), "sync").unwrap();
        assert_eq!(newest(dir.path(), "migrate").as_deref(), Some(log.path()));
        assert_eq!(newest(dir.path(), "sync").as_deref(), Some(sync.path()));
        assert_eq!(newest(&dir.path().join("none"), "sync"), None);
    }
}
