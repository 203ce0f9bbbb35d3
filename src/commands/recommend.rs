//! `pimigrate recommend`: benchmark (or reuse fresh reports of) the current
//! root and every candidate, rank them, pick one or say none is worth it.
//! Blank drives are written only with a yes (see [`recommend::blank`]).

use super::print_json;
use crate::cli::{Cli, RecommendArgs};
use crate::exit::{EXIT_INTERRUPTED, EXIT_OK};
use crate::host::Host;
use crate::privilege;
use crate::recommend;
use crate::recommend::blank::{blank_candidates, decide, BlankDecision};
use crate::recommend::rank::{rank_drives, Shown};
use crate::system::System;
use crate::ui::{is_aborted, TerminalUi, Ui};
use anyhow::{Context, Result};
use std::io::IsTerminal;

pub fn run(cli: &Cli, args: &RecommendArgs, host: &Host) -> Result<u8> {
    if args.bench_blank {
        privilege::require_root("recommend --bench-blank writes test data over blank drives")?;
    }
    let system = System::inspect(host)?;
    super::note_unreadable(&system, host);
    let chatty = !cli.json && !cli.quiet;
    let blank = match blank_drives(cli, args, &system, host) {
        Ok(blank) => blank,
        Err(err) if is_aborted(&err) => return interrupted_exit(),
        Err(err) => return Err(err),
    };
    let interrupted = crate::signals::install(crate::signals::Hangup::Stops)?;
    let shown = Shown {
        chatty,
        progress_bars: chatty && std::io::stdout().is_terminal(),
    };
    let mut options = args.rank_options();
    options.raw_writes_allowed = blank.allowed;
    options.blank_declined = blank.declined;
    let ranked = rank_drives(&system, &options, host, shown, &interrupted);
    // A normal user cannot put a test file on / or open a disk: say how
    // the benchmarks can run.
    let ranked = if privilege::is_root() {
        ranked
    } else {
        ranked.with_context(|| {
            format!(
                "benchmarking as a normal user, who may not write a test file on / or open a \
                 disk (run as root: {}, or --reuse saved reports)",
                privilege::command_to_type(&[], &[])
            )
        })
    };
    let Some(recommendation) = ranked? else {
        return interrupted_exit();
    };
    if cli.json {
        print_json(&recommendation)?;
    } else {
        if chatty {
            println!();
        }
        print!("{}", recommend::render::text(&recommendation));
        let command = privilege::command_to_type(&["--no-bench-blank"], &["--bench-blank"]);
        if let Some(hint) = recommend::render::blank_hint(&recommendation, &command) {
            println!("\n{hint}");
        }
    }
    Ok(EXIT_OK)
}

/// The blank drives, and which may be written: the flags answer; else a
/// person at a terminal is asked, when root (nobody else can write them);
/// nobody is asked for `--reuse`, which measures nothing.
fn blank_drives(
    cli: &Cli,
    args: &RecommendArgs,
    system: &System,
    host: &Host,
) -> Result<BlankDecision> {
    if args.reuse {
        return Ok(BlankDecision::default());
    }
    let blank = blank_candidates(&system.disks, args.all, host.is_live());
    let flag = args.bench_blank();
    let can_ask = !cli.json
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal()
        && privilege::is_root();
    let ui = (!blank.is_empty() && (flag.is_some() || can_ask))
        .then(TerminalUi::new)
        .transpose()?;
    decide(&blank, flag, ui.as_ref().map(|ui| ui as &dyn Ui))
}

fn interrupted_exit() -> Result<u8> {
    eprintln!("pimigrate: interrupted; test files were removed and nothing was recommended");
    Ok(EXIT_INTERRUPTED)
}
