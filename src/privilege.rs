//! Root, said first: the commands that write to disks or boot files check
//! for it before they read, plan or ask anything, and say the exact command
//! to type, so nobody answers questions or reads a plan only to be told at
//! the end that the writes are not allowed.
//!
//! Read-only commands do not need root; [`unreadable_disks`] says which
//! devices a normal user could not open, so their output can say what it
//! could not see instead of showing a disk as emptier than it is.

use crate::system::System;
use std::ffi::OsString;
use std::path::PathBuf;

/// The error of a command that needs root, run without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}, which needs root; run as root: {command}")]
pub struct NeedsRoot {
    /// "migrate writes to the target disk and the boot files".
    pub what: String,
    /// `sudo pimigrate ...` with the user's own arguments.
    pub command: String,
}

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Fails with [`NeedsRoot`] unless this process is root. `what` says why
/// root is needed ("migrate writes to the target disk").
pub fn require_root(what: &str) -> Result<(), NeedsRoot> {
    if is_root() {
        return Ok(());
    }
    Err(NeedsRoot {
        what: what.to_string(),
        command: sudo_command(&this_command_line(), &[]),
    })
}

/// The arguments this process was started with, after the program name.
pub fn this_command_line() -> Vec<OsString> {
    std::env::args_os().skip(1).collect()
}

/// `sudo pimigrate ARGS... EXTRA...`, every word quoted for a POSIX shell
/// where it needs to be, so it can be pasted back as it is. The program is
/// named `pimigrate` (sudo finds it on its own PATH), not by the path it
/// was started from, which may be a build directory.
pub fn sudo_command(args: &[OsString], extra: &[&str]) -> String {
    let mut words = vec!["sudo".to_string(), "pimigrate".to_string()];
    words.extend(args.iter().map(|a| shell_quote(&a.to_string_lossy())));
    words.extend(extra.iter().map(|a| shell_quote(a)));
    words.join(" ")
}

/// The command to type to run this one again with `add` instead of
/// `drop`: `sudo pimigrate ...` for a normal user, without `sudo` for
/// root, who needs none.
pub fn command_to_type(drop: &[&str], add: &[&str]) -> String {
    let args: Vec<OsString> = this_command_line()
        .into_iter()
        .filter(|a| !drop.iter().any(|d| a == d))
        .collect();
    let command = sudo_command(&args, add);
    if is_root() {
        command.trim_start_matches("sudo ").to_string()
    } else {
        command
    }
}

/// One word for a POSIX shell: as it is when it holds only characters no
/// shell treats specially, else in single quotes (a single quote inside
/// becomes `'\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The disks of a running system that this process could not open for
/// reading (a normal user, without the `disk` group): their partition
/// tables and filesystems were not read, only what sysfs and udev say.
/// Empty for root, and for an inspected tree (`--sysroot`).
pub fn unreadable_disks(system: &System, live: bool) -> Vec<PathBuf> {
    if !live || is_root() {
        return Vec::new();
    }
    system
        .disks
        .iter()
        .filter(|d| {
            matches!(
                std::fs::File::open(&d.path),
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied
            )
        })
        .map(|d| d.path.clone())
        .collect()
}

/// One line for the output of a read-only command run without root, or
/// `None` when everything could be read.
pub fn unreadable_note(unreadable: &[PathBuf]) -> Option<String> {
    if unreadable.is_empty() {
        return None;
    }
    let names: Vec<String> = unreadable.iter().map(|p| p.display().to_string()).collect();
    Some(format!(
        "not root: could not open {} (permission denied), so their partition tables and \
         filesystems were not read, only what sysfs and udev say; for everything: {}",
        names.join(", "),
        sudo_command(&this_command_line(), &[])
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_as_they_are_and_others_are_quoted() {
        assert_eq!(shell_quote("--target"), "--target");
        assert_eq!(shell_quote("/dev/sda"), "/dev/sda");
        assert_eq!(shell_quote("--exclude=/home/x"), "--exclude=/home/x");
        assert_eq!(shell_quote("my files"), "'my files'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote("a*"), "'a*'");
    }

    #[test]
    fn the_command_is_sudo_pimigrate_with_the_users_words() {
        let args: Vec<OsString> = [
            "migrate",
            "--target",
            "/dev/sda",
            "--exclude",
            "/srv/my data",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            sudo_command(&args, &[]),
            "sudo pimigrate migrate --target /dev/sda --exclude '/srv/my data'"
        );
        assert_eq!(
            sudo_command(&args[..1], &["--bench-blank"]),
            "sudo pimigrate migrate --bench-blank"
        );
    }

    #[test]
    fn the_refusal_names_the_command_to_type() {
        let err = NeedsRoot {
            what: "migrate writes to the target disk".into(),
            command: "sudo pimigrate migrate --target /dev/sda".into(),
        };
        assert_eq!(
            err.to_string(),
            "migrate writes to the target disk, which needs root; run as root: sudo pimigrate migrate --target /dev/sda"
        );
    }
}
