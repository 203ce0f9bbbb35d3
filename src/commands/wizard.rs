//! `pimigrate wizard`, and `pimigrate` with no subcommand on a terminal:
//! the guided migration (see src/wizard/ and docs/wizard.md).

use crate::apply::standing;
use crate::cli::{usage_error, Cli, WizardArgs};
use crate::exit::{EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, EXIT_USAGE};
use crate::host::Host;
use crate::system::System;
use crate::ui::TerminalUi;
use crate::wizard::{Wizard, WizardEnd};
use anyhow::Result;
use clap::error::ErrorKind;
use std::io::IsTerminal;

/// `pimigrate` alone: the wizard for a person at a terminal; help (and
/// the usage error code) for a script, which must say what it wants.
pub fn without_subcommand(cli: &Cli, host: &Host) -> Result<u8> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() && !cli.json {
        return run(cli, &WizardArgs::default(), host);
    }
    use clap::CommandFactory;
    let mut help = Cli::command();
    eprintln!("{}", help.render_help());
    Ok(EXIT_USAGE)
}

pub fn run(cli: &Cli, args: &WizardArgs, host: &Host) -> Result<u8> {
    if cli.json {
        return Err(usage_error(
            "wizard",
            ErrorKind::ArgumentConflict,
            "--json cannot be used with the wizard, which talks to a person: \
             scripts use `pimigrate plan --json` and `pimigrate migrate --json`",
        )
        .into());
    }
    let settings = args.settings();
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !settings.yes && !interactive {
        return Err(usage_error(
            "wizard",
            ErrorKind::MissingRequiredArgument,
            "--yes and --target <DEV> are required off a terminal, where the wizard cannot ask \
             (and --layout, --no-bench or --quick as wanted)",
        )
        .into());
    }
    // An error before the migration began wrote nothing; the migration's
    // own end with where the Pi stands already (`wizard::apply`).
    guided(host, &settings).map_err(|err| {
        standing::attach(
            err,
            |_| standing::nothing_written(&standing::this_command()),
        )
    })
}

fn guided(host: &Host, settings: &crate::wizard::Settings) -> Result<u8> {
    // The wizard ends by migrating: said before its first question.
    crate::privilege::require_root("the wizard migrates the system to another disk")?;
    let system = System::inspect(host)?;
    // Off a terminal (--yes) nothing is asked, and a prompt the flags did
    // not answer fails with its name instead of waiting for no one.
    let ui = TerminalUi::new()?;
    let wizard = Wizard {
        system: &system,
        host,
        ui: &ui,
        settings,
    };
    Ok(exit_code(&wizard.run()?))
}

fn exit_code(outcome: &WizardEnd) -> u8 {
    match outcome {
        WizardEnd::Migrated(_) | WizardEnd::Rehearsed | WizardEnd::NothingToDo => EXIT_OK,
        WizardEnd::Stopped | WizardEnd::Interrupted => EXIT_INTERRUPTED,
        WizardEnd::NotConfirmed => EXIT_ERROR,
        WizardEnd::Refused => EXIT_REFUSED,
    }
}
