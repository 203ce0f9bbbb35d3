use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    honour_no_color();
    let cli = pimigrate::cli::Cli::parse();
    match pimigrate::commands::run(&cli) {
        Ok(code) => ExitCode::from(code),
        // Esc or Ctrl-C at a question: nothing was written.
        Err(err) if pimigrate::ui::is_aborted(&err) => {
            eprintln!("pimigrate: stopped at your request; nothing was written");
            ExitCode::from(pimigrate::exit::EXIT_INTERRUPTED)
        }
        Err(err) => {
            // Not eprintln!, which panics when the terminal has gone away.
            pimigrate::signals::eprint_line(&format!("pimigrate: {err:#}"));
            ExitCode::from(pimigrate::exit::EXIT_ERROR)
        }
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
