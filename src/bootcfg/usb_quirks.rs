//! `usb-storage.quirks=` on the kernel command line: the one argument that
//! moves a USB bridge from the `uas` driver to `usb-storage` (flag `u`,
//! IGNORE_UAS), merged with whatever quirks the line already carries.
//!
//! How the kernel reads it (drivers/usb/storage/usb.c, Linux 6.1):
//! - the value is a comma-separated list of `VID:PID:flags`; the first
//!   entry whose VID and PID match (as hex numbers) is the one used, the
//!   rest are never looked at (`usb_stor_adjust_quirks`);
//! - it is a string parameter of at most 127 characters (`static char
//!   quirks[128]`); a longer value is refused whole, with "quirks: string
//!   doesn't fit in 127 chars." in the kernel log (`param_set_copystring`),
//!   so not one of its quirks applies;
//! - given twice, the later argument replaces the earlier one.
//!
//! So pimigrate keeps exactly one argument: a second `usb-storage.quirks=`
//! would silently cancel the owner's. Every other byte of cmdline.txt stays
//! (the [`Cmdline`] editor). The quirk costs speed (usb-storage, Bulk-Only,
//! queues one command at a time) and usually TRIM ([`QUIRK_COST`]), and it
//! is only for a bridge that also offers Bulk-Only: one that speaks UAS
//! alone is then driven by nothing (`system::usb_modes` reads which).

use super::cmdline::{Cmdline, CmdlineError};
use serde::Serialize;

/// The kernel argument.
pub const QUIRKS_KEY: &str = "usb-storage.quirks";
/// The longest value the kernel accepts (`quirks[128]` with its NUL).
pub const QUIRKS_MAX_CHARS: usize = 127;
/// The flag that keeps `uas` off a bridge.
pub const IGNORE_UAS: char = 'u';

/// What the quirk costs, for the plan to say before it offers it.
pub const QUIRK_COST: &str = "usb-storage (Bulk-Only) instead of UAS sends one command at a time, \
so the drive is slower (raspberrypi/linux#5060 measured a JMicron bridge both ways), \
and it usually loses TRIM: the kernel reads no provisioning pages from a usb-storage bridge";

/// A USB vendor and product id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct UsbId {
    pub vendor: u16,
    pub product: u16,
}

impl UsbId {
    /// Parses `174c:1156` (hex, as sysfs's idVendor/idProduct and lsusb
    /// print them).
    pub fn parse(text: &str) -> Option<UsbId> {
        let (vendor, product) = text.split_once(':')?;
        Some(UsbId {
            vendor: parse_hex(vendor)?,
            product: parse_hex(product)?,
        })
    }

    /// From sysfs's `idVendor` and `idProduct`.
    pub fn from_parts(vendor: &str, product: &str) -> Option<UsbId> {
        Some(UsbId {
            vendor: parse_hex(vendor)?,
            product: parse_hex(product)?,
        })
    }
}

impl std::fmt::Display for UsbId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04x}:{:04x}", self.vendor, self.product)
    }
}

impl From<UsbId> for String {
    fn from(id: UsbId) -> String {
        id.to_string()
    }
}

/// A hex number as `simple_strtoul(p, &p, 16)` reads it: an optional `0x`,
/// then hex digits; it must fit a USB id.
fn parse_hex(text: &str) -> Option<u16> {
    let digits = text
        .trim()
        .strip_prefix("0x")
        .or_else(|| text.trim().strip_prefix("0X"))
        .unwrap_or(text.trim());
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    u16::from_str_radix(digits, 16).ok()
}

/// Why the quirks argument cannot be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuirksError {
    #[error(
        "usb-storage.quirks={value} would be {chars} characters, and the kernel takes at most \
         {QUIRKS_MAX_CHARS} (a longer value is refused whole, so no quirk in it would apply): \
         remove entries for bridges no longer attached"
    )]
    TooLong { value: String, chars: usize },
    #[error(transparent)]
    Cmdline(#[from] CmdlineError),
}

