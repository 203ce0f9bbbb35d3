//! What `pimigrate devices` shows: the Pi, the running system, the disks.

use super::disks::device_name;
use super::disks::{Disk, Transport};
use super::pi::PiInfo;
use super::source::{BootFile, BootFileError, Reference};
use super::System;
use serde::Serialize;
use std::path::PathBuf;

pub const DEVICES_SCHEMA: &str = "pimigrate.devices/1";

/// The `pimigrate.devices/1` document.
#[derive(Serialize)]
pub struct Listing<'a> {
    pub schema: &'static str,
    pub pi: &'a PiInfo,
    pub source: SourceSummary,
    /// Virtual disks (loop, ram, zram) only when asked for.
    pub disks: Vec<&'a Disk>,
}

/// The running system: where its root and boot files are, and what its
/// fstab and cmdline.txt point at.
#[derive(Serialize)]
pub struct SourceSummary {
    pub root_dir: PathBuf,
    pub root_device: Option<String>,
    pub boot_dir: Option<PathBuf>,
    pub boot_device: Option<String>,
    pub used_bytes: Option<u64>,
    pub references: Vec<Reference>,
    /// Boot files that could not be read or parsed.
    pub problems: Vec<String>,
}

impl Listing<'_> {
    /// The listing of `system`; `all` keeps the virtual disks.
    pub fn of(system: &System, all: bool) -> Listing<'_> {
        Listing {
            schema: DEVICES_SCHEMA,
            pi: &system.pi,
            source: source_summary(system),
            disks: system
                .disks
                .iter()
                .filter(|d| all || d.transport != Transport::Virtual)
                .collect(),
        }
    }
}

fn source_summary(system: &System) -> SourceSummary {
    let source = &system.source;
    let problems = [problem(&source.fstab), problem(&source.cmdline)]
        .into_iter()
        .flatten()
        .collect();
    SourceSummary {
        root_dir: source.root_dir.clone(),
        root_device: source
            .root_devno
            .and_then(|d| device_name(&system.disks, d)),
        boot_dir: source.boot_dir.clone(),
        boot_device: source
            .boot_devno
            .and_then(|d| device_name(&system.disks, d)),
        used_bytes: system.source_used_bytes,
        references: source.references(&system.disks),
        problems,
    }
}

/// Why a boot file could not be read or parsed, if it could not.
fn problem<T>(file: &Result<BootFile<T>, BootFileError>) -> Option<String> {
    match file {
        Err(err) => Some(err.to_string()),
        Ok(file) => file.parsed.as_ref().err().map(|e| e.to_string()),
    }
}
