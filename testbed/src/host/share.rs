//! The host half of the guest command channel: a folder exported over
//! virtio-9p. The guest agent (`testbed/image/files/usr/local/sbin/testbed-agent`)
//! runs `job/run.sh` after boot, writes `out/{stdout,stderr,status}` and then
//! does what `job/after` says. `bin/` is on the job's PATH: the hook for
//! running host-built binaries (such as pimigrate) inside the guest.

use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the guest does once the job has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    PowerOff,
    Reboot,
    /// `systemctl reboot "0 tryboot"`.
    Tryboot,
    /// Stay up (for a person on the console, or a power cut).
    Stay,
    /// Run `job/then.sh` ([`Share::set_then`]) once the job's output and
    /// status are written, the share still mounted, and stay up: for a
    /// program that reboots the Pi itself (`pimigrate migrate --reboot`),
    /// which would cut the job short if the job ran it. Its output goes
    /// to `out/then.log`.
    Then,
}

impl After {
    fn word(self) -> &'static str {
        match self {
            After::PowerOff => "poweroff",
            After::Reboot => "reboot",
            After::Tryboot => "tryboot",
            After::Stay => "stay",
            After::Then => "then",
        }
    }
}

/// Result of a job run in the guest.
#[derive(Debug, Clone)]
pub struct JobOutput {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl JobOutput {
    /// An error with the job's output unless it exited with 0.
    pub fn check(&self, what: &str) -> Result<&Self> {
        anyhow::ensure!(
            self.status == 0,
            "{what} failed in the guest with status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            self.stdout.trim_end(),
            self.stderr.trim_end()
        );
        Ok(self)
    }
}

/// The shared folder of one machine.
#[derive(Debug, Clone)]
pub struct Share {
    pub dir: PathBuf,
}

impl Share {
    pub fn create(dir: PathBuf) -> Result<Share> {
        for sub in ["job", "out", "bin"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d)
                .with_context(|| format!("cannot create share folder {}", d.display()))?;
        }
        Ok(Share { dir })
    }

    /// Sets the job for the next boot; clears the previous boot's output.
    pub fn set_job(&self, script: &str, after: After) -> Result<()> {
        self.clear_output()?;
        let run = self.dir.join("job/run.sh");
        let body = format!("#!/bin/bash\nset -eu\n{script}\n");
        fs::write(&run, body).with_context(|| format!("cannot write {}", run.display()))?;
        fs::set_permissions(&run, fs::Permissions::from_mode(0o755))?;
        let after_file = self.dir.join("job/after");
        fs::write(&after_file, after.word())
            .with_context(|| format!("cannot write {}", after_file.display()))?;
        Ok(())
    }

    /// What [`After::Then`] runs after the job (bash, `set -eu`, with the
    /// job's environment).
    pub fn set_then(&self, script: &str) -> Result<()> {
        let then = self.dir.join("job/then.sh");
        fs::write(&then, format!("#!/bin/bash\nset -eu\n{script}\n"))
            .with_context(|| format!("cannot write {}", then.display()))?;
        fs::set_permissions(&then, fs::Permissions::from_mode(0o755))?;
        Ok(())
    }

    /// No job: the next boot just comes up (the agent then does nothing).
    pub fn clear_job(&self) -> Result<()> {
        self.clear_output()?;
        let _ = fs::remove_file(self.dir.join("job/run.sh"));
        let _ = fs::remove_file(self.dir.join("job/after"));
        Ok(())
    }

    fn clear_output(&self) -> Result<()> {
        let out = self.dir.join("out");
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))
    }

    /// Puts a host file (e.g. `target/release/pimigrate`) on the job's PATH
    /// as `bin/<name>`. The host is Debian 12 like the guest, so host builds
    /// run there.
    pub fn place_binary(&self, host_path: &Path, name: &str) -> Result<PathBuf> {
        let dest = self.dir.join("bin").join(name);
        fs::copy(host_path, &dest).with_context(|| {
            format!(
                "cannot copy {} into the guest share; build it first",
                host_path.display()
            )
        })?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))?;
        Ok(dest)
    }

    /// Puts a file next to the job, readable by it as `$TESTBED/job/<name>`.
    pub fn place_file(&self, name: &str, contents: &[u8]) -> Result<()> {
        let dest = self.dir.join("job").join(name);
        fs::write(&dest, contents).with_context(|| format!("cannot write {}", dest.display()))
    }

    /// True once the agent has picked the job up.
    pub fn started(&self) -> bool {
        self.dir.join("out/started").exists()
    }

    /// The job's result, if it finished.
    pub fn output(&self) -> Result<Option<JobOutput>> {
        let out = self.dir.join("out");
        let status = match fs::read_to_string(out.join("status")) {
            // The agent's `echo "$status" >status` creates the file before
            // it writes the number: an empty file is one being written.
            Ok(s) if s.trim().is_empty() => return Ok(None),
            Ok(s) => s
                .trim()
                .parse::<i32>()
                .with_context(|| format!("bad status file in {}", out.display()))?,
            Err(_) => return Ok(None),
        };
        let read = |f: &str| {
            fs::read(out.join(f))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        Ok(Some(JobOutput {
            status,
            stdout: read("stdout"),
            stderr: read("stderr"),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_file_being_written_is_no_result_yet() {
        let dir = std::env::temp_dir().join(format!("tb-share-test-{}", std::process::id()));
        let share = Share::create(dir.clone()).unwrap();
        assert!(share.output().unwrap().is_none());
        fs::write(dir.join("out/status"), "").unwrap();
        assert!(share.output().unwrap().is_none(), "an empty status file");
        fs::write(dir.join("out/stdout"), "root=/dev/sda1\n").unwrap();
        fs::write(dir.join("out/status"), "0\n").unwrap();
        let out = share.output().unwrap().expect("a finished job");
        assert_eq!((out.status, out.stdout.as_str()), (0, "root=/dev/sda1\n"));
        fs::write(dir.join("out/status"), "x\n").unwrap();
        assert!(share.output().is_err(), "a status that is not a number");
        fs::remove_dir_all(&dir).unwrap();
    }
}
