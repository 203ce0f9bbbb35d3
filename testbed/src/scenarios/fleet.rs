//! What the fleet scenarios (`ansible`, `ansible-rollback`) share: a key
//! for the guest's root, the pimigrate package the playbook installs, an
//! inventory carrying the playbook's variables, `ansible-playbook` runs
//! with their recap, and commands in the guest over SSH.

use crate::machine::fault::{EmulationFault, FaultKind};
use crate::machine::live::Live;
use crate::machine::pi::target_dir;
use crate::machine::probe::{expect_fact, facts};
use crate::machine::rig::Setup;
use crate::{Bus, ImageSet, Pi};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The start of the job of every boot: the host's key for root, whether
/// sshd runs (`sshd=`, for [`Fleet::connect`]), and the firmware's trial
/// flag (what the testbed's firmware booted) for `TRIAL_SYSROOT`, which
/// puts it where `verify --sysroot` looks.
pub const JOB: &str = r#"
install -d -m 700 /root/.ssh
install -m 600 "$TESTBED/job/authorized_keys" /root/.ssh/authorized_keys
# The agent does not wait for sshd, which may still be starting: give it
# two minutes before reporting.
for _ in $(seq 120); do systemctl is-active -q ssh && break; sleep 1; done
echo "sshd=$(systemctl is-active ssh || true)"
tryboot_flag=$(cat "$TESTBED/job/tryboot")
"#;

/// The Pi of both fleet scenarios: the SD card (unthrottled, since nothing
/// here is timed) and a blank NVMe drive; the playbook installs pimigrate.
/// They test the playbook, not where the pick threshold falls, so the drive
/// must be the pick beyond doubt: under emulation NVMe does about 9000
/// random 4K reads and 7800 writes a second against the card's 780 and 260
/// (docs/testbed/disks.md), more than ten times even on a loaded host, where a
/// UAS SSD beside an A1 card once measured 2.0x, the threshold itself, and
/// nothing was picked.
pub fn setup(name: &str, images: &ImageSet) -> Setup {
    Setup::new(name, &images.bookworm)
        .blank("nvme", Bus::Nvme, 8 << 30, "nvme")
        .without_pimigrate()
}

/// What the playbook's own stop says when recommend picked nothing.
const NOTHING_PICKED: &str = "No drive is worth migrating to";

/// Under this many times the card at random 4K, the NVMe drive did not
/// measure as [`setup`]'s profiles make it (more than ten times).
const NVME_GAIN_AT_LEAST: f64 = 3.0;

/// The premise of [`setup`], checked when a play stopped because nothing
/// was picked: recommend's saved figures (read again with `--reuse`) must
/// show the NVMe drive well ahead of the card. If they do not, the
/// emulated drive ran far below its profile (stalls of QEMU's I/O on a
/// loaded host), which says nothing of the playbook: the emulation's fault,
/// and the scenario runs once more. Otherwise, or when the play stopped
/// elsewhere, nothing to say here.
pub fn nvme_was_ahead(ssh: &Ssh, output: &str, logs: &Path) -> Result<()> {
    if !output.contains(NOTHING_PICKED) {
        return Ok(());
    }
    let mut argv = vec!["pimigrate", "recommend", "--json", "--reuse", "--quick"];
    argv.extend(FLEET_BENCH_ARGS);
    let figures = ssh
        .run(&argv.join(" "))
        .context("reading recommend's figures again, since the play picked nothing")?;
    let doc: serde_json::Value = serde_json::from_str(&figures)
        .context("recommend --json --reuse in the guest is not JSON")?;
    match nvme_gain(&doc) {
        Some(gain) if gain < NVME_GAIN_AT_LEAST => Err(EmulationFault::new(
            FaultKind::DiskBelowProfile {
                what: format!(
                    "the NVMe drive measured {gain:.1} times the SD card at random 4K \
                     (its profile makes it more than ten), so nothing was picked"
                ),
            },
            logs,
            true,
        )
        .into()),
        _ => Ok(()),
    }
}

