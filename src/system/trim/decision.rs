//! From the facts to the plan's answer: TRIM is on already, a rule can
//! switch it on, or why it cannot.

use super::rule::{discard_max_bytes, TrimRule};
use super::vpd::{BlockLimits, Provisioning};
use super::{TrimFacts, Vpd, VpdNotRead};
use crate::system::disks::Transport;
use serde::{Deserialize, Serialize};

/// What the plan says of TRIM on the new drive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum TrimDecision {
    /// The kernel already sends discards: nothing to do but the timer.
    AlreadyOn {
        discard_max_bytes: u64,
    },
    /// The bridge passes UNMAP: the rule switches it on.
    SwitchOn {
        rule: TrimRule,
    },
    Cannot {
        why: CannotTrim,
    },
    Unknown {
        why: String,
    },
}

/// Why TRIM cannot be switched on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum CannotTrim {
    /// Never for an SD card: some corrupt data under fstrim
    /// (raspberrypi/linux#6349).
    SdCard,
    /// The bridge reports no UNMAP (LBPU=0).
    NoUnmap { lbpws: bool, lbpws10: bool },
    /// The bridge lists no Logical Block Provisioning page.
    NoProvisioningPage,
    /// UNMAP, but no usable limit for one (no Block Limits page, a zero
    /// count, or less than one block of the disk's granularity).
    NoUnmapLimit { max_unmap_lba_count: Option<u32> },
    /// The disk once refused a discard and the kernel turned them off
    /// (`provisioning_mode` `disabled`).
    RefusedByDisk,
    /// What the bridge passes is not known.
    VpdNotRead { why: VpdNotRead },
    /// An NVMe or other drive whose driver reports no discard.
    NoDiscard,
}

/// Decides for the facts of one disk.
pub fn decide(facts: &TrimFacts) -> TrimDecision {
    if facts.transport == Transport::Mmc {
        return TrimDecision::Cannot {
            why: CannotTrim::SdCard,
        };
    }
    match facts.queue.max_bytes {
        Some(bytes) if bytes > 0 => {
            return TrimDecision::AlreadyOn {
                discard_max_bytes: bytes,
            }
        }
        None => {
            return TrimDecision::Unknown {
                why: format!("{} has no queue/discard_max_bytes", facts.disk),
            }
        }
        Some(_) => {}
    }
    if facts.transport != Transport::Usb {
        return TrimDecision::Cannot {
            why: CannotTrim::NoDiscard,
        };
    }
    let (Some(vendor), Some(product)) = facts
        .usb_id
        .as_deref()
        .and_then(|id| id.split_once(':'))
        .map_or((None, None), |(v, p)| (Some(v), Some(p)))
    else {
        return TrimDecision::Unknown {
            why: format!(
                "the USB bridge of {} has no vendor and product id",
                facts.disk
            ),
        };
    };
    let mode = facts
        .scsi
        .as_ref()
        .and_then(|s| s.provisioning_mode.as_deref());
    if mode == Some("disabled") {
        return TrimDecision::Cannot {
            why: CannotTrim::RefusedByDisk,
        };
    }
    match &facts.vpd {
        Vpd::Read {
            block_limits,
            provisioning,
            ..
        } => from_pages(
            facts,
            (vendor, product),
            block_limits.as_ref(),
            provisioning.as_ref(),
        ),
        Vpd::NotRead { why } => TrimDecision::Cannot {
            why: CannotTrim::VpdNotRead { why: why.clone() },
        },
        Vpd::NotScsi => TrimDecision::Unknown {
            why: format!("{} is on USB but not a SCSI disk", facts.disk),
        },
    }
}

