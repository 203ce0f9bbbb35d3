//! A chain of failed trials on one Pi ([`Chain`]): each injected, then
//! hands off (no power cycle, no console input, no command into the guest)
//! until the SD card's system runs its job again, which says what happened
//! ([`WHAT_IT_SAYS`]); each trial's outcome goes to the [`tally`].
//!
//! [`tally`]: super::tally

use super::tally;
use crate::machine::probe::{expect_fact, facts};
use crate::machine::qmp::Unplug;
use crate::{After, Boot, Ending, Pi};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What the agent prints as it starts a job (on the console too): the Pi
/// runs again.
pub(super) const AGENT_RUNS_JOB: &str = "testbed-agent: running job";

/// How long one boot may take before it counts as waiting for a person:
/// a failed trial resets within a minute or two, a normal boot takes about
/// one under emulation.
pub(super) const BOOT_LIMIT: Duration = Duration::from_secs(8 * 60);

/// The job's first lines at every boot. In a trial boot (its command line
/// carries the trial's marker) it reports `in_trial=1` and what `extra`
/// prints, and leaves the Pi to itself: the trial checks itself, or
/// resets.
///
/// The marker is looked for with the shell's own `read` and `case`, not
/// grep: in a trial whose new drive was pulled as its job started, grep
/// was gone with the root ("grep: command not found"), so the test failed
/// and the job said `in_trial=0`, which the chain took for the SD card's
/// system back (a full run at a1a69b1, `unattended-root-only`).
pub(in crate::scenarios) fn hands_off_in_trial(extra: &str) -> String {
    format!(
        r#"
read -r cmdline < /proc/cmdline
case " $cmdline " in *" pimigrate.trial="*) in_trial=1 ;; *) in_trial=0 ;; esac
if [ "$in_trial" = 1 ]; then
    echo in_trial=1
    echo "root=$(findmnt -no SOURCE /)"
    {extra}
    echo stay > "$TESTBED/job/after"
    exit 0
fi
echo in_trial=0
echo "root=$(findmnt -no SOURCE /)"
"#
    )
}

/// What the SD card's system says after a trial: `pimigrate status`
/// (`stage=`, whether the trial came back by itself in the time its own
/// resets take, `back_by_itself=`, its JSON and its login text in the
/// share) and the trial's own record (`record=`, `record_reason=`), when
/// there is one.
pub(in crate::scenarios) const WHAT_IT_SAYS: &str = r#"
pimigrate status --json > "$TESTBED/out/status.json"
echo "stage=$(jq -r .stage "$TESTBED/out/status.json")"
echo "back_by_itself=$(jq -r '.trial_return.by_itself // "unknown"' "$TESTBED/out/status.json")"
pimigrate status --login > "$TESTBED/out/login.txt"
record=/var/lib/pimigrate/trial-outcome.json
if [ -f "$record" ]; then
    echo "record=$(jq -r .outcome "$record")"
    echo "record_at=$(jq -r .at "$record")"
    echo "record_reason=$(jq -r .reason "$record")"
else
    echo "record=none"
fi
"#;

/// A chain of failures on one Pi: each injected, then hands off until the
/// SD card's system runs again.
pub(in crate::scenarios) struct Chain {
    pub pi: Pi,
    pub name: &'static str,
    /// What the job prints in a trial boot besides `in_trial=1`.
    pub in_trial: String,
}

/// The SD card's system ran again after a failure: its job's facts, and
/// every boot it took.
pub(in crate::scenarios) struct Back {
    pub facts: BTreeMap<String, String>,
    pub boots: Vec<Boot>,
    /// For a drive pulled during the trial: how long after the unplug the
    /// trial's boot ended (its reset).
    pub reset_after_unplug: Option<Duration>,
}

