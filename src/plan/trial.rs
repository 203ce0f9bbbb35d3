//! The trial boot's files: whether a plan boots the new root once on trial,
//! the command line it starts with, and tryboot.txt (config.txt pointing at
//! that command line), decided here; written by the executor.

use super::edits::boot_backup;
use super::options::{Layout, Options, TrialChoice};
use super::source_check::CheckedSource;
use super::{Reason, TrialBoot};
use crate::bootcfg::ConfigTxtError;
use crate::system::System;
use std::path::Path;

/// The command line a trial boot starts with, next to cmdline.txt.
pub const TRIAL_CMDLINE: &str = "/cmdline.pimigrate.txt";
/// What `reboot "0 tryboot"` makes the firmware read once instead of
/// config.txt.
pub const TRYBOOT_FILE: &str = "/tryboot.txt";
/// The firmware's configuration, which tryboot.txt is made from.
pub const CONFIG_TXT: &str = "/config.txt";

/// Why tryboot.txt cannot be made from config.txt.
#[derive(Debug, thiserror::Error)]
#[error("config.txt: {0}")]
pub struct TrybootError(#[from] ConfigTxtError);

/// Whether this plan boots the new root once on trial first.
pub(super) fn wants_trial(system: &System, options: &Options) -> bool {
    options.layout == Layout::RootOnly
        && match options.trial {
            TrialChoice::Auto => system.pi.tryboot_available,
            TrialChoice::Always => true,
            TrialChoice::Never => false,
        }
}

/// tryboot.txt: the normal config.txt with the trial command line.
pub(super) fn trial_boot(system: &System, source: &CheckedSource) -> Result<TrialBoot, Reason> {
    let config_path = source.boot_dir.join(CONFIG_TXT.trim_start_matches('/'));
    let config_bytes = std::fs::read(system.host.path(&config_path)).map_err(|err| {
        Reason::new(
            "trial-unavailable",
            format!(
                "a trial boot needs {} to build tryboot.txt from: {err}",
                config_path.display()
            ),
        )
        .hint("use --no-trial to change cmdline.txt directly")
    })?;
    let tryboot = tryboot_contents(&config_bytes)
        .map_err(|err| Reason::new("trial-unavailable", err.to_string()))?;
    let tryboot_real = source.boot_dir.join(TRYBOOT_FILE.trim_start_matches('/'));
    Ok(TrialBoot {
        tryboot_file: TRYBOOT_FILE.into(),
        cmdline_file: TRIAL_CMDLINE.into(),
        backup: system
            .host
            .path(&tryboot_real)
            .exists()
            .then(|| boot_backup(system, source, &tryboot_real)),
        diff: super::edits::diff_files(
            Path::new(CONFIG_TXT),
            Path::new(TRYBOOT_FILE),
            &config_bytes,
            &tryboot,
        ),
    })
}

/// config.txt with `cmdline=` pointing at the trial command line, in `[all]`.
pub fn tryboot_contents(config_txt: &[u8]) -> Result<Vec<u8>, TrybootError> {
    let mut config = crate::bootcfg::ConfigTxt::parse(config_txt)?;
    config.try_set("cmdline", TRIAL_CMDLINE.trim_start_matches('/'))?;
    Ok(config.to_bytes())
}
