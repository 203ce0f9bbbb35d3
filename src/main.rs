use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = pimigrate::cli::Cli::parse();
    match pimigrate::commands::run(&cli) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("pimigrate: {err:#}");
            ExitCode::from(pimigrate::commands::EXIT_ERROR)
        }
    }
}
