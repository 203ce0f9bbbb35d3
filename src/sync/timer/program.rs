//! Which pimigrate the timer's service runs. The service runs as root, so
//! the program must be one that only root can change: the file the
//! package installs (`/usr/bin/pimigrate`) when this is it, else this
//! running program when it is a root-owned file in directories that are
//! root's all the way up, none of them writable by anyone else. A copy in
//! a user's `~/.cargo/bin` is refused with the command that installs it
//! where only root can change it.

use crate::host::Host;
use crate::plan::{Reason, Refusal};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the Debian package installs the program (a view path).
pub const PACKAGE_PROGRAM: &str = "/usr/bin/pimigrate";

/// The refusal's code.
pub const UNSAFE_PROGRAM: &str = "timer-program-not-root-owned";

/// The program for `ExecStart=`, as the system the units are for sees it:
/// `running` (this process's program, a path on this machine) unless it
/// is the package's file in `host`.
pub fn service_program(host: &Host, running: &Path) -> Result<PathBuf, Refusal> {
    let package = host.path(PACKAGE_PROGRAM);
    if same_file(running, &package) {
        // dpkg installs it root-owned, 755, in /usr/bin: checked all the
        // same, from the root of the system the units are for.
        return match unsafe_part(&host.root, &package) {
            None => Ok(PathBuf::from(PACKAGE_PROGRAM)),
            Some(why) => Err(refusal(&package, &why)),
        };
    }
    let running = running
        .canonicalize()
        .unwrap_or_else(|_| running.to_path_buf());
    match unsafe_part(Path::new("/"), &running) {
        None => Ok(running),
        Some(why) => Err(refusal(&running, &why)),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// What makes `file` (under `top`) changeable by someone other than root:
/// the file or a directory on the way from `top` down to it that another
/// user owns, that its group or others may write, or that has an access
/// ACL (which may grant anyone write). `None` when there is nothing.
pub fn unsafe_part(top: &Path, file: &Path) -> Option<String> {
    let mut paths: Vec<&Path> = file
        .ancestors()
        .take_while(|p| p.starts_with(top))
        .collect();
    paths.reverse();
    for path in paths {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(err) => return Some(format!("{} cannot be examined ({err})", path.display())),
        };
        let kind = if path == file {
            "the program"
        } else {
            "the directory"
        };
        if meta.file_type().is_symlink() {
            return Some(format!(
                "{kind} {} is a symbolic link, which its owner can point elsewhere",
                path.display()
            ));
        }
        if meta.uid() != 0 {
            return Some(format!(
                "{kind} {} belongs to user id {}, not root",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Some(format!(
                "{kind} {} may be written by {} (mode {:o})",
                path.display(),
                if meta.mode() & 0o002 != 0 {
                    "anyone"
                } else {
                    "its group"
                },
                meta.mode() & 0o7777
            ));
        }
        if xattr::get(path, "system.posix_acl_access")
            .ok()
            .flatten()
            .is_some()
        {
            return Some(format!(
                "{kind} {} has an access ACL, which may let other users write it",
                path.display()
            ));
        }
    }
    None
}

fn refusal(program: &Path, why: &str) -> Refusal {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pimigrate".into());
    Refusal {
        reasons: vec![Reason::new(
            UNSAFE_PROGRAM,
            format!(
                "the timer's service would run {} as root, but {why}: whoever can change it could run anything as root",
                program.display()
            ),
        )
        .hint(format!(
            "install it where only root can change it, then install the timer with that copy: \
             sudo install -m 755 {} /usr/local/bin/{name} && sudo /usr/local/bin/{name} sync --install-timer WHEN \
             (or install the Debian package, whose /usr/bin/pimigrate the timer runs)",
            program.display()
        ))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn set_mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_or_another_owner_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let program = bin.join("pimigrate");
        std::fs::write(&program, b"#!/bin/sh\n").unwrap();
        set_mode(dir.path(), 0o755);
        set_mode(&bin, 0o755);
        set_mode(&program, 0o755);
        let owner_is_root = nix::unistd::geteuid().is_root();
        let found = unsafe_part(dir.path(), &program);
        if owner_is_root {
            assert_eq!(found, None);
        } else {
            assert!(found.unwrap().contains("not root"));
        }
        set_mode(&bin, 0o777);
        let found = unsafe_part(dir.path(), &program).unwrap();
        if owner_is_root {
            assert!(
                found.contains("may be written by anyone (mode 777)"),
                "{found}"
            );
            set_mode(&bin, 0o775);
            let found = unsafe_part(dir.path(), &program).unwrap();
            assert!(found.contains("by its group"), "{found}");
            set_mode(&bin, 0o755);
            set_mode(&program, 0o757);
            let found = unsafe_part(dir.path(), &program).unwrap();
            assert!(found.starts_with("the program"), "{found}");
        }
    }

    #[test]
    fn the_refusal_says_where_to_install_it() {
        let refusal = refusal(Path::new("/home/pi/.cargo/bin/pimigrate"), "it is pi's");
        let reason = &refusal.reasons[0];
        assert_eq!(reason.code, UNSAFE_PROGRAM);
        let hint = reason.hint.as_deref().unwrap();
        assert!(
            hint.contains(
                "sudo install -m 755 /home/pi/.cargo/bin/pimigrate /usr/local/bin/pimigrate"
            ),
            "{hint}"
        );
    }

    #[test]
    fn the_package_program_is_named_by_its_installed_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        let program = root.join("usr/bin/pimigrate");
        std::fs::write(&program, b"#!/bin/sh\n").unwrap();
        for path in [
            dir.path(),
            &root,
            &root.join("usr"),
            &root.join("usr/bin"),
            &program,
        ] {
            set_mode(path, 0o755);
        }
        let host = Host::with_root(&root);
        let chosen = service_program(&host, &program);
        if nix::unistd::geteuid().is_root() {
            assert_eq!(chosen.unwrap(), PathBuf::from(PACKAGE_PROGRAM));
        } else {
            assert_eq!(chosen.unwrap_err().reasons[0].code, UNSAFE_PROGRAM);
        }
    }
}