/// One entry of the list as written, and what the kernel matches in it
/// (`None` for text it cannot match). Entries pimigrate does not edit are
/// written back as they were.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    raw: String,
    quirk: Option<(UsbId, String)>,
}

impl Entry {
    fn parse(text: &str) -> Entry {
        let mut parts = text.splitn(3, ':');
        let quirk = match (parts.next(), parts.next(), parts.next()) {
            (Some(vendor), Some(product), Some(flags)) => {
                UsbId::from_parts(vendor, product).map(|id| (id, flags.to_string()))
            }
            _ => None,
        };
        Entry {
            raw: text.to_string(),
            quirk,
        }
    }

    fn new(id: UsbId, flags: String) -> Entry {
        Entry {
            raw: format!("{id}:{flags}"),
            quirk: Some((id, flags)),
        }
    }

    fn is_for(&self, id: UsbId) -> bool {
        self.quirk.as_ref().is_some_and(|(e, _)| *e == id)
    }

    fn flags(&self) -> Option<&str> {
        self.quirk.as_ref().map(|(_, flags)| flags.as_str())
    }
}

/// The value the kernel uses: that of the last `usb-storage.quirks=`
/// among the kernel's arguments, without quotes.
pub fn effective_quirks(cmdline: &Cmdline) -> Option<String> {
    let prefix = format!("{QUIRKS_KEY}=");
    cmdline
        .kernel_arguments()
        .filter_map(|arg| arg.strip_prefix(&prefix))
        .last()
        .map(|value| {
            value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value)
                .to_string()
        })
}

/// The flags the kernel gives `id`: those of its first entry.
pub fn flags_for(cmdline: &Cmdline, id: UsbId) -> Option<String> {
    let value = effective_quirks(cmdline)?;
    entries(&value)
        .into_iter()
        .find(|entry| entry.is_for(id))
        .and_then(|entry| entry.flags().map(str::to_string))
}

/// Whether the kernel keeps `uas` off the bridge `id`.
pub fn ignores_uas(cmdline: &Cmdline, id: UsbId) -> bool {
    flags_for(cmdline, id)
        .is_some_and(|flags| flags.chars().any(|c| c.to_ascii_lowercase() == IGNORE_UAS))
}

fn entries(value: &str) -> Vec<Entry> {
    value
        .split(',')
        .filter(|e| !e.is_empty())
        .map(Entry::parse)
        .collect()
}

/// Adds `u` for `id`: to the flags of its entry when it has one (keeping
/// the owner's other flags), else as a new `VID:PID:u` at the end. Returns
/// whether the line changed; refuses, changing nothing, when the value
/// would pass 127 characters.
pub fn add_ignore_uas(cmdline: &mut Cmdline, id: UsbId) -> Result<bool, QuirksError> {
    edit_flags(cmdline, id, |flags| {
        let mut flags = flags.unwrap_or_default();
        if !flags.chars().any(|c| c.to_ascii_lowercase() == IGNORE_UAS) {
            flags.push(IGNORE_UAS);
        }
        Some(flags)
    })
}

/// Takes `u` out of `id`'s entry again: the entry goes when no flag is
/// left, the argument when no entry is. For undoing pimigrate's own
/// [`add_ignore_uas`] (one that changed the line), never an owner's. The
/// meaning comes back, not always the spelling (`174C:1156:e` returns as
/// `174c:1156:e`); a byte-for-byte undo is the backup of cmdline.txt.
pub fn remove_ignore_uas(cmdline: &mut Cmdline, id: UsbId) -> Result<bool, QuirksError> {
    edit_flags(cmdline, id, |flags| {
        let kept: String = flags?
            .chars()
            .filter(|c| c.to_ascii_lowercase() != IGNORE_UAS)
            .collect();
        (!kept.is_empty()).then_some(kept)
    })
}

