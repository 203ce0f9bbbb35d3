//! `pimigrate devices`: the disks, and what each is to a migration.

use super::print_json;
use crate::cli::{Cli, DevicesArgs};
use crate::exit::EXIT_OK;
use crate::host::Host;
use crate::system::listing::Listing;
use crate::system::{render, System};
use anyhow::Result;

/// The listing, and the standby kept by `pimigrate sync` when there is one.
#[derive(serde::Serialize)]
struct DevicesOutput<'a> {
    #[serde(flatten)]
    listing: Listing<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    standby: Option<crate::sync::status::StandbyStatus>,
    /// Where a migration stands, when there is one (`pimigrate status`).
    #[serde(skip_serializing_if = "Option::is_none")]
    migration: Option<crate::status::Status>,
}

pub fn run(cli: &Cli, args: &DevicesArgs, host: &Host) -> Result<u8> {
    let system = System::inspect(host)?;
    super::note_unreadable(&system, host);
    let listing = Listing::of(&system, args.all);
    let standby = crate::sync::status::status(&system, &crate::apply::standby::look);
    let migration = crate::status::assess(&crate::status::gather_on(host, Some(&system)));
    let migration = migration.headline.is_some().then_some(migration);
    if cli.json {
        print_json(&DevicesOutput {
            listing,
            standby,
            migration,
        })?;
    } else {
        print!("{}", render::text(&listing, cli.quiet, cli.verbose > 0));
        if let Some(standby) = standby {
            println!("\n{}", standby.summary);
            for warning in &standby.warnings {
                println!("  warning: {warning}");
            }
        }
        if let Some(headline) = migration.and_then(|m| m.headline) {
            println!("\nMigration: {headline} (more: pimigrate status)");
        }
    }
    Ok(EXIT_OK)
}
