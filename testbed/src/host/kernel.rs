//! The x86 guest's kernel as QEMU starts it fastest. A Pi's firmware
//! decompresses a compressed kernel image before it starts it, and the
//! stand-in does the same: Debian's amd64 `vmlinuz` is a bzImage whose
//! payload is xz, and under TCG the kernel's own decompressor cost about
//! 3 s of CPU at every boot (the boot's CPU seconds before /init fell from
//! 6.9 to 3.8, measured side by side on one host). The ELF inside starts
//! through its PVH entry, with the same command line and initramfs. It is
//! unpacked once per kernel, into the target folder, which lasts between
//! runs where CI keeps it.

use anyhow::{bail, Context, Result};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The start of an xz stream (its header magic and the first flag byte).
const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
/// "HdrS" at 0x202: the Linux x86 boot protocol's header of a bzImage.
const BZIMAGE_MAGIC: (usize, &[u8]) = (0x202, b"HdrS");
const ELF_MAGIC: &[u8] = b"\x7fELF";

/// The kernel QEMU should load for `kernel`: the ELF a bzImage with an xz
/// payload holds (unpacked into `cache`), or `kernel` itself when it is
/// anything else (an ELF already, another compression, an ARM Image).
pub fn loadable(kernel: &Path, cache: &Path) -> Result<PathBuf> {
    let bytes =
        std::fs::read(kernel).with_context(|| format!("cannot read {}", kernel.display()))?;
    let Some(payload) = xz_payload(&bytes) else {
        return Ok(kernel.to_path_buf());
    };
    let elf = cache.join(format!("vmlinux-{:016x}.elf", key(&bytes)));
    // Scenarios that run side by side start at once and want the same
    // kernel: one unpacks it, the others wait and find it done.
    static UNPACKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = UNPACKING.lock().unwrap_or_else(|e| e.into_inner());
    if elf.exists() {
        return Ok(elf);
    }
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    let partial = elf.with_extension(format!("partial.{}", std::process::id()));
    unpack(&bytes[payload..], &partial)
        .with_context(|| format!("unpacking the kernel in {}", kernel.display()))?;
    std::fs::rename(&partial, &elf).with_context(|| format!("cannot write {}", elf.display()))?;
    Ok(elf)
}

/// Where the xz stream of a bzImage starts, when `bytes` is one.
fn xz_payload(bytes: &[u8]) -> Option<usize> {
    let (at, magic) = BZIMAGE_MAGIC;
    if bytes.get(at..at + magic.len()) != Some(magic) {
        return None;
    }
    bytes.windows(XZ_MAGIC.len()).position(|w| w == XZ_MAGIC)
}

/// A name for these bytes in the cache (the same kernel, the same name).
fn key(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// `xz -dc --single-stream` of `stream` (what follows the stream in a
/// bzImage is not xz) into `out`, which must then be an ELF.
fn unpack(stream: &[u8], out: &Path) -> Result<()> {
    let file =
        std::fs::File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut child = Command::new("xz")
        .args(["-dc", "--single-stream"])
        .stdin(Stdio::piped())
        .stdout(file)
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run xz (Debian package xz-utils)")?;
    let mut stdin = child.stdin.take().context("xz has no stdin")?;
    let written = match std::io::Write::write_all(&mut stdin, stream) {
        // With --single-stream xz stops reading at the stream's end and
        // exits, so what follows the stream may meet a closed pipe: that
        // is xz done, not a failure (its exit status and the ELF check
        // below decide).
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    };
    drop(stdin);
    let output = child.wait_with_output().context("cannot wait for xz")?;
    if !output.status.success() {
        let _ = std::fs::remove_file(out);
        bail!(
            "xz failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    written.context("cannot feed xz")?;
    let head = std::fs::read(out)
        .map(|b| b.get(..4) == Some(ELF_MAGIC))
        .unwrap_or(false);
    if !head {
        let _ = std::fs::remove_file(out);
        bail!("the unpacked kernel is not an ELF file");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bzimage_with_an_xz_payload_is_unpacked() {
        let mut bz = vec![0u8; 0x300];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        assert_eq!(xz_payload(&bz), None, "no xz stream");
        bz.extend_from_slice(XZ_MAGIC);
        assert_eq!(xz_payload(&bz), Some(0x300));
        let mut image = bz.clone();
        image[0x202] = 0;
        assert_eq!(
            xz_payload(&image),
            None,
            "not a bzImage (an ARM Image, an ELF)"
        );
    }

    #[test]
    fn a_bzimage_is_handed_over_as_the_elf_it_holds_and_anything_else_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let elf_body = b"\x7fELF and the rest of a kernel".repeat(100);
        let xz = Command::new("xz")
            .args(["-c", "--format=xz"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                std::io::Write::write_all(c.stdin.as_mut().unwrap(), &elf_body)?;
                drop(c.stdin.take());
                c.wait_with_output()
            })
            .unwrap();
        let mut bz = vec![0u8; 0x400];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz.extend_from_slice(&xz.stdout);
        // More than a pipe holds, so xz is gone before it is all written.
        bz.extend_from_slice(&vec![0x5a; 1 << 20]);
        let kernel = dir.path().join("vmlinuz");
        std::fs::write(&kernel, &bz).unwrap();
        let cache = dir.path().join("cache");
        let elf = loadable(&kernel, &cache).unwrap();
        assert_eq!(std::fs::read(&elf).unwrap(), elf_body);
        assert_eq!(loadable(&kernel, &cache).unwrap(), elf, "unpacked once");
        let other = dir.path().join("kernel8.img");
        std::fs::write(&other, b"an ARM Image").unwrap();
        assert_eq!(loadable(&other, &cache).unwrap(), other);
    }
}
