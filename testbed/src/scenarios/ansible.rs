//! The fleet playbook (`examples/ansible/pimigrate.yml`) run by
//! `ansible-playbook` on the host against the guest over SSH on a loopback
//! port forward, twice. The Pi has an A1 SD card and a blank UAS SSD. The
//! first run installs pimigrate, benchmarks (the blank SSD destructively),
//! picks the SSD from `recommend --json`, migrates with a trial boot,
//! reboots with `"0 tryboot"` through the long-running harness, and commits
//! with `verify --commit`: root is then on the SSD and the SD card's
//! `cmdline.txt` names it. The second run changes nothing.
//!
//! Testbed-only accommodation: the x86 guest has no device tree, so the
//! job builds `/run/tb-sysroot` at every boot with the trial flag the
//! firmware stand-in passes (`job/tryboot`), and the playbook gets
//! `pimigrate_verify_args: [--sysroot, /run/tb-sysroot]`, as migrate-trial
//! does. The emulated Pi's firmware cannot be identified either, so
//! `pimigrate_trial: always`.

use super::pimigrate_bin::TRIAL_SYSROOT;
use super::{expect_fact, facts, PROBE};
use crate::live::Live;
use crate::pi::target_dir;
use crate::{fat, mbr, Bus, ImageSet, Pi};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The job of every boot: the host's key for root, and the firmware's
/// trial flag (what the testbed's firmware booted) where
/// `verify --sysroot` looks for it.
const JOB: &str = r#"
install -d -m 700 /root/.ssh
install -m 600 "$TESTBED/job/authorized_keys" /root/.ssh/authorized_keys
tryboot_flag=$(cat "$TESTBED/job/tryboot")
"#;

/// Longest one playbook run may take (a migration under emulation, with a
/// benchmark and a reboot, on a loaded machine).
const PLAYBOOK_LIMIT: Duration = Duration::from_secs(45 * 60);

