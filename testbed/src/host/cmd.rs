//! Running host tools so that a failure names the whole command line.

use anyhow::{bail, Context, Result};
use std::process::{Command, Output};

/// Runs `cmd` to completion; on failure the error carries the command line,
/// its exit status and stderr, which is what one needs to reproduce it.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let line = describe(cmd);
    let out = cmd
        .output()
        .with_context(|| format!("cannot start `{line}`: is the tool installed? (testbed/run.sh installs the host packages)"))?;
    if !out.status.success() {
        bail!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Like [`run`], returning stdout as text.
pub fn stdout(cmd: &mut Command) -> Result<String> {
    let out = run(cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The command as a shell-like line, for messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
