//! `cargo xtask install-extras`: what the .deb installs besides the
//! program, for a pimigrate installed from a checkout with cargo (its
//! program at `PREFIX/bin/pimigrate`, /usr/local by default): the man
//! pages, the bash, zsh and fish completions, the login message (run by
//! pam_motd from /etc/update-motd.d), the sync timer's units, shipped
//! disabled as the package ships them (`pimigrate sync --install-timer`
//! enables the timer), and the daily check's units, its timer enabled as
//! the package enables it (the link `systemctl enable` makes, in
//! /etc/systemd/system/timers.target.wants) and started where systemd
//! runs. The message and the units run `PREFIX/bin/pimigrate`. With
//! `--destdir`, everything goes under that folder instead of `/` (for a
//! test, or an image), and systemd is left alone.

use anyhow::{bail, Context, Result};
use pimigrate::status::timer as check_timer;
use pimigrate::sync::timer;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The login message's script in the repository, and where it goes.
pub const MOTD_SOURCE: &str = "packaging/update-motd.d/60-pimigrate";
pub const MOTD: &str = "/etc/update-motd.d/60-pimigrate";
/// The program the script runs as the package installs it.
const PACKAGE_PROGRAM: &str = timer::PACKAGE_PROGRAM;

/// Where the extras go.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where pimigrate is installed: its program is `PREFIX/bin/pimigrate`.
    pub prefix: PathBuf,
    /// The folder that stands for `/` (`None`: this system).
    pub destdir: Option<PathBuf>,
}

/// One file to install: where (as the installed system sees it), what,
/// and its mode.
#[derive(Debug, Clone)]
pub struct File {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub mode: u32,
}

impl Target {
    /// The installed program, as the installed system sees it.
    pub fn program(&self) -> PathBuf {
        self.prefix.join("bin/pimigrate")
    }

    /// Where the installed system's `path` is here.
    pub fn here(&self, path: &Path) -> PathBuf {
        match &self.destdir {
            Some(destdir) => destdir.join(path.strip_prefix("/").unwrap_or(path)),
            None => path.to_path_buf(),
        }
    }

    /// Whether systemd reads units from `PREFIX/lib/systemd/system`
    /// (it reads /usr/local's and /usr's, not other prefixes').
    pub fn systemd_reads_units(&self) -> bool {
        ["/usr/local", "/usr"]
            .iter()
            .any(|p| self.prefix == Path::new(p))
    }
}

/// Every file, as it will be installed.
pub fn files(repo: &Path, target: &Target) -> Result<Vec<File>> {
    let share = target.prefix.join("share");
    let mut files = Vec::new();
    let file = |path: PathBuf, bytes: Vec<u8>, mode: u32| File { path, bytes, mode };
    let man1 = share.join("man/man1");
    files.push(file(
        man1.join("pimigrate.1"),
        crate::man::man_page()?,
        0o644,
    ));
    for (name, page) in crate::man::subcommand_man_pages()? {
        files.push(file(man1.join(name), page, 0o644));
    }
    // Where each shell looks under a prefix: bash-completion and fish
    // through XDG_DATA_DIRS (/usr/local/share, /usr/share); Debian's zsh
    // in /usr/local/share/zsh/site-functions, and in vendor-completions
    // for the system's own packages, as the .deb installs it.
    let zsh = if target.prefix == Path::new("/usr") {
        "zsh/vendor-completions"
    } else {
        "zsh/site-functions"
    };
    for (shell, name) in crate::man::SHELLS {
        let path = match shell {
            clap_complete::Shell::Bash => share.join("bash-completion/completions/pimigrate"),
            clap_complete::Shell::Zsh => share.join(zsh).join(name),
            clap_complete::Shell::Fish => share.join("fish/vendor_completions.d").join(name),
            other => bail!("no completion directory known for {other}"),
        };
        files.push(file(path, crate::man::completions(shell), 0o644));
    }
    files.push(file(
        PathBuf::from(MOTD),
        motd_script(repo, &target.program())?.into_bytes(),
        0o755,
    ));
    let units = target.prefix.join("lib/systemd/system");
    let program = target.program();
    files.push(file(
        units.join(timer::SERVICE),
        pimigrate::sync::timer::units::service_unit(&program, false)?.into_bytes(),
        0o644,
    ));
    files.push(file(
        units.join(timer::TIMER),
        pimigrate::sync::timer::units::timer_unit(false).into_bytes(),
        0o644,
    ));
    files.push(file(
        units.join(check_timer::SERVICE),
        check_timer::service_unit(&program)?.into_bytes(),
        0o644,
    ));
    files.push(file(
        units.join(check_timer::TIMER),
        check_timer::timer_unit().into_bytes(),
        0o644,
    ));
    Ok(files)
}

