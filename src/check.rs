//! One finding of a check, pass or fail, with the devices it is about and
//! the fix: what `verify` asks of a running system and a sync asks of its
//! standby offline. Low in the tree, so both rooms (and the writer that
//! records a standby's checks) share the one type. The check after the
//! move ([`Finding`]) adds a level between pass and fail: a warning.

use serde::Serialize;

/// One line of a checklist.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// Stable: `root-mounted`, `kernel-root`, `fstab`, `ids-unique`,
    /// `boot-partition`, `trial-boot` (verify's); `standby-fstab`,
    /// `standby-root`, `kernel`, `first-boot` (a standby's).
    pub code: &'static str,
    pub pass: bool,
    pub message: String,
    /// The devices the message is about.
    pub devices: Vec<String>,
    pub hint: Option<String>,
}

impl Check {
    pub fn pass(code: &'static str, message: String) -> Check {
        Check {
            code,
            pass: true,
            message,
            devices: Vec::new(),
            hint: None,
        }
    }

    pub fn fail(code: &'static str, message: String) -> Check {
        Check {
            pass: false,
            ..Check::pass(code, message)
        }
    }

    pub fn devices(mut self, devices: Vec<String>) -> Check {
        self.devices = devices;
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

/// How much a finding of the check after the move matters: what
/// `status --check` exits with, as monitoring plugins do (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// As the move left it.
    Ok,
    /// Worth a look: the Pi runs as moved, but something may stop it later
    /// (a bridge that resets, under-voltage, a standby left behind), or a
    /// fact could not be read.
    Warning,
    /// The Pi does not run, or will not boot, from what the move set up.
    Failure,
}

/// One finding of the check after the move (`pimigrate status --check`,
/// its daily timer, the login message): what was found, how much it
/// matters, and what to do. A verify check becomes one as it is: passed
/// is ok, failed a failure, its hint the fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable: `booted-from`, `boot-order`, `ids-unique`, `boot-mount`,
    /// `boot-shadowed`, `kernel-modules`, `disk-errors`, `power`,
    /// `usb-current`, `standby-age`, `check-conf`.
    pub code: &'static str,
    pub level: Level,
    pub message: String,
    /// The devices the message is about.
    pub devices: Vec<String>,
    /// Steps, in order (none when it is ok).
    pub fix: Vec<String>,
    /// Muted by the owner (/etc/pimigrate/check.conf, `--ignore`): still
    /// listed, but it changes neither the exit status nor the login message.
    pub muted: bool,
}

impl Finding {
    pub fn new(code: &'static str, level: Level, message: String) -> Finding {
        Finding {
            code,
            level,
            message,
            devices: Vec::new(),
            fix: Vec::new(),
            muted: false,
        }
    }

    pub fn ok(code: &'static str, message: String) -> Finding {
        Finding::new(code, Level::Ok, message)
    }

    pub fn warning(code: &'static str, message: String) -> Finding {
        Finding::new(code, Level::Warning, message)
    }

    pub fn failure(code: &'static str, message: String) -> Finding {
        Finding::new(code, Level::Failure, message)
    }

    pub fn devices(mut self, devices: Vec<String>) -> Finding {
        self.devices = devices;
        self
    }

    pub fn fix(mut self, step: impl Into<String>) -> Finding {
        self.fix.push(step.into());
        self
    }

    /// What it counts for: nothing when muted.
    pub fn counts(&self) -> Level {
        match self.muted {
            true => Level::Ok,
            false => self.level,
        }
    }
}

impl From<Check> for Finding {
    fn from(check: Check) -> Finding {
        let level = match check.pass {
            true => Level::Ok,
            false => Level::Failure,
        };
        Finding {
            fix: check.hint.into_iter().collect(),
            devices: check.devices,
            ..Finding::new(check.code, level, check.message)
        }
    }
}

/// The worst level among `findings` that count.
pub fn worst(findings: &[Finding]) -> Level {
    findings
        .iter()
        .map(Finding::counts)
        .max()
        .unwrap_or(Level::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_becomes_a_finding_and_a_muted_one_counts_for_nothing() {
        let failed = Finding::from(
            Check::fail("ids-unique", "duplicate ids".into())
                .devices(vec!["/dev/sda1".into(), "/dev/sdb1".into()])
                .hint("detach the other disk"),
        );
        assert_eq!(failed.level, Level::Failure);
        assert_eq!(failed.fix, ["detach the other disk"]);
        assert_eq!(failed.devices.len(), 2);
        let passed = Finding::from(Check::pass("ids-unique", "one each".into()));
        assert_eq!((passed.level, passed.fix.len()), (Level::Ok, 0));
        let warning = Finding::warning("power", "under-voltage since boot".into());
        assert_eq!(worst(&[passed.clone(), warning.clone()]), Level::Warning);
        assert_eq!(
            worst(&[passed.clone(), warning, failed.clone()]),
            Level::Failure
        );
        let muted = Finding {
            muted: true,
            ..failed
        };
        assert_eq!(worst(&[passed, muted]), Level::Ok);
        assert_eq!(worst(&[]), Level::Ok);
    }
}
