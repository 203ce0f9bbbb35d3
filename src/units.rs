//! Sizes as people read them, and sizes people type.

use anyhow::{bail, Context, Result};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;
pub const TIB: u64 = 1024 * GIB;

/// "59.5 GiB (63.9 GB)": binary first, as partitioning tools count, and the
/// decimal figure printed on the box.
pub fn human_bytes(bytes: u64) -> String {
    format!("{} ({})", binary(bytes), decimal(bytes))
}

pub fn binary(bytes: u64) -> String {
    scaled(bytes, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
}

pub fn decimal(bytes: u64) -> String {
    scaled(bytes, 1000.0, &["B", "kB", "MB", "GB", "TB", "PB"])
}

fn scaled(bytes: u64, step: f64, units: &[&str]) -> String {
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= step && unit + 1 < units.len() {
        value /= step;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// The words that are there, joined by spaces: `vendor model` when either
/// may be missing.
pub fn join_present<'a>(words: impl IntoIterator<Item = Option<&'a str>>) -> String {
    words.into_iter().flatten().collect::<Vec<_>>().join(" ")
}

/// Parses "512M", "512MiB", "8G", "1T", "4096" (bytes). Suffixes are
/// binary, as in sfdisk and parted: users type "512M" for a boot partition.
pub fn parse_size(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(split);
    let number: u64 = number
        .parse()
        .with_context(|| format!("'{text}' is not a size; write it like 512M, 8G or 1T"))?;
    let factor = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => KIB,
        "m" | "mib" | "mb" => MIB,
        "g" | "gib" | "gb" => GIB,
        "t" | "tib" | "tb" => TIB,
        other => bail!("unknown size unit '{other}' in '{text}'; use K, M, G or T"),
    };
    number
        .checked_mul(factor)
        .with_context(|| format!("size '{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_both_units() {
        assert_eq!(human_bytes(64_021_856_256), "59.6 GiB (64.0 GB)");
        assert_eq!(human_bytes(512), "512 B (512 B)");
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("512M").unwrap(), 512 * MIB);
        assert_eq!(parse_size("8GiB").unwrap(), 8 * GIB);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5X").is_err());
        assert!(parse_size("99999999999999T").is_err());
    }
}
