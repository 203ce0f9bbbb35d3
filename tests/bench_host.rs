//! `pimigrate bench` run for real on this machine: directories, loop
//! devices, Ctrl-C, and the refusals of raw writes. Needs root and losetup;
//! with CI=true a missing prerequisite fails the test instead of skipping.

use crate::common::LoopDisk;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_pimigrate");

/// True when the test can run; false (with a note) to skip outside CI.
fn prerequisites(tools: &[&str]) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root".to_string());
    }
    for tool in tools {
        if pimigrate::tools::which(tool).is_none() {
            missing.push(format!("{tool} (util-linux / e2fsprogs)"));
        }
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI=true but this test's prerequisites are missing: {}",
            missing.join(", ")
        );
    }
    eprintln!("skipping: missing {}", missing.join(", "));
    false
}

/// A scratch directory on a real disk filesystem (direct I/O needs one).
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pimigrate-bench-test")
        .tempdir_in("/var/tmp")
        .expect("creating a scratch directory in /var/tmp")
}

/// An ext4 filesystem on a loop device, mounted; unmounted on drop.
struct MountedLoop {
    mountpoint: tempfile::TempDir,
    loop_device: LoopDisk,
}

impl MountedLoop {
    fn new() -> MountedLoop {
        let loop_device = LoopDisk::new(64 << 20);
        let status = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&loop_device.device)
            .status()
            .expect("running mkfs.ext4");
        assert!(status.success());
        let mountpoint = scratch();
        let status = Command::new("mount")
            .arg(&loop_device.device)
            .arg(mountpoint.path())
            .status()
            .expect("running mount");
        assert!(status.success());
        MountedLoop {
            mountpoint,
            loop_device,
        }
    }
}

impl Drop for MountedLoop {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mountpoint.path()).status();
    }
}

