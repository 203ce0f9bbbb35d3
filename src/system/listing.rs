//! What `pimigrate devices` shows: the Pi, the running system, the disks.

use super::disks::{Disk, Transport};
use super::mounts::DevNo;
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

fn device_name(system: &System, devno: Option<DevNo>) -> Option<String> {
    let devno = devno?;
    let disk = system.disk_holding(devno)?;
    let part = disk.partitions.iter().find(|p| p.devno == Some(devno));
    Some(
        part.and_then(|p| p.path.as_ref())
            .unwrap_or(&disk.path)
            .display()
            .to_string(),
    )
}

fn source_summary(system: &System) -> SourceSummary {
    let source = &system.source;
    let problems = [problem(&source.fstab), problem(&source.cmdline)]
        .into_iter()
        .flatten()
        .collect();
    SourceSummary {
        root_dir: source.root_dir.clone(),
        root_device: device_name(system, source.root_devno),
        boot_dir: source.boot_dir.clone(),
        boot_device: device_name(system, source.boot_devno),
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