pub fn run(images: &ImageSet) -> Result<()> {
    let playbook_bin = which("ansible-playbook").context(
        "ansible-playbook is missing: install ansible-core (testbed/run.sh installs it)",
    )?;
    let mut pi = Pi::new("ansible")?;
    // The first boot holds the whole first run: benchmark, copy, and all.
    pi.boot_limit = Duration::from_secs(60 * 60);
    pi.insert_sd_copy(&images.bookworm, "sd-a1")?;
    pi.attach_blank("ssd", Bus::UsbUas, 8 << 30, "usb-ssd")?;
    let sd = pi.disk("sd")?.image.clone();
    let sd_boot = mbr::partition_of(&sd, 1)?;

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
    // Both runs must install the same package: a copy taken now, since the
    // build in target/ may be replaced while the long first run goes on.
    let pimigrate = pi.work.join("pimigrate");
    std::fs::copy(&built, &pimigrate)
        .with_context(|| format!("cannot copy {} to {}", built.display(), pimigrate.display()))?;
    let logs = pi.logs.clone();
    let work = pi.work.clone();
    let job =
        format!("{JOB}{TRIAL_SYSROOT}echo \"sshd=$(systemctl is-active ssh || true)\"\n{PROBE}");

    let (root_partuuid, boots) = pi.serve(&job, |live| {
        let first = live.wait_job(Duration::from_secs(15 * 60))?;
        let f = facts(&first.check("the first boot's job")?.stdout);
        expect_fact(&f, "sshd", "active")?;
        let ssh = Ssh::new(live, &key);
        // The guest took a DHCP lease and sshd answers with the key.
        ssh.run("true")
            .context("sshd in the guest does not answer")?;
        let inventory = write_inventory(&work, live, &key)?;
        let vars = serde_json::json!({
            "pimigrate_package": pimigrate,
            "pimigrate_trial": "always",
            "pimigrate_verify_args": ["--sysroot", "/run/tb-sysroot"],
        });

        let recap = play(
            &playbook_bin,
            &inventory,
            &vars,
            &logs.join("ansible-1.log"),
        )?;
        ensure!(
            recap["failed"] == 0 && recap["unreachable"] == 0,
            "the first run failed: {recap:?}; see {}",
            logs.join("ansible-1.log").display()
        );
        ensure!(
            recap["changed"] > 0,
            "the first run changed nothing: {recap:?}"
        );
        // The guest now runs from the SSD, on the plan's root partition.
        let ssd = ssh.run("lsblk -dno NAME,SERIAL | awk '$2 == \"TB-SSD\" { print $1 }'")?;
        let root = ssh.run("findmnt -no SOURCE /")?;
        ensure!(
            root == format!("/dev/{ssd}1"),
            "after the first run the root is {root:?}, not the SSD /dev/{ssd}1"
        );
        let root_partuuid = ssh.run("lsblk -no PARTUUID \"$(findmnt -no SOURCE /)\"")?;
        let planned = ssh.run(
            "jq -r '.plan.table.partitions[] | select(.role == \"root\") | .partuuid' \
             /var/lib/pimigrate/migration.json",
        )?;
        ensure!(
            root_partuuid.eq_ignore_ascii_case(&planned),
            "root PARTUUID {root_partuuid} is not the plan's {planned}"
        );
        let cmdline = ssh.run("cat /boot/firmware/cmdline.txt")?;
        ensure!(
            cmdline
                .to_lowercase()
                .contains(&format!("root=partuuid={} ", root_partuuid.to_lowercase())),
            "cmdline.txt is not committed to {root_partuuid}: {cmdline:?}"
        );
        ensure!(
            ssh.run("test -e /boot/firmware/tryboot.txt && echo yes || echo no")? == "no",
            "tryboot.txt is still there after the commit"
        );

        let recap = play(
            &playbook_bin,
            &inventory,
            &vars,
            &logs.join("ansible-2.log"),
        )?;
        ensure!(
            recap["failed"] == 0 && recap["unreachable"] == 0 && recap["changed"] == 0,
            "the second run on the migrated Pi: {recap:?} (expected changed=0 failed=0); see {}",
            logs.join("ansible-2.log").display()
        );
        // Power off cleanly so the disk images hold everything.
        let _ = ssh.run("systemctl poweroff");
        live.wait_ended(Duration::from_secs(5 * 60))?;
        Ok(root_partuuid)
    })?;

    // Normal boots from config.txt (more than one only when the harness
    // had to power-cycle an emergency shell), then the trial from
    // tryboot.txt, which the second run and the power-off happened in.
    let specs: Vec<(String, bool)> = boots
        .iter()
        .map(|b| (b.spec.config_file.clone(), b.spec.tryboot))
        .collect();
    let (last, before) = specs.split_last().context("no boot at all")?;
    ensure!(
        *last == ("tryboot.txt".to_string(), true)
            && !before.is_empty()
            && before
                .iter()
                .all(|b| *b == ("config.txt".to_string(), false)),
        "expected normal boots then one trial boot, got {specs:?}"
    );
    let cmdline = fat::read(&sd, &sd_boot, "cmdline.txt")?.context("no cmdline.txt")?;
    ensure!(
        cmdline
            .to_lowercase()
            .contains(&format!("root=partuuid={} ", root_partuuid.to_lowercase())),
        "the SD card's cmdline.txt does not name the SSD root {root_partuuid}: {cmdline:?}"
    );
    ensure!(
        fat::read(&sd, &sd_boot, "tryboot.txt")?.is_none(),
        "tryboot.txt is still on the SD card after the commit"
    );
    Ok(())
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

fn write_inventory(work: &Path, live: &Live, key: &Path) -> Result<PathBuf> {
    let path = work.join("inventory.ini");
    let common = ssh_options(key)[2..].join(" ");
    // Root logs in itself, and the image has no sudo: no `become`.
    let text = format!(
        "[pis]\npi ansible_host=127.0.0.1 ansible_port={} ansible_user=root ansible_become=false \
         ansible_ssh_private_key_file={} ansible_python_interpreter=/usr/bin/python3 \
         ansible_ssh_common_args='{common}'\n",
        live.port,
        key.display()
    );
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Runs the playbook, keeps its output in `log`, returns the play recap's
/// counters for the host (`ok`, `changed`, `failed`, ...).
fn play(
    bin: &Path,
    inventory: &Path,
    vars: &serde_json::Value,
    log: &Path,
) -> Result<BTreeMap<String, u64>> {
    let started = Instant::now();
    eprintln!("testbed: ansible-playbook, output in {}", log.display());
    let out = Command::new(bin)
        .arg("-i")
        .arg(inventory)
        .arg("-e")
        .arg(vars.to_string())
        .arg(playbook())
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "False")
        .env("ANSIBLE_TIMEOUT", "60")
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
    Ok(recap)
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

/// Commands in the guest over the forwarded port.
struct Ssh {
    port: u16,
    key: PathBuf,
}

impl Ssh {
    fn new(live: &Live, key: &Path) -> Ssh {
        Ssh {
            port: live.port,
            key: key.to_path_buf(),
        }
    }

    /// Runs `command`, returns its trimmed stdout; fails on a non-zero exit.
    fn run(&self, command: &str) -> Result<String> {
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
}

#[cfg(test)]
mod tests {
    use super::parse_recap;

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