/// The link `systemctl enable` makes for the check's timer (its
/// `WantedBy=timers.target`), and the unit it points at, as the installed
/// system sees them.
pub fn check_timer_link(target: &Target) -> (PathBuf, PathBuf) {
    (
        Path::new(timer::UNIT_DIR)
            .join("timers.target.wants")
            .join(check_timer::TIMER),
        target
            .prefix
            .join("lib/systemd/system")
            .join(check_timer::TIMER),
    )
}

/// The package's login message script, running `program` instead of the
/// package's /usr/bin/pimigrate.
pub fn motd_script(repo: &Path, program: &Path) -> Result<String> {
    let source = repo.join(MOTD_SOURCE);
    let text = std::fs::read_to_string(&source)
        .with_context(|| format!("reading {}", source.display()))?;
    if !text.contains(PACKAGE_PROGRAM) {
        bail!("{MOTD_SOURCE} no longer runs {PACKAGE_PROGRAM}: install-extras cannot point it at another program");
    }
    Ok(text.replace(PACKAGE_PROGRAM, &program.display().to_string()))
}

/// Installs every file and, on this system when systemd runs, has it
/// read the units again; returns the files installed (paths here).
pub fn install(repo: &Path, target: &Target) -> Result<Vec<PathBuf>> {
    if !target.prefix.is_absolute() {
        bail!(
            "--prefix {}: give an absolute path such as /usr/local",
            target.prefix.display()
        );
    }
    let on_this_system = target.destdir.is_none();
    if on_this_system && !pimigrate::privilege::is_root() {
        bail!(
            "install-extras writes under {} and /etc, which needs root; run it as root: \
             sudo {} install-extras (or give --destdir DIR to install into a folder)",
            target.prefix.display(),
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "xtask".into())
        );
    }
    let mut installed = Vec::new();
    for file in files(repo, target)? {
        let path = target.here(&file.path);
        crate::write(&path, &file.bytes)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
        installed.push(path);
    }
    if target.systemd_reads_units() {
        // Enabled, as the package enables it: it only reads, and finds
        // nothing to check until a migration is committed.
        let (link, unit) = check_timer_link(target);
        let here = target.here(&link);
        if let Some(dir) = here.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if here.symlink_metadata().is_ok() {
            std::fs::remove_file(&here).with_context(|| format!("replacing {}", here.display()))?;
        }
        std::os::unix::fs::symlink(&unit, &here)
            .with_context(|| format!("linking {} to {}", here.display(), unit.display()))?;
        installed.push(here);
    }
    if !target.here(&target.program()).is_file() {
        eprintln!(
            "note: {} is not there: the login message and the timer's service run it \
             (install it with `sudo install -m 755 ~/.cargo/bin/pimigrate {}`)",
            target.program().display(),
            target.program().display()
        );
    }
    if !target.systemd_reads_units() {
        eprintln!(
            "note: systemd does not read units from {}/lib/systemd/system; \
             `pimigrate sync --install-timer` writes its own into /etc/systemd/system, \
             and the daily check (pimigrate-check.timer) is not enabled",
            target.prefix.display()
        );
    }
    if on_this_system && Path::new("/run/systemd/system").is_dir() {
        systemctl(&["daemon-reload"], "systemd has not read the new units")?;
        if target.systemd_reads_units() {
            systemctl(
                &["start", check_timer::TIMER],
                "the daily check starts at the next boot",
            )?;
        }
    }
    Ok(installed)
}

/// Runs `systemctl ARGS`; `then` says what it means when it fails.
fn systemctl(args: &[&str], then: &str) -> Result<()> {
    let status = Command::new("systemctl")
        .args(args)
        .status()
        .with_context(|| format!("running systemctl {}", args.join(" ")))?;
    if !status.success() {
        bail!("systemctl {} failed ({status}): {then}", args.join(" "));
    }
    Ok(())
}