fn bench(state: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--state-dir")
        .arg(state)
        .arg("bench")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running pimigrate")
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn a_directory_is_benchmarked_with_a_test_file_that_is_removed() {
    if !prerequisites(&[]) {
        return;
    }
    let target = scratch();
    let state = scratch();
    let dir = target.path().to_str().unwrap();
    let output = bench(
        state.path(),
        &["--json", "--runtime", "0.2", "--size", "16M", dir],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&output);
    assert_eq!(report["schema"], "pimigrate.bench/1");
    assert_eq!(report["target"]["kind"], "file");
    assert_eq!(report["parameters"]["span_bytes"], 16 << 20);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    for r in results {
        assert!(r["ios"].as_u64().unwrap() > 0, "{r}");
        assert!(r["latency"]["p99_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(report["grades"]["pibenchmarks"]["score"].as_f64().unwrap() > 0.0);
    assert!(
        entries(target.path()).is_empty(),
        "left behind: {:?}",
        entries(target.path())
    );

    // The report was kept and reads back through the library.
    let saved = pimigrate::bench::report::list(&state.path().join("reports")).unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].report.results.len(), 8);
}

#[test]
fn the_thread_engine_runs_the_same_tests() {
    if !prerequisites(&[]) {
        return;
    }
    let target = scratch();
    let state = scratch();
    let dir = target.path().to_str().unwrap();
    let args = [
        "--json",
        "--no-save",
        "--engine",
        "threads",
        "--runtime",
        "0.2",
        "--size",
        "16M",
        "--test",
        "RND4K Q32 read",
        "--test",
        "seq1m-q8-write",
        dir,
    ];
    let output = bench(state.path(), &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&output);
    assert_eq!(report["engine"]["kind"], "threads");
    let names: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["RND4K Q32 read", "SEQ1M Q8 write"]);
    assert!(entries(target.path()).is_empty());
    assert!(entries(state.path()).is_empty(), "--no-save kept a report");
}

#[test]
fn ctrl_c_removes_the_test_file() {
    if !prerequisites(&[]) {
        return;
    }
    let target = scratch();
    let state = scratch();
    let child = Command::new(BIN)
        .arg("--state-dir")
        .arg(state.path())
        .args(["bench", "--json", "--runtime", "20", "--size", "32M"])
        .arg(target.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting pimigrate");
    // Wait until the test file exists and the tests are running.
    let deadline = Instant::now() + Duration::from_secs(20);
    while entries(target.path()).is_empty() {
        assert!(Instant::now() < deadline, "the test file never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(800));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        entries(target.path()).is_empty(),
        "left behind: {:?}",
        entries(target.path())
    );
    assert!(entries(&state.path().join("reports")).is_empty());
}

#[test]
fn an_unmounted_loop_device_gets_read_tests_only() {
    if !prerequisites(&["losetup"]) {
        return;
    }
    let disk = LoopDisk::new(32 << 20);
    // Known content, to prove nothing was written.
    let pattern: Vec<u8> = (0..(32u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(&disk.device, &pattern).unwrap();
    let state = scratch();
    let output = bench(state.path(), &["--json", "--runtime", "0.2", disk.path()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&output);
    assert_eq!(report["target"]["kind"], "device");
    assert_eq!(report["parameters"]["writes"], false);
    assert_eq!(report["target"]["device"]["transport"], "virtual");
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["direction"] == "read"));
    assert!(report["grades"]["app_class"].is_null());
    drop(output);
    assert!(
        std::fs::read(&disk.image).unwrap() == pattern,
        "the device was written to"
    );
}

#[test]
fn destructive_runs_write_to_an_idle_loop_device_only_when_confirmed() {
    if !prerequisites(&["losetup"]) {
        return;
    }
    let disk = LoopDisk::new(32 << 20);
    let state = scratch();
    let device = disk.path();
    // Without a terminal, --destructive needs --yes.
    let refused = bench(state.path(), &["--destructive", "--runtime", "0.2", device]);
    assert_eq!(refused.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));

    let output = bench(
        state.path(),
        &[
            "--json",
            "--destructive",
            "--yes",
            "--runtime",
            "0.2",
            "--size",
            "16M",
            device,
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = json(&output);
    assert_eq!(report["parameters"]["writes"], true);
    assert_eq!(report["parameters"]["span_bytes"], 16 << 20);
    assert_eq!(report["results"].as_array().unwrap().len(), 8);
}

#[test]
fn destructive_runs_are_refused_on_a_mounted_disk() {
    if !prerequisites(&["losetup", "mkfs.ext4"]) {
        return;
    }
    let mounted = MountedLoop::new();
    let state = scratch();
    let output = bench(
        state.path(),
        &["--destructive", "--yes", mounted.loop_device.path()],
    );
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("in use") && stderr.contains("mounted"),
        "{stderr}"
    );
    assert!(entries(mounted.mountpoint.path()).contains(&"lost+found".to_string()));
}

/// The whole disk holding `/`, from sysfs: the partition's parent, or the
/// device itself when it is a whole disk.
fn root_disk() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata("/").ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sys.join("partition").exists() {
        sys.parent()?.to_path_buf()
    } else {
        sys
    };
    Some(Path::new("/dev").join(disk.file_name()?))
}

#[test]
fn destructive_runs_are_refused_on_the_source_disk() {
    if !prerequisites(&[]) {
        return;
    }
    let Some(disk) = root_disk().filter(|d| d.exists()) else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but / is not on a block device this test can name");
        }
        eprintln!("skipping: / is not on a block device");
        return;
    };
    let state = scratch();
    let output = bench(
        state.path(),
        &["--json", "--destructive", "--yes", disk.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(3));
    let refusal = json(&output);
    assert_eq!(refusal["refused"], true);
    assert_eq!(refusal["reasons"][0]["code"], "bench-source-disk");
}

#[test]
fn destructive_is_refused_for_a_directory() {
    if !prerequisites(&[]) {
        return;
    }
    let target = scratch();
    let state = scratch();
    let output = bench(
        state.path(),
        &["--destructive", "--yes", target.path().to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(3));
    assert!(entries(target.path()).is_empty());
}
