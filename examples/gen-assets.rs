//! Writes the man pages and shell completions the .deb installs:
//! `cargo run --example gen-assets [DIR]` (default `target/assets`).
//! `scripts/build-deb.sh` runs it before `cargo deb`.

use anyhow::Result;
use std::path::PathBuf;

fn main() -> Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/assets")));
    for path in pimigrate::assets::write_all(&dir)? {
        println!("{}", path.display());
    }
    Ok(())
}