/// Rewrites the flags of `id`'s first entry with `change` (`None` drops
/// the entry) and writes the list back as one argument. Later entries for
/// the same id, which the kernel never reads, go, so that dropping the
/// first cannot bring a forgotten one to life.
fn edit_flags(
    cmdline: &mut Cmdline,
    id: UsbId,
    change: impl FnOnce(Option<String>) -> Option<String>,
) -> Result<bool, QuirksError> {
    let before = effective_quirks(cmdline);
    let mut list = before.as_deref().map(entries).unwrap_or_default();
    let position = list.iter().position(|e| e.is_for(id));
    let current = position.and_then(|i| list[i].flags().map(str::to_string));
    let unchanged = position.map(|i| list[i].clone());
    let wanted = match change(current.clone()) {
        // The owner's entry as written, when its flags stay.
        Some(flags) if Some(&flags) == current.as_ref() => unchanged,
        Some(flags) => Some(Entry::new(id, flags)),
        None => None,
    };
    list.retain(|e| !e.is_for(id));
    match (wanted, position) {
        (Some(entry), Some(at)) => list.insert(at, entry),
        (Some(entry), None) => list.push(entry),
        (None, _) => {}
    }
    let value = list
        .iter()
        .map(|e| e.raw.as_str())
        .collect::<Vec<_>>()
        .join(",");
    if value.len() > QUIRKS_MAX_CHARS {
        return Err(QuirksError::TooLong {
            chars: value.len(),
            value,
        });
    }
    let occurrences = cmdline
        .kernel_arguments()
        .filter(|arg| arg.split_once('=').map_or(*arg, |(key, _)| key) == QUIRKS_KEY)
        .count();
    if value.is_empty() {
        return Ok(cmdline.remove(QUIRKS_KEY));
    }
    let changed = cmdline.try_add(&format!("{QUIRKS_KEY}={value}"))?;
    Ok(changed || occurrences > 1 || before.as_deref() != Some(value.as_str()))
}

/// A bridge that trackers report misbehaving on `uas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KnownBridge {
    pub id: &'static str,
    pub name: &'static str,
    /// The public report it comes from.
    pub source: &'static str,
}

/// Bridges reported to abort and reset on `uas`. A list like this goes
/// stale the day it is written (firmware updates fix some bridges, new
/// ones appear, one id covers chips that behave differently): the kernel
/// log of this very machine (`system::kernel_events`) is the stronger
/// signal, and the list only says "watch this one". ASMedia's 174c:55aa is
/// left out on purpose: the kernel itself tells its ASM1051 (uas off) from
/// the ASM1153 (fine) (drivers/usb/storage/uas-detect.h).
pub const UAS_TROUBLE: &[KnownBridge] = &[
    KnownBridge {
        id: "174c:1156",
        name: "ASMedia ASM1156/ASM2115 SATA bridge",
        source: "raspberrypi/linux#7570",
    },
    KnownBridge {
        id: "0634:5605",
        name: "Crucial X9 portable SSD (Micron)",
        source: "home-assistant/operating-system#4893",
    },
    KnownBridge {
        id: "0bda:9201",
        name: "Realtek RTL9201 SATA bridge",
        source: "home-assistant/operating-system#4609",
    },
    KnownBridge {
        id: "152d:0578",
        name: "JMicron JMS567/JMS578 SATA bridge",
        source: "raspberrypi/linux#3070",
    },
];

