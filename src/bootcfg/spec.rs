//! How a boot file names a block device.
//!
//! `cmdline.txt` (`root=`) and `/etc/fstab` (first field) name partitions the
//! same few ways. A migration has to recognise every one of them to replace
//! the SD card's partition with the new drive's.
//!
//! # Case
//!
//! Equality and hashing compare `PARTUUID=` and `UUID=` values without regard
//! to ASCII case, because they are hex numbers and the kernel matches
//! `root=PARTUUID=` case-insensitively. The original text is kept as written
//! and printed unchanged: a FAT volume id such as `UUID=5DF9-E225` is looked
//! up through the case-sensitive `/dev/disk/by-uuid/` links, so rewriting its
//! case could break a mount. `LABEL=`, `PARTLABEL=` and paths compare exactly.

use std::fmt;
use std::hash::{Hash, Hasher};

/// A block device as a boot file names it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum DeviceSpec {
    /// `PARTUUID=6c586e13-02`: the partition's id in the partition table.
    PartUuid(String),
    /// `UUID=…`: the filesystem's id.
    Uuid(String),
    /// `LABEL=…`: the filesystem's label.
    Label(String),
    /// `PARTLABEL=…`: the GPT partition's name.
    PartLabel(String),
    /// A device path such as `/dev/mmcblk0p2`.
    Path(String),
}

/// Why a string does not name a block device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Nothing at all.
    #[error("the device name is empty")]
    Empty,
    /// `PARTUUID=` and friends with nothing after the `=`.
    #[error("\"{0}\" has no value after the '='")]
    EmptyValue(String),
    /// Control characters (tab, newline, NUL, …), which no boot file can carry
    /// in a device name.
    #[error("{0:?} contains control characters, which a boot file cannot hold in a device name")]
    BadCharacter(String),
    /// Anything else, e.g. `proc`, `tmpfs`, `none`, or `ID=…`.
    #[error("\"{0}\" is not a device name (expected PARTUUID=, UUID=, LABEL=, PARTLABEL= or a /dev path)")]
    Unrecognised(String),
}

impl DeviceSpec {
    /// Parses `PARTUUID=…`, `UUID=…`, `LABEL=…`, `PARTLABEL=…` or an absolute
    /// path. Tag names are matched exactly (upper case), as the kernel and
    /// `mount` do. A space is allowed (fstab writes it as `\040`; the kernel
    /// command line cannot hold it, which [`crate::bootcfg::Cmdline`] checks). Pseudo-filesystem names (`proc`, `tmpfs`, `none`) are not
    /// devices and give [`SpecError::Unrecognised`].
    pub fn parse(s: &str) -> Result<DeviceSpec, SpecError> {
        if s.is_empty() {
            return Err(SpecError::Empty);
        }
        if s.chars().any(char::is_control) {
            return Err(SpecError::BadCharacter(s.to_string()));
        }
        type MakeSpec = fn(String) -> DeviceSpec;
        let tagged: [(&str, MakeSpec); 4] = [
            ("PARTUUID=", DeviceSpec::PartUuid),
            ("PARTLABEL=", DeviceSpec::PartLabel),
            ("UUID=", DeviceSpec::Uuid),
            ("LABEL=", DeviceSpec::Label),
        ];
        for (prefix, make) in tagged {
            if let Some(value) = s.strip_prefix(prefix) {
                if value.is_empty() {
                    return Err(SpecError::EmptyValue(s.to_string()));
                }
                return Ok(make(value.to_string()));
            }
        }
        if s.starts_with('/') {
            return Ok(DeviceSpec::Path(s.to_string()));
        }
        Err(SpecError::Unrecognised(s.to_string()))
    }

    /// The tag as it appears in files: `"PARTUUID"`, `"UUID"`, `"LABEL"`,
    /// `"PARTLABEL"`, or `"path"` for a device path.
    pub fn kind_name(&self) -> &'static str {
        match self {
            DeviceSpec::PartUuid(_) => "PARTUUID",
            DeviceSpec::Uuid(_) => "UUID",
            DeviceSpec::Label(_) => "LABEL",
            DeviceSpec::PartLabel(_) => "PARTLABEL",
            DeviceSpec::Path(_) => "path",
        }
    }

    /// The value after the tag (or the whole path).
    pub fn value(&self) -> &str {
        match self {
            DeviceSpec::PartUuid(v)
            | DeviceSpec::Uuid(v)
            | DeviceSpec::Label(v)
            | DeviceSpec::PartLabel(v)
            | DeviceSpec::Path(v) => v,
        }
    }

    /// Whether `root=` with this spec needs an initramfs to be found.
    ///
    /// The kernel itself resolves `PARTUUID=`, `PARTLABEL=` and device paths;
    /// `UUID=` and `LABEL=` name filesystems, which only an initramfs (as on
    /// Ubuntu) can look up.
    pub fn root_needs_initramfs(&self) -> bool {
        matches!(self, DeviceSpec::Uuid(_) | DeviceSpec::Label(_))
    }

    /// Checks that the spec can be written into a boot file as one token.
    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        DeviceSpec::parse(&self.to_string()).map(|_| ())
    }

    fn compares_without_case(&self) -> bool {
        matches!(self, DeviceSpec::PartUuid(_) | DeviceSpec::Uuid(_))
    }

    fn discriminant(&self) -> u8 {
        match self {
            DeviceSpec::PartUuid(_) => 0,
            DeviceSpec::Uuid(_) => 1,
            DeviceSpec::Label(_) => 2,
            DeviceSpec::PartLabel(_) => 3,
            DeviceSpec::Path(_) => 4,
        }
    }
}

