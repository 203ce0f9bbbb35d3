//! Runs pimigrate's tree copier on its own, for benchmarks and manual
//! checks (the `migrate` command drives it with the planned exclusions):
//!
//!   copy-tree [--threads N] [--exclude PATH[/]]... [--all-filesystems]
//!             [--second-pass] [--checksum] SOURCE TARGET
//!
//! `--exclude /tmp/` leaves out what /tmp holds, keeping the directory.
//! Ctrl-C cancels cleanly. Prints the totals and the time taken.

use pimigrate::copy::{self, CopyOptions, CopyStats};
use pimigrate::system::usage::Exclusion;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

fn main() -> anyhow::Result<()> {
    let mut options = CopyOptions::default();
    let mut second_pass = false;
    let mut paths = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--threads") => {
                let n = args.next().and_then(|n| n.into_string().ok());
                options.threads = n
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| anyhow::anyhow!("--threads needs a number"))?;
            }
            Some("--exclude") => {
                let path = args
                    .next()
                    .and_then(|p| p.into_string().ok())
                    .ok_or_else(|| anyhow::anyhow!("--exclude needs a path"))?;
                let contents_only = path.len() > 1 && path.ends_with('/');
                let path = path.trim_end_matches('/');
                options
                    .exclusions
                    .push(Exclusion::new(path, contents_only, "--exclude"));
            }
            Some("--all-filesystems") => options.one_file_system = false,
            Some("--second-pass") => second_pass = true,
            Some("--checksum") => options.checksum = true,
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [source, target] = paths.as_slice() else {
        anyhow::bail!("usage: copy-tree [options] SOURCE TARGET (see the source for options)");
    };
    let cancel = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&cancel))?;
    let started = Instant::now();
    let quiet = |_: &CopyStats| {};
    let stats = if second_pass {
        copy::second_pass(source, target, &options, &cancel, &quiet)?
    } else {
        copy::copy_tree(source, target, &options, &cancel, &quiet)?
    };
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "files {} dirs {} symlinks {} hardlinks {} specials {} unchanged {} deleted {} \
         excluded {} vanished {} mount-points {} bytes {} errors {} seconds {:.3}",
        stats.files,
        stats.dirs,
        stats.symlinks,
        stats.hardlinks,
        stats.specials,
        stats.unchanged,
        stats.deleted,
        stats.excluded,
        stats.vanished,
        stats.mount_points,
        stats.bytes,
        stats.error_count,
        seconds
    );
    for error in &stats.errors {
        eprintln!("error: {error}");
    }
    if stats.error_count > 0 {
        std::process::exit(1);
    }
    Ok(())
}
