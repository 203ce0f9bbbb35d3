use std::process::ExitCode;

fn main() -> ExitCode {
    honour_no_color();
    let cli = pimigrate::cli::Cli::parse_args();
    match pimigrate::commands::run(&cli) {
        Ok(code) => ExitCode::from(code),
        // Esc or Ctrl-C at a question: nothing was written.
        Err(err) if pimigrate::ui::is_aborted(&err) => {
            eprintln!("pimigrate: stopped at your request; nothing was written");
            ExitCode::from(pimigrate::exit::EXIT_INTERRUPTED)
        }
        // --yes missing off a terminal: a usage error of its subcommand.
        Err(err)
            if err
                .downcast_ref::<pimigrate::ui::confirm::YesRequired>()
                .is_some() =>
        {
            let yes = err
                .downcast_ref::<pimigrate::ui::confirm::YesRequired>()
                .expect("matched above");
            pimigrate::cli::usage_error(
                &yes.subcommand,
                clap::error::ErrorKind::MissingRequiredArgument,
                &yes.message,
            )
            .exit()
        }
        Err(err) => match err.downcast::<clap::Error>() {
            // A usage error that depends on more than the flags: said as
            // clap says its own, with the subcommand's usage, exit 2.
            Ok(usage) => usage.exit(),
            Err(err) => {
                // Not eprintln!, which panics when the terminal has gone
                // away. A run that writes ends its error with where the Pi
                // stands and what goes on (`state::standing`).
                pimigrate::signals::eprint_line(&format!("pimigrate: {err:#}"));
                ExitCode::from(pimigrate::exit::EXIT_ERROR)
            }
        },
    }
}

/// NO_COLOR (https://no-color.org): set and not empty means no colour at
/// all. clap's help checks it itself; console (the wizard's prompts) turns
/// colour off for NO_COLOR and for output that is not a terminal, but lets
/// CLICOLOR_FORCE win over NO_COLOR, so it is told explicitly here.
fn honour_no_color() {
    if std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty()) {
        dialoguer::console::set_colors_enabled(false);
        dialoguer::console::set_colors_enabled_stderr(false);
    }
}
