//! The one question a command asks before it writes (`migrate`, `sync`,
//! `rollback`, `bench --destructive`), asked one way: on a terminal, with
//! the wizard's prompts (Esc and Ctrl-C back out, the terminal left as it
//! was); without one, a refusal that names `--yes`. A disk that is erased
//! is confirmed by typing its name: a slip of the finger on a prompt with a
//! default must not erase a disk.

use super::{TerminalUi, Ui};
use anyhow::{bail, Result};
use std::io::IsTerminal;
use std::path::Path;

/// What is about to be written.
pub enum Ask<'a> {
    /// Everything on a disk is erased (or overwritten with test data).
    Erase {
        path: &'a Path,
        name: &'a str,
        /// "Everything on /dev/sda will be erased."
        what: String,
    },
    /// A change that erases nothing: yes or no.
    Change { question: String, default: bool },
}

/// `--yes` missing where no one can be asked: a usage error of
/// `subcommand`, which main turns into clap's own, with that command's
/// usage and exit status 2 (the CLI's types live above this room).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct YesRequired {
    pub subcommand: String,
    pub message: String,
}

/// Goes on when `yes` (the flag) or the person says so; otherwise an
/// error saying that nothing was written. Without a terminal, where no one
/// can be asked, `--yes` is missing: a usage error of `subcommand`, which
/// `what` says writes ("migrate erases /dev/sda").
pub fn before_writing(ask: Ask, yes: bool, subcommand: &str, what: &str) -> Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(YesRequired {
            subcommand: subcommand.to_string(),
            message: format!(
                "--yes (-y) is required when not running on a terminal ({what}; nothing was written)"
            ),
        }
        .into());
    }
    let ui = TerminalUi::new()?;
    let agreed = match ask {
        Ask::Erase { path, name, what } => ui.type_to_confirm(
            &format!("{what} Type its name ({name}) to go on"),
            &[name.to_string(), path.display().to_string()],
        )?,
        Ask::Change { question, default } => ui.confirm(&question, default)?,
    };
    if !agreed {
        bail!("not confirmed; nothing was written");
    }
    Ok(())
}
