//! The host's `strace` or `perf` in the x86 guest, for a benchmark that is
//! asked where the guest's time goes: the image has neither, and the guest
//! is Debian 12 on x86_64 like the host, so the host's program and the
//! libraries it links run there as they are, through the host's own
//! dynamic loader (placed beside them in the share, so nothing the guest
//! runs otherwise sees these libraries).

use crate::Pi;
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The profilers a benchmark can run under.
pub const KNOWN: [&str; 2] = ["strace", "perf"];

/// Puts `profiler` (one of [`KNOWN`]), its libraries and the loader into
/// the share's `profiler/`.
pub fn place(pi: &Pi, profiler: &str) -> Result<()> {
    ensure!(
        KNOWN.contains(&profiler),
        "no profiler {profiler:?}: one of {KNOWN:?}"
    );
    let program = which(profiler)?;
    let dir = pi.share().dir.join("profiler");
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib)?;
    let (libraries, loader) = linked(&program)?;
    for library in &libraries {
        let name = library.file_name().context("a library without a name")?;
        std::fs::copy(library, lib.join(name))
            .with_context(|| format!("copying {} into the share", library.display()))?;
    }
    std::fs::copy(&loader, dir.join("ld.so"))
        .with_context(|| format!("copying {} into the share", loader.display()))?;
    std::fs::copy(&program, dir.join(profiler))
        .with_context(|| format!("copying {} into the share", program.display()))?;
    Ok(())
}

fn which(program: &str) -> Result<PathBuf> {
    for dir in ["/usr/bin", "/usr/sbin", "/bin", "/sbin"] {
        let path = Path::new(dir).join(program);
        if path.is_file() {
            return Ok(path);
        }
    }
    bail!("{program} is not installed on the host (apt-get install {program}, or linux-perf for perf)")
}

/// The libraries `program` links (as ldd resolves them here) and its loader.
fn linked(program: &Path) -> Result<(Vec<PathBuf>, PathBuf)> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .context("running ldd")?;
    ensure!(
        out.status.success(),
        "ldd {} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libraries = Vec::new();
    let mut loader = None;
    for line in text.lines() {
        let line = line.trim();
        // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", or the
        // loader alone: "/lib64/ld-linux-x86-64.so.2 (0x...)".
        let path = match line.split_once(" => ") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue;
        };
        if line.contains(" => ") {
            libraries.push(PathBuf::from(path));
        } else {
            loader = Some(PathBuf::from(path));
        }
    }
    let loader =
        loader.with_context(|| format!("ldd names no loader for {}", program.display()))?;
    Ok((libraries, loader))
}

/// The job's `profiled TOOL PREFIX`: one more copy of TOOL (the job's
/// `copy`) under the profiler, its report in `PREFIX.txt`.
pub fn job_functions(profiler: &str) -> String {
    if profiler.is_empty() {
        return String::new();
    }
    format!(
        r#"
# Runs the host's profiler with its own loader and libraries.
prof() {{ "$TESTBED/profiler/ld.so" --library-path "$TESTBED/profiler/lib" "$TESTBED/profiler/{profiler}" "$@"; }}
profiled() {{
    local tool=$1 prefix=$2
    case {profiler} in
        strace)
            # Every syscall of every thread and child: counts and time.
            copy "$tool" "$prefix.log" "prof -f -c -S calls -o $prefix.txt --" ;;
        perf)
            # The whole guest (kernel, kworkers, every process), sampled
            # on the CPU clock: TCG has no PMU.
            copy "$tool" "$prefix.log" "prof record -q -a -g -e cpu-clock -F 250 -o /run/bench/perf.data --"
            {{ echo "== by process and object"
              prof report -i /run/bench/perf.data --stdio --no-children --sort comm,dso --percent-limit 0.5 2>&1 || true
              echo "== by symbol"
              prof report -i /run/bench/perf.data --stdio --no-children -g none --sort comm,dso,sym --percent-limit 0.3 2>&1 || true
            }} > "$prefix.txt"
            rm -f /run/bench/perf.data ;;
    esac
}}
"#
    )
}
