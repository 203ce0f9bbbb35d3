//! The trial boot's files: whether a plan boots the new root once on trial,
//! the command line it starts with, and tryboot.txt (config.txt pointing at
//! that command line), decided here; written by the executor.

use super::edits::boot_backup;
use super::options::{Layout, Options, TrialChoice};
use super::source_check::CheckedSource;
use super::{EditSite, PartitionPath, Reason, TrialBoot, TrialRoute};
use crate::bootcfg::{BootSettings, ConfigTxtError, FilterContext, IncludeReader};
use crate::system::System;

/// The command line a trial boot starts with, next to cmdline.txt.
pub const TRIAL_CMDLINE: &str = "/cmdline.pimigrate.txt";
/// What `reboot "0 tryboot"` makes the firmware read once instead of
/// config.txt.
pub const TRYBOOT_FILE: &str = "/tryboot.txt";
/// The firmware's configuration, which tryboot.txt is made from.
pub const CONFIG_TXT: &str = "/config.txt";

/// Why tryboot.txt cannot be made from config.txt.
#[derive(Debug, thiserror::Error)]
pub enum TrybootError {
    #[error("config.txt: {0}")]
    Config(#[from] ConfigTxtError),
    /// pimigrate cannot tell which command line the trial boot would read.
    #[error("{0}")]
    Unsure(String),
}

/// tryboot.txt, and what was done to make its `cmdline=` hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tryboot {
    pub bytes: Vec<u8>,
    /// For the plan: where `cmdline=` went and why, when includes mattered.
    pub note: Option<String>,
}

/// Whether this plan boots the new root once on trial first: where the
/// firmware has tryboot, unless asked otherwise. How a full move's trial
/// reaches the new drive is the bootloader's part ([`super::bootloader`]).
pub(super) fn wants_trial(system: &System, options: &Options) -> bool {
    match options.trial {
        TrialChoice::Auto => system.pi.tryboot_available,
        TrialChoice::Always | TrialChoice::Device => true,
        TrialChoice::Never => false,
    }
}

/// Where the trial's files go: the SD card's boot partition, except for a
/// full move's one-shot boot of the new drive, whose own boot partition
/// holds them.
pub(super) fn trial_site(layout: Layout, route: Option<TrialRoute>) -> EditSite {
    match (layout, route) {
        (Layout::Full, Some(TrialRoute::Device)) => EditSite::TargetBoot,
        _ => EditSite::SourceBoot,
    }
}

/// tryboot.txt: the normal config.txt with the trial command line, on the
/// boot partition `site` (a full move's copy of config.txt is the SD
/// card's, so both are made from the SD card's).
pub(super) fn trial_boot(
    system: &System,
    source: &CheckedSource,
    site: EditSite,
) -> Result<TrialBoot, Reason> {
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
    let mut read = crate::system::source::include_reader(&system.host, source.boot_dir);
    let tryboot = tryboot_contents(&config_bytes, system.pi.config_filter, &mut read).map_err(|err| {
        Reason::new("trial-unavailable", err.to_string())
            .hint("use --no-trial to change cmdline.txt directly, after checking it is the file the firmware reads")
    })?;
    let tryboot_file = PartitionPath::known(TRYBOOT_FILE);
    let tryboot_real = tryboot_file.under(source.boot_dir);
    let backup = match system.host.path(&tryboot_real).exists() {
        true => Some(boot_backup(system, source, &tryboot_real)?),
        false => None,
    };
    Ok(TrialBoot {
        site,
        diff: super::edits::diff_files(
            &PartitionPath::known(CONFIG_TXT),
            &tryboot_file,
            &config_bytes,
            &tryboot.bytes,
        ),
        tryboot_file,
        cmdline_file: PartitionPath::known(TRIAL_CMDLINE),
        backup,
        note: tryboot.note,
        // Decided with the edits, which put its words on the command line.
        guard: None,
    })
}

/// config.txt with `cmdline=` pointing at the trial command line, placed so
/// that it is what a trial boot of `model` reads: where config.txt sets
/// `cmdline=` unconditionally (or at its end) when nothing read after it,
/// in config.txt or in the files it includes, sets it again; otherwise at
/// the very end, after every include, where nothing can. Refused when even
/// then it cannot be sure (an include it cannot read, a filter it cannot
/// evaluate, `os_prefix`).
pub fn tryboot_contents(
    config_txt: &[u8],
    model: Option<&str>,
    read: &mut IncludeReader,
) -> Result<Tryboot, TrybootError> {
    let name = TRIAL_CMDLINE.trim_start_matches('/');
    let ctx = FilterContext::new(model, true);
    let config = crate::bootcfg::ConfigTxt::parse(config_txt)?;
    let mut in_place = config.clone();
    in_place.try_set("cmdline", name)?;
    let settings = in_place.effective_with(&ctx, read);
    if takes_effect(&settings, name) {
        let note = (!settings.includes.is_empty()).then(|| {
            format!(
                "tryboot.txt: config.txt includes {}, read as the firmware reads them: none sets cmdline= after tryboot.txt's cmdline={name}",
                settings.includes.join(", ")
            )
        });
        return Ok(Tryboot {
            bytes: in_place.to_bytes(),
            note,
        });
    }
    let overridden_by = settings.cmdline.clone().unwrap_or_default();
    let mut at_end = config;
    at_end.try_set_last("cmdline", name)?;
    let settings = at_end.effective_with(&ctx, read);
    if takes_effect(&settings, name) {
        let through = if settings.includes.is_empty() {
            "a later line".to_string()
        } else {
            format!(
                "a later line or an included file ({})",
                settings.includes.join(", ")
            )
        };
        return Ok(Tryboot {
            bytes: at_end.to_bytes(),
            note: Some(format!(
                "tryboot.txt: {through} sets cmdline={overridden_by} after config.txt's own cmdline=, and the firmware's \
                 last assignment wins, so tryboot.txt takes cmdline={name} at its very end, after every include, where nothing overrides it"
            )),
        });
    }
    Err(TrybootError::Unsure(unsure(&settings, name)))
}

/// The trial's name is the command line a trial boot reads, for certain.
fn takes_effect(settings: &BootSettings, name: &str) -> bool {
    settings.cmdline.as_deref() == Some(name)
        && settings.os_prefix.is_none()
        && settings.unread_includes.is_empty()
        && !settings
            .uncertain
            .iter()
            .any(|u| u.key == "cmdline" || u.key == "os_prefix")
}

fn unsure(settings: &BootSettings, name: &str) -> String {
    let mut why = Vec::new();
    if !settings.unread_includes.is_empty() {
        why.push(format!(
            "config.txt includes {}, which could not be read",
            settings.unread_includes.join(", ")
        ));
    }
    if let Some(prefix) = &settings.os_prefix {
        why.push(format!(
            "os_prefix={prefix} makes the firmware look for the command line under {prefix}"
        ));
    }
    for u in settings
        .uncertain
        .iter()
        .filter(|u| u.key == "cmdline" || u.key == "os_prefix")
    {
        let place = u.file.as_deref().unwrap_or("config.txt");
        why.push(format!(
            "{place} line {} sets {}={} under a filter that {}",
            u.line, u.key, u.value, u.reason
        ));
    }
    format!(
        "pimigrate cannot be sure a trial boot would read {name}: {}",
        why.join("; ")
    )
}
