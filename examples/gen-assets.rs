//! Writes what the .deb installs besides the binary:
//! `cargo run --example gen-assets [DIR]` (default `target/assets`): the
//! man pages and shell completions (from the clap definition), the sync
//! timer's systemd units (`DIR/systemd/`), and the documentation with links
//! that work where it is installed (`DIR/doc/`).
//! `scripts/build-deb.sh` runs it before packing.

use anyhow::{Context, Result};
use pimigrate::sync::timer::{self, units};
use std::path::{Path, PathBuf};

fn main() -> Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/assets")));
    for path in pimigrate::assets::write_all(&dir)? {
        println!("{}", path.display());
    }
    let systemd = dir.join("systemd");
    std::fs::create_dir_all(&systemd).with_context(|| format!("creating {}", systemd.display()))?;
    for (name, text) in [
        (
            timer::SERVICE,
            units::service_unit(Path::new(timer::PACKAGE_PROGRAM), false)?,
        ),
        (timer::TIMER, units::timer_unit(false)),
    ] {
        let path = systemd.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}
