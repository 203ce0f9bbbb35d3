//! `pimigrate recommend`: benchmark (or reuse fresh reports of) the current
//! root and every candidate, rank them, pick one or say none is worth it.

use super::print_json;
use crate::cli::{Cli, RecommendArgs};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK};
use crate::host::Host;
use crate::recommend;
use crate::recommend::rank::{rank_drives, Shown};
use crate::system::System;
use anyhow::Result;
use std::io::IsTerminal;

pub fn run(cli: &Cli, args: &RecommendArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    let chatty = !cli.json && !cli.quiet;
    let interrupted = crate::bench::stop_on_signals()?;
    let shown = Shown {
        chatty,
        progress_bars: chatty && std::io::stdout().is_terminal(),
    };
    let options = args.rank_options();
    let Some(recommendation) = rank_drives(&system, &options, host, shown, &interrupted)? else {
        return interrupted_exit();
    };
    if cli.json {
        print_json(&recommendation)?;
    } else {
        if chatty {
            println!();
        }
        print!("{}", recommend::render::text(&recommendation));
    }
    Ok(EXIT_OK)
}

fn interrupted_exit() -> Result<u8> {
    eprintln!("pimigrate: interrupted; test files were removed and nothing was recommended");
    Ok(EXIT_INTERRUPTED)
}
