//! `cargo xtask COMMAND` (the alias in .cargo/config.toml runs this
//! program): pimigrate's tooling, built for this machine only. Each
//! command hands its arguments to a module of the library.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use xtask::{assets, docgen, install, linked, repo};

#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    about = "pimigrate's tooling: generated docs, the package's files, the extras of a cargo install"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Rewrite the blocks of README.md and docs/ that the code writes (the
    /// exit-status table, the benchmark and copy times, the example plan,
    /// which builds pimigrate and runs it on the tests' Pi 4).
    WriteDocs,
    /// Write what the .deb installs besides the program into DIR:
    /// man pages, completions, the timer's units, the documentation and
    /// the copyright file naming the crates linked for TRIPLE.
    Assets {
        /// The folder (scripts/build-deb.sh and Cargo.toml's package
        /// metadata use target/assets).
        #[arg(default_value = "target/assets")]
        dir: PathBuf,
        /// The Rust target the package is for (this machine's by default).
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
    },
    /// Install the man pages, shell completions, login message and the
    /// sync timer's units (disabled) for a pimigrate installed with cargo
    /// as PREFIX/bin/pimigrate, then `systemctl daemon-reload`.
    InstallExtras {
        #[arg(long, default_value = "/usr/local", value_name = "DIR")]
        prefix: PathBuf,
        /// Install under this folder instead of / (systemd is left alone).
        #[arg(long, value_name = "DIR")]
        destdir: Option<PathBuf>,
    },
}

/// An error is its chain of causes on stderr, not a backtrace (which
/// `main` returning it prints wherever RUST_BACKTRACE is set): it says what
/// failed and what to do.
fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::WriteDocs => {
            for block in docgen::write_all(repo())? {
                println!("{block} rewritten");
            }
        }
        Command::Assets { dir, target } => {
            let triple = match target {
                Some(triple) => triple,
                None => linked::host_triple()?,
            };
            let dir = repo().join(dir);
            for path in assets::write_all(repo(), &dir, &triple)? {
                println!("{}", path.display());
            }
        }
        Command::InstallExtras { prefix, destdir } => {
            let target = install::Target { prefix, destdir };
            for path in install::install(repo(), &target)? {
                println!("{}", path.display());
            }
        }
    }
    Ok(())
}
