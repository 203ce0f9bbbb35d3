//! `pimigrate devices`: the disks, and what each is to a migration.

use super::print_json;
use crate::cli::{Cli, DevicesArgs};
use crate::exit::EXIT_OK;
use crate::host::Host;
use crate::system::listing::Listing;
use crate::system::{render, System};
use anyhow::Result;

pub fn run(cli: &Cli, args: &DevicesArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    super::note_unreadable(&system, host);
    let listing = Listing::of(&system, args.all);
    if cli.json {
        print_json(&listing)?;
    } else {
        print!("{}", render::text(&listing, cli.quiet, cli.verbose > 0));
    }
    Ok(EXIT_OK)
}