/// What the harness does during the trial's boot, hands off otherwise.
pub(in crate::scenarios) enum During<'a> {
    /// Nothing: the trial fails by itself.
    Nothing,
    /// The power cut as soon as the trial's console shows these words.
    CutAt(&'a str),
    /// A disk pulled out (QMP `device_del`) as soon as the trial's console
    /// shows these words; the machine runs on, as a Pi whose bridge
    /// dropped the disk would. The boots after have it plugged in again
    /// (each boot starts QEMU afresh with the Pi's disks).
    UnplugAt(&'a str, Unplug),
}

impl Back {
    /// What the failed trial's consoles said, in order.
    pub fn consoles(&self) -> String {
        self.boots.iter().map(|b| b.record.console()).collect()
    }
}

impl Chain {
    pub fn new(mut pi: Pi, name: &'static str) -> Chain {
        pi.config.reset_on_panic = false;
        pi.boot_limit = BOOT_LIMIT;
        Chain {
            pi,
            name,
            in_trial: String::new(),
        }
    }

    /// `failure` was injected and the trial requested by the boot before
    /// (or the harness breaks it `during` the trial: the power cut, the
    /// new drive pulled). Boots with hands off until the SD card's system
    /// runs `job` (then does `after`), and checks that it came back by
    /// itself, on the SD card's root, each of `signs` on the consoles of
    /// the boots in between (what reset it).
    pub fn failed_trial(
        &mut self,
        failure: &str,
        signs: &[&str],
        during: During,
        job: &str,
        after: After,
    ) -> Result<Back> {
        let result = self.failed_trial_inner(failure, signs, during, job, after);
        if let Err(e) = &result {
            tally::needed_hands(self.name, failure, &format!("{e:#}"));
        }
        result
    }

    fn failed_trial_inner(
        &mut self,
        failure: &str,
        signs: &[&str],
        during: During,
        job: &str,
        after: After,
    ) -> Result<Back> {
        ensure!(
            self.pi.tryboot_pending(),
            "{failure}: no trial boot was requested before it"
        );
        let script = format!("{}{job}", hands_off_in_trial(&self.in_trial));
        let started = Instant::now();
        let mut boots: Vec<Boot> = Vec::new();
        let mut reset_after_unplug = None;
        for attempt in 0..4 {
            self.pi.share().set_job(&script, after)?;
            let mut job_seen = None;
            let mut unplugged: Option<Instant> = None;
            let mut unplug_failed = None;
            let boot = self.pi.boot_through_faults(&mut |_, console: &str| {
                if job_seen.is_none() && console.contains(AGENT_RUNS_JOB) {
                    job_seen = Some(Instant::now());
                }
                match &during {
                    _ if attempt > 0 => false,
                    During::Nothing => false,
                    During::CutAt(words) => console.contains(words),
                    During::UnplugAt(words, unplug) => {
                        if unplugged.is_none() && console.contains(words) {
                            match unplug.now() {
                                Ok(()) => unplugged = Some(Instant::now()),
                                // Cut the power: the error says why.
                                Err(e) => unplug_failed = Some(e),
                            }
                        }
                        unplug_failed.is_some()
                    }
                }
            })?;
            if let During::UnplugAt(words, unplug) = &during {
                if attempt == 0 {
                    if let Some(e) = unplug_failed {
                        return Err(e.context(format!("{failure}: pulling disk {}", unplug.disk)));
                    }
                    let at = unplugged.with_context(|| {
                        format!(
                            "{failure}: the trial's console never said {words:?}, so disk {} was not pulled; see {}",
                            unplug.disk,
                            boot.record.serial_log.display()
                        )
                    })?;
                    let after = at.elapsed();
                    eprintln!(
                        "testbed: {}: {failure}: disk {} pulled once the console said {words:?}; the trial's boot ended {} s later",
                        self.name,
                        unplug.disk,
                        after.as_secs()
                    );
                    reset_after_unplug = Some(after);
                }
            }
            let cut_here = attempt == 0 && matches!(during, During::CutAt(_));
            let back = boot
                .job
                .as_ref()
                .map(|job| facts(&job.stdout))
                .filter(|f| f.get("in_trial").map(String::as_str) == Some("0"));
            let ending = boot.record.ending;
            let console = boot.record.serial_log.display().to_string();
            boots.push(boot);
            if let Some(facts) = back {
                let after = job_seen.map_or(started.elapsed(), |t| t - started);
                let back = Back {
                    facts,
                    boots,
                    reset_after_unplug,
                };
                self.check_back(failure, signs, &back)?;
                tally::came_back(self.name, failure, after);
                return Ok(back);
            }
            ensure!(
                ending.restarted() || (cut_here && ending == Ending::Killed),
                "after {failure} boot {} ended {ending:?} without the SD card's system coming back \
                 (a boot that ran to its {} s limit waited for a person); see {console}",
                boots.len(),
                BOOT_LIMIT.as_secs()
            );
        }
        bail!("after {failure} the SD card's system did not run again within 4 boots")
    }

    fn check_back(&self, failure: &str, signs: &[&str], back: &Back) -> Result<()> {
        let last = back.boots.last().expect("the boot it came back in");
        ensure!(
            last.spec.disk == "sd",
            "after {failure} the Pi came back from disk {}, not the SD card",
            last.spec.disk
        );
        expect_fact(&back.facts, "root", self.sd_root())
            .with_context(|| format!("after {failure}"))?;
        // It came back by itself, and `status` must not say otherwise
        // (`unknown`: it could not tell, e.g. a guest without a clock).
        ensure!(
            back.facts.get("back_by_itself").map(String::as_str) != Some("false"),
            "after {failure} `pimigrate status` says the trial came back only after a reset pimigrate did \
             not plan, though the harness kept its hands off; see {}",
            self.pi.share().dir.join("out/status.json").display()
        );
        let consoles = back.consoles();
        for sign in signs {
            ensure!(
                consoles.contains(sign),
                "after {failure} no console of the boots in between says {sign:?}; see {}",
                self.pi.logs.display()
            );
        }
        Ok(())
    }

    /// The SD card's root as the guest names it.
    pub fn sd_root(&self) -> &'static str {
        "/dev/mmcblk0p2"
    }
}