impl PartialEq for DeviceSpec {
    fn eq(&self, other: &Self) -> bool {
        if self.discriminant() != other.discriminant() {
            return false;
        }
        if self.compares_without_case() {
            self.value().eq_ignore_ascii_case(other.value())
        } else {
            self.value() == other.value()
        }
    }
}

impl Eq for DeviceSpec {}

impl Hash for DeviceSpec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.discriminant().hash(state);
        if self.compares_without_case() {
            self.value().to_ascii_lowercase().hash(state);
        } else {
            self.value().hash(state);
        }
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Path(path) => f.write_str(path),
            other => write!(f, "{}={}", other.kind_name(), other.value()),
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeviceSpec::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn parses_every_form() {
        assert_eq!(
            DeviceSpec::parse("PARTUUID=6c586e13-02"),
            Ok(DeviceSpec::PartUuid("6c586e13-02".into()))
        );
        assert_eq!(
            DeviceSpec::parse("UUID=5DF9-E225"),
            Ok(DeviceSpec::Uuid("5DF9-E225".into()))
        );
        assert_eq!(
            DeviceSpec::parse("LABEL=writable"),
            Ok(DeviceSpec::Label("writable".into()))
        );
        assert_eq!(
            DeviceSpec::parse("PARTLABEL=rootfs"),
            Ok(DeviceSpec::PartLabel("rootfs".into()))
        );
        assert_eq!(
            DeviceSpec::parse("/dev/mmcblk0p2"),
            Ok(DeviceSpec::Path("/dev/mmcblk0p2".into()))
        );
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "PARTUUID=6c586e13-02",
            "UUID=5DF9-E225",
            "LABEL=system-boot",
            "PARTLABEL=root",
            "/dev/nvme0n1p2",
        ] {
            let spec = DeviceSpec::parse(text).expect("valid spec");
            assert_eq!(spec.to_string(), text);
            assert_eq!(text.parse::<DeviceSpec>(), Ok(spec));
        }
    }

    #[test]
    fn kind_names() {
        let kinds: Vec<_> = [
            "PARTUUID=a",
            "UUID=a",
            "LABEL=a",
            "PARTLABEL=a",
            "/dev/sda1",
        ]
        .iter()
        .map(|s| DeviceSpec::parse(s).map(|d| d.kind_name()))
        .collect();
        assert_eq!(
            kinds,
            [
                Ok("PARTUUID"),
                Ok("UUID"),
                Ok("LABEL"),
                Ok("PARTLABEL"),
                Ok("path")
            ]
        );
    }

    #[test]
    fn rejects_non_devices() {
        for text in ["proc", "tmpfs", "none", "ID=x", "partuuid=abc", "dev/sda"] {
            assert_eq!(
                DeviceSpec::parse(text),
                Err(SpecError::Unrecognised(text.into())),
                "{text}"
            );
        }
        assert_eq!(DeviceSpec::parse(""), Err(SpecError::Empty));
        assert_eq!(
            DeviceSpec::parse("UUID="),
            Err(SpecError::EmptyValue("UUID=".into()))
        );
        assert_eq!(
            DeviceSpec::parse("LABEL=a b"),
            Ok(DeviceSpec::Label("a b".into()))
        );
        assert!(matches!(
            DeviceSpec::parse("LABEL=a\tb"),
            Err(SpecError::BadCharacter(_))
        ));
        assert!(matches!(
            DeviceSpec::parse("LABEL=a\0"),
            Err(SpecError::BadCharacter(_))
        ));
    }

    #[test]
    fn uuids_compare_without_case_but_print_as_written() {
        let upper = DeviceSpec::PartUuid("6C586E13-02".into());
        let lower = DeviceSpec::PartUuid("6c586e13-02".into());
        assert_eq!(upper, lower);
        assert_eq!(upper.to_string(), "PARTUUID=6C586E13-02");
        let set: HashSet<_> = [upper, lower].into_iter().collect();
        assert_eq!(set.len(), 1);
        assert_eq!(
            DeviceSpec::Uuid("ABCD-1234".into()),
            DeviceSpec::Uuid("abcd-1234".into())
        );
    }

    #[test]
    fn labels_and_paths_compare_exactly() {
        assert_ne!(
            DeviceSpec::Label("Writable".into()),
            DeviceSpec::Label("writable".into())
        );
        assert_ne!(
            DeviceSpec::Path("/dev/SDA".into()),
            DeviceSpec::Path("/dev/sda".into())
        );
        assert_ne!(
            DeviceSpec::Uuid("a".into()),
            DeviceSpec::PartUuid("a".into())
        );
    }

    #[test]
    fn initramfs_requirement() {
        assert!(DeviceSpec::Label("writable".into()).root_needs_initramfs());
        assert!(DeviceSpec::Uuid("x".into()).root_needs_initramfs());
        assert!(!DeviceSpec::PartUuid("x".into()).root_needs_initramfs());
        assert!(!DeviceSpec::Path("/dev/sda2".into()).root_needs_initramfs());
    }

    #[test]
    fn serde_shape() {
        let spec = DeviceSpec::PartUuid("6c586e13-02".into());
        let json = serde_json::to_string(&spec).expect("serialise");
        assert_eq!(json, r#"{"kind":"partuuid","value":"6c586e13-02"}"#);
        let back: DeviceSpec = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, spec);
    }

    #[test]
    fn validate_catches_constructed_bad_values() {
        assert!(DeviceSpec::Label("has\nnewline".into()).validate().is_err());
        assert!(DeviceSpec::Path("relative".into()).validate().is_err());
        assert!(DeviceSpec::PartUuid(String::new()).validate().is_err());
        assert!(DeviceSpec::PartUuid("abc-01".into()).validate().is_ok());
    }
}