/// The decision for a USB bridge from its pages: a rule when it reports
/// UNMAP and a usable limit for one.
fn from_pages(
    facts: &TrimFacts,
    (vendor, product): (&str, &str),
    limits: Option<&BlockLimits>,
    provisioning: Option<&Provisioning>,
) -> TrimDecision {
    let cannot = |why| TrimDecision::Cannot { why };
    let Some(provisioning) = provisioning else {
        return cannot(CannotTrim::NoProvisioningPage);
    };
    if !provisioning.lbpu {
        return cannot(CannotTrim::NoUnmap {
            lbpws: provisioning.lbpws,
            lbpws10: provisioning.lbpws10,
        });
    }
    let count = limits.and_then(|l| l.max_unmap_lba_count);
    let descriptors = limits.and_then(|l| l.max_unmap_descriptors);
    let bytes = match (count, descriptors) {
        (Some(count), Some(d)) if count > 0 && d > 0 => discard_max_bytes(
            count,
            facts.logical_block_size,
            facts.physical_block_size,
            limits.and_then(|l| l.optimal_unmap_granularity),
        ),
        _ => None,
    };
    match (bytes, count) {
        (Some(bytes), Some(count)) => TrimDecision::SwitchOn {
            rule: TrimRule {
                vendor_id: vendor.to_string(),
                product_id: product.to_string(),
                discard_max_bytes: bytes,
                max_unmap_lba_count: count,
                logical_block_size: facts.logical_block_size,
            },
        },
        _ => cannot(CannotTrim::NoUnmapLimit {
            max_unmap_lba_count: count,
        }),
    }
}

impl TrimDecision {
    /// One sentence for the plan.
    pub fn explain(&self, disk: &str) -> String {
        match self {
            TrimDecision::AlreadyOn { discard_max_bytes } => format!(
                "TRIM: {disk} takes discards already (queue/discard_max_bytes {discard_max_bytes})"
            ),
            TrimDecision::SwitchOn { rule } => format!(
                "TRIM: the bridge {}:{} passes UNMAP; a udev rule for it on the new root \
                 ({}) sets provisioning_mode=unmap and discard_max_bytes={} (the bridge \
                 takes {} blocks of {} bytes in one UNMAP)",
                rule.vendor_id,
                rule.product_id,
                rule.path().display(),
                rule.discard_max_bytes,
                rule.max_unmap_lba_count,
                rule.logical_block_size
            ),
            TrimDecision::Cannot { why } => format!("TRIM: not for {disk}: {}", why.explain()),
            TrimDecision::Unknown { why } => format!("TRIM: unknown for {disk}: {why}"),
        }
    }
}

impl CannotTrim {
    pub fn explain(&self) -> String {
        match self {
            CannotTrim::SdCard => "pimigrate never adds discard to an SD card (some corrupt data \
                                   under fstrim, raspberrypi/linux#6349)"
                .to_string(),
            CannotTrim::NoUnmap { lbpws, .. } if *lbpws => "the bridge reports no UNMAP, only \
                WRITE SAME with unmap, which pimigrate does not switch on for a USB bridge"
                .to_string(),
            CannotTrim::NoUnmap { .. } => {
                "the bridge reports no UNMAP (Logical Block Provisioning page: LBPU=0)".to_string()
            }
            CannotTrim::NoProvisioningPage => {
                "the bridge lists no Logical Block Provisioning page (0xB2)".to_string()
            }
            CannotTrim::NoUnmapLimit {
                max_unmap_lba_count,
            } => format!(
                "the bridge reports UNMAP but no usable limit for one (Block Limits page: \
                 maximum unmap LBA count {})",
                max_unmap_lba_count.map_or("absent".to_string(), |c| c.to_string())
            ),
            CannotTrim::RefusedByDisk => "the disk refused a discard and the kernel switched \
                                          them off (provisioning_mode: disabled)"
                .to_string(),
            CannotTrim::VpdNotRead { why } => match why {
                VpdNotRead::NotAsked => "a usb-storage bridge: the kernel does not read its VPD \
                    pages, and pimigrate did not ask"
                    .to_string(),
                VpdNotRead::DiskInUse => "a usb-storage bridge whose VPD pages the kernel did \
                    not read, and pimigrate does not ask while the disk is in use"
                    .to_string(),
                VpdNotRead::BeforeSpc2 { scsi_level } => format!(
                    "the device claims a SCSI version older than SPC-2 (scsi_level {}), \
                     without VPD pages",
                    scsi_level.map_or("unknown".to_string(), |l| l.to_string())
                ),
                VpdNotRead::Failed { error } => {
                    format!("its VPD pages could not be read: {error}")
                }
            },
            CannotTrim::NoDiscard => "its driver reports no discard support (NVMe: no Dataset \
                                      Management)"
                .to_string(),
        }
    }
}