/// The NVMe drive's combined gain over the current root in a
/// `pimigrate.recommend/1` document.
fn nvme_gain(doc: &serde_json::Value) -> Option<f64> {
    doc["ranking"].as_array()?.iter().find(|e| {
        e["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/dev/nvme"))
    })?["gain"]["combined"]
        .as_f64()
}

/// The benchmark's arguments every fleet run gives the playbook
/// ([`Fleet::host_vars`]).
const FLEET_BENCH_ARGS: [&str; 4] = ["--size", "32M", "--runtime", "0.5"];

/// Longest one playbook run may take (a migration under emulation, with a
/// benchmark and a reboot, on a loaded machine).
const PLAYBOOK_LIMIT: Duration = Duration::from_secs(45 * 60);

/// The host's side of a fleet scenario, set up before the first boot.
pub struct Fleet {
    pub playbook_bin: PathBuf,
    /// The private key whose public half [`JOB`] installs for root.
    pub key: PathBuf,
    /// The package the playbook installs: a copy of the release build.
    pub package: PathBuf,
}

impl Fleet {
    /// Makes a key for this run and places its public half in the share
    /// (for [`JOB`]), and copies the release build of pimigrate.
    pub fn prepare(pi: &Pi) -> Result<Fleet> {
        let playbook_bin = which("ansible-playbook").context(
            "ansible-playbook is missing: install ansible-core (testbed/run.sh installs it)",
        )?;
        let key = pi.work.join("id_ed25519");
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "pi-testbed", "-f"])
            .arg(&key)
            .status()
            .context("cannot run ssh-keygen: install openssh-client")?;
        ensure!(status.success(), "ssh-keygen failed: {status}");
        let public = std::fs::read(key.with_extension("pub")).context("no public key")?;
        pi.share().place_file("authorized_keys", &public)?;

        let built = target_dir().join("release/pimigrate");
        ensure!(
            built.is_file(),
            "{} is missing: run `cargo build --release -p pimigrate` (testbed/run.sh does)",
            built.display()
        );
        // Every run must install the same package: a copy taken now, since
        // the build in target/ may be replaced while a long run goes on.
        let package = pi.work.join("pimigrate");
        std::fs::copy(&built, &package)
            .with_context(|| format!("cannot copy {} to {}", built.display(), package.display()))?;
        Ok(Fleet {
            playbook_bin,
            key,
            package,
        })
    }

    /// Waits for the first boot's job, checks that sshd runs and answers
    /// with the key, and writes the inventory (with [`Fleet::host_vars`])
    /// in `work`.
    pub fn connect(&self, live: &Live, work: &Path) -> Result<(Ssh, PathBuf)> {
        let first = live.wait_job(Duration::from_secs(15 * 60))?;
        let f = facts(&first.check("the first boot's job")?.stdout);
        expect_fact(&f, "sshd", "active")?;
        let ssh = Ssh::new(live, &self.key);
        // The guest took a DHCP lease and sshd answers with the key.
        ssh.run("true")
            .context("sshd in the guest does not answer")?;
        let inventory = self.write_inventory(work, live, &self.host_vars())?;
        Ok((ssh, inventory))
    }

    /// The variables every testbed run gives the playbook, through the
    /// inventory as a fleet would (role defaults must yield to them):
    /// the package, and the two accommodations for an x86 guest playing a
    /// Pi (no identifiable firmware: `trial: always`; no device tree: the
    /// job's `/run/tb-sysroot` for verify), and a 32 MiB test file
    /// (`pimigrate_bench_args`, which a fleet with slow cards needs: laying
    /// out the quick suite's file took an emulated class 10 card, writing
    /// 0.6 MB/s, 7 of a run's 12 minutes) with tests of 0.5 s: the NVMe
    /// drive is about ten times the card at random 4K, a gap no window
    /// edge hides, and the scenarios test the playbook, not the figures.
    pub fn host_vars(&self) -> serde_json::Value {
        serde_json::json!({
            "pimigrate_package": self.package,
            "pimigrate_trial": "always",
            "pimigrate_verify_args": ["--sysroot", "/run/tb-sysroot"],
            "pimigrate_bench_args": FLEET_BENCH_ARGS,
        })
    }

    /// Writes an inventory with host `pi` in group `pis` at the guest's
    /// forwarded port, with `vars` as host variables (JSON is YAML, which
    /// the yaml inventory plugin reads).
    pub fn write_inventory(
        &self,
        work: &Path,
        live: &Live,
        vars: &serde_json::Value,
    ) -> Result<PathBuf> {
        let path = work.join("inventory.yml");
        let mut host = serde_json::json!({
            "ansible_host": "127.0.0.1",
            "ansible_port": live.port,
            // Root logs in itself, and the image has no sudo: no `become`.
            "ansible_user": "root",
            "ansible_become": false,
            "ansible_ssh_private_key_file": self.key,
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_common_args": ssh_options(&self.key)[2..].join(" "),
        });
        if let (Some(host), Some(vars)) = (host.as_object_mut(), vars.as_object()) {
            host.extend(vars.clone());
        }
        let inventory = serde_json::json!({"pis": {"hosts": {"pi": host}}});
        std::fs::write(&path, serde_json::to_string_pretty(&inventory)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Runs the playbook, keeps its output in `log`; returns the play
    /// recap's counters for the host (`ok`, `changed`, `failed`, ...) and
    /// the output.
    pub fn play(&self, inventory: &Path, log: &Path) -> Result<(BTreeMap<String, u64>, String)> {
        let started = Instant::now();
        eprintln!("testbed: ansible-playbook, output in {}", log.display());
        let out = Command::new(&self.playbook_bin)
            .arg("-i")
            .arg(inventory)
            .arg(playbook())
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_HOST_KEY_CHECKING", "False")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
            .env("ANSIBLE_TIMEOUT", "60")
            // One SSH command a task instead of four (temp folder, copy of
            // the module, chmod, run), each a shell started in the
            // emulated guest; as a fleet on slow Pis would set it.
            .env("ANSIBLE_PIPELINING", "True")
            .output()
            .context("cannot run ansible-playbook")?;
        let text = format!(
            "{}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(log, &text).with_context(|| format!("cannot write {}", log.display()))?;
        eprintln!(
            "testbed: ansible-playbook exited {} after {:.0?}",
            out.status,
            started.elapsed()
        );
        if started.elapsed() > PLAYBOOK_LIMIT {
            bail!("ansible-playbook took {:.0?}", started.elapsed());
        }
        let recap = parse_recap(&text)
            .with_context(|| format!("no PLAY RECAP for host pi in {}", log.display()))?;
        let failed = recap.get("failed").copied().unwrap_or(0) > 0;
        ensure!(
            out.status.success() || failed,
            "ansible-playbook exited {} without a failed task; see {}",
            out.status,
            log.display()
        );
        Ok((recap, text))
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

/// The playbook in the repository.
fn playbook() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .parent()
        .unwrap_or(crate_dir)
        .join("examples/ansible/pimigrate.yml")
}

/// SSH options for a guest whose host key is new at every test.
fn ssh_options(key: &Path) -> Vec<String> {
    vec![
        "-i".into(),
        key.display().to_string(),
        "-o".into(),
        "StrictHostKeyChecking=no".into(),
        "-o".into(),
        "UserKnownHostsFile=/dev/null".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "ConnectTimeout=20".into(),
        "-o".into(),
        "LogLevel=ERROR".into(),
    ]
}

/// `pi : ok=12 changed=4 unreachable=0 failed=0 skipped=3 ...` after
/// `PLAY RECAP`.
fn parse_recap(text: &str) -> Option<BTreeMap<String, u64>> {
    let recap = &text[text.rfind("PLAY RECAP")?..];
    let line = recap
        .lines()
        .find(|l| l.split_whitespace().next() == Some("pi"))?;
    let counters: BTreeMap<String, u64> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect();
    ["ok", "changed", "unreachable", "failed"]
        .iter()
        .all(|k| counters.contains_key(*k))
        .then_some(counters)
}

/// The tasks that failed in a playbook's output, each with what it said
/// (the module's `msg`, else its stderr), for an error that tells why
/// without opening the log: `TASK [role : name]` and then
/// `fatal: [pi]: FAILED! => {json}`.
pub fn failed_tasks(text: &str) -> String {
    let mut task = "";
    let mut failed = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("TASK [") {
            task = rest.split(']').next().unwrap_or(rest);
        } else if let Some((_, result)) = line
            .strip_prefix("fatal: [")
            .and_then(|l| l.split_once("FAILED! => "))
        {
            let said = serde_json::from_str::<serde_json::Value>(result)
                .ok()
                .and_then(|r| {
                    ["msg", "stderr"]
                        .iter()
                        .find_map(|k| r[k].as_str().filter(|s| !s.is_empty()).map(str::to_string))
                })
                .unwrap_or_else(|| result.to_string());
            failed.push(format!("task [{task}] failed: {}", said.trim()));
        }
    }
    if failed.is_empty() {
        "no task failed".to_string()
    } else {
        failed.join("; ")
    }
}

/// Commands in the guest over the forwarded port.
pub struct Ssh {
    port: u16,
    key: PathBuf,
}

impl Ssh {
    pub fn new(live: &Live, key: &Path) -> Ssh {
        Ssh {
            port: live.port,
            key: key.to_path_buf(),
        }
    }

    /// Runs `command`, returns its trimmed stdout; fails on a non-zero exit.
    pub fn run(&self, command: &str) -> Result<String> {
        let out = Command::new("ssh")
            .args(ssh_options(&self.key))
            .arg("-p")
            .arg(self.port.to_string())
            .arg("root@127.0.0.1")
            .arg(command)
            .output()
            .context("cannot run ssh: install openssh-client")?;
        ensure!(
            out.status.success(),
            "`{command}` in the guest over ssh: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The PARTUUID the plan in the journal at `journal` gave the new root.
    pub fn planned_root_partuuid(&self, journal: &str) -> Result<String> {
        self.run(&format!(
            "jq -r '.plan.table.partitions[] | select(.role == \"root\") | .partuuid' {journal}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{failed_tasks, nvme_gain, parse_recap};

    #[test]
    fn the_nvme_drives_gain_is_read_from_the_ranking() {
        let doc = serde_json::json!({"ranking": [
            {"path": "/dev/mmcblk0", "gain": null},
            {"path": "/dev/sda", "gain": {"combined": 0.2}},
            {"path": "/dev/nvme0n1", "gain": {"combined": 1.4}}
        ]});
        assert_eq!(nvme_gain(&doc), Some(1.4));
        assert_eq!(nvme_gain(&serde_json::json!({"ranking": []})), None);
    }

    #[test]
    fn a_failed_task_is_named_with_what_it_said() {
        let text = "TASK [pimigrate : Read the pick] ***\nok: [pi]\n\n\
                    TASK [pimigrate : Stop when no drive is worth migrating to] ***\n\
                    fatal: [pi]: FAILED! => {\"changed\": false, \"msg\": \"No drive is worth migrating to: slow.\"}\n\
                    TASK [pimigrate : Verify] ***\n\
                    fatal: [pi]: FAILED! => {\"changed\": true, \"msg\": \"\", \"rc\": 5, \"stderr\": \"ids-unique\\n\"}\n";
        assert_eq!(
            failed_tasks(text),
            "task [pimigrate : Stop when no drive is worth migrating to] failed: \
             No drive is worth migrating to: slow.; task [pimigrate : Verify] failed: ids-unique"
        );
        assert_eq!(failed_tasks("TASK [x]\nok: [pi]\n"), "no task failed");
    }

    #[test]
    fn reads_the_play_recap() {
        let text = "TASK [x]\nok: [pi]\n\nPLAY RECAP ****\n\
                    pi                         : ok=9    changed=0    unreachable=0    failed=0    skipped=8    rescued=0    ignored=0   \n";
        let r = parse_recap(text).expect("a recap");
        assert_eq!(r["ok"], 9);
        assert_eq!(r["changed"], 0);
        assert_eq!(r["skipped"], 8);
        assert!(parse_recap("PLAY RECAP\nother : ok=1\n").is_none());
    }
}
