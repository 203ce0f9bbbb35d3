//! Rewrites the blocks of README.md and docs/ that the code writes (the
//! exit-status table, the benchmark and copy times): `cargo run --example
//! write-docs`. tests/docs_generated.rs fails until this has run after a
//! change to what they show.

use anyhow::{Context, Result};
use std::path::Path;

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failed = 0;
    for block in pimigrate::docgen::blocks(root)? {
        // One block that cannot be written does not keep the others back.
        if let Err(err) = write(&root.join(block.file), &block) {
            eprintln!("write-docs: {err:#}");
            failed += 1;
        }
    }
    anyhow::ensure!(failed == 0, "{failed} block(s) not written");
    Ok(())
}

fn write(path: &Path, block: &pimigrate::docgen::Block) -> Result<()> {
    let doc =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let new = pimigrate::docgen::splice(&doc, block.name, &block.text)
        .with_context(|| format!("in {}", path.display()))?;
    if new != doc {
        std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))?;
        println!("{}: {} rewritten", block.file, block.name);
    }
    Ok(())
}