/// The tracker entry for `id`, when it has one.
pub fn known_uas_trouble(id: UsbId) -> Option<&'static KnownBridge> {
    UAS_TROUBLE
        .iter()
        .find(|bridge| UsbId::parse(bridge.id) == Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASMEDIA: UsbId = UsbId {
        vendor: 0x174c,
        product: 0x1156,
    };

    fn line(text: &str) -> Cmdline {
        Cmdline::parse(text.as_bytes()).unwrap()
    }

    fn text(cmdline: &Cmdline) -> String {
        String::from_utf8(cmdline.to_bytes()).unwrap()
    }

    #[test]
    fn ids_read_as_the_kernel_reads_them() {
        assert_eq!(UsbId::parse("174c:1156"), Some(ASMEDIA));
        assert_eq!(UsbId::parse("174C:1156"), Some(ASMEDIA));
        assert_eq!(UsbId::parse("0x174c:0x1156"), Some(ASMEDIA));
        assert_eq!(ASMEDIA.to_string(), "174c:1156");
        assert_eq!(UsbId::parse("46f4:3").unwrap().to_string(), "46f4:0003");
        assert_eq!(UsbId::parse("174c"), None);
        assert_eq!(UsbId::parse("1174c:1156"), None);
        assert_eq!(UsbId::parse("zz:1156"), None);
    }

    #[test]
    fn the_quirk_is_added_as_one_argument_at_the_end_keeping_every_byte() {
        let mut cmdline =
            line("console=serial0,115200  console=tty1 root=PARTUUID=6c586e13-02 rootwait\r\n");
        assert!(!ignores_uas(&cmdline, ASMEDIA));
        assert!(add_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
        assert_eq!(
            text(&cmdline),
            "console=serial0,115200  console=tty1 root=PARTUUID=6c586e13-02 rootwait \
             usb-storage.quirks=174c:1156:u\r\n"
        );
        assert!(ignores_uas(&cmdline, ASMEDIA));
        // A second time changes nothing.
        assert!(!add_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
        // And out again: the line is what it was.
        assert!(remove_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
        assert_eq!(
            text(&cmdline),
            "console=serial0,115200  console=tty1 root=PARTUUID=6c586e13-02 rootwait\r\n"
        );
        assert!(!remove_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
    }

    #[test]
    fn an_owners_quirks_are_merged_into_the_same_argument_in_order() {
        let mut cmdline = line(
            "root=PARTUUID=6c586e13-02 usb-storage.quirks=0419:aaf5:rl,0421:0433:rc rootwait\n",
        );
        add_ignore_uas(&mut cmdline, ASMEDIA).unwrap();
        assert_eq!(
            text(&cmdline),
            "root=PARTUUID=6c586e13-02 usb-storage.quirks=0419:aaf5:rl,0421:0433:rc,174c:1156:u rootwait\n"
        );
        remove_ignore_uas(&mut cmdline, ASMEDIA).unwrap();
        assert_eq!(
            text(&cmdline),
            "root=PARTUUID=6c586e13-02 usb-storage.quirks=0419:aaf5:rl,0421:0433:rc rootwait\n"
        );
    }

    #[test]
    fn an_entry_for_the_same_bridge_gains_the_flag_and_keeps_its_others() {
        // The owner already keeps READ CAPACITY(16) from this bridge (e),
        // spelled in capitals as lsusb prints ids.
        let mut cmdline = line("root=/dev/sda2 usb-storage.quirks=174C:1156:e,152d:0578:u\n");
        assert!(add_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
        assert_eq!(
            text(&cmdline),
            "root=/dev/sda2 usb-storage.quirks=174c:1156:eu,152d:0578:u\n"
        );
        assert_eq!(flags_for(&cmdline, ASMEDIA).as_deref(), Some("eu"));
        remove_ignore_uas(&mut cmdline, ASMEDIA).unwrap();
        assert_eq!(
            text(&cmdline),
            "root=/dev/sda2 usb-storage.quirks=174c:1156:e,152d:0578:u\n"
        );
        // An owner's own u is already there: nothing to do.
        let mut owned = line("root=/dev/sda2 usb-storage.quirks=174c:1156:u\n");
        assert!(!add_ignore_uas(&mut owned, ASMEDIA).unwrap());
    }

    #[test]
    fn several_arguments_become_one_and_the_kernels_choice_is_kept() {
        // The kernel reads only the last argument; the first one was dead.
        let mut cmdline =
            line("usb-storage.quirks=0bda:9201:u root=/dev/sda2 usb-storage.quirks=152d:0578:u\n");
        assert_eq!(effective_quirks(&cmdline).as_deref(), Some("152d:0578:u"));
        assert!(!ignores_uas(&cmdline, UsbId::parse("0bda:9201").unwrap()));
        assert!(add_ignore_uas(&mut cmdline, ASMEDIA).unwrap());
        assert_eq!(
            text(&cmdline),
            "usb-storage.quirks=152d:0578:u,174c:1156:u root=/dev/sda2\n"
        );
        // A later duplicate entry, which the kernel never reads, goes too.
        let mut dup = line("root=/dev/sda2 usb-storage.quirks=\"174c:1156:e,174c:1156:u\"\n");
        assert!(!ignores_uas(&dup, ASMEDIA));
        add_ignore_uas(&mut dup, ASMEDIA).unwrap();
        assert_eq!(
            text(&dup),
            "root=/dev/sda2 usb-storage.quirks=174c:1156:eu\n"
        );
    }

    #[test]
    fn arguments_for_init_are_not_the_kernels() {
        let mut cmdline = line("root=/dev/sda2 -- usb-storage.quirks=174c:1156:u\n");
        assert!(!ignores_uas(&cmdline, ASMEDIA));
        add_ignore_uas(&mut cmdline, ASMEDIA).unwrap();
        assert_eq!(
            text(&cmdline),
            "root=/dev/sda2 usb-storage.quirks=174c:1156:u -- usb-storage.quirks=174c:1156:u\n"
        );
    }

    #[test]
    fn entries_the_kernel_cannot_match_are_kept_as_written() {
        let mut cmdline =
            line("root=/dev/sda2 usb-storage.quirks=junk,174c:xyz:u,,0x0bda:0x9201:u\n");
        add_ignore_uas(&mut cmdline, ASMEDIA).unwrap();
        assert_eq!(
            effective_quirks(&cmdline).as_deref(),
            Some("junk,174c:xyz:u,0x0bda:0x9201:u,174c:1156:u")
        );
    }

    #[test]
    fn a_value_past_127_characters_is_refused_with_the_numbers() {
        // Ten entries of 11 characters and their commas: 119 characters.
        let owner: Vec<String> = (0..10).map(|i| format!("1234:{:04x}:u", i)).collect();
        let value = owner.join(",");
        assert_eq!(value.len(), 119);
        let original = format!("root=/dev/sda2 usb-storage.quirks={value}\n");
        let mut cmdline = line(&original);
        let err = add_ignore_uas(&mut cmdline, ASMEDIA).unwrap_err();
        assert_eq!(
            err,
            QuirksError::TooLong {
                value: format!("{value},174c:1156:u"),
                chars: 131
            }
        );
        assert!(err.to_string().contains("would be 131 characters"), "{err}");
        assert!(err.to_string().contains("at most 127"), "{err}");
        assert_eq!(text(&cmdline), original, "nothing changed");
        // 127 exactly is taken: nine of the owner's, one with more flags,
        // and ours.
        let nine = format!("1234:0000:uabcdefhi,{}", owner[1..9].join(","));
        assert_eq!(nine.len(), 115);
        let mut fits = line(&format!("root=/dev/sda2 usb-storage.quirks={nine}\n"));
        assert!(add_ignore_uas(&mut fits, ASMEDIA).unwrap());
        assert_eq!(effective_quirks(&fits).unwrap().len(), QUIRKS_MAX_CHARS);
    }

    #[test]
    fn the_tracker_list_names_its_sources() {
        for bridge in UAS_TROUBLE {
            let id = UsbId::parse(bridge.id).unwrap();
            assert_eq!(known_uas_trouble(id), Some(bridge));
            assert!(bridge.source.contains('#'), "{bridge:?}");
        }
        assert_eq!(known_uas_trouble(UsbId::parse("174c:55aa").unwrap()), None);
        assert!(QUIRK_COST.contains("slower") && QUIRK_COST.contains("TRIM"));
    }
}