/// `verify` exited `want` at the end of a chain, which ran it into the
/// share's out/verify.txt; when not, the error quotes what it said.
pub(super) fn verify_ended(chain: &Chain, back: &Back, want: &str) -> Result<()> {
    expect_fact(&back.facts, "verify_status", want).with_context(|| {
        let path = chain.pi.share().dir.join("out/verify.txt");
        match std::fs::read_to_string(&path) {
            Ok(said) => format!("verify said:\n{said}"),
            Err(e) => format!("no {}: {e}", path.display()),
        }
    })
}

/// The login message the last job left (`pimigrate status --login`) says
/// each of `words`.
pub(super) fn said_at_login(chain: &Chain, words: &[&str]) -> Result<()> {
    let path = chain.pi.share().dir.join("out/login.txt");
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    for word in words {
        ensure!(
            text.contains(word),
            "the login message does not say {word:?}:\n{text}"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::hands_off_in_trial;
    use std::process::Command;

    /// What the job's first lines say on a machine whose command line is
    /// `cmdline`, with no program on PATH at all (a root gone from under
    /// the job): only the shell's builtins decide.
    fn in_trial_line(cmdline: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cmdline");
        std::fs::write(&file, format!("{cmdline}\n")).unwrap();
        std::fs::create_dir(dir.path().join("job")).unwrap();
        let script = hands_off_in_trial("").replace("/proc/cmdline", file.to_str().unwrap());
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env("PATH", dir.path().join("nothing"))
            .env("TESTBED", dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        stdout
            .lines()
            .find(|l| l.starts_with("in_trial="))
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn the_trial_is_told_apart_without_any_program_on_the_root() {
        let trial = "console=ttyS0 root=PARTUUID=1-01 panic=10 pimigrate.trial=auto-commit";
        assert_eq!(in_trial_line(trial), "in_trial=1");
        assert_eq!(
            in_trial_line("pimigrate.trial=auto-commit root=/dev/sda1"),
            "in_trial=1"
        );
        assert_eq!(
            in_trial_line("console=ttyS0 root=PARTUUID=1-02 rootwait"),
            "in_trial=0"
        );
        assert_eq!(
            in_trial_line("root=/dev/sda1 xpimigrate.trial=1"),
            "in_trial=0"
        );
    }
}
